// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Reasoning usage, reasoning_field, reasoning_effort and tool calls, over
// loopback against the real server.

var toolCallIDPattern = regexp.MustCompile(`^call_[A-Za-z0-9]{24}$`)

func weatherTools() []map[string]any {
	return []map[string]any{
		{"type": "function", "function": map[string]any{
			"name": "get_weather", "description": "Current weather",
			"parameters": map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}},
		}},
		{"type": "function", "function": map[string]any{"name": "web_search"}},
	}
}

// continuousBody is a streamed chat body with continuous usage stats.
func continuousBody(content string, maxTokens int, extra ...any) map[string]any {
	b := chatBody(content, maxTokens, extra...)
	b["stream_options"] = map[string]any{"include_usage": true, "continuous_usage_stats": true}
	return b
}

// rawChoice returns event i's choices[0] as a generic map (to see which
// keys are present).
func rawChoice(t *testing.T, r *streamResult, i int) map[string]any {
	t.Helper()
	var ev struct {
		Choices []map[string]any `json:"choices"`
	}
	if err := json.Unmarshal([]byte(r.events[i]), &ev); err != nil || len(ev.Choices) != 1 {
		t.Fatalf("event %d: %v %s", i, err, r.events[i])
	}
	return ev.Choices[0]
}

// unaryChat is a decoded non-streaming chat.completion, strictly.
type unaryChat struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	Model   string `json:"model"`
	Choices []struct {
		Index   int `json:"index"`
		Message struct {
			Role             string  `json:"role"`
			Content          *string `json:"content"`
			ReasoningContent *string `json:"reasoning_content"`
			Reasoning        *string `json:"reasoning"`
			ToolCalls        []struct {
				ID       string `json:"id"`
				Type     string `json:"type"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"message"`
		Logprobs     json.RawMessage `json:"logprobs"`
		FinishReason string          `json:"finish_reason"`
		StopReason   json.RawMessage `json:"stop_reason"`
	} `json:"choices"`
	Usage usage `json:"usage"`
}

func postUnaryChat(t *testing.T, url string, body map[string]any) (unaryChat, string) {
	t.Helper()
	body["stream"] = false
	delete(body, "stream_options")
	resp := post(t, url, body)
	defer resp.Body.Close()
	var raw json.RawMessage
	if err := json.NewDecoder(resp.Body).Decode(&raw); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d, decode: %v: %s", resp.StatusCode, err, raw)
	}
	var out unaryChat
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&out); err != nil || len(out.Choices) != 1 {
		t.Fatalf("not a chat.completion (%v): %s", err, raw)
	}
	return out, string(raw)
}

// parseArguments checks that tool-call arguments are {"q": "w1 … wN"} and
// returns N.
func parseArguments(t *testing.T, args string) int {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal([]byte(args), &v); err != nil {
		t.Fatalf("arguments %q are not JSON: %v", args, err)
	}
	q, ok := v["q"].(string)
	if len(v) != 1 || !ok {
		t.Fatalf("arguments %q: want {\"q\": string}", args)
	}
	return len(strings.Fields(q))
}

func TestReasoningUsageStream(t *testing.T) {
	cfg := zeroConfig()
	cfg.ReasoningTokens = 3
	base, _ := startSim(t, cfg)
	r := stream(t, base+"/v1/chat/completions", continuousBody("think first", 8))
	if !r.done || len(r.malformed) > 0 {
		t.Fatalf("stream not clean: %v %s %v", r.readErr, r.errorBody, r.malformed)
	}
	// role, 3 reasoning, 5 content, usage, [DONE]
	if got, want := len(r.events), 1+8+1+1; got != want {
		t.Fatalf("%d events, want %d", got, want)
	}
	if r.reasoning != 3 || len(r.tokens) != 8 {
		t.Fatalf("reasoning chunks %d (want 3), token chunks %d (want 8)", r.reasoning, len(r.tokens))
	}
	u := r.usage
	if u.CompletionTokens != 8 || u.reasoningTokens() != r.reasoning || u.TotalTokens != u.PromptTokens+8 {
		t.Errorf("final usage %+v reasoning_tokens %d, want completion 8 including reasoning 3", u, u.reasoningTokens())
	}
	// Continuous usage: every event counts the reasoning tokens so far.
	seenReasoning := 0
	for i, c := range r.chunks[:len(r.chunks)-1] {
		if c.Usage == nil {
			t.Fatalf("event %d has no usage", i)
		}
		if len(c.Choices) == 1 && c.Choices[0].Delta.ReasoningContent != nil {
			seenReasoning++
		}
		if got := c.Usage.reasoningTokens(); got != seenReasoning {
			t.Errorf("event %d: reasoning_tokens %d, want %d (reasoning chunks so far)", i, got, seenReasoning)
		}
		if want := min(i, 8); c.Usage.CompletionTokens != want {
			t.Errorf("event %d: completion_tokens %d, want %d", i, c.Usage.CompletionTokens, want)
		}
	}

	// A request that does not reason keeps the plain usage object.
	cfg = zeroConfig()
	plainBase, _ := startSim(t, cfg)
	p := stream(t, plainBase+"/v1/chat/completions", continuousBody("no thinking", 4))
	for i, c := range p.chunks[:len(p.chunks)-1] {
		if c.Usage.CompletionTokensDetails != nil {
			t.Errorf("event %d of a plain stream has completion_tokens_details: %s", i, p.events[i])
		}
	}
	if strings.Contains(strings.Join(p.events, ""), "reasoning") {
		t.Errorf("plain stream mentions reasoning")
	}
}

func TestReasoningNonStreaming(t *testing.T) {
	cfg := zeroConfig()
	cfg.ReasoningTokens = 3
	base, _ := startSim(t, cfg)
	out, raw := postUnaryChat(t, base+"/v1/chat/completions", chatBody("think", 8))
	m := out.Choices[0].Message
	if m.ReasoningContent == nil || CountTokens(*m.ReasoningContent) != 3 || m.Content == nil || CountTokens(*m.Content) != 5 || m.Reasoning != nil {
		t.Errorf("message: %s", raw)
	}
	if out.Usage.CompletionTokens != 8 || out.Usage.reasoningTokens() != 3 || out.Choices[0].FinishReason != "length" {
		t.Errorf("usage/finish: %s", raw)
	}
	// Without reasoning there is no completion_tokens_details.
	plain, _ := startSim(t, zeroConfig())
	if _, raw := postUnaryChat(t, plain+"/v1/chat/completions", chatBody("plain", 4)); strings.Contains(raw, "completion_tokens_details") || strings.Contains(raw, "reasoning") {
		t.Errorf("plain answer: %s", raw)
	}
}

func TestReasoningField(t *testing.T) {
	cfg := zeroConfig()
	cfg.ReasoningTokens = 2
	cfg.ReasoningField = "reasoning"
	base, _ := startSim(t, cfg)
	r := stream(t, base+"/v1/chat/completions", chatBody("think", 5))
	if !r.done || r.reasoning != 2 || len(r.tokens) != 5 || r.usage.reasoningTokens() != 2 {
		t.Fatalf("done %v reasoning %d tokens %d usage %+v", r.done, r.reasoning, len(r.tokens), r.usage)
	}
	for i := 1; i <= 2; i++ {
		delta := rawChoice(t, r, i)["delta"].(map[string]any)
		if _, ok := delta["reasoning"]; !ok || len(delta) != 1 {
			t.Errorf("event %d: delta %v, want only \"reasoning\"", i, delta)
		}
	}
	if delta := rawChoice(t, r, 3)["delta"].(map[string]any); delta["content"] == nil {
		t.Errorf("event 3 is not content: %v", delta)
	}
	out, raw := postUnaryChat(t, base+"/v1/chat/completions", chatBody("think", 5))
	if m := out.Choices[0].Message; m.Reasoning == nil || CountTokens(*m.Reasoning) != 2 || m.ReasoningContent != nil {
		t.Errorf("non-streaming message: %s", raw)
	}
}

func TestReasoningEffort(t *testing.T) {
	cfg := zeroConfig()
	cfg.ReasoningTokens = 8
	base, _ := startSim(t, cfg)
	url := base + "/v1/chat/completions"
	for _, tt := range []struct {
		effort    any // nil: absent
		maxTokens int
		want      int
	}{
		{nil, 40, 8},
		{"none", 40, 0},
		{"minimal", 40, 2},
		{"low", 40, 4},
		{"medium", 40, 8},
		{"high", 40, 16},
		{"high", 10, 10}, // capped by max_tokens
	} {
		var extra []any
		if tt.effort != nil {
			extra = []any{"reasoning_effort", tt.effort}
		}
		r := stream(t, url, chatBody("effort", tt.maxTokens, extra...))
		if r.reasoning != tt.want || r.usage.CompletionTokens != tt.maxTokens || len(r.tokens) != tt.maxTokens {
			t.Errorf("effort %v, max_tokens %d: %d reasoning chunks, usage %+v; want %d", tt.effort, tt.maxTokens, r.reasoning, r.usage, tt.want)
		}
		wantDetail := tt.want
		if tt.want == 0 {
			wantDetail = -1 // no reasoning: no completion_tokens_details
		}
		if got := r.usage.reasoningTokens(); got != wantDetail {
			t.Errorf("effort %v: reasoning_tokens %d, want %d", tt.effort, got, wantDetail)
		}
		out, _ := postUnaryChat(t, url, chatBody("effort", tt.maxTokens, extra...))
		got := 0
		if m := out.Choices[0].Message; m.ReasoningContent != nil {
			got = CountTokens(*m.ReasoningContent)
		}
		if got != tt.want || max(out.Usage.reasoningTokens(), 0) != tt.want {
			t.Errorf("effort %v non-streaming: %d reasoning tokens, usage %d; want %d", tt.effort, got, out.Usage.reasoningTokens(), tt.want)
		}
	}
	// A model configured without reasoning does not reason at any effort.
	plain, _ := startSim(t, zeroConfig())
	if r := stream(t, plain+"/v1/chat/completions", chatBody("effort", 10, "reasoning_effort", "high")); r.reasoning != 0 || len(r.tokens) != 10 {
		t.Errorf("no reasoning configured, high effort: %d reasoning chunks", r.reasoning)
	}
	// Completions have no reasoning channel and ignore the field.
	if r := stream(t, base+"/v1/completions", completionBody("effort", 4, "reasoning_effort", "high")); r.status != 200 || r.reasoning != 0 || len(r.tokens) != 4 {
		t.Errorf("completions: status %d reasoning %d tokens %d", r.status, r.reasoning, len(r.tokens))
	}
}

// checkToolStream checks a streamed tool call after `reasoning` reasoning
// tokens and returns the call's header.
func checkToolStream(t *testing.T, r *streamResult, maxTokens, reasoning int, names ...string) toolCallDelta {
	t.Helper()
	if r.status != 200 || !r.done || len(r.malformed) > 0 || r.readErr != nil {
		t.Fatalf("stream not clean: status %d %s %v %v", r.status, r.errorBody, r.malformed, r.readErr)
	}
	args := maxTokens - reasoning
	// role, reasoning chunks, the tool-call header, one chunk per
	// argument token, usage, [DONE]
	if got, want := len(r.events), 1+reasoning+1+args+1+1; got != want {
		t.Fatalf("%d events, want %d:\n%s", got, want, strings.Join(r.events, "\n"))
	}
	if r.reasoning != reasoning || len(r.tokens) != reasoning || len(r.toolArgs) != args || len(r.toolHeaders) != 1 {
		t.Fatalf("reasoning %d, text chunks %d, argument chunks %d, headers %d; want %d, %d, %d, 1",
			r.reasoning, len(r.tokens), len(r.toolArgs), len(r.toolHeaders), reasoning, reasoning, args)
	}
	// Chunk count: token-bearing chunks = completion_tokens; the header
	// is the one extra chunk.
	if u := r.usage; u.CompletionTokens != reasoning+args || u.CompletionTokens != r.reasoning+len(r.toolArgs) {
		t.Errorf("completion_tokens %d, want %d (reasoning %d + arguments %d)", u.CompletionTokens, maxTokens, reasoning, args)
	}
	if reasoning > 0 && r.usage.reasoningTokens() != r.reasoning {
		t.Errorf("reasoning_tokens %d, reasoning chunks %d", r.usage.reasoningTokens(), r.reasoning)
	}
	if r.finish != "tool_calls" {
		t.Errorf("finish_reason %q, want tool_calls", r.finish)
	}
	// The header, exactly.
	hi := 1 + reasoning
	h := r.toolHeaders[0]
	if h.ID == nil || !toolCallIDPattern.MatchString(*h.ID) || h.Function == nil || h.Function.Name == nil {
		t.Fatalf("header: %s", r.events[hi])
	}
	if name := *h.Function.Name; len(names) > 0 && !contains(names, name) {
		t.Errorf("tool %q, want one of %v", name, names)
	}
	prefix := r.events[hi][:strings.Index(r.events[hi], `"choices":[`)+len(`"choices":[`)]
	wantHeader := prefix + `{"index":0,"delta":{"tool_calls":[{"index":0,"id":"` + *h.ID + `","type":"function","function":{"name":"` + *h.Function.Name + `","arguments":""}}]},"logprobs":null,"finish_reason":null}]`
	if ev := r.events[hi]; ev != wantHeader+"}" && !strings.HasPrefix(ev, wantHeader+`,"usage":`) {
		t.Errorf("header event\n%s\nwant\n%s}", ev, wantHeader)
	}
	// The argument chunks: index and arguments only; the last one
	// finishes.
	for k := 0; k < args; k++ {
		i := hi + 1 + k
		c := rawChoice(t, r, i)
		delta := c["delta"].(map[string]any)
		calls := delta["tool_calls"].([]any)
		call := calls[0].(map[string]any)
		fn := call["function"].(map[string]any)
		if len(delta) != 1 || len(calls) != 1 || len(call) != 2 || call["index"] != 0.0 || len(fn) != 1 || fn["arguments"] == "" {
			t.Errorf("argument event %d: %s", k, r.events[i])
		}
		wantFinish := any(nil)
		if k == args-1 {
			wantFinish = "tool_calls"
		}
		if c["finish_reason"] != wantFinish {
			t.Errorf("argument event %d: finish_reason %v, want %v", k, c["finish_reason"], wantFinish)
		}
	}
	if n := parseArguments(t, strings.Join(r.toolArgs, "")); n != args {
		t.Errorf("arguments hold %d words, want %d (one per token)", n, args)
	}
	return h
}

func TestToolCallStream(t *testing.T) {
	cfg := zeroConfig()
	cfg.ReasoningTokens = 3
	base, _ := startSim(t, cfg)
	url := base + "/v1/chat/completions"

	// Reasoning, then the tool call, with continuous usage.
	body := continuousBody("what is the weather in Paris?", 10, "tools", weatherTools(), "tool_choice", "required")
	r := stream(t, url, body)
	checkToolStream(t, r, 10, 3, "get_weather", "web_search")
	t.Logf("reasoning + tool call stream:\n%s", strings.Join(r.events, "\n\n"))
	for i, c := range r.chunks[:len(r.chunks)-1] {
		tokens := min(i, 10)
		if i > 3 { // the header (event 4) carries no token
			tokens = min(i-1, 10)
		}
		if c.Usage == nil || c.Usage.CompletionTokens != tokens || c.Usage.reasoningTokens() != min(tokens, 3) {
			t.Errorf("event %d: usage %+v, want completion_tokens %d, reasoning_tokens %d", i, c.Usage, tokens, min(tokens, 3))
		}
	}

	// A named function; no reasoning configured elsewhere.
	plain, _ := startSim(t, zeroConfig())
	named := map[string]any{"type": "function", "function": map[string]any{"name": "web_search"}}
	h := checkToolStream(t, stream(t, plain+"/v1/chat/completions", chatBody("search", 6, "tools", weatherTools(), "tool_choice", named)), 6, 0)
	if *h.Function.Name != "web_search" {
		t.Errorf("named tool_choice called %q", *h.Function.Name)
	}
	// max_tokens 1: the reasoning gives way to a one-token call.
	checkToolStream(t, stream(t, url, chatBody("short", 1, "tools", weatherTools(), "tool_choice", "required")), 1, 0)
	// max_tokens 3 with 3 configured reasoning tokens: 2 reasoning, 1 call token.
	checkToolStream(t, stream(t, url, chatBody("short", 3, "tools", weatherTools(), "tool_choice", "required")), 3, 2)

	// Each call has its own id.
	a := stream(t, plain+"/v1/chat/completions", chatBody("x", 2, "tools", weatherTools(), "tool_choice", "required"))
	b := stream(t, plain+"/v1/chat/completions", chatBody("x", 2, "tools", weatherTools(), "tool_choice", "required"))
	if *a.toolHeaders[0].ID == *b.toolHeaders[0].ID {
		t.Errorf("two calls share the id %s", *a.toolHeaders[0].ID)
	}
}

func TestToolCallNoEarlyStop(t *testing.T) {
	cfg := zeroConfig()
	cfg.EOSProbability = 1 // content stops at once; a tool call does not
	base, _ := startSim(t, cfg)
	url := base + "/v1/chat/completions"
	checkToolStream(t, stream(t, url, chatBody("call", 12, "tools", weatherTools(), "tool_choice", "required")), 12, 0)
	if r := stream(t, url, chatBody("talk", 12, "tools", weatherTools(), "tool_choice", "none")); r.finish != "stop" || len(r.tokens) != 0 || len(r.toolHeaders) != 0 {
		t.Errorf("tool_choice none: finish %q, %d tokens, %d calls", r.finish, len(r.tokens), len(r.toolHeaders))
	}
	// Metrics: a tool call completes as vLLM's engine sees it, a stop.
	m := scrape(t, base)
	if !strings.Contains(m, `vllm:request_success_total{engine="0",finished_reason="stop",model_name="sim-model"} 2`) ||
		!strings.Contains(m, `vllm:generation_tokens_total{engine="0",model_name="sim-model"} 12`) {
		t.Errorf("metrics:\n%s\n%s", grepLines(m, "request_success"), grepLines(m, "generation_tokens_total"))
	}
}

func TestToolCallNonStreaming(t *testing.T) {
	cfg := zeroConfig()
	cfg.ReasoningTokens = 2
	base, _ := startSim(t, cfg)
	out, raw := postUnaryChat(t, base+"/v1/chat/completions", chatBody("weather?", 9, "tools", weatherTools(), "tool_choice", "required"))
	c := out.Choices[0]
	if c.FinishReason != "tool_calls" || c.Message.Role != "assistant" || c.Message.Content != nil || len(c.Message.ToolCalls) != 1 {
		t.Fatalf("choice: %s", raw)
	}
	if !strings.Contains(raw, `"content":null`) {
		t.Errorf("content is not null: %s", raw)
	}
	tc := c.Message.ToolCalls[0]
	if !toolCallIDPattern.MatchString(tc.ID) || tc.Type != "function" || (tc.Function.Name != "get_weather" && tc.Function.Name != "web_search") {
		t.Errorf("tool call: %s", raw)
	}
	if n := parseArguments(t, tc.Function.Arguments); n != 7 {
		t.Errorf("arguments hold %d words, want 7", n)
	}
	if c.Message.ReasoningContent == nil || CountTokens(*c.Message.ReasoningContent) != 2 {
		t.Errorf("reasoning: %s", raw)
	}
	if out.Usage.CompletionTokens != 9 || out.Usage.reasoningTokens() != 2 {
		t.Errorf("usage: %s", raw)
	}
	// The same request, streamed with a seed, calls the same tool with the
	// same arguments.
	body := chatBody("weather?", 9, "tools", weatherTools(), "tool_choice", "required", "temperature", 0)
	r := stream(t, base+"/v1/chat/completions", body)
	u, _ := postUnaryChat(t, base+"/v1/chat/completions", chatBody("weather?", 9, "tools", weatherTools(), "tool_choice", "required", "temperature", 0))
	ut := u.Choices[0].Message.ToolCalls[0]
	if *r.toolHeaders[0].Function.Name != ut.Function.Name || strings.Join(r.toolArgs, "") != ut.Function.Arguments {
		t.Errorf("streamed %s(%s), non-streamed %s(%s)", *r.toolHeaders[0].Function.Name, strings.Join(r.toolArgs, ""), ut.Function.Name, ut.Function.Arguments)
	}
}

func TestToolChoice(t *testing.T) {
	base, _ := startSim(t, zeroConfig()) // tool_call_probability 0
	url := base + "/v1/chat/completions"
	tools := weatherTools()
	isCall := func(r *streamResult) bool {
		t.Helper()
		if !r.done {
			t.Fatalf("stream failed: %d %s %v", r.status, r.errorBody, r.readErr)
		}
		if len(r.toolHeaders) == 0 {
			if r.finish != "length" || len(r.tokens) != 4 {
				t.Errorf("content answer: finish %q, %d tokens", r.finish, len(r.tokens))
			}
			return false
		}
		checkToolStream(t, r, 4, 0)
		return true
	}
	for _, tt := range []struct {
		name  string
		extra []any
		want  bool
	}{
		{"none", []any{"tools", tools, "tool_choice", "none"}, false},
		{"auto, probability 0", []any{"tools", tools, "tool_choice", "auto"}, false},
		{"absent, probability 0", []any{"tools", tools}, false},
		{"auto without tools", []any{"tool_choice", "auto"}, false},
		{"tools null", []any{"tools", nil, "tool_choice", "none"}, false},
		{"required", []any{"tools", tools, "tool_choice", "required"}, true},
	} {
		if got := isCall(stream(t, url, chatBody("q", 4, tt.extra...))); got != tt.want {
			t.Errorf("%s: tool call %v, want %v", tt.name, got, tt.want)
		}
	}
	// Completions ignore tools.
	if r := stream(t, base+"/v1/completions", completionBody("q", 3, "tools", "not even a list")); r.status != 200 || len(r.tokens) != 3 {
		t.Errorf("completions with tools: status %d, %d tokens", r.status, len(r.tokens))
	}

	cfg := zeroConfig()
	cfg.ToolCallProbability = 1
	always, _ := startSim(t, cfg)
	if !isCall(stream(t, always+"/v1/chat/completions", chatBody("q", 4, "tools", tools))) {
		t.Error("probability 1, tool_choice absent: no tool call")
	}
	if !isCall(stream(t, always+"/v1/chat/completions", chatBody("q", 4, "tools", tools, "tool_choice", "auto"))) {
		t.Error("probability 1, auto: no tool call")
	}
	if isCall(stream(t, always+"/v1/chat/completions", chatBody("q", 4, "tools", tools, "tool_choice", "none"))) {
		t.Error("probability 1, none: a tool call")
	}
	if isCall(stream(t, always+"/v1/chat/completions", chatBody("q", 4))) {
		t.Error("probability 1, no tools: a tool call")
	}

	cfg.ToolCallProbability = 0.5
	half, _ := startSim(t, cfg)
	calls, names := 0, map[string]int{}
	for i := 0; i < 40; i++ {
		r := stream(t, half+"/v1/chat/completions", chatBody(fmt.Sprintf("q%d", i), 4, "tools", tools))
		if isCall(r) {
			calls++
			names[*r.toolHeaders[0].Function.Name]++
		}
	}
	if calls < 8 || calls > 32 || len(names) != 2 {
		t.Errorf("probability 0.5: %d of 40 requests made a tool call (%v); want about 20, of both tools", calls, names)
	}
}

func TestAgentRequestLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "requests.jsonl")
	cfg := zeroConfig()
	cfg.ReasoningTokens = 2
	cfg.RequestLog = path
	base, s := startSim(t, cfg)
	url := base + "/v1/chat/completions"
	stream(t, url, chatBody("call", 6, "tools", weatherTools(), "tool_choice", "required"), "X-Request-Id", "tool-stream")
	postUnaryChat(t, url, chatBody("call", 5, "tools", weatherTools(), "tool_choice", "required"))
	stream(t, url, chatBody("think", 4), "X-Request-Id", "reason")
	stream(t, url, chatBody("plain", 4, "reasoning_effort", "none"), "X-Request-Id", "plain")
	// Cut during the reasoning: the call never went out.
	stream(t, url, chatBody("cut", 6, "tools", weatherTools(), "tool_choice", "required"), "X-Request-Id", "cut", FaultHeader, "reset:1")
	shutdown(t, s)

	got := map[string]RequestLogEntry{}
	for _, e := range readRequestLog(t, path) {
		key := e.XRequestID
		if key == "" {
			key = "tool-unary"
		}
		got[key] = e
	}
	for key, want := range map[string]struct {
		completion, reasoning int
		toolCall              bool
		finish                string
	}{
		"tool-stream": {6, 2, true, "tool_calls"},
		"tool-unary":  {5, 2, true, "tool_calls"},
		"reason":      {4, 2, false, "length"},
		"plain":       {4, 0, false, "length"},
		"cut":         {1, 1, false, ""},
	} {
		e, ok := got[key]
		if !ok {
			t.Errorf("%s: no log line", key)
			continue
		}
		if e.CompletionTokens != want.completion || e.ReasoningTokens != want.reasoning || e.ToolCall != want.toolCall || e.FinishReason != want.finish {
			t.Errorf("%s: completion %d reasoning %d tool_call %v finish %q; want %+v", key, e.CompletionTokens, e.ReasoningTokens, e.ToolCall, e.FinishReason, want)
		}
	}
}
