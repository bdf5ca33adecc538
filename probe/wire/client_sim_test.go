// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package wire

import (
	"bytes"
	"cmp"
	"encoding/base64"
	"image"
	"image/color"
	"image/draw"
	"image/jpeg"
	"image/png"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/llmprobe/llmprobe/internal/simtest"
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

// simConfig is the simulator the client tests run against: fixed 1 ms
// steps, no early stop.
func simConfig(mod func(*sim.Config)) sim.Config {
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
	return cfg
}

// startSim serves simConfig(mod) until the test ends and returns its
// OpenAI base URL.
func startSim(t *testing.T, mod func(*sim.Config)) string {
	t.Helper()
	return simtest.Start(t, simConfig(mod)).URL()
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
	const step = 40 * time.Millisecond
	srv := startRecordedSim(t, func(cfg *sim.Config) { cfg.ReasoningTokens, cfg.DecodeBase = 3, step })
	c := newTestClient(t, srv.URL(), func(cfg *ClientConfig) { cfg.KeepText = true })
	// The record check below always fails a first answer stamped a step
	// early (the early slack is a wake-up's lateness), and one stamped a
	// step late when the late slack is under a step (an idle machine);
	// the measurement is judged when it resolves the reasoning phase.
	m := doTimed(t, simtest.WatchLateness(t), c, simRequest(APIChat, 8), 3*step)
	res := m.res
	expectOutcome(t, res, OutcomeSuccess, "")
	checkTimingInvariants(t, res)
	// Reasoning tokens count for TTFT and ITL but are not kept as text.
	if res.Chunks != 8 || res.OutputTokens != 8 || res.Completion == "" {
		t.Errorf("chunks %d tokens %d completion %q", res.Chunks, res.OutputTokens, res.Completion)
	}
	if words := len(strings.Fields(res.Completion)); words > 5 {
		t.Errorf("completion %q has %d words: reasoning was kept", res.Completion, words)
	}
	if !res.FirstAnswer || res.ReasoningChunks != 3 || !res.ReasoningReported || res.ReasoningTokens != 3 {
		t.Errorf("TTFT %v TTFA %v (answer %v), reasoning chunks %d, tokens %d (reported %v)",
			res.TTFT, res.TTFA, res.FirstAnswer, res.ReasoningChunks, res.ReasoningTokens, res.ReasoningReported)
	}
	// TTFT at the first reasoning token, TTFA at the first answer token
	// three decode steps later, the last token: each where the simulator
	// logged sending it. (TTFA − TTFT ≥ 2 of the client's own mean steps
	// failed when the client read the first token late.)
	checkRecord(t, srv, res, m.slack)

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

// TestClientAgainstSimulatorAPIs runs every protocol against the
// simulator's own endpoint: the Messages and Responses streams with and
// without reasoning and tool calls, embeddings, and an adapter.
func TestClientAgainstSimulatorAPIs(t *testing.T) {
	// Decode steps long enough that the first answer token is told from
	// the reasoning before it by the simulator's record; the Messages
	// thinking case (max_tokens above a budget of 1024) decodes fast.
	const step = 20 * time.Millisecond
	mod := func(step time.Duration) func(*sim.Config) {
		return func(cfg *sim.Config) {
			cfg.ReasoningTokens = 3
			cfg.Adapters = []sim.AdapterConfig{{Name: "sql-lora"}}
			cfg.DecodeBase = step
		}
	}
	timed, fast := startRecordedSim(t, mod(step)), startRecordedSim(t, mod(time.Millisecond))
	lat := simtest.WatchLateness(t)
	tools := []any{map[string]any{"name": "lookup", "description": "look up", "input_schema": map[string]any{"type": "object"}}}
	fnTools := []any{map[string]any{"type": "function", "name": "lookup", "parameters": map[string]any{"type": "object"}}}
	for _, tc := range []struct {
		name      string
		api       API
		model     string
		extra     map[string]any
		reasoning int
		tool      bool
		maxTokens int // 8 when 0
	}{
		{"messages", APIMessages, "sim-model", nil, 0, false, 0},
		// The API wants budget_tokens ≥ 1024 and below max_tokens.
		{"messages thinking", APIMessages, "sim-model", map[string]any{"thinking": map[string]any{"type": "enabled", "budget_tokens": 1024}}, 3, false, 1030},
		{"messages tool_use", APIMessages, "sim-model", map[string]any{"tools": tools, "tool_choice": map[string]any{"type": "any"}}, 0, true, 0},
		{"responses", APIResponses, "sim-model", map[string]any{"reasoning": map[string]any{"effort": "none"}}, 0, false, 0},
		{"responses reasoning", APIResponses, "sim-model", map[string]any{"reasoning": map[string]any{"effort": "medium"}}, 3, false, 0},
		{"responses function call", APIResponses, "sim-model", map[string]any{"reasoning": map[string]any{"effort": "none"}, "tools": fnTools, "tool_choice": "required"}, 0, true, 0},
		{"chat on an adapter", APIChat, "sql-lora", nil, 3, false, 0},
		{"messages on an adapter", APIMessages, "sql-lora", nil, 0, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := cmp.Or(tc.maxTokens, 8)
			srv := timed
			if n > 100 {
				srv = fast
			}
			req := simRequest(APIChat, n)
			req.API, req.Model, req.ExtraBody = tc.api, tc.model, tc.extra
			req.Messages = append([]Message{{Role: "system", Content: "be brief"}}, req.Messages...)
			// A minute: 1,030 streamed events under the race detector on a
			// loaded machine outlast the usual 10 s.
			c := newTestClient(t, srv.URL(), func(cfg *ClientConfig) { cfg.KeepText, cfg.Timeout = true, time.Minute })
			lat.Reset()
			res := do(t, c, req)
			slack := lat.Slack()
			expectOutcome(t, res, OutcomeSuccess, "")
			checkTimingInvariants(t, res)
			if res.Chunks != n || res.OutputTokens != n || !res.UsageReported || res.PromptTokens <= 0 || res.ResponseModel != tc.model {
				t.Errorf("chunks %d, output %d (reported %v), prompt %d, model %q", res.Chunks, res.OutputTokens, res.UsageReported, res.PromptTokens, res.ResponseModel)
			}
			if res.ReasoningChunks != tc.reasoning || res.ToolCall != tc.tool || !res.FirstAnswer {
				t.Errorf("reasoning chunks %d (want %d), tool call %v (want %v), answer %v", res.ReasoningChunks, tc.reasoning, res.ToolCall, tc.tool, res.FirstAnswer)
			}
			// TTFT, TTFA after the reasoning and the last token where the
			// simulator logged sending them. (TTFA > TTFT failed when the
			// client read the reasoning and the answer in one late read,
			// which stamps them alike, as it should.)
			checkRecord(t, srv, res, slack)
			if !tc.tool && strings.TrimSpace(res.Completion) == "" {
				t.Error("no answer text kept")
			}
		})
	}

	t.Run("embeddings", func(t *testing.T) {
		c := newTestClient(t, timed.URL(), nil)
		res := do(t, c, &Request{API: APIEmbeddings, Model: "sim-model", Inputs: []string{"the quick brown fox", "jumps over", "the lazy dog"}})
		expectOutcome(t, res, OutcomeSuccess, "")
		if res.PromptTokens <= 3 || !res.UsageReported || res.E2E <= 0 || res.FirstToken {
			t.Errorf("prompt %d (reported %v), E2E %v, first token %v", res.PromptTokens, res.UsageReported, res.E2E, res.FirstToken)
		}
		// The checks of every vector hold for what a server really writes:
		// floats and base64, at the dimensions asked for or not.
		for _, body := range []map[string]any{
			{"encoding_format": "base64"},
			{"dimensions": 64},
			{"dimensions": 64, "encoding_format": "base64"},
		} {
			res := do(t, c, &Request{API: APIEmbeddings, Model: "sim-model", Inputs: []string{"a b", "c"}, ExtraBody: body})
			if res.Outcome != OutcomeSuccess {
				t.Errorf("%v: %s %s %s", body, res.Outcome, res.ErrorType, res.Error)
			}
		}
	})
}

// TestClientMatchesSimulatorTiming: TTFT, TTFA (after four reasoning
// tokens) and the last token are where the simulator's request log says
// it sent them, and with per-chunk usage there is one inter-token gap per
// token, their median the simulator's mean step. Compared with the
// configured timing model instead, a busy machine failed it (TTFA − TTFT
// 64 ms for a 49 ms phase) because the simulator's own steps ran long.
func TestClientMatchesSimulatorTiming(t *testing.T) {
	const reasoning = 4
	const step = 30 * time.Millisecond
	def := sim.DefaultConfig()
	srv := startRecordedSim(t, func(cfg *sim.Config) {
		cfg.PrefillBase, cfg.PrefillPerToken = def.PrefillBase, def.PrefillPerToken
		cfg.DecodeBase, cfg.DecodePerSeq = step, 0
		cfg.ReasoningTokens = reasoning
	})
	req := simRequest(APIChat, 12)
	req.ExtraBody = map[string]any{"stream_options": map[string]any{"include_usage": true, "continuous_usage_stats": true}}
	// A first answer stamped a step early (at the last reasoning token)
	// always fails the check (the early slack is one wake-up); a step
	// late fails it whenever the late slack is under a step, as on an
	// idle machine. A slack above the reasoning phase is not judged.
	m := doTimed(t, simtest.WatchLateness(t), newTestClient(t, srv.URL(), nil), req, reasoning*step)
	res := m.res
	expectOutcome(t, res, OutcomeSuccess, "")
	checkTimingInvariants(t, res)
	if len(res.ITLs) != 11 || res.ReasoningChunks != reasoning || !res.FirstAnswer {
		t.Fatalf("%d ITLs for 12 tokens, %d reasoning chunks, answer %v", len(res.ITLs), res.ReasoningChunks, res.FirstAnswer)
	}
	e := srv.Entry(t, res.ResponseID)
	if err := simtest.Check(clientTiming(res), e, m.slack); err != nil {
		t.Error(err)
	}
	// Each gap is the server's plus the difference of two read delays,
	// each within the slack: so is the median, around the server's mean
	// step (its median, on a busy machine, within a wake-up of it).
	sorted := slices.Clone(res.ITLs)
	slices.Sort(sorted)
	med, tpot := sorted[len(sorted)/2], simtest.Seconds(*e.TPOTSeconds)
	if d := med - tpot; d < -(m.slack.Early+m.slack.Late) || d > m.slack.Early+m.slack.Late {
		t.Errorf("median ITL %v, the simulator's mean step %v (slack %v)", med, tpot, m.slack)
	}
	t.Logf("TTFA − TTFT %v (server %v), median ITL %v (server step %v), slack %v", res.TTFA-res.TTFT,
		simtest.Seconds(*e.TTFASeconds-*e.TTFTSeconds), med, tpot, m.slack)
}

// TestClientImagesAgainstSimulator: an image part reaches the simulator
// in every message-based API, which counts its tokens
// (ceil(w·h / image_token_pixels), 784 by default) in usage.
func TestClientImagesAgainstSimulator(t *testing.T) {
	base := startSim(t, nil)
	c := newTestClient(t, base, nil)
	rng := rand.New(rand.NewPCG(5, 6))
	for _, api := range []API{APIChat, APIResponses, APIMessages} {
		t.Run(string(api), func(t *testing.T) {
			plain := simRequest(APIChat, 2)
			plain.API = api
			without := do(t, c, plain)
			expectOutcome(t, without, OutcomeSuccess, "")
			for _, jpeg := range []bool{false, true} {
				withImage := simRequest(APIChat, 2)
				withImage.API = api
				withImage.Messages[0].Images = []Image{testImage(t, rng, 56, 56, jpeg), testImage(t, rng, 100, 50, jpeg)}
				res := do(t, c, withImage)
				expectOutcome(t, res, OutcomeSuccess, "")
				if d := res.PromptTokens - without.PromptTokens; d != 4+7 {
					t.Errorf("jpeg %v: the images added %d prompt tokens, want 4 + 7", jpeg, d)
				}
			}
		})
	}
}

// testImage is a w×h image of one random colour, as PNG or JPEG.
func testImage(t *testing.T, rng *rand.Rand, w, h int, asJPEG bool) Image {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	draw.Draw(img, img.Bounds(), &image.Uniform{color.RGBA{uint8(rng.Uint32()), uint8(rng.Uint32()), uint8(rng.Uint32()), 255}}, image.Point{}, draw.Src)
	var buf bytes.Buffer
	var err error
	mediaType := "image/png"
	if asJPEG {
		mediaType, err = "image/jpeg", jpeg.Encode(&buf, img, nil)
	} else {
		err = png.Encode(&buf, img)
	}
	if err != nil {
		t.Fatal(err)
	}
	return Image{MediaType: mediaType, Data: base64.StdEncoding.EncodeToString(buf.Bytes())}
}
