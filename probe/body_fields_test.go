// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package probe

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/llmprobe/llmprobe/config"
)

// TestClassBodyFields runs the engine against a server that records the
// bodies it gets: a class's reasoning_effort, tools, tool_choice and
// extra_body reach the wire over the target's extra_body, continuous usage
// sets stream_options, and a class without fields sends the target's
// body alone; a class's model (a LoRA adapter) replaces the target's.
func TestClassBodyFields(t *testing.T) {
	seen := make(chan map[string]any, 100)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		if json.NewDecoder(r.Body).Decode(&body) == nil {
			select {
			case seen <- body:
			default:
			}
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: [DONE]\n\n") // what the request measures is not this test's
	}))
	defer srv.Close()
	cfg, err := config.Load([]byte(fmt.Sprintf(`
global: {warmup: 0s}
workloads:
  w:
    classes:
      - name: agent
        prompt_tokens: 16
        output_tokens: 4
        reasoning_effort: high
        tools:
          - type: function
            function: {name: search, parameters: {type: object, properties: {q: {type: string}}}}
        tool_choice: {type: function, function: {name: search}}
        extra_body: {ignore_eos: false, top_logprobs: 2}
        model: sql-lora
        images: {count: 2, width: 32, height: {dist: uniform, min: 20, max: 40}, format: jpeg}
      - {name: plain, prompt_tokens: 16, output_tokens: 4}
targets:
  - name: t
    url: %s/v1
    model: m
    workload: w
    tokenize: "off"
    arrival: {process: constant, rate: 40}
    continuous_usage_stats: true
    extra_body: {ignore_eos: true, repetition_penalty: 1.1}
`, srv.URL)), "test.yml")
	if err != nil {
		t.Fatal(err)
	}
	e := NewEngine(Options{Logger: slog.New(slog.DiscardHandler), Observer: Observers{}})
	if err := e.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	var agent, plain map[string]any
	deadline := time.After(20 * time.Second)
	for agent == nil || plain == nil {
		select {
		case r := <-seen:
			if _, ok := r["tools"]; ok {
				agent = r
			} else {
				plain = r
			}
		case <-deadline:
			t.Fatal("no request of each class within 20s")
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}

	js := func(v any) string { b, _ := json.Marshal(v); return string(b) }
	for key, want := range map[string]string{
		"model":              `"sql-lora"`, // the class's adapter
		"reasoning_effort":   `"high"`,
		"tools":              `[{"function":{"name":"search","parameters":{"properties":{"q":{"type":"string"}},"type":"object"}},"type":"function"}]`,
		"tool_choice":        `{"function":{"name":"search"},"type":"function"}`,
		"ignore_eos":         `false`, // the class's extra_body wins
		"top_logprobs":       `2`,
		"repetition_penalty": `1.1`, // the target's stays
		"stream_options":     `{"continuous_usage_stats":true,"include_usage":true}`,
	} {
		if got := js(agent[key]); got != want {
			t.Errorf("agent body %s = %s, want %s", key, got, want)
		}
	}
	// The agent class's user message carries two JPEG image parts.
	msgs, _ := agent["messages"].([]any)
	user, _ := msgs[len(msgs)-1].(map[string]any)
	parts, _ := user["content"].([]any)
	images := 0
	for _, p := range parts {
		pm, _ := p.(map[string]any)
		iu, _ := pm["image_url"].(map[string]any)
		if url, _ := iu["url"].(string); pm["type"] == "image_url" && strings.HasPrefix(url, "data:image/jpeg;base64,") {
			images++
		}
	}
	if len(parts) != 3 || images != 2 {
		t.Errorf("agent user content %d parts, %d JPEG images: %.200s", len(parts), images, js(user["content"]))
	}
	if _, ok := plain["messages"].([]any)[0].(map[string]any)["content"].(string); !ok {
		t.Errorf("plain user content is not a string: %.200s", js(plain["messages"]))
	}
	for key, want := range map[string]string{
		"model":              `"m"`, // the target's
		"ignore_eos":         `true`,
		"repetition_penalty": `1.1`,
		"stream_options":     `{"continuous_usage_stats":true,"include_usage":true}`,
		"reasoning_effort":   `null`,
		"tool_choice":        `null`,
	} {
		if got := js(plain[key]); got != want {
			t.Errorf("plain body %s = %s, want %s", key, got, want)
		}
	}
}
