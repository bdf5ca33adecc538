// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package wire

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/llmprobe/llmprobe/internal/simtest"
)

// Wire-format tests of the Responses, Messages and embeddings protocols,
// against streams written in the shapes the public API references show,
// and hostile variants.

// named is an SSE event with an event: line, as Anthropic and the
// Responses API send them.
func named(pause time.Duration, event, data string) streamStep {
	return streamStep{pause: pause, raw: "event: " + event + "\ndata: " + data + "\n\n"}
}

func messagesRequest() *Request {
	return &Request{
		API: APIMessages, Model: "claude-x",
		Messages: []Message{
			{Role: "system", Content: "You are terse."},
			{Role: "user", Content: "Why is the sky blue?"},
		},
		MaxTokens: 64, Sampling: Sampling{Temperature: 0.7, TopP: 0.9, TopK: 40, Seed: new(int64)},
	}
}

func TestMessagesStream(t *testing.T) {
	p := 10 * time.Millisecond
	times := &serverTimes{}
	srv, seen := fixtureServerTimed(t, "text/event-stream", []streamStep{
		named(0, "message_start", `{"type":"message_start","message":{"id":"msg_01","type":"message","role":"assistant","content":[],"model":"claude-x-20250101","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":12,"cache_creation_input_tokens":0,"cache_read_input_tokens":30,"output_tokens":1}}}`),
		named(0, "content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}`),
		named(p, "content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Rayleigh"}}`),
		named(p, "content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":" scattering."}}`),
		named(0, "content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQBCgIYAh"}}`),
		named(0, "content_block_stop", `{"type":"content_block_stop","index":0}`),
		named(0, "ping", `{"type": "ping"}`),
		named(0, "content_block_start", `{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}`),
		named(p, "content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Short"}}`),
		named(p, "content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":" waves scatter."}}`),
		named(0, "content_block_stop", `{"type":"content_block_stop","index":1}`),
		named(0, "message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":9}}`),
		named(0, "message_stop", `{"type":"message_stop"}`),
	}, times)
	c := newTestClient(t, srv.URL+"/v1", func(cfg *ClientConfig) { cfg.KeepText = true })
	lat := simtest.WatchLateness(t)
	res := do(t, c, messagesRequest())
	slack := lat.Slack()
	expectOutcome(t, res, OutcomeSuccess, "")
	checkTimingInvariants(t, res)
	if res.Chunks != 4 || res.ReasoningChunks != 2 || !res.FirstAnswer {
		t.Fatalf("chunks %d, reasoning %d, answer %v, TTFA %v after TTFT %v", res.Chunks, res.ReasoningChunks, res.FirstAnswer, res.TTFA, res.TTFT)
	}
	// The thinking deltas, then the text deltas, each stamped when it
	// arrived (TTFA − TTFT ≥ 8 ms for two 5 ms pauses failed when the
	// client read the first thinking delta late): the first answer is
	// the first text delta, never before it was written.
	checkEvents(t, res, times, []int{2, 3, 8, 9}, 8, slack)
	if res.Completion != "Short waves scatter." || res.FinishReason != "stop" || res.ResponseID != "msg_01" || res.ResponseModel != "claude-x-20250101" {
		t.Errorf("completion %q finish %q id %q model %q", res.Completion, res.FinishReason, res.ResponseID, res.ResponseModel)
	}
	// Anthropic counts input_tokens after the cache: the prompt is the sum.
	if res.PromptTokens != 42 || res.CachedTokens != 30 || !res.CachedTokensReported || res.OutputTokens != 9 || !res.UsageReported {
		t.Errorf("prompt %d cached %d (%v) output %d (%v)", res.PromptTokens, res.CachedTokens, res.CachedTokensReported, res.OutputTokens, res.UsageReported)
	}
	got := <-seen
	if got.path != "/v1/messages" || got.header.Get("Anthropic-Version") != AnthropicVersion {
		t.Errorf("path %q anthropic-version %q", got.path, got.header.Get("Anthropic-Version"))
	}
	body, _ := json.Marshal(got.body)
	for _, want := range []string{`"system":"You are terse."`, `"messages":[{"content":"Why is the sky blue?","role":"user"}]`, `"max_tokens":64`, `"top_k":40`, `"stream":true`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("body lacks %s: %s", want, body)
		}
	}
	for _, absent := range []string{`"seed"`, `"stream_options"`, `"role":"system"`} {
		if strings.Contains(string(body), absent) {
			t.Errorf("body has %s: %s", absent, body)
		}
	}
}

func TestMessagesToolUseAndFailures(t *testing.T) {
	start := named(0, "message_start", `{"type":"message_start","message":{"id":"msg_02","model":"m","usage":{"input_tokens":20,"output_tokens":1}}}`)
	t.Run("tool_use", func(t *testing.T) {
		srv, _ := fixtureServer(t, "text/event-stream", []streamStep{start,
			named(0, "content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_01","name":"get_weather","input":{}}}`),
			named(time.Millisecond, "content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":""}}`),
			named(time.Millisecond, "content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"city\": \"Paris\"}"}}`),
			named(0, "message_delta", `{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":6}}`),
			named(0, "message_stop", `{"type":"message_stop"}`),
		})
		res := do(t, newTestClient(t, srv.URL+"/v1", nil), messagesRequest())
		expectOutcome(t, res, OutcomeSuccess, "")
		if res.Chunks != 1 || !res.ToolCall || res.FinishReason != "tool_calls" || res.OutputTokens != 6 || res.PromptTokens != 20 || res.CachedTokensReported {
			t.Errorf("chunks %d tool %v finish %q output %d prompt %d cached reported %v", res.Chunks, res.ToolCall, res.FinishReason, res.OutputTokens, res.PromptTokens, res.CachedTokensReported)
		}
	})
	for name, tc := range map[string]struct {
		steps   []streamStep
		outcome Outcome
		errType string
		msg     string
	}{
		"overloaded mid-stream": {[]streamStep{start,
			named(0, "content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}`),
			named(0, "error", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)},
			OutcomeInvalidResponse, "error_event", "Overloaded"},
		"no message_stop nor stop_reason": {[]streamStep{start,
			named(0, "content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}`)},
			OutcomeStreamError, "eof_without_done", ""},
		"only thinking, then max_tokens": {[]streamStep{start,
			named(0, "content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hmm"}}`),
			named(0, "message_delta", `{"type":"message_delta","delta":{"stop_reason":"max_tokens"},"usage":{"output_tokens":64}}`),
			named(0, "message_stop", `{"type":"message_stop"}`)},
			OutcomeSuccess, "", ""},
		"malformed delta": {[]streamStep{start,
			named(0, "content_block_delta", `{"type":"content_block_delta","delta":{"type":"text_delta","text":"Hi"`)},
			OutcomeInvalidResponse, "malformed_event", ""},
		"an event that is not an object": {[]streamStep{start, named(0, "content_block_delta", `[1,2]`)},
			OutcomeInvalidResponse, "malformed_event", ""},
	} {
		t.Run(name, func(t *testing.T) {
			srv, _ := fixtureServer(t, "text/event-stream", tc.steps)
			res := do(t, newTestClient(t, srv.URL+"/v1", nil), messagesRequest())
			expectOutcome(t, res, tc.outcome, tc.errType)
			if !strings.Contains(res.Error, tc.msg) {
				t.Errorf("error %q lacks %q", res.Error, tc.msg)
			}
		})
	}

	t.Run("negative usage is an anomaly", func(t *testing.T) {
		srv, _ := fixtureServer(t, "text/event-stream", []streamStep{start,
			named(0, "content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}`),
			named(0, "message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":-3}}`),
			named(0, "message_stop", `{"type":"message_stop"}`)})
		res := do(t, newTestClient(t, srv.URL+"/v1", nil), messagesRequest())
		expectOutcome(t, res, OutcomeSuccess, "")
		if res.Anomalies&AnomalyInvalidUsage == 0 || res.OutputTokens != 1 {
			t.Errorf("anomalies %v, output %d (the chunk count stands in)", res.Anomalies, res.OutputTokens)
		}
	})
}

// TestMessagesConfiguredVersion: an anthropic-version the target's
// headers set is the only one sent.
func TestMessagesConfiguredVersion(t *testing.T) {
	seen := make(chan []string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Header.Values("Anthropic-Version")
		http.Error(w, "no", http.StatusBadRequest)
	}))
	defer srv.Close()
	rt := headerTransport{name: "anthropic-version", value: "2025-01-01", next: http.DefaultTransport}
	c := newTestClient(t, srv.URL+"/v1", func(cfg *ClientConfig) {
		cfg.HTTPClient = &http.Client{Transport: rt}
		cfg.ConfiguredHeaders = []string{"anthropic-version"}
	})
	do(t, c, messagesRequest())
	if got := <-seen; len(got) != 1 || got[0] != "2025-01-01" {
		t.Errorf("anthropic-version sent as %q, want only the configured one", got)
	}
}

// headerTransport adds a header, as prometheus/common's http_headers do.
type headerTransport struct {
	name, value string
	next        http.RoundTripper
}

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Add(h.name, h.value)
	return h.next.RoundTrip(r)
}

func responsesRequest() *Request {
	return &Request{
		API: APIResponses, Model: "gpt-x",
		Messages:  []Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "Name a prime."}},
		MaxTokens: 32, Sampling: Sampling{Temperature: 0.7, TopP: 0.95, TopK: 5},
	}
}

func TestResponsesStream(t *testing.T) {
	p := 10 * time.Millisecond
	ev := func(pause time.Duration, typ, rest string) streamStep {
		return named(pause, typ, `{"type":"`+typ+`","sequence_number":1`+rest+`}`)
	}
	times := &serverTimes{}
	srv, seen := fixtureServerTimed(t, "text/event-stream", []streamStep{
		ev(0, "response.created", `,"response":{"id":"resp_1","object":"response","status":"in_progress","model":"gpt-x-2025","output":[],"usage":null}`),
		ev(0, "response.in_progress", `,"response":{"id":"resp_1","status":"in_progress"}`),
		ev(0, "response.output_item.added", `,"output_index":0,"item":{"id":"rs_1","type":"reasoning","summary":[]}`),
		ev(p, "response.reasoning_text.delta", `,"item_id":"rs_1","output_index":0,"content_index":0,"delta":"two is even,"`),
		ev(p, "response.reasoning_text.delta", `,"item_id":"rs_1","output_index":0,"content_index":0,"delta":" three then"`),
		ev(0, "response.output_item.added", `,"output_index":1,"item":{"id":"msg_1","type":"message","status":"in_progress","role":"assistant","content":[]}`),
		ev(0, "response.content_part.added", `,"item_id":"msg_1","output_index":1,"content_index":0,"part":{"type":"output_text","text":"","annotations":[]}`),
		ev(p, "response.output_text.delta", `,"item_id":"msg_1","output_index":1,"content_index":0,"delta":"Three"`),
		ev(p, "response.output_text.delta", `,"item_id":"msg_1","output_index":1,"content_index":0,"delta":"."`),
		ev(0, "response.output_text.done", `,"item_id":"msg_1","output_index":1,"content_index":0,"text":"Three."`),
		ev(0, "response.completed", `,"response":{"id":"resp_1","object":"response","status":"completed","model":"gpt-x-2025","output":[],"usage":{"input_tokens":20,"input_tokens_details":{"cached_tokens":16},"output_tokens":8,"output_tokens_details":{"reasoning_tokens":6},"total_tokens":28}}`),
	}, times)
	c := newTestClient(t, srv.URL+"/v1", func(cfg *ClientConfig) { cfg.KeepText = true })
	lat := simtest.WatchLateness(t)
	res := do(t, c, responsesRequest())
	slack := lat.Slack()
	expectOutcome(t, res, OutcomeSuccess, "")
	checkTimingInvariants(t, res)
	if res.Chunks != 4 || res.ReasoningChunks != 2 || !res.FirstAnswer || res.Completion != "Three." {
		t.Fatalf("chunks %d reasoning %d answer %v TTFA-TTFT %v completion %q", res.Chunks, res.ReasoningChunks, res.FirstAnswer, res.TTFA-res.TTFT, res.Completion)
	}
	// As in TestMessagesStream: the reasoning deltas, then the text
	// deltas, the first of which is the first answer.
	checkEvents(t, res, times, []int{3, 4, 7, 8}, 7, slack)
	if res.PromptTokens != 20 || res.CachedTokens != 16 || res.OutputTokens != 8 || res.ReasoningTokens != 6 || res.FinishReason != "stop" || res.ResponseID != "resp_1" || res.ResponseModel != "gpt-x-2025" {
		t.Errorf("prompt %d cached %d output %d reasoning %d finish %q id %q model %q",
			res.PromptTokens, res.CachedTokens, res.OutputTokens, res.ReasoningTokens, res.FinishReason, res.ResponseID, res.ResponseModel)
	}
	got := <-seen
	body, _ := json.Marshal(got.body)
	if got.path != "/v1/responses" || !strings.Contains(string(body), `"input":[{"content":"Be brief.","role":"system"},{"content":"Name a prime.","role":"user"}]`) ||
		!strings.Contains(string(body), `"max_output_tokens":32`) || strings.Contains(string(body), `"top_k"`) || strings.Contains(string(body), `"max_tokens"`) {
		t.Errorf("path %q body %s", got.path, body)
	}
}

func TestResponsesEndings(t *testing.T) {
	ev := func(typ, rest string) streamStep {
		return named(0, typ, `{"type":"`+typ+`"`+rest+`}`)
	}
	text := ev("response.output_text.delta", `,"delta":"Hi"`)
	for name, tc := range map[string]struct {
		steps           []streamStep
		outcome         Outcome
		errType, finish string
		toolCall        bool
	}{
		"incomplete at max_output_tokens": {[]streamStep{text,
			ev("response.incomplete", `,"response":{"status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"usage":{"input_tokens":5,"output_tokens":32}}`)},
			OutcomeSuccess, "", "length", false},
		"a function call": {[]streamStep{
			ev("response.output_item.added", `,"item":{"type":"function_call","name":"f","call_id":"call_1","arguments":""}`),
			ev("response.function_call_arguments.delta", `,"delta":"{\"x\":"`),
			ev("response.function_call_arguments.delta", `,"delta":"1}"`),
			ev("response.completed", `,"response":{"status":"completed","usage":{"input_tokens":5,"output_tokens":4}}`)},
			OutcomeSuccess, "", "tool_calls", true},
		"a function call named only in the final output": {[]streamStep{text,
			ev("response.completed", `,"response":{"status":"completed","output":[{"type":"message","content":[]},{"type":"function_call","name":"f","arguments":"{}"}]}`)},
			OutcomeSuccess, "", "tool_calls", false},
		"failed": {[]streamStep{text,
			ev("response.failed", `,"response":{"status":"failed","error":{"code":"server_error","message":"The model crashed"}}`)},
			OutcomeInvalidResponse, "error_event", "", false},
		"an error event": {[]streamStep{ev("error", `,"code":"rate_limit_exceeded","message":"Slow down"`)},
			OutcomeInvalidResponse, "error_event", "", false},
		"the stream stops before completed": {[]streamStep{text},
			OutcomeStreamError, "eof_without_done", "", false},
		"an unknown event is ignored": {[]streamStep{ev("response.audio.delta", `,"delta":"AAAA"`), text,
			ev("response.completed", `,"response":{"status":"completed"}`)},
			OutcomeSuccess, "", "stop", false},
	} {
		t.Run(name, func(t *testing.T) {
			srv, _ := fixtureServer(t, "text/event-stream", tc.steps)
			res := do(t, newTestClient(t, srv.URL+"/v1", nil), responsesRequest())
			expectOutcome(t, res, tc.outcome, tc.errType)
			if res.FinishReason != tc.finish || res.ToolCall != tc.toolCall {
				t.Errorf("finish %q tool call %v, want %q %v", res.FinishReason, res.ToolCall, tc.finish, tc.toolCall)
			}
			if tc.errType == "error_event" && !strings.Contains(res.Error, "The model crashed") && !strings.Contains(res.Error, "Slow down") {
				t.Errorf("error %q lacks the server's message", res.Error)
			}
		})
	}
}

func TestEmbeddings(t *testing.T) {
	answer := func(n int, usage string) string {
		var items []string
		for i := range n {
			items = append(items, fmt.Sprintf(`{"object":"embedding","index":%d,"embedding":[0.1,-0.2,0.3]}`, i))
		}
		return `{"object":"list","data":[` + strings.Join(items, ",") + `],"model":"bge-x","usage":` + usage + `}`
	}
	seen := make(chan map[string]any, 8)
	var reply string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		seen <- body
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, reply)
	}))
	defer srv.Close()
	c := newTestClient(t, srv.URL+"/v1", nil)
	req := &Request{API: APIEmbeddings, Model: "bge-x", Inputs: []string{"a b c", "d e", "f"}}

	reply = answer(3, `{"prompt_tokens":9,"total_tokens":9}`)
	res := do(t, c, req)
	expectOutcome(t, res, OutcomeSuccess, "")
	if res.FirstToken || res.E2E <= 0 || res.PromptTokens != 9 || !res.UsageReported || res.OutputTokens != 0 || res.ResponseModel != "bge-x" {
		t.Errorf("first token %v E2E %v prompt %d (%v) output %d model %q", res.FirstToken, res.E2E, res.PromptTokens, res.UsageReported, res.OutputTokens, res.ResponseModel)
	}
	body, _ := json.Marshal(<-seen)
	if string(body) != `{"input":["a b c","d e","f"],"model":"bge-x"}` {
		t.Errorf("body %s", body)
	}

	for name, tc := range map[string]struct {
		reply, errType string
	}{
		"too few results":  {answer(2, `{"prompt_tokens":9}`), "wrong_result_count"},
		"an error object":  {`{"error":{"message":"input too long","type":"invalid_request_error"}}`, "error_event"},
		"malformed":        {`{"data":[{"embedding":[0.1,`, "malformed_response"},
		"not JSON at all":  {`<html>gateway</html>`, "malformed_response"},
		"not an object":    {`[1,2,3]`, "malformed_response"},
		"results are junk": {`{"data":[1,"x",null]}`, "invalid_embedding"},
	} {
		t.Run(name, func(t *testing.T) {
			reply = tc.reply
			res := do(t, c, req)
			<-seen
			expectOutcome(t, res, OutcomeInvalidResponse, tc.errType)
		})
	}

	t.Run("one input", func(t *testing.T) {
		reply = answer(1, `{"prompt_tokens":4,"total_tokens":4}`)
		res := do(t, c, &Request{API: APIEmbeddings, Model: "bge-x", Prompt: "one two three"})
		expectOutcome(t, res, OutcomeSuccess, "")
		if b, _ := json.Marshal(<-seen); string(b) != `{"input":"one two three","model":"bge-x"}` {
			t.Errorf("body %s", b)
		}
	})
}

// TestProtocolDecodeAllocations: reading a token event of any protocol
// allocates nothing (the client's per-event cost stays flat).
func TestProtocolDecodeAllocations(t *testing.T) {
	for name, tc := range map[string]struct {
		p     protocol
		event string
		data  string
	}{
		"chat":      {openAIChat{}, "", chatContent("hi")},
		"messages":  {messagesAPI{}, "content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Short"}}`},
		"responses": {responsesAPI{}, "response.output_text.delta", `{"type":"response.output_text.delta","item_id":"msg_1","output_index":1,"content_index":0,"delta":"Three"}`},
	} {
		var d chunkDecoder
		ev := SSEEvent{Data: []byte(tc.data)}
		if tc.event != "" {
			ev.Type = []byte(tc.event)
		}
		if kind, err := tc.p.decode(&d, ev); err != nil || kind != eventChunk || !d.c.tokens {
			t.Fatalf("%s: kind %v err %v tokens %v", name, kind, err, d.c.tokens)
		}
		if a := testing.AllocsPerRun(200, func() { tc.p.decode(&d, ev) }); a != 0 {
			t.Errorf("%s: %.1f allocations per event", name, a)
		}
	}
}

// TestToolsFor: tools configured in the chat format go out in each API's.
func TestToolsFor(t *testing.T) {
	tools := []map[string]any{{"type": "function", "function": map[string]any{
		"name": "lookup", "description": "find it", "parameters": map[string]any{"type": "object"}}}}
	js := func(v any) string { b, _ := json.Marshal(v); return string(b) }
	for _, tc := range []struct {
		api         API
		choice      any
		tools, want string
	}{
		{APIChat, "auto", `[{"function":{"description":"find it","name":"lookup","parameters":{"type":"object"}},"type":"function"}]`, `"auto"`},
		{APIResponses, "required", `[{"description":"find it","name":"lookup","parameters":{"type":"object"},"type":"function"}]`, `"required"`},
		{APIResponses, map[string]any{"type": "function", "function": map[string]any{"name": "lookup"}}, "", `{"name":"lookup","type":"function"}`},
		{APIMessages, "required", `[{"description":"find it","input_schema":{"type":"object"},"name":"lookup"}]`, `{"type":"any"}`},
		{APIMessages, "auto", "", `{"type":"auto"}`},
		{APIMessages, "none", "", `{"type":"none"}`},
		{APIMessages, map[string]any{"type": "function", "function": map[string]any{"name": "lookup"}}, "", `{"name":"lookup","type":"tool"}`},
	} {
		gotTools, gotChoice := ToolsFor(tc.api, tools, tc.choice)
		if tc.tools != "" && js(gotTools) != tc.tools {
			t.Errorf("%s tools = %s, want %s", tc.api, js(gotTools), tc.tools)
		}
		if js(gotChoice) != tc.want {
			t.Errorf("%s tool_choice %v = %s, want %s", tc.api, tc.choice, js(gotChoice), tc.want)
		}
	}
}
