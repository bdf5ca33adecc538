// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package wire

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/llmprobe/llmprobe/internal/simtest"
)

// --- byte-exact stream fixtures (vLLM's OpenAI server output) ---

const (
	fxID    = "chatcmpl-8f1c2d"
	fxModel = "meta-llama/Llama-3.1-8B-Instruct"
)

func chatRole() string {
	return `{"id":"` + fxID + `","object":"chat.completion.chunk","created":1718000000,"model":"` + fxModel + `","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}`
}

func chatDelta(field, text string, finish string, usage string) string {
	f := "null"
	if finish != "" {
		f = `"` + finish + `"`
	}
	s := `{"id":"` + fxID + `","object":"chat.completion.chunk","created":1718000000,"model":"` + fxModel + `","choices":[{"index":0,"delta":{"` + field + `":` + mustJSON(text) + `},"logprobs":null,"finish_reason":` + f + `}]`
	if usage != "" {
		s += `,"usage":` + usage
	}
	return s + "}"
}

func chatContent(text string) string { return chatDelta("content", text, "", "") }

func usageChunk(prompt, completion, cached int) string {
	details := "null"
	if cached >= 0 {
		details = fmt.Sprintf(`{"cached_tokens":%d}`, cached)
	}
	return fmt.Sprintf(`{"id":"%s","object":"chat.completion.chunk","created":1718000000,"model":"%s","choices":[],"usage":{"prompt_tokens":%d,"total_tokens":%d,"completion_tokens":%d,"prompt_tokens_details":%s}}`,
		fxID, fxModel, prompt, prompt+completion, completion, details)
}

func completionText(text, finish string) string {
	f := "null"
	if finish != "" {
		f = `"` + finish + `"`
	}
	return `{"id":"cmpl-77","object":"text_completion","created":1718000000,"model":"` + fxModel + `","choices":[{"index":0,"text":` + mustJSON(text) + `,"logprobs":null,"finish_reason":` + f + `,"stop_reason":null}],"usage":null}`
}

func mustJSON(s string) string {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// sseBody renders payloads as `data:` events.
func sseBody(payloads ...string) string {
	var b strings.Builder
	for _, p := range payloads {
		b.WriteString("data: " + p + "\n\n")
	}
	return b.String()
}

// streamStep is one write of a fixture server, after a pause.
type streamStep struct {
	pause time.Duration
	raw   string
}

func steps(pause time.Duration, payloads ...string) []streamStep {
	out := make([]streamStep, len(payloads))
	for i, p := range payloads {
		out[i] = streamStep{pause: pause, raw: "data: " + p + "\n\n"}
	}
	return out
}

// recorded is what a fixture server saw of a request.
type recorded struct {
	header http.Header
	body   map[string]any
	path   string
}

// fixtureServer serves the steps on every request, flushing after each.
func fixtureServer(t *testing.T, contentType string, st []streamStep) (*httptest.Server, chan recorded) {
	t.Helper()
	return fixtureServerTimed(t, contentType, st, nil)
}

// fixtureServerTimed is fixtureServer recording its instants in times
// when not nil (record_test.go).
func fixtureServerTimed(t *testing.T, contentType string, st []streamStep, times *serverTimes) (*httptest.Server, chan recorded) {
	t.Helper()
	seen := make(chan recorded, 100)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if times != nil {
			times.begin()
		}
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		io.Copy(io.Discard, r.Body)
		select {
		case seen <- recorded{header: r.Header.Clone(), body: body, path: r.URL.Path}:
		default:
		}
		if contentType != "" {
			w.Header().Set("Content-Type", contentType)
		}
		w.WriteHeader(http.StatusOK)
		flusher := w.(http.Flusher)
		flusher.Flush()
		for _, s := range st {
			if s.pause > 0 {
				select {
				case <-time.After(s.pause):
				case <-r.Context().Done():
					return
				}
			}
			if times != nil {
				times.write()
			}
			if _, err := io.WriteString(w, s.raw); err != nil {
				return
			}
			flusher.Flush()
		}
	}))
	t.Cleanup(srv.Close)
	return srv, seen
}

func newTestClient(t *testing.T, base string, mod func(*ClientConfig)) *Client {
	t.Helper()
	cfg := ClientConfig{BaseURL: base, Timeout: 10 * time.Second}
	if mod != nil {
		mod(&cfg)
	}
	c, err := NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.HTTPClient == nil {
		t.Cleanup(c.http.CloseIdleConnections)
	}
	return c
}

func chatRequest() *Request {
	return &Request{
		API: APIChat, Model: fxModel,
		Messages:  []Message{{Role: "user", Content: "Tell me a story about a lighthouse keeper."}},
		MaxTokens: 64, Sampling: Sampling{Temperature: 0.7, TopP: 0.95},
	}
}

func do(t *testing.T, c *Client, req *Request) *Result {
	t.Helper()
	res := &Result{PlannedPromptTokens: 42}
	c.Do(context.Background(), req, res)
	return res
}

func expectOutcome(t *testing.T, res *Result, outcome Outcome, errType string) {
	t.Helper()
	if res.Outcome != outcome || res.ErrorType != errType {
		t.Fatalf("outcome %s/%s (%q), want %s/%s", res.Outcome, res.ErrorType, res.Error, outcome, errType)
	}
}

// checkTimingInvariants asserts the relations that hold exactly by
// construction.
func checkTimingInvariants(t *testing.T, res *Result) {
	t.Helper()
	if !res.FirstToken {
		return
	}
	// One gap per chunk after the first, or more where per-chunk usage
	// says a chunk carried several tokens.
	if len(res.ITLs) < res.Chunks-1 || (len(res.ITLs) > res.Chunks-1 && !res.UsageReported) {
		t.Errorf("%d ITLs for %d token chunks", len(res.ITLs), res.Chunks)
	}
	var sum time.Duration
	for _, d := range res.ITLs {
		if d < 0 {
			t.Errorf("negative ITL %v", d)
		}
		sum += d
	}
	if res.E2E-res.TTFT != sum {
		t.Errorf("E2E-TTFT = %v, sum of ITLs = %v", res.E2E-res.TTFT, sum)
	}
	if res.TTFT <= 0 || res.E2E < res.TTFT {
		t.Errorf("TTFT %v, E2E %v", res.TTFT, res.E2E)
	}
	if res.OutputTokens >= 2 {
		if want := (res.E2E - res.TTFT) / time.Duration(res.OutputTokens-1); res.TPOT != want {
			t.Errorf("TPOT %v, want (E2E-TTFT)/(OutputTokens-1) = %v", res.TPOT, want)
		}
	} else if res.TPOT != 0 {
		t.Errorf("TPOT %v with %d output tokens", res.TPOT, res.OutputTokens)
	}
	if res.Start.Before(res.Dispatched) || res.ClientWait != res.Start.Sub(res.Dispatched) {
		t.Errorf("Start %v, Dispatched %v, ClientWait %v", res.Start, res.Dispatched, res.ClientWait)
	}
}

func TestClientChatVLLMStream(t *testing.T) {
	const gap = 20 * time.Millisecond
	st := []streamStep{{raw: "data: " + chatRole() + "\n\n"}}
	// The first content comes 30ms after the role-only delta: TTFT must
	// not start at the role delta.
	st = append(st, streamStep{pause: 30 * time.Millisecond, raw: "data: " + chatContent("Once") + "\n\n"})
	st = append(st, steps(gap, chatContent(" upon"), chatContent(" a"), chatContent(" time"))...)
	st = append(st, steps(gap, chatDelta("content", ".", "stop", ""), usageChunk(17, 5, 16), "[DONE]")...)
	times := &serverTimes{}
	srv, seen := fixtureServerTimed(t, "text/event-stream; charset=utf-8", st, times)
	c := newTestClient(t, srv.URL+"/v1/", func(cfg *ClientConfig) { cfg.KeepText = true })
	lat := simtest.WatchLateness(t)

	res := do(t, c, chatRequest())
	slack := lat.Slack()
	expectOutcome(t, res, OutcomeSuccess, "")
	checkTimingInvariants(t, res)
	if res.Chunks != 5 || len(res.ITLs) != 4 {
		t.Fatalf("chunks %d, ITLs %d; want 5, 4", res.Chunks, len(res.ITLs))
	}
	if res.TTFT < 25*time.Millisecond {
		t.Errorf("TTFT %v: the role-only delta was counted as the first token", res.TTFT)
	}
	// Each event is stamped when it arrived: never before the server
	// wrote it, and after it by no more than this machine delays a
	// goroutine. (An ITL of at least half the server's pause would fail
	// when the client read one chunk late and the next on time.)
	checkEvents(t, res, times, []int{1, 2, 3, 4, 5}, 1, slack)
	if res.OutputTokens != 5 || res.PromptTokens != 17 || !res.UsageReported {
		t.Errorf("tokens out %d prompt %d reported %v; want 5, 17, true", res.OutputTokens, res.PromptTokens, res.UsageReported)
	}
	if res.CachedTokens != 16 || !res.CachedTokensReported {
		t.Errorf("cached %d reported %v; want 16 true", res.CachedTokens, res.CachedTokensReported)
	}
	if res.FinishReason != "stop" || res.ResponseModel != fxModel || res.ResponseID != fxID || res.StatusCode != 200 {
		t.Errorf("finish %q model %q id %q status %d", res.FinishReason, res.ResponseModel, res.ResponseID, res.StatusCode)
	}
	if res.Completion != "Once upon a time." {
		t.Errorf("completion %q", res.Completion)
	}
	if res.MaxTokens != 64 || res.Sampling.Temperature != 0.7 {
		t.Errorf("sent parameters not recorded: %d %v", res.MaxTokens, res.Sampling)
	}
	if res.ConnReused || res.Connect <= 0 {
		t.Errorf("first request: reused %v, connect %v", res.ConnReused, res.Connect)
	}

	got := <-seen
	if got.path != "/v1/chat/completions" {
		t.Errorf("path %q", got.path)
	}
	for k, want := range map[string]string{"Content-Type": "application/json", "Accept": "text/event-stream", "User-Agent": "llmprobe/dev"} {
		if v := got.header.Get(k); v != want {
			t.Errorf("header %s = %q, want %q", k, v, want)
		}
	}
	if got.body["model"] != fxModel || got.body["stream"] != true || got.body["max_tokens"] != 64.0 {
		t.Errorf("body %v", got.body)
	}
	if so, _ := got.body["stream_options"].(map[string]any); so["include_usage"] != true {
		t.Errorf("stream_options %v", got.body["stream_options"])
	}

	// The connection is reused: [DONE] is followed by the body's end.
	for i := range 3 {
		res := do(t, c, chatRequest())
		expectOutcome(t, res, OutcomeSuccess, "")
		if !res.ConnReused || res.Connect != 0 {
			t.Errorf("request %d: reused %v, connect %v", i+2, res.ConnReused, res.Connect)
		}
	}
}

func TestClientCompletionsStream(t *testing.T) {
	srv, seen := fixtureServer(t, "text/event-stream", steps(time.Millisecond,
		completionText(" The", ""), completionText(" end", ""), completionText("", "length"),
		`{"id":"cmpl-77","object":"text_completion","created":1718000000,"model":"`+fxModel+`","choices":[],"usage":{"prompt_tokens":3,"total_tokens":7,"completion_tokens":4}}`,
		"[DONE]"))
	c := newTestClient(t, srv.URL+"/v1", nil)
	res := do(t, c, &Request{API: APICompletions, Model: fxModel, PromptIDs: []int{1, 2, 3}, MaxTokens: 4})
	expectOutcome(t, res, OutcomeSuccess, "")
	checkTimingInvariants(t, res)
	// 2 token-bearing events but 4 tokens by usage: TPOT uses the tokens.
	if res.Chunks != 2 || res.OutputTokens != 4 || res.CachedTokensReported || res.FinishReason != "length" {
		t.Errorf("chunks %d tokens %d cached reported %v finish %q", res.Chunks, res.OutputTokens, res.CachedTokensReported, res.FinishReason)
	}
	if res.Completion != "" {
		t.Errorf("text kept without KeepText: %q", res.Completion)
	}
	got := <-seen
	if got.path != "/v1/completions" || fmt.Sprint(got.body["prompt"]) != "[1 2 3]" {
		t.Errorf("path %q prompt %v", got.path, got.body["prompt"])
	}
}

func TestClientReasoningStream(t *testing.T) {
	srv, _ := fixtureServer(t, "text/event-stream", steps(2*time.Millisecond,
		chatRole(),
		chatDelta("reasoning_content", "Let me think", "", ""),
		chatDelta("reasoning", "...", "", ""),
		chatContent("42"),
		chatDelta("content", "", "stop", ""),
		usageChunk(5, 9, -1), "[DONE]"))
	c := newTestClient(t, srv.URL+"/v1", func(cfg *ClientConfig) { cfg.KeepText = true })
	res := do(t, c, chatRequest())
	expectOutcome(t, res, OutcomeSuccess, "")
	checkTimingInvariants(t, res)
	if res.Chunks != 3 || res.OutputTokens != 9 || res.Completion != "42" || res.CachedTokensReported {
		t.Errorf("chunks %d tokens %d completion %q cached reported %v", res.Chunks, res.OutputTokens, res.Completion, res.CachedTokensReported)
	}
}

func TestClientContinuousUsage(t *testing.T) {
	u := func(n int) string {
		return fmt.Sprintf(`{"prompt_tokens":8,"total_tokens":%d,"completion_tokens":%d}`, 8+n, n)
	}
	srv, _ := fixtureServer(t, "text/event-stream", steps(0,
		chatDelta("role", "assistant", "", u(0)),
		chatDelta("content", "a", "", u(1)),
		chatDelta("content", "b", "", u(2)),
		chatDelta("content", "c", "stop", u(3)),
		"[DONE]"))
	c := newTestClient(t, srv.URL+"/v1", nil)
	res := do(t, c, chatRequest())
	expectOutcome(t, res, OutcomeSuccess, "")
	checkTimingInvariants(t, res)
	if res.OutputTokens != 3 || res.PromptTokens != 8 || !res.UsageReported || res.Chunks != 3 {
		t.Errorf("tokens %d prompt %d reported %v chunks %d", res.OutputTokens, res.PromptTokens, res.UsageReported, res.Chunks)
	}
}

// TGI and some llama.cpp versions end the stream after the finish chunk,
// without [DONE] and without a usage chunk.
func TestClientStreamWithoutDone(t *testing.T) {
	srv, _ := fixtureServer(t, "text/event-stream", steps(time.Millisecond,
		`{"object":"chat.completion.chunk","id":"","created":1,"model":"tgi","system_fingerprint":"2.0","choices":[{"index":0,"delta":{"role":"assistant","content":"Hi"},"logprobs":null,"finish_reason":null}]}`,
		`{"object":"chat.completion.chunk","id":"","created":1,"model":"tgi","system_fingerprint":"2.0","choices":[{"index":0,"delta":{"role":"assistant","content":" there"},"logprobs":null,"finish_reason":null}]}`,
		`{"object":"chat.completion.chunk","id":"","created":1,"model":"tgi","system_fingerprint":"2.0","choices":[{"index":0,"delta":{"role":"assistant","content":"!"},"logprobs":null,"finish_reason":"eos_token"}]}`))
	c := newTestClient(t, srv.URL, nil)
	res := do(t, c, chatRequest())
	expectOutcome(t, res, OutcomeSuccess, "")
	checkTimingInvariants(t, res)
	if res.UsageReported || res.OutputTokens != 3 || res.PromptTokens != 42 || res.FinishReason != "eos_token" {
		t.Errorf("reported %v tokens %d prompt %d finish %q; want estimates 3 and 42", res.UsageReported, res.OutputTokens, res.PromptTokens, res.FinishReason)
	}
}

func TestClientStreamFailures(t *testing.T) {
	cases := []struct {
		name        string
		contentType string
		steps       []streamStep
		outcome     Outcome
		errType     string
		chunks      int
		errContains string
	}{
		{"eof without finish or done", "text/event-stream",
			steps(0, chatRole(), chatContent("a"), chatContent("b")),
			OutcomeStreamError, "eof_without_done", 2, ""},
		{"unterminated malformed tail", "text/event-stream",
			[]streamStep{{raw: sseBody(chatContent("a"))}, {raw: `data: {"id":"x","choi`}},
			OutcomeStreamError, "eof_without_done", 1, ""},
		{"vllm error mid-stream", "text/event-stream",
			steps(0, chatRole(), chatContent("a"), `{"error":{"object":"error","message":"CUDA out of memory","type":"InternalServerError","param":null,"code":500}}`, "[DONE]"),
			OutcomeInvalidResponse, "error_event", 1, "CUDA out of memory"},
		{"legacy vllm error", "text/event-stream",
			steps(0, `{"object":"error","message":"The model does not exist.","type":"NotFoundError","param":null,"code":404}`),
			OutcomeInvalidResponse, "error_event", 0, "does not exist"},
		{"sse error event", "text/event-stream",
			[]streamStep{{raw: sseBody(chatContent("a")) + "event: error\ndata: {\"error\":\"Request failed during generation: overloaded\",\"error_type\":\"generation\"}\n\n"}},
			OutcomeInvalidResponse, "error_event", 1, "overloaded"},
		{"sse error event, flat as llama.cpp sends it", "text/event-stream",
			[]streamStep{{raw: sseBody(chatContent("a")) + "event: error\ndata: {\"code\":500,\"message\":\"output does not match the format\",\"type\":\"server_error\"}\n\n"}},
			OutcomeInvalidResponse, "error_event", 1, "output does not match the format"},
		{"sse error event with text", "text/event-stream",
			[]streamStep{{raw: "event: error\ndata: upstream went away\n\n"}},
			OutcomeInvalidResponse, "error_event", 0, "upstream went away"},
		{"malformed json", "text/event-stream",
			steps(0, chatContent("a"), `{"id":"x","choices":[{"delta":{"content":"b"}]}`, "[DONE]"),
			OutcomeInvalidResponse, "malformed_event", 1, "not valid JSON"},
		{"not an object", "text/event-stream",
			steps(0, `"just a string"`),
			OutcomeInvalidResponse, "malformed_event", 0, "not a JSON object"},
		{"empty completion", "text/event-stream",
			steps(0, chatRole(), chatDelta("content", "", "stop", ""), usageChunk(5, 0, -1), "[DONE]"),
			OutcomeInvalidResponse, "empty_completion", 0, ""},
		{"json instead of a stream", "application/json",
			[]streamStep{{raw: `{"id":"chatcmpl-1","object":"chat.completion","choices":[{"message":{"role":"assistant","content":"hi"}}]}`}},
			OutcomeInvalidResponse, "wrong_content_type", 0, "application/json"},
		{"html", "text/html",
			[]streamStep{{raw: "<html><body>proxy says hello</body></html>"}},
			OutcomeInvalidResponse, "wrong_content_type", 0, ""},
		{"mislabelled sse is read", "text/plain",
			steps(0, chatContent("a"), chatDelta("content", "b", "stop", ""), "[DONE]"),
			OutcomeSuccess, "", 2, ""},
		{"sse starting with a comment, no content type", "",
			[]streamStep{{raw: ": ping\n\n"}, {raw: sseBody(chatContent("a"), chatDelta("content", "b", "length", ""), "[DONE]")}},
			OutcomeSuccess, "", 2, ""},
		{"keep-alives and empty data ignored", "text/event-stream",
			[]streamStep{{raw: ": keep-alive\n\ndata:\n\ndata:  \n\nevent: ping\ndata: {}\n\n"}, {raw: sseBody(chatContent("a"), chatDelta("content", "b", "stop", ""), "[DONE]")}},
			OutcomeSuccess, "", 2, ""},
		{"crlf framing", "text/event-stream",
			[]streamStep{{raw: "data: " + chatContent("a") + "\r\n\r\ndata: " + chatDelta("content", "b", "stop", "") + "\r\n\r\ndata: [DONE]\r\n\r\n"}},
			OutcomeSuccess, "", 2, ""},
		{"line too long", "text/event-stream",
			[]streamStep{{raw: sseBody(chatContent("a"))}, {raw: "data: " + chatContent(strings.Repeat("x", DefaultMaxSSELine)) + "\n\n"}},
			OutcomeStreamError, "line_too_long", 1, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv, _ := fixtureServer(t, tc.contentType, tc.steps)
			c := newTestClient(t, srv.URL, nil)
			res := do(t, c, chatRequest())
			expectOutcome(t, res, tc.outcome, tc.errType)
			checkTimingInvariants(t, res)
			if res.Chunks != tc.chunks {
				t.Errorf("chunks %d, want %d", res.Chunks, tc.chunks)
			}
			if !strings.Contains(res.Error, tc.errContains) {
				t.Errorf("error %q does not contain %q", res.Error, tc.errContains)
			}
			if res.E2E <= 0 {
				t.Errorf("E2E %v", res.E2E)
			}
		})
	}
}

func TestClientHTTPErrors(t *testing.T) {
	secretPrompt := "my very private prompt about the launch codes"
	cases := []struct {
		name, header, body string
		status             int
		errType            string
		retryAfter         time.Duration
		contains           string
	}{
		{"429 openai", "7", `{"error":{"message":"Rate limit reached for requests","type":"requests","param":null,"code":"rate_limit_exceeded"}}`,
			429, "http_429", 7 * time.Second, "Rate limit reached"},
		{"503 http date", time.Now().Add(90 * time.Second).UTC().Format(http.TimeFormat), `{"object":"error","message":"Service overloaded","code":503}`,
			503, "http_503", 85 * time.Second, "Service overloaded"},
		{"500 text", "", "Internal Server Error\n", 500, "http_500", 0, "Internal Server Error"},
		{"400 echoing the request", "", `{"error":{"message":"[{'type': 'missing', 'loc': ('body', 'model'), 'msg': 'Field required', 'input': {'messages': [{'role': 'user', 'content': '` + secretPrompt + `'}]}}]"}}`,
			400, "http_400", 0, "Field required"},
		{"422 echoing the prompt", "", `{"detail":"cannot tokenize ` + secretPrompt + `"}`, 422, "http_422", 0, "cannot tokenize"},
		{"404 html", "", "<html>not here</html>", 404, "http_404", 0, "Not Found"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tc.header != "" {
					w.Header().Set("Retry-After", tc.header)
				}
				w.WriteHeader(tc.status)
				io.WriteString(w, tc.body)
			}))
			defer srv.Close()
			c := newTestClient(t, srv.URL, nil)
			req := chatRequest()
			req.Messages[0].Content = secretPrompt
			res := do(t, c, req)
			expectOutcome(t, res, OutcomeHTTPError, tc.errType)
			if res.StatusCode != tc.status {
				t.Errorf("status %d", res.StatusCode)
			}
			if res.RetryAfter < tc.retryAfter || res.RetryAfter > tc.retryAfter+10*time.Second || (tc.retryAfter == 0 && res.RetryAfter != 0) {
				t.Errorf("RetryAfter %v, want about %v", res.RetryAfter, tc.retryAfter)
			}
			if !strings.Contains(res.Error, tc.contains) {
				t.Errorf("error %q does not contain %q", res.Error, tc.contains)
			}
			if strings.Contains(res.Error, "launch codes") || strings.Contains(res.Error, "private prompt") {
				t.Errorf("error leaks the prompt: %q", res.Error)
			}
			if res.FirstToken || res.E2E <= 0 {
				t.Errorf("first token %v, E2E %v", res.FirstToken, res.E2E)
			}
		})
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	for in, want := range map[string]time.Duration{
		"":                              0,
		"0":                             0,
		"-3":                            0,
		" 12 ":                          12 * time.Second,
		"1.5":                           0,
		"soon":                          0,
		"Thu, 02 Jan 2025 03:05:05 GMT": time.Minute,
		"Thu, 02 Jan 2025 03:00:00 GMT": 0,
		"99999999999":                   365 * 24 * time.Hour,
	} {
		if got := parseRetryAfter(in, now); got != want {
			t.Errorf("parseRetryAfter(%q) = %v, want %v", in, got, want)
		}
	}
}

func TestClientTimeouts(t *testing.T) {
	t.Run("stalled stream", func(t *testing.T) {
		st := steps(0, chatRole(), chatContent("a"), chatContent("b"))
		st = append(st, streamStep{pause: time.Minute, raw: sseBody("[DONE]")})
		srv, _ := fixtureServer(t, "text/event-stream", st)
		c := newTestClient(t, srv.URL, func(cfg *ClientConfig) { cfg.Timeout = 300 * time.Millisecond })
		begin := time.Now()
		res := do(t, c, chatRequest())
		expectOutcome(t, res, OutcomeTimeout, "timeout")
		if took := time.Since(begin); took > 5*time.Second {
			t.Errorf("Do took %v with a 300ms timeout", took)
		}
		if !res.FirstToken || res.Chunks != 2 {
			t.Errorf("first token %v chunks %d: what arrived before the stall is kept", res.FirstToken, res.Chunks)
		}
		checkTimingInvariants(t, res)
	})
	t.Run("stalled headers", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body) // lets the server notice the client leaving
			select {
			case <-r.Context().Done():
			case <-time.After(time.Minute):
			}
		}))
		defer srv.Close()
		c := newTestClient(t, srv.URL, func(cfg *ClientConfig) { cfg.Timeout = 200 * time.Millisecond })
		res := do(t, c, chatRequest())
		expectOutcome(t, res, OutcomeTimeout, "timeout")
		if res.Start.IsZero() || res.E2E < 150*time.Millisecond {
			t.Errorf("start %v E2E %v", res.Start, res.E2E)
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		st := append(steps(0, chatContent("a")), streamStep{pause: time.Minute, raw: sseBody("[DONE]")})
		srv, _ := fixtureServer(t, "text/event-stream", st)
		c := newTestClient(t, srv.URL, nil)
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(100*time.Millisecond, cancel)
		res := &Result{}
		c.Do(ctx, chatRequest(), res)
		expectOutcome(t, res, OutcomeTimeout, "cancelled")
		if res.Chunks != 1 {
			t.Errorf("chunks %d", res.Chunks)
		}
	})
}

// serveConns accepts loopback connections until the test ends and hands
// each to fn on a goroutine of its own (closing it when fn returns); it
// returns the server's http:// address.
func serveConns(t testing.TB, fn func(c net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer conn.Close()
				fn(conn)
			})
		}
	})
	return "http://" + ln.Addr().String()
}

// rawServer accepts connections and hands each to fn after reading the
// request head and body.
func rawServer(t testing.TB, fn func(c net.Conn, req *http.Request)) string {
	t.Helper()
	return serveConns(t, func(conn net.Conn) {
		br := bufio.NewReader(conn)
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			if _, err := io.Copy(io.Discard, req.Body); err != nil {
				return
			}
			fn(conn, req)
			if req.Close {
				return
			}
		}
	})
}

func chunked(s string) string { return fmt.Sprintf("%x\r\n%s\r\n", len(s), s) }

func TestClientBrokenConnections(t *testing.T) {
	head := "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
	twoTokens := sseBody(chatRole(), chatContent("a"), chatContent("b"))
	cases := []struct {
		name    string
		serve   func(c net.Conn)
		outcome Outcome
		errType string
		chunks  int
	}{
		{"closed mid-stream (chunked)", func(c net.Conn) {
			io.WriteString(c, head+chunked(twoTokens))
		}, OutcomeStreamError, "unexpected_eof", 2},
		{"reset mid-stream", func(c net.Conn) {
			io.WriteString(c, head+chunked(twoTokens))
			time.Sleep(20 * time.Millisecond) // let the client read the tokens first
			c.(*net.TCPConn).SetLinger(0)
		}, OutcomeStreamError, "connection_reset", 2},
		{"close-delimited body ends early", func(c net.Conn) {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"+twoTokens)
		}, OutcomeStreamError, "eof_without_done", 2},
		{"close-delimited body with finish", func(c net.Conn) {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"+
				twoTokens+sseBody(chatDelta("content", "c", "stop", "")))
		}, OutcomeSuccess, "", 3},
		{"closed before the response", func(c net.Conn) {}, OutcomeStreamError, "no_response", 0},
		{"reset before the response", func(c net.Conn) {
			c.(*net.TCPConn).SetLinger(0)
		}, OutcomeStreamError, "no_response", 0}, // as closed: the client cannot always tell them apart (TestResetRightAfterAccept)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			url := rawServer(t, func(c net.Conn, _ *http.Request) {
				tc.serve(c)
				c.Close()
			})
			c := newTestClient(t, url, nil)
			res := do(t, c, chatRequest())
			expectOutcome(t, res, tc.outcome, tc.errType)
			checkTimingInvariants(t, res)
			if res.Chunks != tc.chunks {
				t.Errorf("chunks %d, want %d", res.Chunks, tc.chunks)
			}
		})
	}
}

func TestClientConnectErrors(t *testing.T) {
	t.Run("connection refused", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		c := newTestClient(t, "http://user:hunter2@"+addr+"/v1?api_key=topsecret", nil)
		res := do(t, c, chatRequest())
		expectOutcome(t, res, OutcomeConnectError, "connection_refused")
		if !res.Start.IsZero() || res.E2E != 0 || res.ClientWait <= 0 || res.StatusCode != 0 {
			t.Errorf("start %v E2E %v client wait %v status %d", res.Start, res.E2E, res.ClientWait, res.StatusCode)
		}
		for _, secret := range []string{"hunter2", "topsecret", "user:"} {
			if strings.Contains(res.Error, secret) {
				t.Errorf("error %q contains %q", res.Error, secret)
			}
		}
	})
	t.Run("dns", func(t *testing.T) {
		// A resolver whose DNS server is a closed loopback port.
		ln, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		dnsAddr := ln.LocalAddr().String()
		ln.Close()
		dialer := &net.Dialer{Resolver: &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "udp", dnsAddr)
		}}}
		hc := &http.Client{Transport: &http.Transport{DialContext: dialer.DialContext}}
		c := newTestClient(t, "http://llm.example.invalid:8000/v1", func(cfg *ClientConfig) { cfg.HTTPClient = hc })
		res := do(t, c, chatRequest())
		expectOutcome(t, res, OutcomeConnectError, "dns")
	})
	t.Run("tls", func(t *testing.T) {
		srv := httptest.NewTLSServer(http.NotFoundHandler())
		defer srv.Close()
		c := newTestClient(t, srv.URL, nil) // does not trust the test certificate
		res := do(t, c, chatRequest())
		expectOutcome(t, res, OutcomeConnectError, "tls")
	})
	t.Run("tls trusted", func(t *testing.T) {
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, sseBody(chatContent("a"), chatDelta("content", "b", "stop", ""), "[DONE]"))
		}))
		srv.StartTLS()
		defer srv.Close()
		c := newTestClient(t, srv.URL, func(cfg *ClientConfig) { cfg.HTTPClient = srv.Client() })
		res := do(t, c, chatRequest())
		expectOutcome(t, res, OutcomeSuccess, "")
		if res.TLS <= 0 || res.Connect <= 0 || res.ConnReused {
			t.Errorf("TLS %v connect %v reused %v", res.TLS, res.Connect, res.ConnReused)
		}
	})
	t.Run("invalid request", func(t *testing.T) {
		c := newTestClient(t, "http://127.0.0.1:1", nil)
		res := do(t, c, &Request{API: "rerank", Model: "m"})
		expectOutcome(t, res, OutcomeConnectError, "invalid_request")
		res = &Result{}
		c.Do(context.Background(), nil, res)
		expectOutcome(t, res, OutcomeConnectError, "invalid_request")
	})
}

func TestNewClientErrors(t *testing.T) {
	for _, base := range []string{"", "127.0.0.1:8000", "ftp://host/v1", "http://", "http://[::1"} {
		if _, err := NewClient(ClientConfig{BaseURL: base}); err == nil {
			t.Errorf("NewClient(%q): no error", base)
		}
	}
	if _, err := NewClient(ClientConfig{BaseURL: "http://h", Timeout: -1}); err == nil {
		t.Error("negative timeout accepted")
	}
	if _, err := NewClient(ClientConfig{BaseURL: "http://user:pw@[::1"}); err == nil || strings.Contains(err.Error(), "pw") {
		t.Errorf("error %v", err)
	}
	c, err := NewClient(ClientConfig{BaseURL: "https://api.example.com/openai/v1/?api-version=2024-10-21#frag", UserAgent: "ua/1"})
	if err != nil {
		t.Fatal(err)
	}
	if c.urls[APIChat] != "https://api.example.com/openai/v1/chat/completions?api-version=2024-10-21" || c.serverPort != 443 || c.serverAddress != "api.example.com" || c.userAgent != "ua/1" {
		t.Errorf("chat URL %q port %d address %q ua %q", c.urls[APIChat], c.serverPort, c.serverAddress, c.userAgent)
	}
}

func TestClientResultReuse(t *testing.T) {
	srv, _ := fixtureServer(t, "text/event-stream", steps(0, chatContent("a"), chatDelta("content", "b", "stop", ""), usageChunk(3, 2, 1), "[DONE]"))
	c := newTestClient(t, srv.URL, nil)
	res := &Result{Target: "t", Outcome: OutcomeHTTPError, ErrorType: "http_500", Error: "old", StatusCode: 500,
		RetryAfter: time.Second, TraceID: "abc", Completion: "old", ITLs: make([]time.Duration, 5, 64)}
	c.Do(context.Background(), chatRequest(), res)
	expectOutcome(t, res, OutcomeSuccess, "")
	if res.Error != "" || res.RetryAfter != 0 || res.TraceID != "" || res.Completion != "" || len(res.ITLs) != 1 || cap(res.ITLs) != 64 || res.Target != "t" {
		t.Errorf("stale fields: %+v", res)
	}
	if res.Dispatched.IsZero() {
		t.Error("Dispatched not set")
	}
}

func TestClientConcurrent(t *testing.T) {
	srv, _ := fixtureServer(t, "text/event-stream", steps(time.Millisecond,
		chatRole(), chatContent("a"), chatContent("b"), chatDelta("content", "c", "stop", ""), usageChunk(3, 3, 0), "[DONE]"))
	c := newTestClient(t, srv.URL, func(cfg *ClientConfig) { cfg.KeepText = true })
	var wg sync.WaitGroup
	results := make([]Result, 64)
	for i := range results {
		wg.Go(func() { c.Do(context.Background(), chatRequest(), &results[i]) })
	}
	wg.Wait()
	for i := range results {
		res := &results[i]
		expectOutcome(t, res, OutcomeSuccess, "")
		checkTimingInvariants(t, res)
		if res.Completion != "abc" || res.OutputTokens != 3 {
			t.Errorf("result %d: completion %q tokens %d", i, res.Completion, res.OutputTokens)
		}
	}
}

// --- tracing ---

type recTracer struct {
	embedded.Tracer
	mu    sync.Mutex
	spans []*recSpan
	n     byte
}

func (tr *recTracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	cfg := trace.NewSpanStartConfig(opts...)
	tr.mu.Lock()
	tr.n++
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{0xaa, tr.n},
		SpanID:     trace.SpanID{0xbb, tr.n},
		TraceFlags: trace.FlagsSampled,
	})
	s := &recSpan{name: name, kind: cfg.SpanKind(), attrs: cfg.Attributes(), sc: sc}
	tr.spans = append(tr.spans, s)
	tr.mu.Unlock()
	return trace.ContextWithSpan(ctx, s), s
}

type recSpan struct {
	embedded.Span
	mu         sync.Mutex
	name       string
	kind       trace.SpanKind
	attrs      []attribute.KeyValue
	sc         trace.SpanContext
	events     []string
	status     codes.Code
	statusDesc string
	ended      bool
}

func (s *recSpan) End(...trace.SpanEndOption) { s.mu.Lock(); s.ended = true; s.mu.Unlock() }
func (s *recSpan) AddEvent(name string, _ ...trace.EventOption) {
	s.mu.Lock()
	s.events = append(s.events, name)
	s.mu.Unlock()
}
func (s *recSpan) AddLink(trace.Link)                      {}
func (s *recSpan) IsRecording() bool                       { return true }
func (s *recSpan) RecordError(error, ...trace.EventOption) {}
func (s *recSpan) SpanContext() trace.SpanContext          { return s.sc }
func (s *recSpan) SetName(n string)                        { s.name = n }
func (s *recSpan) TracerProvider() trace.TracerProvider    { return noop.NewTracerProvider() }
func (s *recSpan) SetStatus(c codes.Code, desc string)     { s.status, s.statusDesc = c, desc }
func (s *recSpan) SetAttributes(kv ...attribute.KeyValue)  { s.attrs = append(s.attrs, kv...) }
func (s *recSpan) attr(k attribute.Key) (attribute.Value, bool) {
	for _, kv := range s.attrs {
		if kv.Key == k {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

func TestClientTracing(t *testing.T) {
	srv, seen := fixtureServer(t, "text/event-stream", steps(0, chatRole(), chatContent("a"), chatDelta("content", "b", "stop", ""), "[DONE]"))
	tr := &recTracer{}
	c := newTestClient(t, srv.URL+"/v1", func(cfg *ClientConfig) {
		cfg.Tracer = tr
		cfg.Propagator = propagation.TraceContext{}
	})
	res := do(t, c, chatRequest())
	expectOutcome(t, res, OutcomeSuccess, "")
	if len(tr.spans) != 1 {
		t.Fatalf("%d spans", len(tr.spans))
	}
	s := tr.spans[0]
	if s.name != "chat "+fxModel || s.kind != trace.SpanKindClient || !s.ended || s.status != codes.Unset {
		t.Errorf("span %q kind %v ended %v status %v", s.name, s.kind, s.ended, s.status)
	}
	if len(s.events) != 1 || s.events[0] != "gen_ai.first_token" {
		t.Errorf("events %v", s.events)
	}
	for k, want := range map[attribute.Key]string{"gen_ai.operation.name": "chat", "gen_ai.request.model": fxModel, "server.address": "127.0.0.1"} {
		if v, _ := s.attr(k); v.AsString() != want {
			t.Errorf("attribute %s = %q, want %q", k, v.AsString(), want)
		}
	}
	if v, ok := s.attr("server.port"); !ok || v.AsInt64() == 0 {
		t.Errorf("server.port %v", v)
	}
	if res.TraceID != s.sc.TraceID().String() {
		t.Errorf("TraceID %q, span's %q", res.TraceID, s.sc.TraceID())
	}
	got := <-seen
	if want := "00-" + s.sc.TraceID().String() + "-" + s.sc.SpanID().String() + "-01"; got.header.Get("Traceparent") != want {
		t.Errorf("traceparent %q, want %q", got.header.Get("Traceparent"), want)
	}

	// A failure sets the status and error.type.
	srv2 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(503) }))
	defer srv2.Close()
	c2 := newTestClient(t, srv2.URL, func(cfg *ClientConfig) { cfg.Tracer = tr })
	res = do(t, c2, &Request{API: APICompletions, Model: "m", Prompt: "x"})
	s = tr.spans[1]
	if s.name != "text_completion m" || s.status != codes.Error || s.statusDesc != string(OutcomeHTTPError) {
		t.Errorf("span %q status %v %q", s.name, s.status, s.statusDesc)
	}
	if v, _ := s.attr("error.type"); v.AsString() != "http_503" {
		t.Errorf("error.type %q", v.AsString())
	}

	// An unsampled span leaves TraceID empty.
	ctx := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1}, SpanID: trace.SpanID{1},
	}))
	c3 := newTestClient(t, srv.URL, func(cfg *ClientConfig) { cfg.Tracer = noop.NewTracerProvider().Tracer("") })
	res = &Result{}
	c3.Do(ctx, chatRequest(), res)
	if res.TraceID != "" {
		t.Errorf("TraceID %q for an unsampled span", res.TraceID)
	}
}

func TestSpanHooksWithoutTracerDoNotAllocate(t *testing.T) {
	c := &Client{}
	req, res := chatRequest(), &Result{}
	ctx := context.Background()
	allocs := testing.AllocsPerRun(100, func() {
		_, span := c.startSpan(ctx, req, res)
		spanFirstToken(span, time.Time{})
		c.inject(ctx, nil)
		c.endSpan(span, res)
	})
	if allocs != 0 {
		t.Fatalf("span hooks without a tracer allocate %.1f times", allocs)
	}
}

// TestSanitizeMessage: URLs in a message are masked as everywhere
// (internal/scrub), control bytes replaced, the length bounded.
func TestSanitizeMessage(t *testing.T) {
	for in, want := range map[string]string{
		`Post "http://user:pw@host:8000/v1/chat/completions?key=s3cret": EOF`: `Post "http://xxxxx@host:8000/v1/chat/completions?key=xxxxx": EOF`,
		"proxyconnect tcp: https://a:b@proxy:3128 refused":                    "proxyconnect tcp: https://xxxxx@proxy:3128 refused",
		"no url here": "no url here",
	} {
		if got := SanitizeMessage(in); got != want {
			t.Errorf("SanitizeMessage(%q) = %q, want %q", in, got, want)
		}
	}
	if got := SanitizeMessage("a\x00b\nc\xffd" + strings.Repeat("x", 1000)); strings.ContainsAny(got, "\x00\n\xff") || len(got) > maxErrorMessage+4 {
		t.Errorf("sanitizeMessage kept control bytes or length: %q", got)
	}
}

// streamResponse renders a complete chunked HTTP response carrying a chat
// stream of n content chunks.
func streamResponse(n int) []byte {
	payloads := []string{chatRole()}
	for i := range n {
		payloads = append(payloads, chatContent(fmt.Sprintf(" tok%d", i)))
	}
	payloads = append(payloads, chatDelta("content", "", "length", ""), usageChunk(100, n, 64), "[DONE]")
	var resp strings.Builder
	resp.WriteString("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
	for _, p := range payloads {
		resp.WriteString(chunked("data: " + p + "\n\n"))
	}
	resp.WriteString("0\r\n\r\n")
	return []byte(resp.String())
}

// TestClientAllocationsPerEvent checks that the per-event path does not
// allocate: a 512-chunk stream costs no more allocations than a 16-chunk
// one (the server side is a bare write of pre-built bytes).
func TestClientAllocationsPerEvent(t *testing.T) {
	if testing.Short() {
		t.Skip("allocation counting")
	}
	allocs := map[int]float64{}
	for _, n := range []int{16, 512} {
		response := streamResponse(n)
		url := rawServer(t, func(c net.Conn, _ *http.Request) { c.Write(response) })
		c := newTestClient(t, url, nil)
		req := chatRequest()
		req.MaxTokens = n
		var res Result
		allocs[n] = testing.AllocsPerRun(200, func() {
			res.Dispatched = time.Time{}
			c.Do(context.Background(), req, &res)
			if res.Outcome != OutcomeSuccess || res.Chunks != n {
				t.Fatalf("%s %s: %d chunks", res.Outcome, res.Error, res.Chunks)
			}
		})
	}
	if extra := allocs[512] - allocs[16]; extra > 4 {
		t.Fatalf("496 more events cost %.1f more allocations (16: %.1f, 512: %.1f per request)", extra, allocs[16], allocs[512])
	}
	t.Logf("allocations per request: %.1f (16 chunks), %.1f (512 chunks)", allocs[16], allocs[512])
}

// --- measurement overhead ---

// BenchmarkClientStream16 measures the client's cost per request: a
// 16-token streamed chat completion (role delta, 16 content chunks, finish,
// usage, [DONE]) over a loopback keep-alive connection from a minimal
// server that writes a pre-built response without delay. The server side
// is a bare loop over the connection, so allocs/op is essentially the
// client's (net/http included). cpu-ns/op is the process's CPU time (user
// + system, server loop included) per request: unlike ns/op it does not
// grow when other processes compete for the cores.
func BenchmarkClientStream16(b *testing.B) {
	response := streamResponse(16)
	url := rawServer(b, func(c net.Conn, _ *http.Request) { c.Write(response) })

	for _, keep := range []bool{false, true} {
		b.Run(fmt.Sprintf("keep_text=%v", keep), func(b *testing.B) {
			c, err := NewClient(ClientConfig{BaseURL: url + "/v1", Timeout: 10 * time.Second, KeepText: keep})
			if err != nil {
				b.Fatal(err)
			}
			defer c.http.CloseIdleConnections()
			req := chatRequest()
			req.MaxTokens = 16
			var res Result
			b.ReportAllocs()
			cpu := processCPU()
			for b.Loop() {
				res.Dispatched = time.Time{}
				c.Do(context.Background(), req, &res)
				if res.Outcome != OutcomeSuccess || res.Chunks != 16 {
					b.Fatalf("%s %s %s", res.Outcome, res.ErrorType, res.Error)
				}
			}
			b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op")
		})
	}
	b.Run("parallel", func(b *testing.B) {
		c, err := NewClient(ClientConfig{BaseURL: url + "/v1", Timeout: 10 * time.Second})
		if err != nil {
			b.Fatal(err)
		}
		defer c.http.CloseIdleConnections()
		b.ReportAllocs()
		b.SetParallelism(8)
		cpu := processCPU()
		b.RunParallel(func(pb *testing.PB) {
			req := chatRequest()
			var res Result
			for pb.Next() {
				res.Dispatched = time.Time{}
				c.Do(context.Background(), req, &res)
				if res.Outcome != OutcomeSuccess {
					b.Errorf("%s %s %s", res.Outcome, res.ErrorType, res.Error)
					return
				}
			}
		})
		b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op")
	})
}

// processCPU returns the CPU time (user + system) the process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
