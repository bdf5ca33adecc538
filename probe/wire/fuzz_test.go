// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package wire

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
	"time"
	"unicode/utf8"

	commoncfg "github.com/prometheus/common/config"
)

// Fuzz targets. `go test` runs them over their seed corpus; run one with
// e.g. `go test ./probe -run '^$' -fuzz FuzzClientStream -fuzztime 60s`.

func sseSeeds(f *testing.F) {
	for _, tc := range sseCases {
		f.Add([]byte(tc.in), uint8(3))
	}
	f.Add([]byte(sseBody(chatRole(), chatContent("a"), usageChunk(1, 1, 0), "[DONE]")), uint8(7))
	f.Add([]byte("data: x\r\n\rdata: y\r\r\n\n:c\ndata"), uint8(1))
}

// FuzzSSEReader checks the parser against the reference transcription of
// the spec, with the input cut into reads of varying sizes.
func FuzzSSEReader(f *testing.F) {
	sseSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte, step uint8) {
		want := refParse(string(data))
		var cuts []int
		for pos, i := 0, 0; ; i++ {
			pos += 1 + int(step>>(i%4))%17
			if pos >= len(data) {
				break
			}
			cuts = append(cuts, pos)
		}
		for name, src := range map[string]io.Reader{
			"whole":    bytes.NewReader(data),
			"one-byte": iotest.OneByteReader(bytes.NewReader(data)),
			"cuts":     splitAt(string(data), cuts...),
		} {
			got, err := readAll(src, 0)
			if err != io.EOF {
				t.Fatalf("%s: error %v", name, err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%s: got %+v, want %+v", name, got, want)
			}
			for _, ev := range got {
				if strings.ContainsRune(ev.Data, '\r') {
					t.Fatalf("%s: CR in data %q", name, ev.Data)
				}
			}
		}
	})
}

// FuzzDecodeChunk checks the chunk scanner against encoding/json.
func FuzzDecodeChunk(f *testing.F) {
	for _, s := range chunkCorpus {
		f.Add([]byte(s))
	}
	f.Add(benchChunk)
	f.Fuzz(func(t *testing.T, data []byte) {
		checkDecodeAgainstJSON(t, data)
	})
}

// bodyTransport answers every request with a 200 event stream whose body
// is the fuzz input, without a network.
type bodyTransport struct {
	contentType string
	body        []byte
}

func (b bodyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		io.Copy(io.Discard, r.Body)
		r.Body.Close()
	}
	return &http.Response{
		StatusCode: 200,
		Header:     http.Header{"Content-Type": {b.contentType}},
		Body:       io.NopCloser(iotest.HalfReader(bytes.NewReader(b.body))),
		Request:    r,
	}, nil
}

// FuzzClientStream runs the whole client on arbitrary response bodies: it
// must not panic and must produce a consistent Result.
func FuzzClientStream(f *testing.F) {
	sseSeeds(f)
	f.Add([]byte(sseBody(chatRole(), chatContent("a"), chatDelta("reasoning_content", "r", "", ""), chatDelta("content", "b", "stop", ""), usageChunk(3, 2, 1), "[DONE]")), uint8(0))
	f.Add([]byte(sseBody(completionText("x", ""), `{"error":{"message":"bad"}}`)), uint8(1))
	f.Add([]byte("event: error\ndata: {\"error\":\"x\"}\n\n"), uint8(2))
	f.Add([]byte(`{"id":"x","choices":[]}`), uint8(3))
	f.Add([]byte(sseBody(chatDelta("reasoning", "r", "", `{"completion_tokens":1}`), toolCallDelta(true, "f", "", ""), chatDelta("content", "b", "stop", `{"completion_tokens":5,"completion_tokens_details":{"reasoning_tokens":1}}`), "[DONE]")), uint8(2))
	f.Fuzz(func(t *testing.T, body []byte, mode uint8) {
		ct := "text/event-stream"
		if mode%2 == 1 {
			ct = "application/octet-stream" // through the SSE sniffing path
		}
		c, err := NewClient(ClientConfig{
			BaseURL:    "http://fuzz.invalid/v1",
			HTTPClient: &http.Client{Transport: bodyTransport{contentType: ct, body: body}},
			KeepText:   mode%4 >= 2,
		})
		if err != nil {
			t.Fatal(err)
		}
		res := &Result{PlannedPromptTokens: 7}
		c.Do(context.Background(), chatRequest(), res)
		if !slices.Contains(Outcomes[:], res.Outcome) {
			t.Fatalf("outcome %q", res.Outcome)
		}
		if (res.Outcome == OutcomeSuccess) != (res.ErrorType == "") {
			t.Fatalf("outcome %s with error type %q", res.Outcome, res.ErrorType)
		}
		if res.Outcome == OutcomeSuccess && (!res.FirstToken || res.Chunks == 0) {
			t.Fatalf("success without tokens: %+v", res)
		}
		// One gap per chunk after the first, more only where per-chunk
		// usage split a chunk into tokens, never more than the response
		// bounds allow.
		maxEvents, _, _ := responseBounds(chatRequest().MaxTokens)
		if len(res.ITLs) < max(res.Chunks-1, 0) || (len(res.ITLs) > max(res.Chunks-1, 0) && !res.UsageReported) ||
			len(res.ITLs) > maxEvents || res.FirstToken != (res.Chunks > 0) {
			t.Fatalf("%d chunks, %d ITLs, first token %v", res.Chunks, len(res.ITLs), res.FirstToken)
		}
		if res.FirstAnswer && (!res.FirstToken || res.TTFA < res.TTFT || res.TTFA > res.E2E) || res.ReasoningChunks > res.Chunks ||
			(res.ReasoningChunks == res.Chunks && res.Chunks > 0 && res.FirstAnswer) {
			t.Fatalf("first answer %v at %v (TTFT %v, E2E %v), %d of %d chunks reasoning", res.FirstAnswer, res.TTFA, res.TTFT, res.E2E, res.ReasoningChunks, res.Chunks)
		}
		if res.TTFT < 0 || res.E2E < res.TTFT || res.TPOT < 0 || res.OutputTokens < 0 || res.PromptTokens < 0 {
			t.Fatalf("negative figure: %+v", res)
		}
		if res.Start.IsZero() || res.Start.Before(res.Dispatched) {
			t.Fatalf("start %v dispatched %v", res.Start, res.Dispatched)
		}
		if len(res.Error) > maxErrorMessage+8 || len(res.ResponseID) > maxResponseString || len(res.ResponseModel) > maxResponseString {
			t.Fatalf("unbounded strings: %d %d %d", len(res.Error), len(res.ResponseID), len(res.ResponseModel))
		}
	})
}

// FuzzEncodeBody checks that any prompt text produces valid JSON that
// decodes to what encoding/json would have sent.
func FuzzEncodeBody(f *testing.F) {
	for _, s := range []string{"", "hello", "\x00\x1f\"\\\u2028\xff", "日本 😀", strings.Repeat("ab\n", 50)} {
		f.Add(s, 0.7)
	}
	f.Fuzz(func(t *testing.T, text string, temp float64) {
		req := &Request{API: APIChat, Model: text, Messages: []Message{{Role: "user", Content: text}},
			MaxTokens: 8, Sampling: Sampling{Temperature: temp}, ExtraBody: map[string]any{text: text}}
		body, err := EncodeBody(nil, req)
		if err != nil {
			if temp != temp || temp > 1e308 || temp < -1e308 { // NaN or ±Inf
				return
			}
			t.Fatalf("EncodeBody: %v", err)
		}
		var got map[string]any
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatalf("invalid JSON %q: %v", body, err)
		}
		ref, _ := json.Marshal(text)
		var want string
		_ = json.Unmarshal(ref, &want)
		if slices.Contains(standardKeys[:], text) {
			return // the extra member replaced a standard one
		}
		msgs, _ := got["messages"].([]any)
		if len(msgs) != 1 || msgs[0].(map[string]any)["content"] != want || got["model"] != want || got[want] != want {
			t.Fatalf("body %s does not carry %q", body, want)
		}
	})
}

// statusTransport answers every request with the given status, headers
// and body, without a network.
type statusTransport struct {
	status int
	header http.Header
	body   []byte
}

func (s statusTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		io.Copy(io.Discard, r.Body)
		r.Body.Close()
	}
	return &http.Response{StatusCode: s.status, Header: s.header, Body: io.NopCloser(bytes.NewReader(s.body)), Request: r}, nil
}

// FuzzClientHTTPError runs the client's non-2xx path on arbitrary status
// codes, headers and error bodies that may quote the request's secret:
// the outcome is http_error with the status in its type, the message is
// bounded, valid UTF-8 and free of the secret, and Retry-After is sane.
func FuzzClientHTTPError(f *testing.F) {
	const secret = "sk-fuzz-credential-0123456789"
	for _, b := range []string{
		`{"error":{"message":"Incorrect API key provided: ` + secret + `"}}`,
		`{"error":"rate limited"}`, `{"message":"old vllm"}`, `{"detail":"fastapi"}`,
		"<html>502 Bad Gateway</html>", "plain text error", "",
		`{"error":{"message":"` + strings.Repeat("x", 5000) + secret + `"}}`,
		`{"error":{"message":{"nested":true}}}`, "\xff\xfe binary",
	} {
		f.Add(uint16(401), "120", "application/json", []byte(b), uint16(0))
		f.Add(uint16(429), "Wed, 21 Oct 2015 07:28:00 GMT", "text/plain", []byte(b), uint16(7))
	}
	f.Add(uint16(503), "-5", "", []byte(strings.Repeat("a", 4090)+secret), uint16(4090))
	redactor := NewRedactor(commoncfg.HTTPClientConfig{Authorization: &commoncfg.Authorization{Type: "Bearer", Credentials: secret}})
	f.Fuzz(func(t *testing.T, status uint16, retryAfter, contentType string, body []byte, at uint16) {
		code := 100 + int(status)%500
		if code >= 200 && code < 400 {
			code += 200 // 2xx is the stream path, 3xx the redirect path
		}
		// The server quotes the secret somewhere in its body.
		pos := int(at) % (len(body) + 1)
		quoted := append(append(append([]byte{}, body[:pos]...), secret...), body[pos:]...)
		c, err := NewClient(ClientConfig{
			BaseURL: "http://fuzz.invalid/v1",
			HTTPClient: &http.Client{Transport: statusTransport{status: code, body: quoted,
				header: http.Header{"Retry-After": {retryAfter}, "Content-Type": {contentType}}}},
			Redactor: redactor,
		})
		if err != nil {
			t.Fatal(err)
		}
		res := &Result{}
		c.Do(context.Background(), chatRequest(), res)
		if res.Outcome != OutcomeHTTPError || res.ErrorType != "http_"+strconv.Itoa(code) || res.StatusCode != code {
			t.Fatalf("status %d: outcome %s/%s status %d", code, res.Outcome, res.ErrorType, res.StatusCode)
		}
		if !utf8.ValidString(res.Error) || len(res.Error) > maxErrorMessage+16 {
			t.Fatalf("message %d bytes, valid UTF-8 %v", len(res.Error), utf8.ValidString(res.Error))
		}
		// Neither the secret, nor what a length limit left of it (its
		// beginning at the end of the message). The body itself may hold
		// pieces of it elsewhere: those are the server's words, not a cut.
		if strings.Contains(res.Error, secret) {
			t.Fatalf("the secret survived: %q", res.Error)
		}
		tail := strings.TrimSuffix(res.Error, "…")
		for k := redactMinPartial; k < len(secret); k++ {
			if strings.HasSuffix(tail, secret[:k]) {
				t.Fatalf("a cut secret survived: %q", res.Error)
			}
		}
		if res.RetryAfter < 0 || res.RetryAfter > 366*24*time.Hour {
			t.Fatalf("Retry-After %q -> %v", retryAfter, res.RetryAfter)
		}
	})
}

// FuzzProtocolDecode runs every protocol's event decoder on arbitrary
// payloads: no panic, and an error exactly when the payload is not a
// valid JSON object (the OpenAI [DONE] marker and empty events aside).
func FuzzProtocolDecode(f *testing.F) {
	for _, s := range []string{
		`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}`,
		`{"type":"message_start","message":{"id":"m","usage":{"input_tokens":3,"cache_read_input_tokens":2}}}`,
		`{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":-1}}`,
		`{"type":"response.completed","response":{"status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"usage":{"input_tokens":1,"output_tokens_details":{"reasoning_tokens":1}}}}`,
		`{"type":"response.function_call_arguments.delta","delta":"{"}`,
		`{"object":"list","data":[{"embedding":[1]},{"embedding":[2]}],"usage":{"prompt_tokens":2}}`,
		`{"error":{"message":"x"}}`, `[]`, `null`, `{"data":"x"}`,
	} {
		for ev := range uint8(4) {
			f.Add([]byte(s), ev)
		}
	}
	events := []string{"", "content_block_delta", "message_delta", "response.completed"}
	f.Fuzz(func(t *testing.T, data []byte, which uint8) {
		ev := SSEEvent{Data: data}
		if name := events[int(which)%len(events)]; name != "" {
			ev.Type = []byte(name)
		}
		trimmed := bytes.TrimSpace(data)
		for _, api := range []API{APIMessages, APIResponses, APIEmbeddings} {
			var d chunkDecoder
			_, err := protocols[api].decode(&d, ev)
			if len(trimmed) == 0 && api != APIEmbeddings {
				continue // an empty event is skipped
			}
			var v any
			object := json.Unmarshal(data, &v) == nil
			if _, isMap := v.(map[string]any); !isMap {
				object = false
			}
			if (err == nil) != object {
				t.Fatalf("%s: decode(%q) = %v, but it is a JSON object: %v", api, data, err, object)
			}
			if err == nil && (d.c.items < 0 || (d.c.hasUsage && (d.c.usage.prompt < 0 || d.c.usage.completion < 0))) {
				t.Fatalf("%s: decode(%q): negative counts %+v", api, data, d.c.usage)
			}
		}
	})
}
