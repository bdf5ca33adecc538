// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

// sseOut is a comparable rendering of one event.
type sseOut struct {
	Type    string // "" when absent
	Data    string
	ID      string
	Partial bool
}

// readAll parses src to the end and returns the events and the final error.
func readAll(src io.Reader, maxLine int) ([]sseOut, error) {
	p := NewSSEReader(src, maxLine)
	var out []sseOut
	for range 1 << 20 {
		ev, err := p.Next()
		if err != nil {
			return out, err
		}
		out = append(out, sseOut{Type: string(ev.Type), Data: string(ev.Data), ID: string(ev.ID), Partial: ev.Partial})
	}
	panic("no end")
}

// refParse is a direct, unoptimised transcription of the WHATWG algorithm
// (plus this package's end-of-stream rule), used to check SSEReader.
func refParse(in string) []sseOut {
	in = strings.TrimPrefix(in, "\xef\xbb\xbf")
	var lines []string
	for len(in) > 0 {
		i := strings.IndexAny(in, "\r\n")
		if i < 0 {
			lines = append(lines, in) // the unterminated last line
			break
		}
		lines = append(lines, in[:i])
		if in[i] == '\r' && i+1 < len(in) && in[i+1] == '\n' {
			in = in[i+2:]
		} else {
			in = in[i+1:]
		}
	}
	var out []sseOut
	var data []string
	var typ, id string
	hasType := false
	dispatch := func(partial bool) {
		if len(data) > 0 {
			ev := sseOut{Data: strings.Join(data, "\n"), ID: id, Partial: partial}
			if hasType {
				ev.Type = typ
			}
			out = append(out, ev)
		}
		data, typ, hasType = nil, "", false
	}
	for _, l := range lines {
		if l == "" {
			dispatch(false)
			continue
		}
		if l[0] == ':' {
			continue
		}
		name, value := l, ""
		if j := strings.IndexByte(l, ':'); j >= 0 {
			name, value = l[:j], strings.TrimPrefix(l[j+1:], " ")
		}
		switch name {
		case "data":
			data = append(data, value)
		case "event":
			typ, hasType = value, true
		case "id":
			if !strings.Contains(value, "\x00") {
				id = value
			}
		}
	}
	dispatch(true)
	return out
}

// chunkedReader returns the chunks one per Read.
type chunkedReader struct {
	chunks [][]byte
}

func (r *chunkedReader) Read(p []byte) (int, error) {
	for len(r.chunks) > 0 && len(r.chunks[0]) == 0 {
		r.chunks = r.chunks[1:]
	}
	if len(r.chunks) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.chunks[0])
	r.chunks[0] = r.chunks[0][n:]
	return n, nil
}

func splitAt(s string, cuts ...int) *chunkedReader {
	r := &chunkedReader{}
	prev := 0
	for _, c := range cuts {
		r.chunks = append(r.chunks, []byte(s[prev:c]))
		prev = c
	}
	r.chunks = append(r.chunks, []byte(s[prev:]))
	return r
}

var sseCases = []struct {
	name string
	in   string
	want []sseOut
}{
	{"lf", "data: a\n\n", []sseOut{{Data: "a"}}},
	{"crlf", "data: a\r\n\r\ndata: b\r\n\r\n", []sseOut{{Data: "a"}, {Data: "b"}}},
	{"cr", "data: a\r\rdata: b\r\r", []sseOut{{Data: "a"}, {Data: "b"}}},
	{"mixed terminators", "data: a\r\ndata: b\n\r", []sseOut{{Data: "a\nb"}}},
	{"cr then lf pairs", "data: a\r\n\r\n\r\n", []sseOut{{Data: "a"}}},
	{"comments and keep-alives", ": ping\n\n:\n\ndata: x\n: inside\n\n", []sseOut{{Data: "x"}}},
	{"multi-line data", "data: a\ndata: b\ndata: c\n\n", []sseOut{{Data: "a\nb\nc"}}},
	{"no space after colon", "data:a\n\n", []sseOut{{Data: "a"}}},
	{"only one space stripped", "data:  a \n\n", []sseOut{{Data: " a "}}},
	{"field without colon", "data\n\n", []sseOut{{Data: ""}}},
	{"empty data lines", "data:\ndata:\n\n", []sseOut{{Data: "\n"}}},
	{"bom", "\xef\xbb\xbfdata: a\n\n", []sseOut{{Data: "a"}}},
	{"bom only once", "\xef\xbb\xbf\xef\xbb\xbfdata: a\n\ndata: b\n\n", []sseOut{{Data: "b"}}},
	{"bom prefix then end", "\xef\xbb", nil},
	{"event type", "event: error\ndata: x\n\ndata: y\n\n", []sseOut{{Type: "error", Data: "x"}, {Data: "y"}}},
	{"type without data resets", "event: a\n\ndata: y\n\n", []sseOut{{Data: "y"}}},
	{"id persists", "id: 7\ndata: x\n\ndata: y\n\nid\ndata: z\n\n", []sseOut{{Data: "x", ID: "7"}, {Data: "y", ID: "7"}, {Data: "z", ID: ""}}},
	{"id with nul ignored", "id: 1\nid: a\x00b\ndata: x\n\n", []sseOut{{Data: "x", ID: "1"}}},
	{"unknown fields", "foo: bar\nDATA: no\ndata : no\ndata: yes\n\n", []sseOut{{Data: "yes"}}},
	{"retry", "retry: 1500\nretry: x\ndata: a\n\n", []sseOut{{Data: "a"}}},
	{"eof without blank line", "data: a\n", []sseOut{{Data: "a", Partial: true}}},
	{"eof inside a line", "data: a\n\ndata: {\"b", []sseOut{{Data: "a"}, {Data: "{\"b", Partial: true}}},
	{"eof after cr", "data: a\r", []sseOut{{Data: "a", Partial: true}}},
	{"empty", "", nil},
	{"blank lines only", "\n\n\r\n\r", nil},
	{"garbage", "\x00\xff\xfe{}[]\n\x01data\x02: x\n\n", nil},
	{"json payloads", "data: {\"a\":\"b\\n\"}\n\ndata: [DONE]\n\n", []sseOut{{Data: "{\"a\":\"b\\n\"}"}, {Data: "[DONE]"}}},
}

func TestSSEReader(t *testing.T) {
	for _, tc := range sseCases {
		t.Run(tc.name, func(t *testing.T) {
			if ref := refParse(tc.in); !reflect.DeepEqual(ref, tc.want) {
				t.Fatalf("reference parser disagrees with the table: %+v", ref)
			}
			readers := map[string]func() io.Reader{
				"whole":    func() io.Reader { return strings.NewReader(tc.in) },
				"one-byte": func() io.Reader { return iotest.OneByteReader(strings.NewReader(tc.in)) },
				"half":     func() io.Reader { return iotest.HalfReader(strings.NewReader(tc.in)) },
				"data-err": func() io.Reader { return iotest.DataErrReader(strings.NewReader(tc.in)) },
			}
			for name, mk := range readers {
				got, err := readAll(mk(), 0)
				if err != io.EOF {
					t.Errorf("%s: final error %v, want io.EOF", name, err)
				}
				if !reflect.DeepEqual(got, tc.want) {
					t.Errorf("%s: got %+v, want %+v", name, got, tc.want)
				}
			}
			// Every split of the input into two reads.
			for k := 0; k <= len(tc.in); k++ {
				got, err := readAll(splitAt(tc.in, k), 0)
				if err != io.EOF || !reflect.DeepEqual(got, tc.want) {
					t.Fatalf("split at %d: got %+v, %v; want %+v", k, got, err, tc.want)
				}
			}
		})
	}
}

// TestSSEReaderCompaction drives events near the buffer size through random
// read sizes, so that buffer compaction and growth happen between a data
// line and its dispatching blank line, and compares with the reference.
func TestSSEReaderCompaction(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	terms := []string{"\n", "\r\n", "\r"}
	for iter := range 200 {
		var b strings.Builder
		for range 1 + rng.IntN(12) {
			term := terms[rng.IntN(len(terms))]
			for range 1 + rng.IntN(3) {
				n := rng.IntN(3 * sseInitialBuffer / 2)
				if rng.IntN(4) == 0 {
					n = rng.IntN(20)
				}
				b.WriteString("data: ")
				for i := range n {
					b.WriteByte('a' + byte((i+iter)%26))
				}
				b.WriteString(term)
			}
			if rng.IntN(3) == 0 {
				b.WriteString(": comment" + term)
			}
			b.WriteString(term)
		}
		in := b.String()
		var cuts []int
		for pos := 0; pos < len(in); {
			pos += 1 + rng.IntN(2*sseInitialBuffer)
			if pos < len(in) {
				cuts = append(cuts, pos)
			}
		}
		got, err := readAll(splitAt(in, cuts...), 0)
		if err != io.EOF {
			t.Fatalf("iteration %d: error %v", iter, err)
		}
		if want := refParse(in); !reflect.DeepEqual(got, want) {
			t.Fatalf("iteration %d: %d events differ from the reference's %d", iter, len(got), len(want))
		}
	}
}

func TestSSEReaderLimits(t *testing.T) {
	const limit = 64
	line := "data: " + strings.Repeat("x", limit-6)
	for _, split := range []bool{false, true} {
		mk := func(s string) io.Reader {
			if split {
				return iotest.OneByteReader(strings.NewReader(s))
			}
			return strings.NewReader(s)
		}
		got, err := readAll(mk(line+"\n\n"), limit)
		if err != io.EOF || len(got) != 1 {
			t.Errorf("split=%v: a line of exactly the limit: %d events, %v", split, len(got), err)
		}
		_, err = readAll(mk(line+"x\n\n"), limit)
		if !errors.Is(err, ErrLineTooLong) {
			t.Errorf("split=%v: a line over the limit: %v, want ErrLineTooLong", split, err)
		}
		_, err = readAll(mk("data: a\n\n"+strings.Repeat("y", 10*limit)), limit)
		if !errors.Is(err, ErrLineTooLong) {
			t.Errorf("split=%v: an unterminated huge line: %v, want ErrLineTooLong", split, err)
		}
		many := strings.Repeat("data: "+strings.Repeat("z", 20)+"\n", 5) + "\n"
		_, err = readAll(mk(many), limit)
		if !errors.Is(err, ErrEventTooLong) {
			t.Errorf("split=%v: event data over the limit: %v, want ErrEventTooLong", split, err)
		}
	}
	// The default limit, with a 2 MiB line.
	_, err := readAll(strings.NewReader("data: "+strings.Repeat("x", 2<<20)+"\n\n"), 0)
	if !errors.Is(err, ErrLineTooLong) {
		t.Errorf("2 MiB line: %v, want ErrLineTooLong", err)
	}
	// The error is sticky.
	p := NewSSEReader(strings.NewReader(line+"xx\n\ndata: b\n\n"), limit)
	for range 3 {
		if _, err := p.Next(); !errors.Is(err, ErrLineTooLong) {
			t.Fatalf("Next after ErrLineTooLong: %v", err)
		}
	}
}

// TestSSEReaderBound checks the stream byte bound and the early
// detection of a body that is not an event stream.
func TestSSEReaderBound(t *testing.T) {
	read := func(in string, maxBytes int64, sniff int) ([]sseOut, int64, error) {
		p := NewSSEReader(iotest.HalfReader(strings.NewReader(in)), 0)
		p.Bound(maxBytes, sniff)
		var out []sseOut
		for {
			ev, err := p.Next()
			if err != nil {
				return out, p.BytesRead(), err
			}
			out = append(out, sseOut{Type: string(ev.Type), Data: string(ev.Data)})
		}
	}
	const sniff = 1 << 10
	for _, tc := range []struct {
		name     string
		in       string
		maxBytes int64
		events   int
		err      error
	}{
		{"within the bound", "data: a\n\n" + strings.Repeat(": c\n", 100), 1 << 10, 1, io.EOF},
		{"comments past the bound", "data: a\n\n" + strings.Repeat(": c\n", 1000), 1 << 10, 1, ErrStreamTooLarge},
		{"blank lines past the bound", "data: a\n\n" + strings.Repeat("\n", 4000), 1 << 10, 1, ErrStreamTooLarge},
		{"binary first", "\x1f\x8b\x08\x00garbage\ndata: a\n\n", 0, 0, ErrNotEventStream},
		{"invalid UTF-8 comment first", ":\xff\xfe\ndata: a\n\n", 0, 0, ErrNotEventStream},
		{"binary after a text line", "hello\n\x00\x01\ndata: a\n\n", 0, 0, ErrNotEventStream},
		{"no field in the window", strings.Repeat("<p>text</p>\n", 200) + "data: a\n\n", 0, 0, ErrNotEventStream},
		{"no line in the window", strings.Repeat("x", 4*sniff) + "\ndata: a\n\n", 0, 0, ErrNotEventStream},
		{"comments, then data after the window", strings.Repeat(": pad\n", 400) + "data: a\n\n", 0, 1, io.EOF},
		{"a first event longer than the window", "data: " + strings.Repeat("x", 4*sniff) + "\n\n", 0, 1, io.EOF},
		{"binary after the first field is data's business", "data: a\n\n\x00\x01\n:\xff\ndata: b\n\n", 0, 2, io.EOF},
		{"a BOM, text lines, then data", "\xef\xbb\xbfhello\n\tx\ndata: a\n\n", 0, 1, io.EOF},
		{"data with invalid UTF-8 first", "data: \xff\n\n", 0, 1, io.EOF},
	} {
		got, n, err := read(tc.in, tc.maxBytes, sniff)
		if !errors.Is(err, tc.err) || len(got) != tc.events {
			t.Errorf("%s: %d events, %v; want %d, %v", tc.name, len(got), err, tc.events, tc.err)
		}
		if errors.Is(err, ErrNotEventStream) && n > 4*sniff {
			t.Errorf("%s: read %d bytes before telling", tc.name, n)
		}
	}
	// Without Bound nothing changes: binary lines are ignored (the spec).
	if got, err := readAll(strings.NewReader("\x00\x01\ndata: a\n\n"), 0); err != io.EOF || len(got) != 1 {
		t.Errorf("unbounded: %d events, %v", len(got), err)
	}
}

func TestSSEReaderReadError(t *testing.T) {
	boom := errors.New("connection reset")
	src := io.MultiReader(strings.NewReader("data: a\n\ndata: b\n"), iotest.ErrReader(boom))
	got, err := readAll(src, 0)
	if !errors.Is(err, boom) {
		t.Fatalf("error %v, want %v", err, boom)
	}
	// The pending event is not dispatched after a failure.
	if want := []sseOut{{Data: "a"}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}

// TestSSEReaderRetry checks the retry field.
func TestSSEReaderRetry(t *testing.T) {
	p := NewSSEReader(strings.NewReader("retry: 1500\nretry: 2x\ndata: a\n\n"), 0)
	if _, err := p.Next(); err != nil {
		t.Fatal(err)
	}
	if p.Retry() != 1500*time.Millisecond {
		t.Fatalf("Retry() = %v, want 1.5s", p.Retry())
	}
}

// stepReader hands out one chunk per Read, waiting for a signal first, and
// records when each Read returned.
type stepReader struct {
	chunks   []string
	release  chan struct{}
	returned []time.Time
}

func (r *stepReader) Read(p []byte) (int, error) {
	if len(r.chunks) == 0 {
		return 0, io.EOF
	}
	<-r.release
	n := copy(p, r.chunks[0])
	r.chunks = r.chunks[1:]
	r.returned = append(r.returned, time.Now())
	return n, nil
}

func TestSSEReaderEventTime(t *testing.T) {
	r := &stepReader{
		chunks:  []string{"data: a\n\ndata: b\n\n", "data: c\n", "\n"},
		release: make(chan struct{}, 3),
	}
	p := NewSSEReader(r, 0)
	r.release <- struct{}{}
	a, _ := p.Next()
	aTime := a.Time
	b, _ := p.Next()
	if !aTime.Equal(b.Time) {
		t.Errorf("events of one read got different times: %v, %v", aTime, b.Time)
	}
	if aTime.Before(r.returned[0]) {
		t.Errorf("event time %v is before the read returned (%v)", aTime, r.returned[0])
	}
	bTime := b.Time
	time.Sleep(20 * time.Millisecond)
	r.release <- struct{}{}
	time.Sleep(20 * time.Millisecond)
	r.release <- struct{}{}
	c, err := p.Next()
	if err != nil || string(c.Data) != "c" {
		t.Fatalf("third event: %q, %v", c.Data, err)
	}
	// The time is the data line's read, not the blank line's.
	if c.Time.Before(r.returned[1]) || !c.Time.Before(r.returned[2]) {
		t.Errorf("event time %v not within [%v, %v)", c.Time, r.returned[1], r.returned[2])
	}
	if c.Time.Sub(bTime) < 15*time.Millisecond {
		t.Errorf("a later read's event is only %v after the previous one", c.Time.Sub(bTime))
	}
}

func TestSSEReaderAllocations(t *testing.T) {
	stream := []byte(strings.Repeat(`data: {"id":"x","choices":[{"delta":{"content":"hi"}}]}`+"\n\n", 50) +
		"data: a\ndata: b\n\n")
	p := NewSSEReader(bytes.NewReader(stream), 0)
	src := bytes.NewReader(nil)
	allocs := testing.AllocsPerRun(50, func() {
		src.Reset(stream)
		p.Reset(src, 0)
		for {
			if _, err := p.Next(); err != nil {
				break
			}
		}
	})
	if allocs != 0 {
		t.Fatalf("parsing a stream allocates %.1f times, want 0", allocs)
	}
}

// --- chunk decoding ---

func decodeOK(t *testing.T, data string) *streamChunk {
	t.Helper()
	var d chunkDecoder
	if err := d.decode([]byte(data)); err != nil {
		t.Fatalf("decode(%s): %v", data, err)
	}
	return &d.c
}

func TestDecodeChunk(t *testing.T) {
	type want struct {
		tokens     bool
		texts      string
		finish     string
		id, model  string
		usage      *tokenUsage
		isError    bool
		errMessage string
	}
	cases := []struct {
		name, data string
		want       want
	}{
		{"vllm role-only first delta",
			`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}`,
			want{id: "chatcmpl-1", model: "m"}},
		{"role only, no content key",
			`{"choices":[{"index":0,"delta":{"role":"assistant"}}]}`, want{}},
		{"content",
			`{"id":"c","model":"m","choices":[{"index":0,"delta":{"content":"Hello"},"logprobs":null,"finish_reason":null}]}`,
			want{tokens: true, texts: "Hello", id: "c", model: "m"}},
		{"null content",
			`{"choices":[{"delta":{"content":null}}]}`, want{}},
		{"reasoning_content counts, not kept",
			`{"choices":[{"delta":{"reasoning_content":"think"}}]}`, want{tokens: true}},
		{"reasoning counts",
			`{"choices":[{"delta":{"reasoning":"think","content":null}}]}`, want{tokens: true}},
		{"completions text",
			`{"id":"cmpl-1","object":"text_completion","model":"m","choices":[{"index":0,"text":" world","logprobs":null,"finish_reason":null}]}`,
			want{tokens: true, texts: " world", id: "cmpl-1", model: "m"}},
		{"empty text", `{"choices":[{"text":""}]}`, want{}},
		{"finish with last token",
			`{"choices":[{"delta":{"content":"."},"finish_reason":"length"}]}`,
			want{tokens: true, texts: ".", finish: "length"}},
		{"usage chunk, empty choices",
			`{"id":"c","choices":[],"usage":{"prompt_tokens":12,"total_tokens":28,"completion_tokens":16,"prompt_tokens_details":{"cached_tokens":8}}}`,
			want{id: "c", usage: &tokenUsage{prompt: 12, completion: 16, cached: 8, hasPrompt: true, hasCompletion: true, hasCached: true}}},
		{"usage without details",
			`{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4,"prompt_tokens_details":null}}`,
			want{usage: &tokenUsage{prompt: 3, completion: 4, hasPrompt: true, hasCompletion: true}}},
		{"usage null", `{"choices":[{"delta":{"content":"x"}}],"usage":null}`, want{tokens: true, texts: "x"}},
		{"usage float counts",
			`{"usage":{"prompt_tokens":5.0,"completion_tokens":1e1,"prompt_tokens_details":{"cached_tokens":-1}}}`,
			want{usage: &tokenUsage{prompt: 5, completion: 10, hasPrompt: true, hasCompletion: true, badCached: true}}},
		{"escapes and unicode",
			`{"choices":[{"delta":{"content":"a\"b\\c\n\u00e9\ud83d\ude00 é 日本"}}]}`,
			want{tokens: true, texts: "a\"b\\c\né😀 é 日本"}},
		{"escaped keys",
			`{"\u0063hoices":[{"delta":{"cont\u0065nt":"x"}}]}`, want{tokens: true, texts: "x"}},
		{"case matters",
			`{"Choices":[{"delta":{"content":"x"}}]}`, want{}},
		{"duplicate keys: last wins",
			`{"choices":[{"delta":{"content":"x"}}],"choices":[],"model":"a","model":"b"}`, want{model: "b"}},
		{"nested unknown values",
			`{"x":{"y":[1,2,{"z":[[],{}]}],"w":"}"},"choices":[{"logprobs":{"content":[{"token":"a","logprob":-0.1,"top_logprobs":[]}]},"delta":{"content":"a","tool_calls":[{"id":"t"}]}}]}`,
			want{tokens: true, texts: "a"}},
		{"two choices",
			`{"choices":[{"index":0,"delta":{"content":"a"},"finish_reason":"stop"},{"index":1,"text":"b","finish_reason":null}]}`,
			want{tokens: true, texts: "ab", finish: "stop"}},
		{"choices not an array", `{"choices":{"delta":{"content":"x"}}}`, want{}},
		{"openai error",
			`{"error":{"message":"overloaded","type":"server_error","param":null,"code":null}}`,
			want{isError: true, errMessage: "overloaded"}},
		{"vllm legacy error",
			`{"object":"error","message":"bad","type":"BadRequestError","param":null,"code":400}`,
			want{isError: true, errMessage: "bad"}},
		{"tgi string error", `{"error":"Input validation error","error_type":"validation"}`,
			want{isError: true, errMessage: "Input validation error"}},
		{"error null", `{"error":null,"choices":[{"text":"x"}]}`, want{tokens: true, texts: "x"}},
		{"whitespace", " \t{ \"choices\" : [ { \"text\" : \"x\" } ] } \n", want{tokens: true, texts: "x"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := decodeOK(t, tc.data)
			var texts []byte
			for _, s := range c.texts {
				texts = appendUnquoted(texts, s.raw)
			}
			got := want{
				tokens: c.tokens, texts: string(texts), finish: decodeString(c.finish),
				id: decodeString(c.id), model: decodeString(c.model),
				isError: c.isError, errMessage: decodeString(c.errMsg),
			}
			if c.hasUsage {
				got.usage = &c.usage
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v (usage %+v), want %+v (usage %+v)", got, got.usage, tc.want, tc.want.usage)
			}
		})
	}
}

func TestDecodeChunkInvalid(t *testing.T) {
	for _, data := range []string{
		``, ` `, `{`, `}`, `{"a"}`, `{"a":}`, `{"a":1,}`, `{"a":1 "b":2}`, `{,}`, `{"a":[1,]}`,
		`{"a":01}`, `{"a":1.}`, `{"a":.5}`, `{"a":-}`, `{"a":1e}`, `{"a":+1}`, `{"a":tru}`, `{"a":nul}`,
		`{"a":"\x"}`, `{"a":"\u12"}`, "{\"a\":\"\x01\"}", `{"a":"unterminated}`, `{"a":1}}`, `{"a":1}x`,
		`{"choices":[{"delta":{"content":"x"}]}`, `{"usage":{"prompt_tokens":1,}}`, `{'a':1}`, `[DONE]`,
		`{"error":{"message":"x"}`, `{"a":[}`, `{"a":{]}`, "\x00",
	} {
		var d chunkDecoder
		if err := d.decode([]byte(data)); !errors.Is(err, errMalformedJSON) {
			t.Errorf("decode(%q) = %v, want errMalformedJSON", data, err)
		}
		if json.Valid([]byte(data)) {
			t.Errorf("test bug: %q is valid JSON", data)
		}
	}
	for _, data := range []string{`"x"`, `[1,2]`, `42`, `null`, ` true `} {
		var d chunkDecoder
		if err := d.decode([]byte(data)); !errors.Is(err, errNotObject) {
			t.Errorf("decode(%q) = %v, want errNotObject", data, err)
		}
	}
}

func TestDecodeChunkDepth(t *testing.T) {
	for _, depth := range []int{maxJSONDepth, maxJSONDepth + 1} {
		// The top-level object is one level; the rest are arrays.
		data := `{"x":` + strings.Repeat("[", depth-1) + strings.Repeat("]", depth-1) + `}`
		var d chunkDecoder
		err := d.decode([]byte(data))
		if valid := json.Valid([]byte(data)); (err == nil) != valid {
			t.Errorf("depth %d: decode error %v, json.Valid %v", depth, err, valid)
		}
	}
}

func TestDecodeChunkAllocations(t *testing.T) {
	data := []byte(`{"id":"chatcmpl-9","object":"chat.completion.chunk","created":1718000000,"model":"meta-llama/Llama-3.1-8B-Instruct","choices":[{"index":0,"delta":{"content":" token\u00e9"},"logprobs":null,"finish_reason":null}],"usage":{"prompt_tokens":120,"total_tokens":133,"completion_tokens":13}}`)
	var d chunkDecoder
	allocs := testing.AllocsPerRun(100, func() {
		if err := d.decode(data); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("decode allocates %.1f times, want 0", allocs)
	}
}

// refChunk decodes a chunk with encoding/json, with the semantics the
// scanner documents, for differential tests. ok is false when encoding/json
// cannot decode it into interface values (e.g. a number overflowing float64).
func refChunk(data []byte) (c refResult, isObject, ok bool) {
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		return c, false, false
	}
	top, isObj := v.(map[string]any)
	if !isObj {
		return c, false, true
	}
	str := func(m map[string]any, k string) (string, bool) {
		s, ok := m[k].(string)
		return s, ok
	}
	c.id, c.hasID = str(top, "id")
	c.model, c.hasModel = str(top, "model")
	if choices, ok := top["choices"].([]any); ok {
		for _, e := range choices {
			ch, ok := e.(map[string]any)
			if !ok {
				continue
			}
			var content, rc, r string
			tool := false
			if d, ok := ch["delta"].(map[string]any); ok {
				content, _ = str(d, "content")
				rc, _ = str(d, "reasoning_content")
				r, _ = str(d, "reasoning")
				calls, _ := d["tool_calls"].([]any)
				for _, call := range calls {
					cm, _ := call.(map[string]any)
					fn, _ := cm["function"].(map[string]any)
					args, _ := str(fn, "arguments")
					tool = tool || args != ""
				}
			}
			text, _ := str(ch, "text")
			answer := content != "" || text != "" || tool
			if answer || rc != "" || r != "" {
				c.tokens = true
			}
			c.answer = c.answer || answer
			c.toolCall = c.toolCall || tool
			c.texts += content + text
			if f, ok := str(ch, "finish_reason"); ok {
				c.finish, c.hasFinish = f, true
			}
		}
	}
	// count returns the count, whether it is one, and whether the field
	// held a number that is not a count (negative, fractional, huge).
	count := func(m map[string]any, k string) (int, bool, bool) {
		f, ok := m[k].(float64)
		if !ok {
			return 0, false, false
		}
		n, ok := countFromFloat(f, true)
		return n, ok, !ok
	}
	if u, ok := top["usage"].(map[string]any); ok {
		c.hasUsage = true
		c.usage.prompt, c.usage.hasPrompt, c.usage.badPrompt = count(u, "prompt_tokens")
		c.usage.completion, c.usage.hasCompletion, c.usage.badCompletion = count(u, "completion_tokens")
		if d, ok := u["prompt_tokens_details"].(map[string]any); ok {
			c.usage.cached, c.usage.hasCached, c.usage.badCached = count(d, "cached_tokens")
		}
		if d, ok := u["completion_tokens_details"].(map[string]any); ok {
			c.usage.reasoning, c.usage.hasReasoning, c.usage.badReasoning = count(d, "reasoning_tokens")
		}
	}
	if e, ok := top["error"]; ok && e != nil {
		c.isError = true
		switch e := e.(type) {
		case string:
			c.errMsg, c.hasErrMsg = e, true
		case map[string]any:
			c.errMsg, c.hasErrMsg = str(e, "message")
		}
	} else if o, _ := str(top, "object"); o == "error" {
		c.isError = true
		c.errMsg, c.hasErrMsg = str(top, "message")
	}
	return c, true, true
}

type refResult struct {
	id, model, texts, finish, errMsg      string
	hasID, hasModel, hasFinish, hasErrMsg bool
	tokens, hasUsage, isError             bool
	answer, toolCall                      bool
	usage                                 tokenUsage
}

func scannerResult(c *streamChunk) refResult {
	var texts []byte
	for _, s := range c.texts {
		texts = appendUnquoted(texts, s.raw)
	}
	r := refResult{
		id: decodeString(c.id), model: decodeString(c.model), texts: string(texts),
		finish: decodeString(c.finish), errMsg: decodeString(c.errMsg),
		hasID: c.id.ok, hasModel: c.model.ok, hasFinish: c.finish.ok, hasErrMsg: c.errMsg.ok,
		tokens: c.tokens, hasUsage: c.hasUsage, isError: c.isError,
		answer: c.answer, toolCall: c.toolCall,
	}
	if c.hasUsage {
		r.usage = c.usage
	}
	return r
}

// checkDecodeAgainstJSON is the differential oracle shared by the tests and
// the fuzz target.
func checkDecodeAgainstJSON(t *testing.T, data []byte) {
	t.Helper()
	var d chunkDecoder
	err := d.decode(data)
	valid := json.Valid(data)
	if valid != (err == nil || errors.Is(err, errNotObject)) {
		t.Fatalf("decode(%q) = %v but json.Valid = %v", data, err, valid)
	}
	if !valid {
		return
	}
	ref, isObject, ok := refChunk(data)
	if !ok {
		return
	}
	if isObject != (err == nil) {
		t.Fatalf("decode(%q) = %v, but object = %v", data, err, isObject)
	}
	if !isObject {
		return
	}
	if got := scannerResult(&d.c); !reflect.DeepEqual(got, ref) {
		t.Fatalf("decode(%q):\n got %+v\nwant %+v", data, got, ref)
	}
}

var chunkCorpus = []string{
	`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}`,
	`{"id":"c","choices":[{"index":0,"delta":{"content":"He\"llo\u0000\ud800x\udc00\ud83d\ude00"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":0}}}`,
	`{"choices":[{"text":"a\/b","finish_reason":"length"},{"delta":{"reasoning":"r"}}],"usage":null}`,
	`{"error":{"message":"boom","code":500}}`,
	`{"object":"error","message":"old"}`,
	`{"usage":{"prompt_tokens":1e400}}`,
	`{"usage":{"prompt_tokens":12345678901,"completion_tokens":-0,"prompt_tokens_details":{"cached_tokens":3.5}}}`,
	"{\"model\":\"\xff\xfe bad utf8\",\"choices\":[{\"delta\":{\"content\":\"\xc3\x28\"}}]}",
	`{"a":[{"b":[{"c":[]}]}],"choices":[{"delta":{"content":"x","content":""}}]}`,
	`{"choices":[{"delta":{"content":"x"},"delta":{"role":"assistant"}}]}`,
	`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":""}}]},"finish_reason":null}]}`,
	`{"choices":[{"delta":{"tool_calls":[{"function":{"arguments":"{\"q\": 1}","name":7}},{"function":null},{"function":{"name":""},"function":{"arguments":"x"}}],"tool_calls":[]},"finish_reason":"tool_calls"}]}`,
	`{"choices":[{"delta":{"reasoning_content":"hmm","tool_calls":"no"}}],"usage":{"completion_tokens":3,"completion_tokens_details":{"reasoning_tokens":2,"reasoning_tokens":-1}}}`,
	`[]`, `"s"`, `{}`, `{"a":1}garbage`,
}

func TestDecodeChunkMatchesEncodingJSON(t *testing.T) {
	for _, s := range chunkCorpus {
		checkDecodeAgainstJSON(t, []byte(s))
	}
	// Random mutations of the corpus.
	rng := rand.New(rand.NewPCG(3, 4))
	alphabet := []byte(`{}[],:" \\/ubnrtfe0123456789.-+aelnrstu` + "\x00\x1f\x7f\xc3\xff")
	for range 20000 {
		b := []byte(chunkCorpus[rng.IntN(len(chunkCorpus))])
		for range 1 + rng.IntN(4) {
			if len(b) == 0 {
				break
			}
			i := rng.IntN(len(b))
			switch rng.IntN(3) {
			case 0:
				b[i] = alphabet[rng.IntN(len(alphabet))]
			case 1:
				b = append(b[:i], b[i+1:]...)
			default:
				b = append(b[:i], append([]byte{alphabet[rng.IntN(len(alphabet))]}, b[i:]...)...)
			}
		}
		checkDecodeAgainstJSON(t, b)
	}
}

// --- benchmarks ---

var benchChunk = []byte(`{"id":"chatcmpl-7f3a9c2e8b1d4e6f","object":"chat.completion.chunk","created":1718000000,"model":"meta-llama/Llama-3.1-8B-Instruct","choices":[{"index":0,"delta":{"content":" the"},"logprobs":null,"finish_reason":null}],"usage":{"prompt_tokens":120,"total_tokens":133,"completion_tokens":13,"prompt_tokens_details":null}}`)

// jsonChunk is what an encoding/json client would decode.
type jsonChunk struct {
	ID      string `json:"id"`
	Model   string `json:"model"`
	Choices []struct {
		Delta struct {
			Content          *string `json:"content"`
			ReasoningContent *string `json:"reasoning_content"`
			Reasoning        *string `json:"reasoning"`
		} `json:"delta"`
		Text         *string `json:"text"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens        *int `json:"prompt_tokens"`
		CompletionTokens    *int `json:"completion_tokens"`
		PromptTokensDetails *struct {
			CachedTokens *int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	} `json:"usage"`
	Error json.RawMessage `json:"error"`
}

// BenchmarkDecodeChunk compares the scanner with encoding/json on a
// vLLM chunk carrying continuous usage.
func BenchmarkDecodeChunk(b *testing.B) {
	b.Run("scanner", func(b *testing.B) {
		var d chunkDecoder
		b.SetBytes(int64(len(benchChunk)))
		b.ReportAllocs()
		for b.Loop() {
			if err := d.decode(benchChunk); err != nil || !d.c.tokens {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding_json", func(b *testing.B) {
		b.SetBytes(int64(len(benchChunk)))
		b.ReportAllocs()
		for b.Loop() {
			var c jsonChunk
			if err := json.Unmarshal(benchChunk, &c); err != nil || len(c.Choices) != 1 {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkParseEvent measures the client's per-event parsing cost: SSE
// framing plus chunk decoding, over an in-memory stream.
func BenchmarkParseEvent(b *testing.B) {
	var stream []byte
	const events = 256
	for range events {
		stream = append(stream, "data: "...)
		stream = append(stream, benchChunk...)
		stream = append(stream, "\n\n"...)
	}
	src := bytes.NewReader(stream)
	p := NewSSEReader(src, 0)
	var d chunkDecoder
	b.SetBytes(int64(len(stream) / events))
	b.ReportAllocs()
	for b.Loop() {
		ev, err := p.Next()
		if err == io.EOF {
			src.Reset(stream)
			p.Reset(src, 0)
			ev, err = p.Next()
		}
		if err != nil {
			b.Fatal(err)
		}
		if err := d.decode(ev.Data); err != nil {
			b.Fatal(err)
		}
	}
}
