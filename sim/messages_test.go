// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// Anthropic Messages API (/v1/messages) over loopback.

var (
	msgIDPattern   = regexp.MustCompile(`^msg_[0-9a-f]{32}$`)
	toolUIDPattern = regexp.MustCompile(`^toolu_[A-Za-z0-9]{24}$`)
)

func messagesBody(text string, maxTokens int, extra ...any) map[string]any {
	b := map[string]any{
		"model":      "sim-model",
		"max_tokens": maxTokens,
		"messages":   []map[string]any{{"role": "user", "content": text}},
	}
	return withExtra(b, extra)
}

// checkMessagesStream checks the event grammar common to every stream
// and returns the deltas of each block, by index.
func checkMessagesStream(t *testing.T, ns *namedStream) (blocks []map[string]any, deltas [][]map[string]any) {
	t.Helper()
	if ns.status != http.StatusOK {
		t.Fatalf("status %d: %s", ns.status, ns.body)
	}
	for i, e := range ns.events {
		if e.v["type"] != e.name {
			t.Errorf("event %d: name %q, data type %v", i, e.name, e.v["type"])
		}
	}
	names := ns.names()
	if names[0] != "message_start" || names[len(names)-1] != "message_stop" || names[len(names)-2] != "message_delta" {
		t.Fatalf("events %v: want message_start … message_delta message_stop", names)
	}
	if ns.count("ping") != 1 {
		t.Errorf("%d pings, want 1", ns.count("ping"))
	}
	open := -1
	for _, e := range ns.events {
		switch e.name {
		case "content_block_start":
			idx := num(e.v["index"])
			if open != -1 || idx != len(blocks) {
				t.Fatalf("content_block_start index %d with block %d open (%d started)", idx, open, len(blocks))
			}
			open = idx
			blocks = append(blocks, e.v["content_block"].(map[string]any))
			deltas = append(deltas, nil)
		case "content_block_delta":
			if num(e.v["index"]) != open {
				t.Fatalf("delta for block %v while %d is open", e.v["index"], open)
			}
			deltas[open] = append(deltas[open], e.v["delta"].(map[string]any))
		case "content_block_stop":
			if num(e.v["index"]) != open {
				t.Fatalf("stop for block %v while %d is open", e.v["index"], open)
			}
			open = -1
		}
	}
	if open != -1 {
		t.Fatalf("block %d never stopped", open)
	}
	return blocks, deltas
}

func TestMessagesStream(t *testing.T) {
	base, _ := startSim(t, zeroConfig())
	ns := streamNamed(t, base+"/v1/messages", messagesBody("Say hello to the simulator.", 5, "stream", true), anthropicHeaders...)
	blocks, deltas := checkMessagesStream(t, ns)
	want := []string{"message_start", "content_block_start", "ping"}
	for range 5 {
		want = append(want, "content_block_delta")
	}
	want = append(want, "content_block_stop", "message_delta", "message_stop")
	if got := ns.names(); !slices.Equal(got, want) {
		t.Fatalf("events\n%v\nwant\n%v", got, want)
	}
	m := ns.first(t, "message_start")["message"].(map[string]any)
	prompt := CountChatTokens([]ChatMessage{{Role: "user", Content: "Say hello to the simulator."}}, true)
	if !msgIDPattern.MatchString(m["id"].(string)) || m["type"] != "message" || m["role"] != "assistant" || m["model"] != "sim-model" ||
		m["stop_reason"] != nil || len(m["content"].([]any)) != 0 {
		t.Errorf("message_start message: %v", m)
	}
	u := m["usage"].(map[string]any)
	if num(u["input_tokens"]) != prompt || num(u["output_tokens"]) != 1 || u["cache_creation_input_tokens"] == nil || u["cache_read_input_tokens"] == nil {
		t.Errorf("message_start usage %v, want input_tokens %d, output_tokens 1, cache fields", u, prompt)
	}
	if len(blocks) != 1 || blocks[0]["type"] != "text" || blocks[0]["text"] != "" {
		t.Fatalf("blocks %v", blocks)
	}
	text := ""
	for _, d := range deltas[0] {
		if d["type"] != "text_delta" {
			t.Errorf("delta %v", d)
		}
		text += d["text"].(string)
	}
	if CountTokens(text) != 5 {
		t.Errorf("text %q is not 5 tokens", text)
	}
	md := ns.first(t, "message_delta")
	if get(md, "delta", "stop_reason") != "max_tokens" || get(md, "delta", "stop_sequence") != nil || num(get(md, "usage", "output_tokens")) != 5 {
		t.Errorf("message_delta %v", md)
	}
	if strings.Contains(ns.events[len(ns.events)-1].data, "[DONE]") {
		t.Error("[DONE] in a Messages stream")
	}
}

func TestMessagesNonStreaming(t *testing.T) {
	base, _ := startSim(t, zeroConfig())
	body := messagesBody("", 4, "system", "You are terse.", "messages", []map[string]any{
		{"role": "user", "content": []map[string]any{{"type": "text", "text": "first question"}}},
		{"role": "assistant", "content": "an answer"},
		{"role": "user", "content": "second question"},
	}, "temperature", 0)
	status, v, raw := postJSON(t, base+"/v1/messages", body, anthropicHeaders...)
	if status != 200 {
		t.Fatalf("status %d: %s", status, raw)
	}
	var out struct {
		ID           string `json:"id"`
		Type         string `json:"type"`
		Role         string `json:"role"`
		Model        string `json:"model"`
		Content      []struct{ Type, Text string }
		StopReason   string          `json:"stop_reason"`
		StopSequence json.RawMessage `json:"stop_sequence"`
		Usage        struct {
			InputTokens              int `json:"input_tokens"`
			CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
			CacheReadInputTokens     int `json:"cache_read_input_tokens"`
			OutputTokens             int `json:"output_tokens"`
		} `json:"usage"`
	}
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&out); err != nil {
		t.Fatalf("%v: %s", err, raw)
	}
	prompt := CountChatTokens([]ChatMessage{{Content: "You are terse."}, {Content: "first question"}, {Content: "an answer"}, {Content: "second question"}}, true)
	if !msgIDPattern.MatchString(out.ID) || out.Type != "message" || out.Role != "assistant" || out.StopReason != "max_tokens" || string(out.StopSequence) != "null" ||
		len(out.Content) != 1 || out.Content[0].Type != "text" || CountTokens(out.Content[0].Text) != 4 ||
		out.Usage.InputTokens+out.Usage.CacheReadInputTokens != prompt || out.Usage.OutputTokens != 4 {
		t.Errorf("answer %s (prompt %d)", raw, prompt)
	}
	_ = v
	// temperature 0: the same answer again, and the prompt is now cached.
	_, _, raw2 := postJSON(t, base+"/v1/messages", body, anthropicHeaders...)
	var again struct {
		Content []struct{ Text string }
		Usage   struct {
			InputTokens          int `json:"input_tokens"`
			CacheReadInputTokens int `json:"cache_read_input_tokens"`
		} `json:"usage"`
	}
	_ = json.Unmarshal([]byte(raw2), &again)
	if again.Content[0].Text != out.Content[0].Text || again.Usage.CacheReadInputTokens == 0 || again.Usage.InputTokens+again.Usage.CacheReadInputTokens != prompt {
		t.Errorf("repeat: %s", raw2)
	}
}

func TestMessagesThinking(t *testing.T) {
	cfg := zeroConfig()
	cfg.ReasoningTokens = 3 // capped by budget_tokens
	base, _ := startSim(t, cfg)
	thinking := map[string]any{"type": "enabled", "budget_tokens": 1024}
	ns := streamNamed(t, base+"/v1/messages", messagesBody("think", 1030, "stream", true, "thinking", thinking), anthropicHeaders...)
	blocks, deltas := checkMessagesStream(t, ns)
	if len(blocks) != 2 || blocks[0]["type"] != "thinking" || blocks[0]["thinking"] != "" || blocks[1]["type"] != "text" {
		t.Fatalf("blocks %v", blocks)
	}
	if n := len(deltas[0]); n != 4 {
		t.Fatalf("thinking block has %d deltas, want 3 thinking + 1 signature", n)
	}
	for i, d := range deltas[0][:3] {
		if d["type"] != "thinking_delta" || d["thinking"] == "" {
			t.Errorf("thinking delta %d: %v", i, d)
		}
	}
	if d := deltas[0][3]; d["type"] != "signature_delta" || d["signature"] == "" {
		t.Errorf("last thinking delta %v, want signature_delta", d)
	}
	if len(deltas[1]) != 1027 || num(get(ns.first(t, "message_delta"), "usage", "output_tokens")) != 1030 {
		t.Errorf("%d text deltas (want 1027), message_delta %v", len(deltas[1]), ns.first(t, "message_delta"))
	}
	if ns.names()[2] != "ping" {
		t.Errorf("ping not after the first content_block_start: %v", ns.names()[:4])
	}

	// Non-streaming: a thinking block with its signature, then the text.
	status, v, raw := postJSON(t, base+"/v1/messages", messagesBody("think", 1030, "thinking", thinking), anthropicHeaders...)
	c := v["content"].([]any)
	if status != 200 || len(c) != 2 || get(c, 0, "type") != "thinking" || CountTokens(get(c, 0, "thinking").(string)) != 3 ||
		get(c, 0, "signature") == nil || get(c, 1, "type") != "text" || num(get(v, "usage", "output_tokens")) != 1030 {
		t.Errorf("answer %.400s", raw)
	}

	// Without the configured amount, the model thinks its whole budget.
	plainBase, _ := startSim(t, zeroConfig())
	_, v, raw = postJSON(t, plainBase+"/v1/messages", messagesBody("think", 1100, "thinking", thinking), anthropicHeaders...)
	if th, _ := get(v, "content", 0, "thinking").(string); CountTokens(th) != 1024 {
		t.Errorf("thinking of %d tokens, want the budget 1024: %.300s", CountTokens(th), raw)
	}
	// Without thinking in the request there is none, whatever the config.
	_, v, raw = postJSON(t, base+"/v1/messages", messagesBody("no think", 5), anthropicHeaders...)
	if c := v["content"].([]any); len(c) != 1 || get(c, 0, "type") != "text" {
		t.Errorf("answer without thinking: %s", raw)
	}
}

func TestMessagesToolUse(t *testing.T) {
	cfg := zeroConfig()
	base, _ := startSim(t, cfg)
	tools := []map[string]any{
		{"name": "get_weather", "description": "Current weather", "input_schema": map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}},
		{"name": "web_search", "input_schema": map[string]any{"type": "object"}},
	}
	for _, choice := range []map[string]any{{"type": "any"}, {"type": "tool", "name": "web_search"}} {
		ns := streamNamed(t, base+"/v1/messages", messagesBody("weather?", 6, "stream", true, "tools", tools, "tool_choice", choice), anthropicHeaders...)
		blocks, deltas := checkMessagesStream(t, ns)
		if len(blocks) != 1 || blocks[0]["type"] != "tool_use" || !toolUIDPattern.MatchString(blocks[0]["id"].(string)) {
			t.Fatalf("blocks %v", blocks)
		}
		if in, ok := blocks[0]["input"].(map[string]any); !ok || len(in) != 0 {
			t.Errorf("content_block_start input %v, want {}", blocks[0]["input"])
		}
		if choice["type"] == "tool" && blocks[0]["name"] != "web_search" {
			t.Errorf("named tool: %v", blocks[0])
		}
		var args strings.Builder
		for _, d := range deltas[0] {
			if d["type"] != "input_json_delta" {
				t.Errorf("delta %v", d)
			}
			args.WriteString(d["partial_json"].(string))
		}
		if len(deltas[0]) != 6 || parseArguments(t, args.String()) != 6 {
			t.Errorf("%d fragments %q", len(deltas[0]), args.String())
		}
		if r := get(ns.first(t, "message_delta"), "delta", "stop_reason"); r != "tool_use" {
			t.Errorf("stop_reason %v, want tool_use", r)
		}
	}
	// Non-streaming: the input is the parsed object.
	_, v, raw := postJSON(t, base+"/v1/messages", messagesBody("weather?", 4, "tools", tools, "tool_choice", map[string]any{"type": "any"}), anthropicHeaders...)
	if get(v, "stop_reason") != "tool_use" || get(v, "content", 0, "type") != "tool_use" || get(v, "content", 0, "input", "q") == nil {
		t.Errorf("answer %s", raw)
	}
	// auto: tool_call_probability decides (0 here: text); none: text.
	for _, choice := range []string{"auto", "none"} {
		_, v, raw := postJSON(t, base+"/v1/messages", messagesBody("weather?", 3, "tools", tools, "tool_choice", map[string]any{"type": choice}), anthropicHeaders...)
		if get(v, "content", 0, "type") != "text" || get(v, "stop_reason") != "max_tokens" {
			t.Errorf("tool_choice %s: %s", choice, raw)
		}
	}
	cfg.ToolCallProbability = 1
	autoBase, _ := startSim(t, cfg)
	_, v, raw = postJSON(t, autoBase+"/v1/messages", messagesBody("weather?", 3, "tools", tools), anthropicHeaders...)
	if get(v, "content", 0, "type") != "tool_use" {
		t.Errorf("auto with probability 1: %s", raw)
	}
	// A tool result in the history is part of the prompt.
	hist := messagesBody("", 2, "tools", tools, "messages", []map[string]any{
		{"role": "user", "content": "weather?"},
		{"role": "assistant", "content": []map[string]any{{"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": map[string]any{"city": "Paris"}}}},
		{"role": "user", "content": []map[string]any{{"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"}}},
	})
	if status, _, raw := postJSON(t, base+"/v1/messages", hist, anthropicHeaders...); status != 200 {
		t.Errorf("history with tool_result: %d %s", status, raw)
	}
}

func TestMessagesErrors(t *testing.T) {
	cfg := zeroConfig()
	cfg.MaxModelLen = 2048
	base, _ := startSim(t, cfg)
	url := base + "/v1/messages"
	thinking := map[string]any{"type": "enabled", "budget_tokens": 1024}
	tools := []map[string]any{{"name": "f", "input_schema": map[string]any{"type": "object"}}}
	for _, tc := range []struct {
		name    string
		body    any
		headers []string
		status  int
		typ     string
		msg     string
	}{
		{"no anthropic-version", messagesBody("x", 5), []string{"x-api-key", "k"}, 400, "invalid_request_error", "anthropic-version"},
		{"no max_tokens", map[string]any{"model": "sim-model", "messages": []map[string]any{{"role": "user", "content": "x"}}}, anthropicHeaders, 400, "invalid_request_error", "max_tokens"},
		{"no model", map[string]any{"max_tokens": 5, "messages": []map[string]any{{"role": "user", "content": "x"}}}, anthropicHeaders, 400, "invalid_request_error", "model"},
		{"unknown model", messagesBody("x", 5, "model", "claude-nope"), anthropicHeaders, 404, "not_found_error", "claude-nope"},
		{"no messages", messagesBody("x", 5, "messages", []any{}), anthropicHeaders, 400, "invalid_request_error", "messages"},
		{"bad role", messagesBody("x", 5, "messages", []map[string]any{{"role": "system", "content": "x"}}), anthropicHeaders, 400, "invalid_request_error", "messages.0.role"},
		{"bad json", `{"model":`, anthropicHeaders, 400, "invalid_request_error", "JSON"},
		{"temperature", messagesBody("x", 5, "temperature", 1.5), anthropicHeaders, 400, "invalid_request_error", "temperature"},
		{"small budget", messagesBody("x", 2000, "thinking", map[string]any{"type": "enabled", "budget_tokens": 10}), anthropicHeaders, 400, "invalid_request_error", "budget_tokens"},
		{"budget over max_tokens", messagesBody("x", 1024, "thinking", thinking), anthropicHeaders, 400, "invalid_request_error", "max_tokens"},
		{"thinking forced tool", messagesBody("x", 1100, "thinking", thinking, "tools", tools, "tool_choice", map[string]any{"type": "any"}), anthropicHeaders, 400, "invalid_request_error", "Thinking"},
		{"tool choice without tools", messagesBody("x", 5, "tool_choice", map[string]any{"type": "any"}), anthropicHeaders, 400, "invalid_request_error", "requires tools"},
		{"unknown tool", messagesBody("x", 5, "tools", tools, "tool_choice", map[string]any{"type": "tool", "name": "g"}), anthropicHeaders, 400, "invalid_request_error", "tool_choice.name"},
		{"tool without schema", messagesBody("x", 5, "tools", []map[string]any{{"name": "f"}}), anthropicHeaders, 400, "invalid_request_error", "input_schema"},
		{"server tool", messagesBody("x", 5, "tools", []map[string]any{{"type": "web_search_20250305", "name": "web_search"}}), anthropicHeaders, 400, "invalid_request_error", "not supported"},
		{"context", messagesBody("x", 4000), anthropicHeaders, 400, "invalid_request_error", "context limit"},
		{"image url source", messagesBody("", 5, "messages", []map[string]any{{"role": "user", "content": []map[string]any{{"type": "image", "source": map[string]any{"type": "url", "url": "https://example.com/a.png"}}}}}), anthropicHeaders, 400, "invalid_request_error", "not fetched"},
		{"malformed base64", messagesBody("", 5, "messages", []map[string]any{{"role": "user", "content": []map[string]any{{"type": "image", "source": map[string]any{"type": "base64", "media_type": "image/png", "data": "!!!not base64!!!"}}}}}), anthropicHeaders, 400, "invalid_request_error", "base64"},
		{"gif", messagesBody("", 5, "messages", []map[string]any{{"role": "user", "content": []map[string]any{{"type": "image", "source": map[string]any{"type": "base64", "media_type": "image/gif", "data": "R0lGODlh"}}}}}), anthropicHeaders, 400, "invalid_request_error", "image/gif"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := post(t, url, tc.body, tc.headers...)
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, b)
			}
			typ, msg := checkAnthropicError(t, string(b))
			if typ != tc.typ || !strings.Contains(msg, tc.msg) {
				t.Errorf("error %s %q, want %s containing %q", typ, msg, tc.typ, tc.msg)
			}
		})
	}
}
