// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package tracefile

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// readAll reads every record of a file, failing the test on an error.
func readAll(t *testing.T, path string, opts Options) (*Reader, []Record) {
	t.Helper()
	r, err := Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	var recs []Record
	for {
		rec, err := r.Next()
		if err == io.EOF {
			return r, recs
		}
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, rec)
	}
}

// readErr reads content from a file until the first error.
func readErr(t *testing.T, name, content string, opts Options) ([]Record, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := NewReader(f, name, opts) // errors name the file as given
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var recs []Record
	for {
		rec, err := r.Next()
		if err == io.EOF {
			return recs, nil
		}
		if err != nil {
			if _, again := r.Next(); again != err {
				t.Errorf("after an error Next returned %v, want the same error", again)
			}
			return recs, err
		}
		recs = append(recs, rec)
	}
}

// TestMooncakeFixture reads the generated Mooncake trace, plain, gzip and
// zstd, and checks every record against the file's own JSON.
func TestMooncakeFixture(t *testing.T) {
	raw, err := os.ReadFile("testdata/mooncake.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
	for _, name := range []string{"mooncake.jsonl", "mooncake.jsonl.gz", "mooncake.jsonl.zst"} {
		t.Run(name, func(t *testing.T) {
			for _, f := range []Format{Auto, Mooncake} {
				r, recs := readAll(t, filepath.Join("testdata", name), Options{Format: f})
				if r.Format() != Mooncake || r.BlockSize() != 512 {
					t.Fatalf("format %s block size %d, want mooncake 512", r.Format(), r.BlockSize())
				}
				if len(recs) != len(lines) {
					t.Fatalf("%d records, want %d", len(recs), len(lines))
				}
				var first int64
				for i, rec := range recs {
					var want struct {
						Timestamp    int64    `json:"timestamp"`
						InputLength  int      `json:"input_length"`
						OutputLength int      `json:"output_length"`
						HashIDs      []uint64 `json:"hash_ids"`
					}
					if err := json.Unmarshal([]byte(lines[i]), &want); err != nil {
						t.Fatal(err)
					}
					if i == 0 {
						first = want.Timestamp
					}
					if rec.Line != i+1 || rec.PromptTokens != want.InputLength || rec.OutputTokens != want.OutputLength ||
						rec.Offset != time.Duration(want.Timestamp-first)*time.Millisecond || !slices.Equal(rec.HashIDs, want.HashIDs) ||
						rec.Session != "" || rec.Turn != 0 || rec.Model != "" {
						t.Fatalf("record %d = %+v, want %s", i, rec, lines[i])
					}
				}
			}
		})
	}
}

// TestMooncakeOffsetOrigin: offsets count from the first record, not from
// zero, and session_id is kept.
func TestMooncakeOffsetOrigin(t *testing.T) {
	recs, err := readErr(t, "t.jsonl", "\n"+
		`{"timestamp": 5000, "input_length": 10, "output_length": 2, "hash_ids": [7], "session_id": "a"}`+"\n"+
		`{"timestamp": 5250.5, "input_length": 0, "output_length": 0, "session_id": 12}`+"\r\n"+
		"\n"+
		`{"timestamp": 6000, "input_length": 3, "output_length": 1, "hash_ids": []}`, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := []Record{
		{Line: 2, Offset: 0, PromptTokens: 10, OutputTokens: 2, HashIDs: []uint64{7}, Session: "a"},
		{Line: 3, Offset: 250500 * time.Microsecond, Session: "12"},
		{Line: 5, Offset: time.Second, PromptTokens: 3, OutputTokens: 1, HashIDs: []uint64{}},
	}
	if len(recs) != len(want) {
		t.Fatalf("got %+v, want %+v", recs, want)
	}
	for i := range want {
		if g, w := recs[i], want[i]; g.Line != w.Line || g.Offset != w.Offset || g.PromptTokens != w.PromptTokens ||
			g.OutputTokens != w.OutputTokens || !slices.Equal(g.HashIDs, w.HashIDs) || g.Session != w.Session {
			t.Errorf("record %d = %+v, want %+v", i, g, w)
		}
	}
}

// TestMooncakeErrors: every bad line is a *LineError "file:line: field:
// problem" and reading stops at it.
func TestMooncakeErrors(t *testing.T) {
	good := `{"timestamp": 0, "input_length": 10, "output_length": 2, "hash_ids": [1]}` + "\n"
	for _, c := range []struct {
		name, line string
		field      string
		want       string
	}{
		{"no timestamp", `{"input_length": 10, "output_length": 2}`, "timestamp", "t.jsonl:2: timestamp: missing"},
		{"no input", `{"timestamp": 1, "output_length": 2}`, "input_length", "t.jsonl:2: input_length: missing"},
		{"no output", `{"timestamp": 1, "input_length": 2}`, "output_length", "t.jsonl:2: output_length: missing"},
		{"string length", `{"timestamp": 1, "input_length": "x", "output_length": 2}`, "input_length", "t.jsonl:2: input_length: "},
		{"negative length", `{"timestamp": 1, "input_length": -3, "output_length": 2}`, "input_length", "t.jsonl:2: input_length: negative length -3"},
		{"fractional length", `{"timestamp": 1, "input_length": 3.5, "output_length": 2}`, "input_length", "t.jsonl:2: input_length: not a whole number: 3.5"},
		{"negative output", `{"timestamp": 1, "input_length": 3, "output_length": -1}`, "output_length", "t.jsonl:2: output_length: negative length -1"},
		{"negative time", `{"timestamp": -1, "input_length": 3, "output_length": 1}`, "timestamp", "t.jsonl:2: timestamp: negative time -1"},
		{"negative hash id", `{"timestamp": 1, "input_length": 3, "output_length": 1, "hash_ids": [-1]}`, "hash_ids", "t.jsonl:2: hash_ids: "},
		{"hash ids not a list", `{"timestamp": 1, "input_length": 3, "output_length": 1, "hash_ids": 4}`, "hash_ids", "t.jsonl:2: hash_ids: "},
		{"not JSON", `{"timestamp": 1,`, "", "t.jsonl:2: invalid JSON"},
		{"backwards", `{"timestamp": -0, "input_length": 3, "output_length": 1}` + "\n" + `{"timestamp": 0, "input_length": 3, "output_length": 1}`, "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			content := good + c.line + "\n" + good
			if c.name == "backwards" {
				// 5 s, then 3.5 s: 1.5 s back, beyond the 1 s tolerance; 4.5 s is within.
				content = `{"timestamp": 5000, "input_length": 1, "output_length": 1}` + "\n" +
					`{"timestamp": 4500, "input_length": 1, "output_length": 1}` + "\n" +
					`{"timestamp": 3500, "input_length": 1, "output_length": 1}` + "\n"
				c.field, c.want = "timestamp", "t.jsonl:3: timestamp: time goes backwards: 1.5s before the latest earlier record"
			}
			recs, err := readErr(t, "t.jsonl", content, Options{})
			var le *LineError
			if !errors.As(err, &le) {
				t.Fatalf("error %v (%T), want a *LineError", err, err)
			}
			if !strings.HasPrefix(err.Error(), c.want) || le.Field != c.field || le.File != "t.jsonl" {
				t.Errorf("error %q (field %q), want it to start %q (field %q)", err, le.Field, c.want, c.field)
			}
			if want := le.Line - 1; len(recs) != want {
				t.Errorf("%d records before the error, want %d", len(recs), want)
			}
		})
	}
}

// TestMaxDisorder: a negative tolerance turns the order check off; a
// larger one lets a record fall further behind (and its offset go
// negative from the first record).
func TestMaxDisorder(t *testing.T) {
	content := `{"timestamp": 5000, "input_length": 1, "output_length": 1}` + "\n" +
		`{"timestamp": 0, "input_length": 1, "output_length": 1}` + "\n"
	for _, d := range []time.Duration{-1, 5 * time.Second} {
		recs, err := readErr(t, "t.jsonl", content, Options{MaxDisorder: d})
		if err != nil || len(recs) != 2 || recs[1].Offset != -5*time.Second {
			t.Errorf("MaxDisorder %v: %+v, %v; want the second record at -5s", d, recs, err)
		}
	}
	if _, err := readErr(t, "t.jsonl", content, Options{MaxDisorder: 4 * time.Second}); err == nil {
		t.Error("MaxDisorder 4s: no error for a record 5s back")
	}
}

// TestLineTooLong: a line over MaxLineBytes is an error naming its line,
// after the records before it; one just under is read.
func TestLineTooLong(t *testing.T) {
	ids := func(bytes int) string {
		var b strings.Builder
		b.WriteString(`{"timestamp": 1, "input_length": 1, "output_length": 1, "hash_ids": [0`)
		for b.Len() < bytes-2 { // spaces: ids are bounded on their own (MaxHashIDs)
			b.WriteString(" ")
		}
		b.WriteString("]}")
		return b.String()
	}
	fits, over := ids(MaxLineBytes), ids(MaxLineBytes+1)
	if len(fits) != MaxLineBytes || len(over) != MaxLineBytes+1 {
		t.Fatalf("lines of %d and %d bytes", len(fits), len(over))
	}
	recs, err := readErr(t, "t.jsonl", fits+"\n"+fits+"\r\n"+over+"\n", Options{})
	if len(recs) != 2 || !errors.Is(err, ErrLineTooLong) || !strings.HasSuffix(err.Error(), "t.jsonl:3: line longer than 1 MiB") {
		t.Errorf("%d records, error %v; want 2 and line 3 too long", len(recs), err)
	}
	// Unterminated at the end, and as the first line (detection).
	if _, err := readErr(t, "t.jsonl", over, Options{}); !errors.Is(err, ErrLineTooLong) || !strings.HasSuffix(err.Error(), "t.jsonl:1: line longer than 1 MiB") {
		t.Errorf("a first line too long: %v", err)
	}
}

// TestDetectUnknown: a file of no known format is refused at Open with
// its name and what its first line holds.
func TestDetectUnknown(t *testing.T) {
	for _, c := range []struct{ content, want string }{
		{"", "t.txt: empty: not a trace of a known format"},
		{"\n\n  \n", "t.txt: empty: not a trace of a known format"},
		{"a,b,c\n1,2,3\n", `t.txt:1: not a trace of a known format: the first line "a,b,c" is neither`},
		{`{"foo": 1, "bar": 2}`, `t.txt:1: not a trace of a known format: a JSON object with keys bar, foo,`},
		{`{"foo": `, `t.txt:1: not a trace of a known format: the first line is neither a CSV header nor a JSON object`},
		{"\x00\x01binary", `t.txt:1: not a trace of a known format: the first line "\x00\x01binary"`},
	} {
		_, err := readErr(t, "t.txt", c.content, Options{})
		if !errors.Is(err, ErrUnknownFormat) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want it to contain %q", c.content, err, c.want)
		}
	}
}

// TestNamedFormat: a named format is not second-guessed, and a bad
// option is refused.
func TestNamedFormat(t *testing.T) {
	_, err := readErr(t, "t.jsonl", `{"planned": "2026-01-01T00:00:00Z", "prompt_tokens": 1, "output_tokens": 1}`, Options{Format: Mooncake})
	if err == nil || !strings.HasSuffix(err.Error(), "t.jsonl:1: timestamp: missing") {
		t.Errorf("llmprobe line read as Mooncake: %v", err)
	}
	if _, err := NewReader(strings.NewReader(""), "x", Options{Format: "parquet"}); err == nil || !strings.Contains(err.Error(), `unknown trace format "parquet"`) {
		t.Errorf("format parquet: %v", err)
	}
	if _, err := NewReader(strings.NewReader(""), "x", Options{BlockSize: -1}); err == nil {
		t.Error("negative block size accepted")
	}
	r, err := NewReader(strings.NewReader(""), "x", Options{Format: Mooncake, BlockSize: 16})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Next(); err != io.EOF || r.BlockSize() != 16 {
		t.Errorf("empty named Mooncake: %v, block size %d", err, r.BlockSize())
	}
}

// TestCorruptCompression: a damaged gzip or zstd stream is an error
// naming the file, not a panic or a silent end.
func TestCorruptCompression(t *testing.T) {
	for _, name := range []string{"mooncake.jsonl.gz", "mooncake.jsonl.zst"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		cut := b[:len(b)/2]
		bad := bytes.Clone(b)
		bad[len(bad)/2] ^= 0xff
		for _, content := range [][]byte{cut, bad} {
			_, err := readErr(t, name, string(content), Options{})
			if err == nil || !strings.Contains(err.Error(), name) {
				t.Errorf("%s damaged: error %v, want one naming the file", name, err)
			}
		}
	}
}
