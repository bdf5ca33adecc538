// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

func TestBadRequests(t *testing.T) {
	cfg := zeroConfig()
	cfg.MaxRequestBodyBytes = 4096
	base, _ := startSim(t, cfg)
	chat, comp := base+"/v1/chat/completions", base+"/v1/completions"
	msgs := `"messages":[{"role":"user","content":"hi"}]`

	tests := []struct {
		name, method, url, body string
		status                  int
		param, code, message    string // expected param / code / message substring ("" = don't care)
	}{
		{"invalid JSON", "POST", chat, `{"messages": [`, 400, "", "", "invalid JSON"},
		{"not an object", "POST", chat, `[1,2]`, 400, "", "", "JSON object"},
		{"empty body", "POST", chat, ``, 400, "", "", "empty"},
		{"wrong type", "POST", chat, `{` + msgs + `,"max_tokens":"ten"}`, 400, "max_tokens", "", "max_tokens"},
		{"float max_tokens", "POST", chat, `{` + msgs + `,"max_tokens":1.5}`, 400, "max_tokens", "", ""},
		{"unknown model", "POST", chat, `{"model":"gpt-9",` + msgs + `}`, 404, "model", "model_not_found", "gpt-9"},
		{"no messages", "POST", chat, `{"model":"sim-model"}`, 400, "messages", "", "messages"},
		{"empty messages", "POST", chat, `{"messages":[]}`, 400, "messages", "", "messages"},
		{"bad role", "POST", chat, `{"messages":[{"role":"wizard","content":"hi"}]}`, 400, "messages[0].role", "", "wizard"},
		{"image part", "POST", chat, `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}`, 400, "", "", "image_url"},
		{"content number", "POST", chat, `{"messages":[{"role":"user","content":5}]}`, 400, "", "", "content"},
		{"max_tokens zero", "POST", chat, `{` + msgs + `,"max_tokens":0}`, 400, "max_tokens", "", "at least 1"},
		{"beyond max_model_len", "POST", chat, `{` + msgs + `,"max_tokens":9000}`, 400, "max_tokens", "", "maximum context length is 8192"},
		{"min_tokens over max", "POST", chat, `{` + msgs + `,"max_tokens":4,"min_tokens":5}`, 400, "min_tokens", "", "min_tokens"},
		{"n=2", "POST", chat, `{` + msgs + `,"n":2}`, 400, "n", "", "n=1"},
		{"temperature", "POST", chat, `{` + msgs + `,"temperature":3}`, 400, "temperature", "", "temperature"},
		{"top_p", "POST", chat, `{` + msgs + `,"top_p":0}`, 400, "top_p", "", "top_p"},
		{"stream_options without stream", "POST", chat, `{` + msgs + `,"stream_options":{"include_usage":true}}`, 400, "stream_options", "", "stream"},
		{"reasoning_effort unknown", "POST", chat, `{` + msgs + `,"reasoning_effort":"extreme"}`, 400, "reasoning_effort", "", "extreme"},
		{"reasoning_effort number", "POST", chat, `{` + msgs + `,"reasoning_effort":2}`, 400, "reasoning_effort", "", "reasoning_effort"},
		{"tools not a list", "POST", chat, `{` + msgs + `,"tools":{"type":"function"}}`, 400, "tools", "", "array"},
		{"tools empty", "POST", chat, `{` + msgs + `,"tools":[]}`, 400, "tools", "", "empty"},
		{"tool not an object", "POST", chat, `{` + msgs + `,"tools":["get_weather"]}`, 400, "tools", "", "array"},
		{"tool type", "POST", chat, `{` + msgs + `,"tools":[{"type":"retrieval","function":{"name":"f"}}]}`, 400, "tools[0].type", "", "retrieval"},
		{"tool without function", "POST", chat, `{` + msgs + `,"tools":[{"type":"function"}]}`, 400, "tools[0].function", "", "function"},
		{"tool without name", "POST", chat, `{` + msgs + `,"tools":[{"type":"function","function":{"name":"ok"}},{"type":"function","function":{"description":"x"}}]}`, 400, "tools[1].function.name", "", "name"},
		{"tool name pattern", "POST", chat, `{` + msgs + `,"tools":[{"type":"function","function":{"name":"get weather"}}]}`, 400, "tools[0].function.name", "", "get weather"},
		{"tool name type", "POST", chat, `{` + msgs + `,"tools":[{"type":"function","function":{"name":5}}]}`, 400, "tools", "", ""},
		{"tool parameters", "POST", chat, `{` + msgs + `,"tools":[{"type":"function","function":{"name":"f","parameters":[1]}}]}`, 400, "tools[0].function.parameters", "", "parameters"},
		{"tool_choice unknown", "POST", chat, `{` + msgs + `,"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"sometimes"}`, 400, "tool_choice", "", "sometimes"},
		{"tool_choice unknown function", "POST", chat, `{` + msgs + `,"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"function","function":{"name":"g"}}}`, 400, "tool_choice", "", "\"g\""},
		{"tool_choice bad object", "POST", chat, `{` + msgs + `,"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"tool"}}`, 400, "tool_choice", "", "tool_choice"},
		{"tool_choice number", "POST", chat, `{` + msgs + `,"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":1}`, 400, "tool_choice", "", "tool_choice"},
		{"tool_choice required without tools", "POST", chat, `{` + msgs + `,"tool_choice":"required"}`, 400, "tool_choice", "", "tools"},
		{"tool_choice named without tools", "POST", chat, `{` + msgs + `,"tool_choice":{"type":"function","function":{"name":"f"}}}`, 400, "tool_choice", "", "not in tools"},
		{"no prompt", "POST", comp, `{"max_tokens":3}`, 400, "prompt", "", "prompt"},
		{"blank prompt", "POST", comp, `{"prompt":"   "}`, 400, "prompt", "", "at least one token"},
		{"token id out of range", "POST", comp, `{"prompt":[1,2,32000]}`, 400, "prompt", "", "32000"},
		{"negative token id", "POST", comp, `{"prompt":[-1]}`, 400, "prompt", "", "out of vocabulary"},
		{"batched prompts", "POST", comp, `{"prompt":["a","b"]}`, 400, "prompt", "", "batched"},
		{"prompt object", "POST", comp, `{"prompt":{"a":1}}`, 400, "prompt", "", "prompt"},
		{"body too large", "POST", comp, `{"prompt":"` + strings.Repeat("a ", 4096) + `"}`, 413, "", "", "4096"},
		{"unknown path", "POST", base + "/v1/rerank", `{}`, 404, "", "not_found", "/v1/rerank"},
		{"wrong method", "GET", chat, ``, 405, "", "method_not_allowed", "POST"},
		{"tokenize both", "POST", base + "/tokenize", `{"prompt":"a",` + msgs + `}`, 400, "", "", "either"},
		{"tokenize neither", "POST", base + "/tokenize", `{"model":"sim-model"}`, 400, "prompt", "", ""},
		{"tokenize unknown model", "POST", base + "/tokenize", `{"model":"nope","prompt":"a"}`, 404, "model", "model_not_found", ""},
		{"models wrong method", "DELETE", base + "/v1/models", ``, 405, "", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(tt.method, tt.url, strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := testClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.status, b)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
			e := decodeError(t, string(b))
			if tt.param != "" && (e.Error.Param == nil || *e.Error.Param != tt.param) {
				t.Errorf("param %v, want %q (%s)", e.Error.Param, tt.param, e.Error.Message)
			}
			if tt.code != "" && (e.Error.Code == nil || *e.Error.Code != tt.code) {
				t.Errorf("code %v, want %q", e.Error.Code, tt.code)
			}
			if !strings.Contains(e.Error.Message, tt.message) {
				t.Errorf("message %q does not contain %q", e.Error.Message, tt.message)
			}
		})
	}
	if resp, err := testClient.Get(chat); err == nil {
		if got := resp.Header.Get("Allow"); got != "POST" {
			t.Errorf("405 Allow = %q", got)
		}
		resp.Body.Close()
	}
}
