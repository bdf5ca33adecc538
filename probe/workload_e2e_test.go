// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package probe_test

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/llmprobe/llmprobe/probe"
	"github.com/llmprobe/llmprobe/probe/wire"
	"github.com/llmprobe/llmprobe/sim"
)

// Multi-turn conversations against the simulator: each turn carries the
// real history, so prompts grow and the prefix cache serves a growing
// share of them.
func TestEngineMultiTurnConversations(t *testing.T) {
	for _, api := range []string{"chat", "completions"} {
		t.Run(api, func(t *testing.T) {
			_, url := startSim(t, func(c *sim.Config) { c.ZeroLatency = true })
			cfg := loadConfig(t, `
global: {warmup: 0s, seed: 5}
workloads:
  w:
    classes:
      - name: agent
        prompt_tokens: 200
        output_tokens: 40
        turns: {count: 4, think_time: 20ms, user_tokens: 60}
targets:
  - {name: t, url: %s, api: %s, model: sim-model, workload: w, arrival: {process: constant, rate: 10}, extra_body: {ignore_eos: true}}
`, url, api)
			rec := newRecorder()
			runEngine(t, cfg, rec, 1500*time.Millisecond)

			byConv := map[string][]*wire.Result{}
			for _, r := range rec.byTarget("t") {
				if r.ConversationID == "" {
					t.Fatalf("turn without a conversation id: %+v", r)
				}
				byConv[r.ConversationID] = append(byConv[r.ConversationID], r)
			}
			if rec.conversations[probe.ConversationCompleted] < 8 {
				t.Fatalf("completed conversations: %v", rec.conversations)
			}
			cachedRatio := make([][]float64, 5)
			for id, turns := range byConv {
				slices.SortFunc(turns, func(a, b *wire.Result) int { return a.Turn - b.Turn })
				for i, r := range turns {
					if r.Turn != i+1 || r.Outcome != wire.OutcomeSuccess {
						t.Fatalf("conversation %s: turn %d is #%d, outcome %s", id, r.Turn, i+1, r.Outcome)
					}
					if i > 0 {
						prev := turns[i-1]
						// The history is the previous prompt and answer, plus the new message.
						if r.PromptTokens <= prev.PromptTokens+prev.OutputTokens {
							t.Errorf("conversation %s turn %d: prompt %d tokens, previous prompt+answer %d", id, r.Turn, r.PromptTokens, prev.PromptTokens+prev.OutputTokens)
						}
						if !r.Start.After(prev.Start.Add(prev.E2E).Add(15 * time.Millisecond)) {
							t.Errorf("turn %d started before the previous answer plus think time", r.Turn)
						}
					}
					cachedRatio[r.Turn] = append(cachedRatio[r.Turn], float64(r.CachedTokens)/float64(r.PromptTokens))
				}
			}
			mean := func(v []float64) float64 {
				s := 0.0
				for _, x := range v {
					s += x
				}
				return s / float64(len(v))
			}
			m1, m2, m4 := mean(cachedRatio[1]), mean(cachedRatio[2]), mean(cachedRatio[4])
			t.Logf("cached-token ratio by turn: 1: %.3f  2: %.3f  3: %.3f  4: %.3f", m1, m2, mean(cachedRatio[3]), m4)
			if !(m1 < 0.05 && m2 > 0.5 && m4 > m2) {
				t.Errorf("cached ratio should rise with the turn: turn1 %.3f turn2 %.3f turn4 %.3f", m1, m2, m4)
			}
		})
	}
}

// A conversation whose turn fails ends there and is counted as failed.
func TestEngineConversationFailure(t *testing.T) {
	_, url := startSim(t, func(c *sim.Config) {
		c.ZeroLatency = true
		// A conversation of 5 turns completes with probability 0.85^5 =
		// 0.44: of ~20, none completes or none fails with probability
		// below 1e-5. (With 0.3, 0.7^5 = 0.17, none completed 2.5% of the
		// time, more often when a busy machine left fewer conversations
		// time to end before shutdown.)
		c.Faults.HTTP500.Probability = 0.15
	})
	cfg := loadConfig(t, `
global: {warmup: 0s, seed: 9}
workloads:
  w:
    classes:
      - {name: agent, prompt_tokens: 50, output_tokens: 8, turns: {count: 5, think_time: 10ms}}
targets:
  - {name: t, url: %s, model: sim-model, workload: w, arrival: {process: constant, rate: 20}, extra_body: {ignore_eos: true}}
`, url)
	rec := newRecorder()
	runEngine(t, cfg, rec, time.Second)
	if rec.conversations[probe.ConversationFailed] == 0 || rec.conversations[probe.ConversationCompleted] == 0 {
		t.Fatalf("conversations: %v, want some failed and some completed", rec.conversations)
	}
	byConv := map[string][]*wire.Result{}
	for _, r := range rec.results {
		byConv[r.ConversationID] = append(byConv[r.ConversationID], r)
	}
	failed := 0
	for id, turns := range byConv {
		slices.SortFunc(turns, func(a, b *wire.Result) int { return a.Turn - b.Turn })
		for i, r := range turns {
			if r.Outcome != wire.OutcomeSuccess {
				failed++
				if i != len(turns)-1 {
					t.Errorf("conversation %s went on after its failed turn %d", id, r.Turn)
				}
			}
		}
	}
	if failed != rec.conversations[probe.ConversationFailed] {
		t.Errorf("%d failed turns, %d failed conversations", failed, rec.conversations[probe.ConversationFailed])
	}
}

// lengthErrors returns the median and the 90th percentile of
// |reported - planned| / planned over the results.
func lengthErrors(t *testing.T, rs []*wire.Result) (median, p90 float64) {
	t.Helper()
	var errs []float64
	for _, r := range rs {
		if r.Outcome != wire.OutcomeSuccess || !r.UsageReported {
			t.Fatalf("outcome %s usage %v", r.Outcome, r.UsageReported)
		}
		errs = append(errs, math.Abs(float64(r.PromptTokens-r.PlannedPromptTokens))/float64(r.PlannedPromptTokens))
	}
	if len(errs) < 20 {
		t.Fatalf("only %d results", len(errs))
	}
	slices.Sort(errs)
	return errs[len(errs)/2], errs[len(errs)*9/10]
}

const lengthWorkload = `
global: {warmup: 0s, seed: 13}
workloads:
  w:
    classes:
      - name: c
        prompt_tokens: {dist: lognormal, median: 300, p99: 3000, min: 20, max: 6000}
        output_tokens: 4
        prefix: {groups: 2, tokens: 64, probability: 0.5}
targets:
  - {name: t, url: %s, api: %s, prompt_format: %s, model: sim-model, workload: w, arrival: {process: constant, rate: 40}, extra_body: {ignore_eos: true}}
`

// Planned prompt lengths land on what the server counts: exactly with
// token ids, within 2% (median) with text once /tokenize calibrated the
// template and tokenizer.
func TestPromptLengthAccuracy(t *testing.T) {
	_, url := startSim(t, func(c *sim.Config) { c.ZeroLatency = true })
	for _, mode := range []struct{ api, format string }{
		{"chat", "text"}, {"completions", "text"}, {"completions", "token_ids"},
	} {
		cfg := loadConfig(t, lengthWorkload, url, mode.api, mode.format)
		rec := newRecorder()
		runEngine(t, cfg, rec, 1500*time.Millisecond)
		med, p90 := lengthErrors(t, rec.byTarget("t"))
		t.Logf("%s/%s: median |error| %.2f%%, p90 %.2f%% over %d requests", mode.api, mode.format, 100*med, 100*p90, len(rec.results))
		if med > 0.02 {
			t.Errorf("%s/%s: median length error %.2f%% > 2%%", mode.api, mode.format, 100*med)
		}
		if mode.format == "token_ids" && p90 != 0 {
			t.Errorf("token ids: p90 error %.2f%%, want exact", 100*p90)
		}
	}
}

// Against a tokenizer llmprobe does not know (3 letters per token, a
// begin-of-text token, no /tokenize), the length model learns from usage:
// after the first responses the median error is within 10%.
func TestPromptLengthUnknownTokenizer(t *testing.T) {
	_, url := startSim(t, func(c *sim.Config) {
		c.ZeroLatency = true
		c.LettersPerToken = 3
		c.BeginOfText = true
		c.DisableTokenize = true
	})
	for _, api := range []string{"chat", "completions"} {
		cfg := loadConfig(t, lengthWorkload, url, api, "text")
		rec := newRecorder()
		runEngine(t, cfg, rec, 3*time.Second)
		rs := rec.byTarget("t")
		slices.SortFunc(rs, func(a, b *wire.Result) int { return a.Start.Compare(b.Start) })
		early, _ := lengthErrors(t, rs[:20])
		med, p90 := lengthErrors(t, rs[len(rs)/2:])
		t.Logf("%s, unknown tokenizer: first 20 requests median |error| %.1f%%; second half median %.2f%%, p90 %.2f%% (%d requests)", api, 100*early, 100*med, 100*p90, len(rs))
		if med > 0.10 {
			t.Errorf("%s: median length error %.2f%% > 10%% after learning", api, 100*med)
		}
	}
}
