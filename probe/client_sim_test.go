// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package probe

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/llmprobe/llmprobe/sim"
)

// End-to-end client tests against the built-in simulator: every fault the
// simulator can inject, asked for with its X-Sim-Fault header, must end in
// the outcome the client documents.

// faultTransport adds the simulator's fault header to every request.
type faultTransport struct {
	rt    http.RoundTripper
	fault string
}

func (f faultTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(sim.FaultHeader, f.fault)
	return f.rt.RoundTrip(r)
}

func startSim(t *testing.T, mod func(*sim.Config)) string {
	t.Helper()
	cfg := sim.DefaultConfig()
	cfg.Models = []string{"sim-model"}
	cfg.Seed = 1
	cfg.PrefillBase = time.Millisecond
	cfg.PrefillPerToken = 0
	cfg.DecodeBase = time.Millisecond
	cfg.DecodePerSeq = 0
	cfg.EOSProbability = 0
	if mod != nil {
		mod(&cfg)
	}
	srv, base, err := sim.Listen("127.0.0.1:0", cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	return base + "/v1"
}

func simRequest(api API, maxTokens int) *Request {
	req := &Request{API: api, Model: "sim-model", MaxTokens: maxTokens, Sampling: Sampling{Temperature: 0.7}}
	if api == APIChat {
		req.Messages = []Message{{Role: "user", Content: strings.Repeat("the quick brown fox ", 20)}}
	} else {
		req.Prompt = strings.Repeat("the quick brown fox ", 20)
	}
	return req
}

func TestClientAgainstSimulatorFaults(t *testing.T) {
	base := startSim(t, nil)
	cases := []struct {
		fault   string
		timeout time.Duration
		outcome Outcome
		errType string
		chunks  int // -1: not checked
	}{
		{"", 0, OutcomeSuccess, "", 8},
		{"http_500", 0, OutcomeHTTPError, "http_500", 0},
		{"http_503", 0, OutcomeHTTPError, "http_503", 0},
		{"http_429", 0, OutcomeHTTPError, "http_429", 0},
		{"reset:3", 0, OutcomeStreamError, "connection_reset", 3},
		{"stall_first:10s", 300 * time.Millisecond, OutcomeTimeout, "timeout", 0},
		{"stall:2:10s", 300 * time.Millisecond, OutcomeTimeout, "timeout", 2},
		{"malformed:2", 0, OutcomeInvalidResponse, "malformed_event", 2},
		{"no_done:4", 0, OutcomeStreamError, "eof_without_done", 4},
		{"empty", 0, OutcomeInvalidResponse, "empty_completion", 0},
	}
	for _, api := range []API{APIChat, APICompletions} {
		for _, tc := range cases {
			t.Run(string(api)+"/"+tc.fault, func(t *testing.T) {
				hc := http.DefaultClient
				if tc.fault != "" {
					hc = &http.Client{Transport: faultTransport{rt: http.DefaultTransport, fault: tc.fault}}
				}
				timeout := tc.timeout
				if timeout == 0 {
					timeout = 10 * time.Second
				}
				c := newTestClient(t, base, func(cfg *ClientConfig) { cfg.HTTPClient, cfg.Timeout = hc, timeout })
				res := do(t, c, simRequest(api, 8))
				expectOutcome(t, res, tc.outcome, tc.errType)
				checkTimingInvariants(t, res)
				if tc.chunks >= 0 && res.Chunks != tc.chunks {
					t.Errorf("chunks %d, want %d", res.Chunks, tc.chunks)
				}
				switch tc.fault {
				case "":
					if !res.UsageReported || res.OutputTokens != 8 || res.PromptTokens <= 0 || !res.CachedTokensReported || res.FinishReason != "length" || res.ResponseModel != "sim-model" {
						t.Errorf("usage %v out %d prompt %d cached reported %v finish %q model %q",
							res.UsageReported, res.OutputTokens, res.PromptTokens, res.CachedTokensReported, res.FinishReason, res.ResponseModel)
					}
				case "http_429":
					if res.RetryAfter <= 0 {
						t.Errorf("RetryAfter %v", res.RetryAfter)
					}
				}
			})
		}
	}
}

func TestClientAgainstSimulatorReasoning(t *testing.T) {
	base := startSim(t, func(cfg *sim.Config) { cfg.ReasoningTokens = 3 })
	c := newTestClient(t, base, func(cfg *ClientConfig) { cfg.KeepText = true })
	res := do(t, c, simRequest(APIChat, 8))
	expectOutcome(t, res, OutcomeSuccess, "")
	checkTimingInvariants(t, res)
	// Reasoning tokens count for TTFT and ITL but are not kept as text.
	if res.Chunks != 8 || res.OutputTokens != 8 || res.Completion == "" {
		t.Errorf("chunks %d tokens %d completion %q", res.Chunks, res.OutputTokens, res.Completion)
	}
	if words := len(strings.Fields(res.Completion)); words > 5 {
		t.Errorf("completion %q has %d words: reasoning was kept", res.Completion, words)
	}
	// TTFT at the first reasoning token, TTFA three decode steps later at
	// the first answer token; the reasoning count from the usage details.
	if !res.FirstAnswer || res.TTFA <= res.TTFT || res.ReasoningChunks != 3 || !res.ReasoningReported || res.ReasoningTokens != 3 {
		t.Errorf("TTFT %v TTFA %v (answer %v), reasoning chunks %d, tokens %d (reported %v)",
			res.TTFT, res.TTFA, res.FirstAnswer, res.ReasoningChunks, res.ReasoningTokens, res.ReasoningReported)
	}
	if step := (res.E2E - res.TTFT) / 7; res.TTFA-res.TTFT < 2*step {
		t.Errorf("TTFA %v is %v after TTFT %v; three reasoning steps of ~%v came between", res.TTFA, res.TTFA-res.TTFT, res.TTFT, step)
	}

	// The newer spelling, and reasoning_effort scaling what is thought.
	base2 := startSim(t, func(cfg *sim.Config) { cfg.ReasoningTokens, cfg.ReasoningField = 2, "reasoning" })
	req := simRequest(APIChat, 8)
	req.ExtraBody = map[string]any{"reasoning_effort": "high"}
	res = do(t, newTestClient(t, base2, nil), req)
	expectOutcome(t, res, OutcomeSuccess, "")
	if res.ReasoningChunks != 4 || res.ReasoningTokens != 4 || !res.FirstAnswer {
		t.Errorf("reasoning field, effort high: %d reasoning chunks, %d tokens, answer %v; want 4 (2 × 2)", res.ReasoningChunks, res.ReasoningTokens, res.FirstAnswer)
	}
}

// TestClientAgainstSimulatorToolCall: a required tool call streams
// argument fragments after the reasoning; they are the answer and its
// tokens, and the call ends with finish_reason tool_calls, a success.
func TestClientAgainstSimulatorToolCall(t *testing.T) {
	base := startSim(t, func(cfg *sim.Config) { cfg.ReasoningTokens = 2 })
	req := simRequest(APIChat, 8)
	req.ExtraBody = map[string]any{
		"tools": []any{map[string]any{"type": "function", "function": map[string]any{
			"name": "search", "parameters": map[string]any{"type": "object"}}}},
		"tool_choice":    "required",
		"stream_options": map[string]any{"include_usage": true, "continuous_usage_stats": true},
	}
	res := do(t, newTestClient(t, base, nil), req)
	expectOutcome(t, res, OutcomeSuccess, "")
	checkTimingInvariants(t, res)
	if !res.ToolCall || !res.FirstAnswer || res.FinishReason != "tool_calls" || res.TTFA <= res.TTFT {
		t.Errorf("tool call %v, answer %v at %v (TTFT %v), finish %q", res.ToolCall, res.FirstAnswer, res.TTFA, res.TTFT, res.FinishReason)
	}
	// Token-bearing events are the completion tokens (the call's header
	// is none), one ITL per later token.
	if res.Chunks != 8 || res.OutputTokens != 8 || res.ReasoningTokens != 2 || len(res.ITLs) != 7 {
		t.Errorf("chunks %d, output %d, reasoning %d, ITLs %d", res.Chunks, res.OutputTokens, res.ReasoningTokens, len(res.ITLs))
	}
}

// TestClientAgainstSimulatorPrefixCache checks that the cached-token count
// the simulator reports reaches the Result.
func TestClientAgainstSimulatorPrefixCache(t *testing.T) {
	base := startSim(t, nil)
	c := newTestClient(t, base, nil)
	req := simRequest(APIChat, 2)
	req.Messages[0].Content = strings.Repeat("shared system prompt text ", 40)
	first := do(t, c, req)
	second := do(t, c, req)
	expectOutcome(t, second, OutcomeSuccess, "")
	if !second.CachedTokensReported || second.CachedTokens <= first.CachedTokens || second.CachedTokens > second.PromptTokens {
		t.Errorf("cached tokens %d then %d of %d prompt tokens", first.CachedTokens, second.CachedTokens, second.PromptTokens)
	}
	if !second.ConnReused {
		t.Error("second request did not reuse the connection")
	}
}
