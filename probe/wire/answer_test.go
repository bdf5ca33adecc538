// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package wire

import (
	"fmt"
	"testing"
	"time"

	"github.com/llmprobe/llmprobe/internal/simtest"
)

// Reasoning models, tool calls and per-chunk usage: what the client takes
// from a stream beyond TTFT.

func reasoningUsage(prompt, completion, reasoning int) string {
	return fmt.Sprintf(`{"id":"%s","object":"chat.completion.chunk","created":1718000000,"model":"%s","choices":[],"usage":{"prompt_tokens":%d,"total_tokens":%d,"completion_tokens":%d,"completion_tokens_details":{"reasoning_tokens":%d}}}`,
		fxID, fxModel, prompt, prompt+completion, completion, reasoning)
}

func toolCallDelta(header bool, name, args, finish string) string {
	f := "null"
	if finish != "" {
		f = `"` + finish + `"`
	}
	call := `{"index":0,"function":{"arguments":` + mustJSON(args) + `}}`
	if header {
		call = `{"index":0,"id":"call_1","type":"function","function":{"name":` + mustJSON(name) + `,"arguments":` + mustJSON(args) + `}}`
	}
	return `{"id":"` + fxID + `","object":"chat.completion.chunk","created":1718000000,"model":"` + fxModel + `","choices":[{"index":0,"delta":{"tool_calls":[` + call + `]},"logprobs":null,"finish_reason":` + f + `}]}`
}

// TestTimeToFirstAnswer: TTFT is the first generated token, reasoning
// included (docs/design.md); TTFA is the first token of the answer, after
// the reasoning, whichever field spelling the server uses. Reasoning
// tokens come from usage.completion_tokens_details.
func TestTimeToFirstAnswer(t *testing.T) {
	for _, field := range []string{"reasoning_content", "reasoning"} {
		t.Run(field, func(t *testing.T) {
			thought := make([]streamStep, 0, 8)
			thought = append(thought, steps(0, chatRole())...)
			for range 3 {
				thought = append(thought, steps(15*time.Millisecond, chatDelta(field, "hmm ", "", ""))...)
			}
			thought = append(thought, steps(15*time.Millisecond, chatContent("42"), chatDelta("content", " it is", "stop", ""))...)
			thought = append(thought, steps(0, reasoningUsage(5, 5, 3), "[DONE]")...)
			url, times := timedFixture(t, "text/event-stream", thought)
			c := newTestClient(t, url+"/v1", func(cfg *ClientConfig) { cfg.KeepText = true })
			lat := simtest.WatchLateness(t)
			res := do(t, c, chatRequest())
			slack := lat.Slack()
			expectOutcome(t, res, OutcomeSuccess, "")
			checkTimingInvariants(t, res)
			if !res.FirstToken || !res.FirstAnswer {
				t.Fatalf("first token %v, first answer %v", res.FirstToken, res.FirstAnswer)
			}
			if res.Chunks != 5 || res.ReasoningChunks != 3 || res.Completion != "42 it is" {
				t.Fatalf("chunks %d, reasoning chunks %d, completion %q", res.Chunks, res.ReasoningChunks, res.Completion)
			}
			// TTFT at the first reasoning delta, TTFA at "42" three 15 ms
			// steps later, as the server wrote them (TTFA − TTFT ≥ 40 ms
			// failed when the client read the first delta late).
			checkEvents(t, res, times, []int{1, 2, 3, 4, 5}, 4, slack)
			if !res.ReasoningReported || res.ReasoningTokens != 3 || res.OutputTokens != 5 {
				t.Errorf("reasoning tokens %d (reported %v), output %d", res.ReasoningTokens, res.ReasoningReported, res.OutputTokens)
			}
		})
	}

	t.Run("no reasoning", func(t *testing.T) {
		srv, _ := fixtureServer(t, "text/event-stream", steps(time.Millisecond,
			chatRole(), chatContent("a"), chatDelta("content", "b", "stop", ""), usageChunk(5, 2, -1), "[DONE]"))
		res := do(t, newTestClient(t, srv.URL+"/v1", nil), chatRequest())
		expectOutcome(t, res, OutcomeSuccess, "")
		if !res.FirstAnswer || res.TTFA != res.TTFT || res.ReasoningChunks != 0 || res.ReasoningReported {
			t.Errorf("TTFA %v TTFT %v reasoning chunks %d reported %v", res.TTFA, res.TTFT, res.ReasoningChunks, res.ReasoningReported)
		}
	})

	t.Run("reasoning only", func(t *testing.T) {
		// max_tokens ran out while thinking: tokens came, no answer.
		srv, _ := fixtureServer(t, "text/event-stream", steps(time.Millisecond,
			chatRole(), chatDelta("reasoning", "hmm", "", ""), chatDelta("reasoning", "hmm", "length", ""), reasoningUsage(5, 2, 2), "[DONE]"))
		res := do(t, newTestClient(t, srv.URL+"/v1", nil), chatRequest())
		expectOutcome(t, res, OutcomeSuccess, "")
		if !res.FirstToken || res.FirstAnswer || res.TTFA != 0 || res.ReasoningChunks != 2 || res.ReasoningTokens != 2 {
			t.Errorf("first token %v, first answer %v (TTFA %v), reasoning chunks %d, tokens %d",
				res.FirstToken, res.FirstAnswer, res.TTFA, res.ReasoningChunks, res.ReasoningTokens)
		}
	})
}

// TestToolCallFragments: delta.tool_calls argument fragments are
// generated tokens (TTFT, ITL, chunks) and the answer; the header naming
// the function is not (servers do not count it); finish_reason tool_calls
// is a success.
func TestToolCallFragments(t *testing.T) {
	srv, _ := fixtureServer(t, "text/event-stream", steps(2*time.Millisecond,
		chatRole(),
		toolCallDelta(true, "get_weather", "", ""),
		toolCallDelta(false, "", `{"city": `, ""),
		toolCallDelta(false, "", `"Paris"}`, ""),
		toolCallDelta(false, "", "", "tool_calls"), // an empty fragment is no token
		usageChunk(20, 6, -1), "[DONE]"))
	c := newTestClient(t, srv.URL+"/v1", func(cfg *ClientConfig) { cfg.KeepText = true })
	res := do(t, c, chatRequest())
	expectOutcome(t, res, OutcomeSuccess, "")
	checkTimingInvariants(t, res)
	if res.Chunks != 2 || !res.ToolCall || !res.FirstAnswer || res.TTFA != res.TTFT || res.FinishReason != "tool_calls" {
		t.Errorf("chunks %d tool call %v first answer %v TTFA %v TTFT %v finish %q",
			res.Chunks, res.ToolCall, res.FirstAnswer, res.TTFA, res.TTFT, res.FinishReason)
	}
	if res.OutputTokens != 6 || len(res.ITLs) != 1 {
		t.Errorf("output tokens %d, ITLs %d", res.OutputTokens, len(res.ITLs))
	}
	if res.Completion != "" {
		t.Errorf("tool-call arguments kept as completion text: %q", res.Completion)
	}

	// A tool_calls value that is not a list, and elements without a
	// function, are no tokens; malformed JSON inside is still malformed.
	srv2, _ := fixtureServer(t, "text/event-stream", steps(0,
		chatDelta("tool_calls", "x", "", ""),
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0},7,null]},"finish_reason":null}]}`,
		chatContent("ok"), chatDelta("content", "", "stop", ""), "[DONE]"))
	res = do(t, newTestClient(t, srv2.URL+"/v1", nil), chatRequest())
	expectOutcome(t, res, OutcomeSuccess, "")
	if res.Chunks != 1 || res.ToolCall {
		t.Errorf("chunks %d tool call %v for odd tool_calls values", res.Chunks, res.ToolCall)
	}
	srv3, _ := fixtureServer(t, "text/event-stream", steps(0,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"function":{"arguments":"{"}]}}]}`, "[DONE]"))
	res = do(t, newTestClient(t, srv3.URL+"/v1", nil), chatRequest())
	expectOutcome(t, res, OutcomeInvalidResponse, "malformed_event")
}

// TestPerTokenITL: with usage in every chunk, a chunk that carries k
// tokens is k gaps of gap/k, adding up to the chunk's gap; a server whose
// counts jump absurdly is bounded like any flood.
func TestPerTokenITL(t *testing.T) {
	u := func(n int) string {
		return fmt.Sprintf(`{"prompt_tokens":8,"total_tokens":%d,"completion_tokens":%d}`, 8+n, n)
	}
	url, times := timedFixture(t, "text/event-stream", steps(30*time.Millisecond,
		chatDelta("role", "assistant", "", u(0)),
		chatDelta("content", "a", "", u(1)),
		chatDelta("content", "b c", "", u(3)),
		chatDelta("content", "d e f", "stop", u(6)),
		"[DONE]"))
	lat := simtest.WatchLateness(t)
	res := do(t, newTestClient(t, url+"/v1", nil), chatRequest())
	slack := lat.Slack()
	expectOutcome(t, res, OutcomeSuccess, "")
	checkTimingInvariants(t, res)
	if res.Chunks != 3 || res.OutputTokens != 6 || len(res.ITLs) != 5 {
		t.Fatalf("chunks %d, tokens %d, ITLs %d (want 2 + 3 per-token gaps)", res.Chunks, res.OutputTokens, len(res.ITLs))
	}
	for i := range 2 {
		if d := res.ITLs[i] - res.ITLs[1-i]; d > time.Nanosecond || d < -time.Nanosecond {
			t.Errorf("the two gaps of one chunk differ: %v", res.ITLs[:2])
		}
	}
	// The 2-token chunk's gaps add up to the gap between the chunks as
	// the server wrote them, give or take how late the client read either
	// (a window of 2–8 ms around half of a 10 ms pause failed when one
	// read was late); its first token is never stamped before it was
	// written.
	if got, wrote := 2*res.ITLs[0], times.at(t, 2)-times.at(t, 1); got < wrote-slack.Late || got > wrote+slack.Late {
		t.Errorf("a 2-token chunk %v after the last gives 2 gaps adding up to that (slack %v), got 2 × %v", wrote, slack.Late, res.ITLs[0])
	}
	if at := times.at(t, 1); res.TTFT < at || res.TTFT > at+slack.Late {
		t.Errorf("TTFT %v, the first content was written at %v (slack %v)", res.TTFT, at, slack.Late)
	}

	// Without per-chunk usage the same stream gives one gap per chunk.
	srv2, _ := fixtureServer(t, "text/event-stream", steps(time.Millisecond,
		chatRole(), chatContent("a"), chatContent("b c"), chatDelta("content", "d e f", "stop", ""), usageChunk(8, 6, -1), "[DONE]"))
	res = do(t, newTestClient(t, srv2.URL+"/v1", nil), chatRequest())
	expectOutcome(t, res, OutcomeSuccess, "")
	if len(res.ITLs) != 2 {
		t.Errorf("%d ITLs without per-chunk usage, want 2", len(res.ITLs))
	}

	// A count jumping by a billion: the gaps are bounded by what
	// max_tokens allows (responseBounds), not by the server's claim.
	req := chatRequest()
	req.MaxTokens = 4
	maxEvents, _, _ := responseBounds(req.MaxTokens)
	srv3, _ := fixtureServer(t, "text/event-stream", steps(0,
		chatDelta("content", "a", "", u(1)),
		chatDelta("content", "b", "stop", u(1_000_000_000)),
		"[DONE]"))
	res = do(t, newTestClient(t, srv3.URL+"/v1", nil), req)
	if len(res.ITLs) > maxEvents {
		t.Errorf("%d ITLs from a count jump; the bound is %d", len(res.ITLs), maxEvents)
	}
	if res.Anomalies&AnomalyOutputExceedsMaxTokens == 0 {
		t.Errorf("1e9 output tokens for max_tokens 4 is not flagged: anomalies %v", res.Anomalies)
	}
}

// TestLlamaCppStream: llama.cpp's llama-server opens with a role delta
// whose content is null (no token), ends with an empty delta carrying the
// finish reason, and sends usage with its own timings object.
func TestLlamaCppStream(t *testing.T) {
	chunk := func(delta, finish string) string {
		return `{"choices":[{"finish_reason":` + finish + `,"index":0,"delta":` + delta + `}],"created":1748000000,"id":"chatcmpl-Q7s","model":"qwen2.5-7b","system_fingerprint":"b5466-2bdb83a3","object":"chat.completion.chunk"}`
	}
	srv, _ := fixtureServer(t, "text/event-stream", steps(2*time.Millisecond,
		chunk(`{"role":"assistant","content":null}`, "null"),
		chunk(`{"content":"Hel"}`, "null"),
		chunk(`{"content":"lo"}`, "null"),
		chunk(`{}`, `"stop"`),
		`{"choices":[],"created":1748000000,"id":"chatcmpl-Q7s","model":"qwen2.5-7b","object":"chat.completion.chunk","usage":{"completion_tokens":2,"prompt_tokens":14,"total_tokens":16},"timings":{"prompt_n":14,"prompt_ms":21.5,"predicted_n":2,"predicted_ms":30.1}}`,
		"[DONE]"))
	c := newTestClient(t, srv.URL+"/v1", func(cfg *ClientConfig) { cfg.KeepText = true })
	res := do(t, c, chatRequest())
	expectOutcome(t, res, OutcomeSuccess, "")
	checkTimingInvariants(t, res)
	if res.Chunks != 2 || res.Completion != "Hello" || res.FinishReason != "stop" || res.OutputTokens != 2 || res.PromptTokens != 14 || res.TTFA != res.TTFT {
		t.Errorf("chunks %d completion %q finish %q output %d prompt %d TTFA %v TTFT %v",
			res.Chunks, res.Completion, res.FinishReason, res.OutputTokens, res.PromptTokens, res.TTFA, res.TTFT)
	}
}
