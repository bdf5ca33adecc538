// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package workload

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/llmprobe/llmprobe/internal/redirecttest"

	commoncfg "github.com/prometheus/common/config"

	"github.com/llmprobe/llmprobe/probe/wire"
)

// fixtureTokenizer counts tokens the way the calibration fixtures do:
// text splits at whitespace, a period is a word of its own, each word is
// perWord tokens, and a special marker "<|...|>" is one token.
func fixtureTokens(s string, perWord int) int {
	n := 0
	for _, f := range strings.Fields(strings.ReplaceAll(s, ".", " . ")) {
		if strings.HasPrefix(f, "<|") && strings.HasSuffix(f, "|>") {
			n++
		} else {
			n += perWord
		}
	}
	return n
}

// fixtureTemplate is the fixtures' chat template: perMessage markers
// around each message's content, and a one-token generation prompt.
func fixtureTemplate(msgs []wire.Message, perMessage int, addGen bool) string {
	var b strings.Builder
	for _, m := range msgs {
		b.WriteString("<|" + m.Role + "|> ")
		for range perMessage - 2 {
			b.WriteString("<|pad|> ")
		}
		b.WriteString(m.Content + " <|eot|> ")
	}
	if addGen {
		b.WriteString("<|assistant|>")
	}
	return b.String()
}

func ids(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = 100 + i
	}
	return out
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// vllmFixture answers vLLM's /tokenize: {"model", "prompt"} (a
// begin-of-text token added) or {"model", "messages",
// "add_generation_prompt"} (the template carries begin-of-text), with
// {"count", "max_model_len", "tokens"}; countOnly/tokensOnly drop a field.
func vllmFixture(t *testing.T, perWord, perMessage int, tokensOnly bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/tokenize" || r.Method != http.MethodPost {
			http.NotFound(w, r)
			return
		}
		var req struct {
			Model               string         `json:"model"`
			Prompt              *string        `json:"prompt"`
			Messages            []wire.Message `json:"messages"`
			AddGenerationPrompt *bool          `json:"add_generation_prompt"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Model != "m" {
			writeJSON(w, 400, map[string]any{"object": "error", "message": fmt.Sprintf("bad request (%v, model %q)", err, req.Model)})
			return
		}
		var n int
		switch {
		case req.Prompt != nil && req.Messages == nil:
			n = 1 + fixtureTokens(*req.Prompt, perWord)
		case req.Messages != nil && req.Prompt == nil:
			addGen := req.AddGenerationPrompt == nil || *req.AddGenerationPrompt
			n = fixtureTokens("<|bos|> "+fixtureTemplate(req.Messages, perMessage, addGen), perWord)
		default:
			// Pydantic's answer to neither or both.
			writeJSON(w, 400, map[string]any{"object": "error", "message": "1 validation error: prompt or messages required", "type": "BadRequestError", "code": 400})
			return
		}
		if tokensOnly {
			writeJSON(w, 200, map[string]any{"tokens": ids(n)})
			return
		}
		writeJSON(w, 200, map[string]any{"count": n, "max_model_len": 8192, "tokens": ids(n)})
	})
}

// llamaFixture answers llama.cpp's llama-server: /tokenize reads
// "content" (begin-of-text only with add_special) and ignores other keys,
// answering {"tokens": []} without content (or, strict, a 400 that
// "content" is required); /apply-template templates messages without a
// begin-of-text (the chat endpoint tokenizes the prompt with add_special).
type llamaFixture struct {
	perWord, perMessage int
	strict              bool // 400 for a /tokenize without content
	noTemplate          bool // no /apply-template (llama.cpp before 2025)

	mu          sync.Mutex
	addSpecials []bool // add_special of each /tokenize with content
}

func (f *llamaFixture) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.NotFound(w, r)
		return
	}
	var body map[string]json.RawMessage
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		writeJSON(w, 500, map[string]any{"error": map[string]any{"code": 500, "message": err.Error(), "type": "server_error"}})
		return
	}
	switch {
	case r.URL.Path == "/tokenize":
		raw, ok := body["content"]
		if !ok {
			if f.strict {
				writeJSON(w, 400, map[string]any{"error": map[string]any{"code": 400, "message": `"content" is required`, "type": "invalid_request_error"}})
				return
			}
			writeJSON(w, 200, map[string]any{"tokens": []int{}})
			return
		}
		var content string
		var addSpecial bool
		_ = json.Unmarshal(raw, &content)
		if a, ok := body["add_special"]; ok {
			_ = json.Unmarshal(a, &addSpecial)
		}
		f.mu.Lock()
		f.addSpecials = append(f.addSpecials, addSpecial)
		f.mu.Unlock()
		n := fixtureTokens(content, f.perWord)
		if addSpecial {
			n++
		}
		writeJSON(w, 200, map[string]any{"tokens": ids(n)})
	case r.URL.Path == "/apply-template" && !f.noTemplate:
		var msgs []wire.Message
		if err := json.Unmarshal(body["messages"], &msgs); err != nil || len(msgs) == 0 {
			writeJSON(w, 400, map[string]any{"error": map[string]any{"code": 400, "message": "'messages' is required", "type": "invalid_request_error"}})
			return
		}
		addGen := true
		if a, ok := body["add_generation_prompt"]; ok {
			_ = json.Unmarshal(a, &addGen)
		}
		writeJSON(w, 200, map[string]any{"prompt": fixtureTemplate(msgs, f.perMessage, addGen)})
	default:
		writeJSON(w, 404, map[string]any{"error": map[string]any{"code": 404, "message": "File Not Found", "type": "not_found_error"}})
	}
}

func calibrateAgainst(t *testing.T, h http.Handler, api wire.API) (lengthPrior, float64, error) {
	t.Helper()
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return calibrateWithTokenize(context.Background(), ts.Client(), ts.URL+"/v1", "m", api, NewPromptSynth(7))
}

// Every dialect calibrates to the fixture's exact template and tokenizer:
// b is the tokens per word, a_0 the begin-of-text (completions) or the
// begin-of-text and generation prompt (chat), the per-message cost the
// template's markers.
func TestCalibrateDialects(t *testing.T) {
	for _, perWord := range []int{1, 2} {
		for _, perMessage := range []int{3, 7} {
			fixtures := map[string]func() http.Handler{
				"vllm":             func() http.Handler { return vllmFixture(t, perWord, perMessage, false) },
				"vllm-tokens-only": func() http.Handler { return vllmFixture(t, perWord, perMessage, true) },
				"llama.cpp":        func() http.Handler { return &llamaFixture{perWord: perWord, perMessage: perMessage} },
				"llama.cpp-strict": func() http.Handler { return &llamaFixture{perWord: perWord, perMessage: perMessage, strict: true} },
			}
			for name, mk := range fixtures {
				for _, api := range []wire.API{wire.APICompletions, wire.APIChat} {
					t.Run(fmt.Sprintf("%s/%s/perWord=%d/perMessage=%d", name, api, perWord, perMessage), func(t *testing.T) {
						h := mk()
						p, b, err := calibrateAgainst(t, h, api)
						if err != nil {
							t.Fatalf("calibration failed: %v", err)
						}
						want := lengthPrior{perPrompt: 1}
						if api == wire.APIChat {
							// begin-of-text + generation prompt; the markers per message.
							want = lengthPrior{perPrompt: 2, perMessage: float64(perMessage)}
						}
						if b != float64(perWord) || p != want {
							t.Errorf("got prior %+v, b %v; want %+v, b %d", p, b, want, perWord)
						}
						if lf, ok := h.(*llamaFixture); ok {
							for i, a := range lf.addSpecials {
								if !a {
									t.Errorf("llama.cpp /tokenize request %d without add_special: the server adds begin-of-text to what it serves", i)
								}
							}
						}
					})
				}
			}
		}
	}
}

// The simulator speaks vLLM's dialect; calibration against it still
// gives its tokenizer exactly (one token per word, no template tokens in
// completions).
func TestCalibrateSimulatorShape(t *testing.T) {
	p, b, err := calibrateAgainst(t, vllmFixture(t, 1, 4, false), wire.APICompletions)
	if err != nil || b != 1 || p.perPrompt != 1 {
		t.Fatalf("prior %+v, b %v, err %v", p, b, err)
	}
}

// llama.cpp without /apply-template calibrates completions but not chat
// (whose template it cannot see); the error names the endpoint.
func TestCalibrateLlamaCppWithoutApplyTemplate(t *testing.T) {
	f := &llamaFixture{perWord: 1, perMessage: 5, noTemplate: true}
	if p, b, err := calibrateAgainst(t, f, wire.APICompletions); err != nil || b != 1 || p.perPrompt != 1 {
		t.Errorf("completions: prior %+v, b %v, err %v", p, b, err)
	}
	_, _, err := calibrateAgainst(t, f, wire.APIChat)
	if err == nil || !strings.Contains(err.Error(), "apply-template") || !strings.Contains(err.Error(), "404") {
		t.Errorf("chat without /apply-template: err = %v, want a 404 naming /apply-template", err)
	}
}

const secretTail = "SECRET-TAIL-9f3a"

// Servers that answer nonsense: calibration fails with a short, clean
// error that quotes at most a short excerpt of the body, and never
// panics.
func TestCalibrateBadServers(t *testing.T) {
	long := strings.Repeat("x", 600) + secretTail
	huge := func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"count": 64, "tokens": [`))
		chunk := []byte(strings.Repeat("1,", 1<<15))
		for range 300 { // ~19 MiB
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
		_, _ = w.Write([]byte("1]}"))
	}
	// byWords answers with a function of the prompt's word count.
	byWords := func(f func(words int) string) func(http.ResponseWriter, *http.Request) {
		return func(w http.ResponseWriter, r *http.Request) {
			var req struct {
				Prompt   string         `json:"prompt"`
				Content  string         `json:"content"`
				Messages []wire.Message `json:"messages"`
			}
			_ = json.NewDecoder(r.Body).Decode(&req)
			text := req.Prompt + req.Content
			for _, m := range req.Messages {
				text += " " + m.Content
			}
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(f(fixtureTokens(text, 1))))
		}
	}
	cases := map[string]func(http.ResponseWriter, *http.Request){
		"garbage": func(w http.ResponseWriter, r *http.Request) {
			_, _ = w.Write([]byte("\x00\x01\xff\xfe garbage \x1b[31m" + long))
		},
		"html-200": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			_, _ = w.Write([]byte("<!DOCTYPE html>\n<html><head><title>Sign in</title></head><body>" + long + "</body></html>"))
		},
		"html-502": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(502)
			_, _ = w.Write([]byte("<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>" + long + "</body></html>"))
		},
		"500-json": func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, 500, map[string]any{"error": map[string]any{"message": "internal error\n" + long}})
		},
		"400-mentions-content-everywhere": func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, 400, map[string]any{"error": map[string]any{"message": `"content" is required ` + long}})
		},
		"huge-body": func(w http.ResponseWriter, r *http.Request) { huge(w) },
		"negative-counts": byWords(func(n int) string {
			return fmt.Sprintf(`{"count": %d}`, n-1000)
		}),
		"negative-overhead": byWords(func(n int) string {
			return fmt.Sprintf(`{"count": %d}`, n-60)
		}),
		"constant-count": byWords(func(int) string { return `{"count": 5}` }),
		"decreasing-count": byWords(func(n int) string {
			return fmt.Sprintf(`{"count": %d}`, 10000-n)
		}),
		"absurd-ratio": byWords(func(n int) string {
			return fmt.Sprintf(`{"count": %d}`, 1000*n)
		}),
		"huge-count": byWords(func(n int) string {
			return fmt.Sprintf(`{"count": %d}`, int64(n)<<40)
		}),
		"nan-literal": func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(`{"count": NaN}`)) },
		"nan-string":  func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(`{"count": "NaN"}`)) },
		"infinity":    func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(`{"count": 1e400}`)) },
		"fraction":    func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(`{"count": 64.5}`)) },
		"long-number": func(w http.ResponseWriter, r *http.Request) {
			_, _ = w.Write([]byte(`{"count": 1` + strings.Repeat("0", 5000) + `}`))
		},
		"null":              func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(`null`)) },
		"array":             func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(`[{"id": 1, "text": "a"}]`)) },
		"tokens-not-a-list": func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(`{"tokens": "1 2 3"}`)) },
		"tokens-strings":    func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(`{"tokens": ["` + long + `"]}`)) },
		"count-disagrees": byWords(func(n int) string {
			return fmt.Sprintf(`{"count": %d, "tokens": [1, 2, 3]}`, n+1)
		}),
		"truncated": func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(`{"count": 6`)) },
		"empty":     func(w http.ResponseWriter, r *http.Request) {},
		"llama-template-not-a-string": func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/apply-template" {
				_, _ = w.Write([]byte(`{"prompt": ["` + long + `"]}`))
				return
			}
			(&llamaFixture{perWord: 1, perMessage: 3}).ServeHTTP(w, r)
		},
		"llama-template-empty": func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/apply-template" {
				_, _ = w.Write([]byte(`{"prompt": ""}`))
				return
			}
			(&llamaFixture{perWord: 1, perMessage: 3}).ServeHTTP(w, r)
		},
		"chat-template-eats-text": func(w http.ResponseWriter, r *http.Request) {
			var req struct {
				Prompt   *string        `json:"prompt"`
				Messages []wire.Message `json:"messages"`
			}
			_ = json.NewDecoder(r.Body).Decode(&req)
			if req.Prompt != nil {
				writeJSON(w, 200, map[string]any{"count": 1 + fixtureTokens(*req.Prompt, 1)})
				return
			}
			writeJSON(w, 200, map[string]any{"count": 5})
		},
		"llama-tokenize-always-empty": func(w http.ResponseWriter, r *http.Request) {
			_, _ = w.Write([]byte(`{"tokens": []}`))
		},
	}
	for name, h := range cases {
		for _, api := range []wire.API{wire.APICompletions, wire.APIChat} {
			if (strings.HasPrefix(name, "llama-template") || strings.HasPrefix(name, "chat-")) && api != wire.APIChat {
				continue // only chat asks for the template
			}
			t.Run(name+"/"+string(api), func(t *testing.T) {
				var p lengthPrior
				var b float64
				var err error
				func() {
					defer func() {
						if v := recover(); v != nil {
							t.Fatalf("panic: %v", v)
						}
					}()
					p, b, err = calibrateAgainst(t, http.HandlerFunc(h), api)
				}()
				if err == nil {
					t.Fatalf("calibration succeeded with prior %+v, b %v", p, b)
				}
				t.Log(err)
				checkCalibrationError(t, err.Error())
			})
		}
	}
}

func checkCalibrationError(t *testing.T, msg string) {
	t.Helper()
	if len(msg) > 400 {
		t.Errorf("error of %d bytes: %.100q…", len(msg), msg)
	}
	if strings.Contains(msg, secretTail) || strings.Contains(msg, strings.Repeat("x", 200)) {
		t.Errorf("error quotes the body beyond a short excerpt: %q", msg)
	}
	if !utf8.ValidString(msg) {
		t.Errorf("error is not valid UTF-8: %q", msg)
	}
	for _, r := range msg {
		if r < 0x20 || r == 0x7f {
			t.Errorf("control character %U in error %q", r, msg)
			break
		}
	}
}

// A server that never finishes its answer is cut off by the timeout.
func TestCalibrateStalledServer(t *testing.T) {
	release := make(chan struct{})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(200)
		_, _ = w.Write([]byte(`{"count": `))
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer ts.Close()
	defer close(release)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, _, err := calibrateWithTokenize(ctx, ts.Client(), ts.URL, "m", wire.APIChat, NewPromptSynth(1))
	if err == nil || time.Since(start) > 3*time.Second {
		t.Fatalf("err %v after %v", err, time.Since(start))
	}
	checkCalibrationError(t, err.Error())
}

func TestParseTokenizeResponse(t *testing.T) {
	for _, c := range []struct {
		in       string
		n        int
		hasCount bool
		err      string
	}{
		{`{"count": 3, "max_model_len": 8192, "tokens": [1, 2, 3]}`, 3, true, ""},
		{`{"count": 0, "tokens": []}`, 0, true, ""},
		{`{"tokens": [1, 2]}`, 2, false, ""},
		{`{"tokens": []}`, 0, false, ""},
		{`{"tokens": [{"id": 1, "piece": "Hel"}, {"id": 2, "piece": [226, 130]}]}`, 2, false, ""},
		{`{"count": 2}`, 2, true, ""},
		{`{"count": null, "tokens": [5]}`, 1, false, ""},
		{`{"count": -1}`, 0, false, "negative"},
		{`{"count": 3, "tokens": [1]}`, 0, false, "disagree"},
		{`{"count": 1e3}`, 0, false, "count"},
		{`{"count": "3"}`, 0, false, "count"},
		{`{"count": 99999999999}`, 0, false, "more than"},
		{`{"tokens": [1, "a"]}`, 0, false, "token"},
		{`{"tokens": [[1]]}`, 0, false, "token"},
		{`{"tokens": {"a": 1}}`, 0, false, "list"},
		{`{}`, 0, false, "neither"},
		{`null`, 0, false, "neither"},
		{`[1, 2]`, 0, false, "object"},
		{`<html>`, 0, false, "invalid character"},
		{``, 0, false, "unexpected end"},
	} {
		a, err := parseTokenizeResponse([]byte(c.in))
		switch {
		case c.err == "" && err != nil:
			t.Errorf("%s: %v", c.in, err)
		case c.err == "" && (a.n != c.n || a.hasCount != c.hasCount):
			t.Errorf("%s: got %+v, want n %d, hasCount %v", c.in, a, c.n, c.hasCount)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s: err %v, want one containing %q", c.in, err, c.err)
		}
	}
}

func TestParseApplyTemplateResponse(t *testing.T) {
	if p, err := parseApplyTemplateResponse([]byte(`{"prompt": "<|user|> hi <|eot|>"}`)); err != nil || p != "<|user|> hi <|eot|>" {
		t.Errorf("got %q, %v", p, err)
	}
	for _, in := range []string{`{}`, `{"prompt": ""}`, `{"prompt": 3}`, `[]`, `x`, `null`} {
		if _, err := parseApplyTemplateResponse([]byte(in)); err == nil {
			t.Errorf("%s: no error", in)
		}
	}
}

// FuzzTokenizeResponse feeds arbitrary bodies to the /tokenize and
// /apply-template answer parsers: no panic, a count within bounds, short
// clean errors, and a count that survives re-encoding.
func FuzzTokenizeResponse(f *testing.F) {
	for _, s := range []string{
		`{"count": 3, "max_model_len": 8192, "tokens": [1, 2, 3]}`,
		`{"count": 0, "tokens": []}`,
		`{"tokens": [128000, 9906, 1917]}`,
		`{"tokens": []}`,
		`{"tokens": [{"id": 1, "piece": "Hel"}, {"id": 2, "piece": [226, 130]}]}`,
		`{"count": -1}`,
		`{"count": 1e400}`,
		`{"count": NaN}`,
		`{"count": "NaN"}`,
		`{"count": 3, "tokens": [1]}`,
		`{"prompt": "<|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>"}`,
		`{"error": {"code": 400, "message": "\"content\" is required", "type": "invalid_request_error"}}`,
		`{"object": "error", "message": "1 validation error", "type": "BadRequestError", "code": 400}`,
		`[{"id": 1, "text": "a", "start": 0, "stop": 1}]`,
		`<!DOCTYPE html><html></html>`,
		"\x00\xff",
		`null`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		a, err := parseTokenizeResponse(data)
		if err != nil {
			checkCalibrationError(t, "tokenize: unexpected answer: "+err.Error())
		} else {
			if a.n < 0 || a.n > maxTokenizeCount {
				t.Fatalf("count %d out of bounds", a.n)
			}
			again, err := parseTokenizeResponse(fmt.Appendf(nil, `{"count": %d}`, a.n))
			if err != nil || again.n != a.n || !again.hasCount {
				t.Fatalf("count %d does not survive re-encoding: %+v, %v", a.n, again, err)
			}
			if a.n <= 64 {
				list, _ := json.Marshal(map[string]any{"tokens": ids(a.n)})
				again, err = parseTokenizeResponse(list)
				if err != nil || again.n != a.n || again.hasCount {
					t.Fatalf("%d token ids parse as %+v, %v", a.n, again, err)
				}
			}
		}
		p, err := parseApplyTemplateResponse(data)
		if err != nil {
			checkCalibrationError(t, "apply-template: "+err.Error())
		} else if p == "" || len(p) > 3*len(data) {
			t.Fatalf("prompt %q from %q", p, data)
		}
	})
}

// TestTokenizeRedirectIsRefused: /tokenize (the target's client) does not
// follow a redirect to another port or host with the target's
// credentials.
func TestTokenizeRedirectIsRefused(t *testing.T) {
	other := redirecttest.NewCapture(t, "")
	for _, host := range []string{"127.0.0.1", "localhost"} {
		t.Run(host, func(t *testing.T) {
			srv := redirecttest.Redirector(t, other, host)
			cfg := commoncfg.DefaultHTTPClientConfig
			cfg.FollowRedirects = true
			cfg.Authorization = &commoncfg.Authorization{Type: "Bearer", Credentials: "tokenize-secret-0123"}
			hc, err := wire.NewHTTPClient(cfg, "tokenize", 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := calibrateWithTokenize(context.Background(), hc, srv.URL+"/v1", "m", wire.APIChat, NewPromptSynth(1)); err == nil {
				t.Fatal("calibration succeeded against a redirecting server")
			}
			if got := other.Requests(); len(got) != 0 {
				t.Fatalf("the other server received %d requests: %q", len(got), got)
			}
		})
	}
}
