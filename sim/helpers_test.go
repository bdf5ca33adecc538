// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// zeroConfig is the default configuration in zero-latency mode, with
// early stops off so that token counts are exact.
func zeroConfig() Config {
	c := DefaultConfig()
	c.ZeroLatency = true
	c.EOSProbability = 0
	return c
}

// startSim serves cfg on a loopback port for the duration of the test.
func startSim(t testing.TB, cfg Config) (string, *Server) {
	t.Helper()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	s, base, err := Listen("127.0.0.1:0", cfg, logger)
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		if n := s.panics.Load(); n != 0 {
			t.Errorf("%d handler panics recovered", n)
		}
	})
	return base, s
}

var testClient = &http.Client{Timeout: 60 * time.Second}

// post sends a JSON body (a string or any value to marshal) with optional
// headers (name, value pairs).
func post(t testing.TB, url string, body any, headers ...string) *http.Response {
	t.Helper()
	var b []byte
	switch v := body.(type) {
	case string:
		b = []byte(v)
	case []byte:
		b = v
	default:
		var err error
		if b, err = json.Marshal(v); err != nil {
			t.Fatal(err)
		}
	}
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := testClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	return resp
}

// chunk is a streamed chat.completion.chunk or text_completion event.
type chunk struct {
	ID                string `json:"id"`
	Object            string `json:"object"`
	Created           int64  `json:"created"`
	Model             string `json:"model"`
	SystemFingerprint string `json:"system_fingerprint"`
	Choices           []struct {
		Index int `json:"index"`
		Delta *struct {
			Role             *string         `json:"role"`
			Content          *string         `json:"content"`
			ReasoningContent *string         `json:"reasoning_content"`
			Reasoning        *string         `json:"reasoning"`
			ToolCalls        []toolCallDelta `json:"tool_calls"`
		} `json:"delta"`
		Text         *string         `json:"text"`
		Logprobs     json.RawMessage `json:"logprobs"`
		FinishReason *string         `json:"finish_reason"`
		StopReason   json.RawMessage `json:"stop_reason"`
	} `json:"choices"`
	Usage *usage `json:"usage"`
}

// toolCallDelta is one element of delta.tool_calls.
type toolCallDelta struct {
	Index    *int    `json:"index"`
	ID       *string `json:"id"`
	Type     *string `json:"type"`
	Function *struct {
		Name      *string `json:"name"`
		Arguments *string `json:"arguments"`
	} `json:"function"`
}

type usage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	TotalTokens         int `json:"total_tokens"`
	PromptTokensDetails *struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails *struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
}

// reasoningTokens is completion_tokens_details.reasoning_tokens, -1 when
// absent.
func (u *usage) reasoningTokens() int {
	if u == nil || u.CompletionTokensDetails == nil {
		return -1
	}
	return u.CompletionTokensDetails.ReasoningTokens
}

func (u *usage) cached() int {
	if u == nil || u.PromptTokensDetails == nil {
		return -1
	}
	return u.PromptTokensDetails.CachedTokens
}

// streamResult is a streamed response read event by event.
type streamResult struct {
	status    int
	header    http.Header
	events    []string    // raw data payloads, in order
	at        []time.Time // arrival of each event
	chunks    []*chunk    // parsed events (nil for [DONE] and malformed ones)
	malformed []int       // indexes of events that are not valid JSON
	done      bool        // data: [DONE] seen (as the last event)
	readErr   error       // error reading the body (nil on clean EOF)
	start     time.Time

	tokens    []string // generated text pieces (content, reasoning, text), in order
	tokenAt   []time.Time
	reasoning int // how many of tokens were reasoning (either field)

	toolHeaders []toolCallDelta // tool_calls elements with an id (call headers)
	toolArgs    []string        // non-empty arguments fragments, in order
	toolArgAt   []time.Time
	finish      string
	usage       *usage
	roleFirst   bool
	errorBody   string
}

// stream posts body and reads the SSE response event by event.
func stream(t testing.TB, url string, body any, headers ...string) *streamResult {
	t.Helper()
	r := &streamResult{start: time.Now()}
	r.status, r.header, r.errorBody, r.readErr = postSSE(t, url, body, headers, func(name string, data []string, at time.Time) {
		if name != "" {
			t.Errorf("unexpected SSE event name %q", name)
		}
		r.addEvent(t, strings.Join(data, "\n"), at)
	})
	return r
}

// postSSE posts body (with headers, name, value pairs) and reads the
// answer: a 200 as an SSE stream, calling each with every event's name
// ("" without an event: line), its data lines and its arrival; another
// status as a whole body, returned. readErr is what ended the stream: nil
// for a clean end, io.ErrUnexpectedEOF or an error for a cut one.
func postSSE(t testing.TB, url string, body any, headers []string, each func(name string, data []string, at time.Time)) (status int, header http.Header, errorBody string, readErr error) {
	t.Helper()
	resp := post(t, url, body, headers...)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, string(b), nil
	}
	br := bufio.NewReader(resp.Body)
	var name string
	var data []string
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			switch {
			case !errors.Is(err, io.EOF):
				readErr = err
			case line != "":
				readErr = io.ErrUnexpectedEOF
			case name != "" || len(data) > 0:
				readErr = errors.New("stream ended inside an event")
			}
			return resp.StatusCode, resp.Header, "", readErr
		}
		line = strings.TrimRight(line, "\r\n")
		switch {
		case line == "":
			if name != "" || len(data) > 0 {
				each(name, data, time.Now())
				name, data = "", data[:0]
			}
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data = append(data, strings.TrimPrefix(line, "data: "))
		default:
			t.Errorf("unexpected SSE line %q", line)
		}
	}
}

func (r *streamResult) addEvent(t testing.TB, data string, at time.Time) {
	if r.done {
		t.Errorf("event after [DONE]: %q", data)
	}
	r.events = append(r.events, data)
	r.at = append(r.at, at)
	if data == "[DONE]" {
		r.done = true
		r.chunks = append(r.chunks, nil)
		return
	}
	var c chunk
	dec := json.NewDecoder(strings.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		r.malformed = append(r.malformed, len(r.events)-1)
		r.chunks = append(r.chunks, nil)
		return
	}
	r.chunks = append(r.chunks, &c)
	if c.Usage != nil && len(c.Choices) == 0 {
		r.usage = c.Usage
	}
	for _, ch := range c.Choices {
		if d := ch.Delta; d != nil {
			if d.Role != nil && len(r.events) == 1 {
				r.roleFirst = true
			}
			for _, rc := range []*string{d.ReasoningContent, d.Reasoning} {
				if rc != nil && *rc != "" {
					r.tokens = append(r.tokens, *rc)
					r.tokenAt = append(r.tokenAt, at)
					r.reasoning++
				}
			}
			for _, tc := range d.ToolCalls {
				if tc.ID != nil {
					r.toolHeaders = append(r.toolHeaders, tc)
				}
				if f := tc.Function; f != nil && f.Arguments != nil && *f.Arguments != "" {
					r.toolArgs = append(r.toolArgs, *f.Arguments)
					r.toolArgAt = append(r.toolArgAt, at)
				}
			}
			if d.Content != nil && *d.Content != "" {
				r.tokens = append(r.tokens, *d.Content)
				r.tokenAt = append(r.tokenAt, at)
			}
		}
		if ch.Text != nil && *ch.Text != "" {
			r.tokens = append(r.tokens, *ch.Text)
			r.tokenAt = append(r.tokenAt, at)
		}
		if ch.FinishReason != nil {
			r.finish = *ch.FinishReason
		}
	}
}

// ttft is the client-side time to the first token-bearing event.
func (r *streamResult) ttft() time.Duration {
	if len(r.tokenAt) == 0 {
		return -1
	}
	return r.tokenAt[0].Sub(r.start)
}

func (r *streamResult) text() string { return strings.Join(r.tokens, "") }

// withExtra sets extra's key, value pairs in b and returns it.
func withExtra(b map[string]any, extra []any) map[string]any {
	for i := 0; i+1 < len(extra); i += 2 {
		b[extra[i].(string)] = extra[i+1]
	}
	return b
}

func chatBody(content string, maxTokens int, extra ...any) map[string]any {
	b := map[string]any{
		"model":          "sim-model",
		"messages":       []map[string]any{{"role": "user", "content": content}},
		"max_tokens":     maxTokens,
		"stream":         true,
		"stream_options": map[string]any{"include_usage": true},
	}
	return withExtra(b, extra)
}

func completionBody(prompt any, maxTokens int, extra ...any) map[string]any {
	b := map[string]any{
		"model":          "sim-model",
		"prompt":         prompt,
		"max_tokens":     maxTokens,
		"stream":         true,
		"stream_options": map[string]any{"include_usage": true},
	}
	return withExtra(b, extra)
}

// openAIError is the OpenAI error body.
type openAIError struct {
	Error *struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}

// decodeError checks that body is an OpenAI-style error and returns it.
func decodeError(t testing.TB, body string) openAIError {
	t.Helper()
	var e openAIError
	dec := json.NewDecoder(strings.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil || e.Error == nil || e.Error.Message == "" || e.Error.Type == "" {
		t.Fatalf("not an OpenAI error body (%v): %q", err, body)
	}
	return e
}

// scrape returns the /metrics exposition.
func scrape(t testing.TB, base string) string {
	t.Helper()
	resp, err := testClient.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// moduleRoot finds the directory holding go.mod.
func moduleRoot(t testing.TB) string {
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found above the test directory")
		}
		dir = parent
	}
}

// requireTool finds an external tool via the environment variable env, then
// bin/NAME under the module root. Absent, the test is skipped, or fails when
// LLMPROBE_REQUIRE_TOOLS=1.
func requireTool(t testing.TB, env, name string) string {
	t.Helper()
	if p := os.Getenv(env); p != "" {
		if !filepath.IsAbs(p) {
			p = filepath.Join(moduleRoot(t), p)
		}
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	p := filepath.Join(moduleRoot(t), "bin", name)
	if _, err := os.Stat(p); err == nil {
		return p
	}
	msg := name + " not found (set $" + env + " or run `make tools`)"
	if os.Getenv("LLMPROBE_REQUIRE_TOOLS") == "1" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// grepLines returns the lines of s containing substr.
func grepLines(s, substr string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func stringsReader(s string) *strings.Reader { return strings.NewReader(s) }

func newRecorder() *httptest.ResponseRecorder { return httptest.NewRecorder() }
