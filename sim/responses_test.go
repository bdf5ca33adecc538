// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"encoding/json"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// OpenAI Responses API (/v1/responses) over loopback.

var respIDPattern = regexp.MustCompile(`^resp_[0-9a-f]{32}$`)

func responsesBody(input any, maxTokens int, extra ...any) map[string]any {
	b := map[string]any{"model": "sim-model", "input": input, "max_output_tokens": maxTokens}
	return withExtra(b, extra)
}

// checkResponsesStream checks what every Responses stream has: event
// names equal to the data's type, sequence numbers 0, 1, …, created and
// in_progress first, one terminal event last; it returns the final
// response object.
func checkResponsesStream(t *testing.T, ns *namedStream) map[string]any {
	t.Helper()
	if ns.status != http.StatusOK {
		t.Fatalf("status %d: %s", ns.status, ns.body)
	}
	for i, e := range ns.events {
		if e.v["type"] != e.name || num(e.v["sequence_number"]) != i {
			t.Fatalf("event %d: %s with type %v, sequence_number %v", i, e.name, e.v["type"], e.v["sequence_number"])
		}
		if strings.Contains(e.data, "[DONE]") {
			t.Fatal("[DONE] in a Responses stream")
		}
	}
	names := ns.names()
	if len(names) < 3 || names[0] != "response.created" || names[1] != "response.in_progress" {
		t.Fatalf("events %v", names)
	}
	created := get(ns.events[0].v, "response").(map[string]any)
	if !respIDPattern.MatchString(created["id"].(string)) || created["status"] != "in_progress" || created["object"] != "response" || created["usage"] != nil {
		t.Errorf("response.created: %v", created)
	}
	last := names[len(names)-1]
	if last != "response.completed" && last != "response.incomplete" {
		t.Fatalf("last event %s", last)
	}
	final := get(ns.events[len(names)-1].v, "response").(map[string]any)
	if final["id"] != created["id"] {
		t.Errorf("final id %v, created %v", final["id"], created["id"])
	}
	return final
}

func TestResponsesStreamText(t *testing.T) {
	base, _ := startSim(t, zeroConfig())
	ns := streamNamed(t, base+"/v1/responses", responsesBody("Say hello.", 4, "stream", true, "instructions", "Be brief."))
	final := checkResponsesStream(t, ns)
	want := []string{"response.created", "response.in_progress", "response.output_item.added", "response.content_part.added"}
	for range 4 {
		want = append(want, "response.output_text.delta")
	}
	want = append(want, "response.output_text.done", "response.content_part.done", "response.output_item.done", "response.incomplete")
	if got := ns.names(); !slices.Equal(got, want) {
		t.Fatalf("events\n%v\nwant\n%v", got, want)
	}
	added := ns.first(t, "response.output_item.added")
	item := added["item"].(map[string]any)
	if item["type"] != "message" || item["status"] != "in_progress" || item["role"] != "assistant" || num(added["output_index"]) != 0 {
		t.Errorf("output_item.added %v", added)
	}
	if p := get(ns.first(t, "response.content_part.added"), "part"); get(p, "type") != "output_text" || get(p, "text") != "" {
		t.Errorf("content_part.added part %v", p)
	}
	var text strings.Builder
	for _, e := range ns.events {
		if e.name == "response.output_text.delta" {
			if e.v["item_id"] != item["id"] || num(e.v["output_index"]) != 0 || num(e.v["content_index"]) != 0 {
				t.Errorf("delta %v", e.v)
			}
			text.WriteString(e.v["delta"].(string))
		}
	}
	if done := ns.first(t, "response.output_text.done"); done["text"] != text.String() || CountTokens(text.String()) != 4 {
		t.Errorf("output_text.done %v, deltas %q", done, text.String())
	}
	prompt := CountChatTokens([]ChatMessage{{Content: "Be brief."}, {Content: "Say hello."}}, true)
	if final["status"] != "incomplete" || get(final, "incomplete_details", "reason") != "max_output_tokens" ||
		get(final, "output", 0, "content", 0, "text") != text.String() || get(final, "output", 0, "status") != "incomplete" ||
		num(get(final, "usage", "input_tokens")) != prompt || num(get(final, "usage", "output_tokens")) != 4 ||
		num(get(final, "usage", "total_tokens")) != prompt+4 || get(final, "usage", "input_tokens_details", "cached_tokens") == nil ||
		num(get(final, "usage", "output_tokens_details", "reasoning_tokens")) != 0 || final["instructions"] != "Be brief." {
		t.Errorf("final response %v", final)
	}

	// An early stop (EOS) completes the response.
	cfg := zeroConfig()
	cfg.EOSProbability = 1
	eosBase, _ := startSim(t, cfg)
	ns = streamNamed(t, eosBase+"/v1/responses", responsesBody("stop", 4, "stream", true))
	final = checkResponsesStream(t, ns)
	if final["status"] != "completed" || final["incomplete_details"] != nil || num(get(final, "usage", "output_tokens")) != 0 ||
		get(final, "output", 0, "type") != "message" {
		t.Errorf("early stop: %v", final)
	}
}

func TestResponsesReasoning(t *testing.T) {
	cfg := zeroConfig()
	cfg.ReasoningTokens = 2
	base, _ := startSim(t, cfg)
	ns := streamNamed(t, base+"/v1/responses", responsesBody("think", 5, "stream", true))
	final := checkResponsesStream(t, ns)
	want := []string{"response.created", "response.in_progress",
		"response.output_item.added", "response.content_part.added", "response.reasoning_text.delta", "response.reasoning_text.delta",
		"response.reasoning_text.done", "response.content_part.done", "response.output_item.done",
		"response.output_item.added", "response.content_part.added", "response.output_text.delta", "response.output_text.delta", "response.output_text.delta",
		"response.output_text.done", "response.content_part.done", "response.output_item.done", "response.incomplete"}
	if got := ns.names(); !slices.Equal(got, want) {
		t.Fatalf("events\n%v\nwant\n%v", got, want)
	}
	r := ns.events[2].v["item"].(map[string]any)
	if r["type"] != "reasoning" || !strings.HasPrefix(r["id"].(string), "rs_") {
		t.Errorf("reasoning item %v", r)
	}
	if get(ns.events[3].v, "part", "type") != "reasoning_text" || ns.events[4].v["item_id"] != r["id"] {
		t.Errorf("reasoning part/delta %v %v", ns.events[3].v, ns.events[4].v)
	}
	if num(ns.events[9].v["output_index"]) != 1 || num(ns.events[11].v["output_index"]) != 1 {
		t.Errorf("message item not at output_index 1: %v", ns.events[9].v)
	}
	if get(final, "output", 0, "type") != "reasoning" || CountTokens(get(final, "output", 0, "content", 0, "text").(string)) != 2 ||
		get(final, "output", 1, "type") != "message" || num(get(final, "usage", "output_tokens_details", "reasoning_tokens")) != 2 ||
		num(get(final, "usage", "output_tokens")) != 5 {
		t.Errorf("final %v", final)
	}
	// effort none: no reasoning; high: twice as much.
	for _, tc := range []struct {
		effort string
		want   int
	}{{"none", 0}, {"high", 4}} {
		_, v, raw := postJSON(t, base+"/v1/responses", responsesBody("think", 6, "reasoning", map[string]any{"effort": tc.effort}))
		if num(get(v, "usage", "output_tokens_details", "reasoning_tokens")) != tc.want || get(v, "reasoning", "effort") != tc.effort {
			t.Errorf("effort %s: %s", tc.effort, raw)
		}
	}
}

func TestResponsesToolCall(t *testing.T) {
	base, _ := startSim(t, zeroConfig())
	tools := []map[string]any{
		{"type": "function", "name": "get_weather", "parameters": map[string]any{"type": "object"}},
		{"type": "function", "name": "web_search"},
	}
	ns := streamNamed(t, base+"/v1/responses", responsesBody("weather?", 5, "stream", true, "tools", tools, "tool_choice", "required"))
	final := checkResponsesStream(t, ns)
	item := ns.first(t, "response.output_item.added")["item"].(map[string]any)
	if item["type"] != "function_call" || !toolCallIDPattern.MatchString(item["call_id"].(string)) || item["name"] == "" || item["arguments"] != "" {
		t.Fatalf("function_call item %v", item)
	}
	var args strings.Builder
	for _, e := range ns.events {
		if e.name == "response.function_call_arguments.delta" {
			args.WriteString(e.v["delta"].(string))
		}
	}
	if ns.count("response.function_call_arguments.delta") != 5 || parseArguments(t, args.String()) != 5 {
		t.Errorf("arguments %q", args.String())
	}
	if done := ns.first(t, "response.function_call_arguments.done"); done["arguments"] != args.String() {
		t.Errorf("arguments.done %v", done)
	}
	if ns.count("response.output_text.delta") != 0 || final["status"] != "completed" ||
		get(final, "output", 0, "arguments") != args.String() || get(final, "output", 0, "call_id") != item["call_id"] {
		t.Errorf("final %v", final)
	}
	// Non-streaming, named function.
	_, v, raw := postJSON(t, base+"/v1/responses", responsesBody("weather?", 3, "tools", tools, "tool_choice", map[string]any{"type": "function", "name": "web_search"}))
	if get(v, "output", 0, "type") != "function_call" || get(v, "output", 0, "name") != "web_search" || v["status"] != "completed" {
		t.Errorf("named: %s", raw)
	}
	var a map[string]any
	if s, _ := get(v, "output", 0, "arguments").(string); json.Unmarshal([]byte(s), &a) != nil {
		t.Errorf("arguments not JSON: %s", raw)
	}
}

func TestResponsesNonStreaming(t *testing.T) {
	base, _ := startSim(t, zeroConfig())
	input := []map[string]any{
		{"role": "developer", "content": "Be brief."},
		{"type": "message", "role": "user", "content": []map[string]any{{"type": "input_text", "text": "hello there"}}},
		{"role": "assistant", "content": []map[string]any{{"type": "output_text", "text": "hi"}}},
		{"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
		{"role": "user", "content": "and now?"},
	}
	status, v, raw := postJSON(t, base+"/v1/responses", responsesBody(input, 3, "temperature", 0))
	prompt := CountChatTokens([]ChatMessage{{Content: "Be brief."}, {Content: "hello there"}, {Content: "hi"}, {Content: "sunny"}, {Content: "and now?"}}, true)
	if status != 200 || v["object"] != "response" || v["status"] != "incomplete" || get(v, "output", 0, "type") != "message" ||
		CountTokens(get(v, "output", 0, "content", 0, "text").(string)) != 3 || num(get(v, "usage", "input_tokens")) != prompt ||
		get(v, "output", 0, "content", 0, "annotations") == nil {
		t.Errorf("answer (prompt %d): %s", prompt, raw)
	}
}

func TestResponsesErrors(t *testing.T) {
	base, _ := startSim(t, zeroConfig())
	for _, tc := range []struct {
		name   string
		body   any
		status int
		param  string
	}{
		{"no input", map[string]any{"model": "sim-model"}, 400, "input"},
		{"empty input", responsesBody([]any{}, 3), 400, "input"},
		{"bad input", responsesBody(42, 3), 400, "input"},
		{"bad role", responsesBody([]map[string]any{{"role": "robot", "content": "x"}}, 3), 400, "input[0].role"},
		{"bad part", responsesBody([]map[string]any{{"role": "user", "content": []map[string]any{{"type": "input_file"}}}}, 3), 400, "input[0].content[0].type"},
		{"unknown model", responsesBody("x", 3, "model", "nope"), 404, "model"},
		{"max_output_tokens", responsesBody("x", 0), 400, "max_output_tokens"},
		{"context", responsesBody("x", 100000), 400, "max_output_tokens"},
		{"previous_response_id", responsesBody("x", 3, "previous_response_id", "resp_1"), 400, "previous_response_id"},
		{"effort", responsesBody("x", 3, "reasoning", map[string]any{"effort": "max"}), 400, "reasoning.effort"},
		{"tool type", responsesBody("x", 3, "tools", []map[string]any{{"type": "web_search"}}), 400, "tools[0].type"},
		{"tool name", responsesBody("x", 3, "tools", []map[string]any{{"type": "function", "name": "a b"}}), 400, "tools[0].name"},
		{"required without tools", responsesBody("x", 3, "tool_choice", "required"), 400, "tool_choice"},
		{"image url", responsesBody([]map[string]any{{"role": "user", "content": []map[string]any{{"type": "input_image", "image_url": "https://example.com/x.png"}}}}, 3), 400, "input[0].content[0].image_url"},
		{"bad json", `{"input":`, 400, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, _, raw := postJSON(t, base+"/v1/responses", tc.body)
			if status != tc.status {
				t.Fatalf("status %d, want %d: %s", status, tc.status, raw)
			}
			e := decodeError(t, raw)
			if got := ""; e.Error.Param != nil {
				got = *e.Error.Param
				if got != tc.param {
					t.Errorf("param %q, want %q: %s", got, tc.param, raw)
				}
			} else if tc.param != "" {
				t.Errorf("param null, want %q: %s", tc.param, raw)
			}
		})
	}
}
