package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// FuzzRequest sends arbitrary bodies (and fault headers) to every POST
// endpoint: the server must never panic, and must answer either a
// completion or an OpenAI-style error.
func FuzzRequest(f *testing.F) {
	for _, seed := range []struct {
		path  uint8
		body  string
		fault string
	}{
		{0, `{"messages":[{"role":"user","content":"hi"}],"max_tokens":3,"stream":true,"stream_options":{"include_usage":true,"continuous_usage_stats":true}}`, ""},
		{0, `{"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":null}]}]}`, ""},
		{0, `{"messages":[{"role":"system","content":null},{"role":"user","content":"x"}],"max_tokens":2,"min_tokens":1,"ignore_eos":true,"temperature":0,"seed":-1}`, "malformed:1"},
		{0, `{"messages":[{"role":"user","content":"x"}],"max_tokens":2,"stream":true}`, "reset:1"},
		{0, `{"messages":[{"role":"user","content":"x"}],"max_tokens":2,"stream":true}`, "no_done:0"},
		{1, `{"prompt":[1,2,3],"max_tokens":2,"stream":true}`, "empty"},
		{1, `{"prompt":[[1,2]],"max_tokens":2}`, "stall:1:1ms"},
		{1, `{"prompt":["a b c"],"max_completion_tokens":4}`, ""},
		{1, `{"prompt":"\u0000\uffff\ud800","max_tokens":1e400}`, ""},
		{1, `{"prompt":[99999999999999999999]}`, ""},
		{2, `{"messages":[{"role":"user","content":"hi"}],"add_generation_prompt":false}`, ""},
		{2, `{"prompt":"hello"}`, ""},
		{0, `{"model":null,"messages":null}`, "http_429"},
		{0, `{`, ""},
		{1, `null`, ""},
		{1, `"just a string"`, ""},
		{1, `{"prompt":"x","n":0,"top_p":1,"temperature":2}`, "stall_first:0s"},
	} {
		f.Add(seed.path, []byte(seed.body), seed.fault)
	}

	cfg := zeroConfig()
	cfg.MaxModelLen = 1024
	cfg.NumKVBlocks = 256
	cfg.EOSProbability = 0.01
	cfg.MaxRequestBodyBytes = 64 << 10
	s, err := New(cfg, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	paths := []string{"/v1/chat/completions", "/v1/completions", "/tokenize"}

	f.Fuzz(func(t *testing.T, path uint8, body []byte, faultValue string) {
		if flt, err := parseFaultHeader(faultValue, time.Second); err == nil && flt.duration > 10*time.Millisecond {
			t.Skip("long stalls make slow fuzzing")
		}
		req := httptest.NewRequest(http.MethodPost, paths[int(path)%len(paths)], bytes.NewReader(body))
		if faultValue != "" {
			req.Header[FaultHeader] = []string{faultValue}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req = req.WithContext(ctx)
		rec := httptest.NewRecorder()
		aborted := false
		func() {
			defer func() {
				if v := recover(); v != nil {
					if v != http.ErrAbortHandler {
						t.Fatalf("panic: %v", v)
					}
					aborted = true // the reset fault, or a recovered bug (counted below)
				}
			}()
			s.Handler().ServeHTTP(rec, req)
		}()
		if n := s.panics.Load(); n != 0 {
			t.Fatalf("handler panicked (%d) on body %q", n, body)
		}
		if aborted {
			return
		}
		switch rec.Code {
		case 200:
		case 400, 404, 413, 429, 500, 503:
			var e openAIError
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Error == nil || e.Error.Message == "" {
				t.Fatalf("status %d with a body that is not an OpenAI error: %q", rec.Code, rec.Body.String())
			}
		default:
			t.Fatalf("unexpected status %d: %q", rec.Code, rec.Body.String())
		}
	})
}
