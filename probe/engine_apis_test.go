// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package probe_test

import (
	"testing"
	"time"

	"github.com/llmprobe/llmprobe/probe"
	"github.com/llmprobe/llmprobe/probe/wire"
	"github.com/llmprobe/llmprobe/sim"
)

// TestEngineEveryAPI runs the daemon's engine from one configuration
// against the simulator: a multi-turn Messages target with a vision class
// on a LoRA adapter, a Responses target with a tool, and an embeddings
// target sending batches. Every request succeeds with the server's token
// counts, in each class's model.
func TestEngineEveryAPI(t *testing.T) {
	_, base := startSim(t, func(c *sim.Config) {
		c.ZeroLatency = true
		c.Adapters = []sim.AdapterConfig{{Name: "vision-lora"}}
		c.ReasoningTokens = 2
	})
	cfg := loadConfig(t, `
global: {warmup: 0s}
workloads:
  chatty:
    classes:
      - name: talk
        weight: 0.5
        prompt_tokens: 64
        output_tokens: 8
        turns: {count: 2, think_time: 10ms, user_tokens: 16}
      - name: look
        weight: 0.5
        prompt_tokens: 64
        output_tokens: 8
        model: vision-lora
        images: {count: 1, width: 56, format: jpeg}
  agent:
    classes:
      - name: act
        prompt_tokens: 64
        output_tokens: 8
        tools: [{type: function, function: {name: lookup, parameters: {type: object}}}]
        tool_choice: required
  embed:
    classes:
      - {name: batch, prompt_tokens: 32, output_tokens: 1, batch_size: 4}
targets:
  - {name: claude, url: "%[1]s", api: messages, model: sim-model, workload: chatty, arrival: {process: constant, rate: 20}}
  - {name: resp, url: "%[1]s", api: responses, model: sim-model, workload: agent, arrival: {process: constant, rate: 20}}
  - {name: emb, url: "%[1]s", api: embeddings, model: sim-model, workload: embed, arrival: {process: constant, rate: 20}}
`, base)
	rec := newRecorder()
	runEngine(t, cfg, rec, 1500*time.Millisecond)
	for _, target := range []string{"claude", "resp", "emb"} {
		results := rec.byTarget(target)
		if len(results) < 10 {
			t.Errorf("%s: %d results in 1.5s at 20/s", target, len(results))
		}
		classes := map[string]int{}
		for _, r := range results {
			if r.Outcome != wire.OutcomeSuccess {
				t.Errorf("%s/%s: %s %s %s", target, r.Class, r.Outcome, r.ErrorType, r.Error)
				continue
			}
			classes[r.Class]++
			if !r.UsageReported || r.PromptTokens <= 0 {
				t.Errorf("%s/%s: prompt tokens %d (reported %v)", target, r.Class, r.PromptTokens, r.UsageReported)
			}
			switch r.Class {
			case "look":
				if r.Model != "vision-lora" || r.ResponseModel != "vision-lora" || r.Images != 1 || r.ImagePixels != 56*56 {
					t.Errorf("look: model %q (server %q), images %d, pixels %d", r.Model, r.ResponseModel, r.Images, r.ImagePixels)
				}
			case "talk", "act":
				// The Messages API thinks only when asked (thinking); the
				// Responses API reasons as the model is configured.
				want := map[string]int{"talk": 0, "act": 2}[r.Class]
				if r.Model != "sim-model" || !r.FirstAnswer || r.ReasoningChunks != want || r.OutputTokens < 1 || r.OutputTokens > 8 {
					t.Errorf("%s: model %q answer %v reasoning chunks %d (want %d) output %d", r.Class, r.Model, r.FirstAnswer, r.ReasoningChunks, want, r.OutputTokens)
				}
				if r.Class == "act" && (!r.ToolCall || r.FinishReason != "tool_calls") { // a Responses function call
					t.Errorf("act: tool call %v finish %q", r.ToolCall, r.FinishReason)
				}
			case "batch":
				if r.FirstToken || r.E2E <= 0 || r.PlannedPromptTokens < 4*20 {
					t.Errorf("batch: first token %v E2E %v planned %d", r.FirstToken, r.E2E, r.PlannedPromptTokens)
				}
			}
		}
		t.Logf("%s: %v", target, classes)
	}
	if rec.conversations[probe.ConversationCompleted] == 0 {
		t.Error("no Messages conversation completed its turns")
	}
}

// TestEngineAnswerBudget: an embeddings request whose answer the
// process-wide answer budget cannot take is not sent: it is dropped
// (memory_budget). With room for the answers, the same target succeeds,
// and every reservation is given back.
func TestEngineAnswerBudget(t *testing.T) {
	_, base := startSim(t, func(c *sim.Config) { c.ZeroLatency = true })
	cfg := loadConfig(t, `
global: {warmup: 0s}
workloads:
  embed:
    classes:
      - {name: batch, prompt_tokens: 32, output_tokens: 1, batch_size: 4}
targets:
  - {name: emb, url: "%[1]s", api: embeddings, model: sim-model, workload: embed, arrival: {process: constant, rate: 40}}
`, base)
	limit, _ := probe.AnswerBudget()
	t.Cleanup(func() { probe.SetAnswerBudget(limit) })

	probe.SetAnswerBudget(64 << 10) // less than one answer's window
	rec := newRecorder()
	runEngine(t, cfg, rec, 500*time.Millisecond)
	if rec.dropped[probe.DropMemoryBudget] == 0 || len(rec.results) != 0 || rec.sent["emb"] != 0 {
		t.Errorf("budget too small: dropped %v, sent %d, %d results; want every arrival dropped as memory_budget", rec.dropped, rec.sent["emb"], len(rec.results))
	}

	probe.SetAnswerBudget(limit)
	rec = newRecorder()
	runEngine(t, cfg, rec, 500*time.Millisecond)
	if len(rec.results) == 0 || rec.dropped[probe.DropMemoryBudget] != 0 {
		t.Errorf("default budget: %d results, dropped %v", len(rec.results), rec.dropped)
	}
	for _, r := range rec.results {
		if r.Outcome != wire.OutcomeSuccess {
			t.Errorf("%s %s %s", r.Outcome, r.ErrorType, r.Error)
		}
	}
	if _, used := probe.AnswerBudget(); used != 0 {
		t.Errorf("%d bytes of the budget still reserved after the engine stopped", used)
	}
}
