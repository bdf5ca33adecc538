// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package wire

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Streams recorded from real servers (testdata/servers/README.md), replayed
// byte for byte from a loopback server: each was a case the decoders got
// wrong.

// replayServer serves the recorded file on every request, one write and
// flush per event, as the server sent it; the writes add up to the file
// exactly.
func replayServer(t *testing.T, name string) *httptest.Server {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "servers", name))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		f := w.(http.Flusher)
		f.Flush()
		var sent int
		for rest := raw; len(rest) > 0; {
			n := len(rest)
			if i := bytes.Index(rest, []byte("\n\n")); i >= 0 {
				n = i + 2
			}
			if _, err := w.Write(rest[:n]); err != nil {
				return
			}
			f.Flush()
			sent += n
			rest = rest[n:]
			time.Sleep(time.Millisecond) // events arrive apart, as recorded
		}
		if sent != len(raw) {
			panic("replay lost bytes")
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestRecordedResponsesFunctionCall: a Responses answer that is a function
// call finishes as tool_calls (docs/config.md), as the server counted it,
// not stop.
func TestRecordedResponsesFunctionCall(t *testing.T) {
	srv := replayServer(t, "responses-function-call.sse")
	c := newTestClient(t, srv.URL+"/v1", nil)
	res := do(t, c, responsesRequest())
	expectOutcome(t, res, OutcomeSuccess, "")
	checkTimingInvariants(t, res)
	if res.FinishReason != "tool_calls" || FinishReasonLabel(res.FinishReason) != "tool_calls" {
		t.Errorf("finish reason %q, want tool_calls", res.FinishReason)
	}
	if !res.ToolCall || !res.FirstAnswer || res.Chunks != 9 {
		t.Errorf("tool call %v, answer %v, chunks %d; want a tool call of 9 argument fragments", res.ToolCall, res.FirstAnswer, res.Chunks)
	}
	if !res.UsageReported || res.OutputTokens != 12 || res.PromptTokens != 7 {
		t.Errorf("usage reported %v, output %d, prompt %d; want the server's 12 and 7", res.UsageReported, res.OutputTokens, res.PromptTokens)
	}
	if res.ResponseID != "resp_5d217a73-df03-5583-8927-2c62618d8755" || res.ResponseModel != "tiny-sim" {
		t.Errorf("id %q, model %q", res.ResponseID, res.ResponseModel)
	}
}

// TestRecordedMessagesErrorAfterDeltas: message_start's output_tokens 0 is
// a placeholder, not the server's count: a stream that breaks after 13
// text deltas counts 13 estimated output tokens, and the error event keeps
// the server's own message.
func TestRecordedMessagesErrorAfterDeltas(t *testing.T) {
	srv := replayServer(t, "messages-error-after-deltas.sse")
	c := newTestClient(t, srv.URL+"/v1", nil)
	res := do(t, c, messagesRequest())
	expectOutcome(t, res, OutcomeInvalidResponse, "error_event")
	const msg = "The model produced output that does not match the expected peg-native format"
	if !strings.Contains(res.Error, msg) {
		t.Errorf("error %q does not carry the server's message %q", res.Error, msg)
	}
	if res.Chunks != 13 || !res.FirstToken {
		t.Errorf("chunks %d, first token %v; want 13 text deltas", res.Chunks, res.FirstToken)
	}
	if res.UsageReported || res.OutputTokens != 13 {
		t.Errorf("usage reported %v, output tokens %d; want 13 estimated (no final usage arrived)", res.UsageReported, res.OutputTokens)
	}
	if res.PromptTokens != 13 || !res.CachedTokensReported || res.CachedTokens != 7 {
		t.Errorf("prompt %d, cached %d (%v); want message_start's 6+7 and 7", res.PromptTokens, res.CachedTokens, res.CachedTokensReported)
	}
	if res.ResponseModel != "tiny-random" {
		t.Errorf("model %q", res.ResponseModel)
	}
}

// TestRecordedChatCacheThreshold: a well-formed, deliberate answer with
// an unknown finish reason and no text is a success counted as reason
// "other", not an invalid response.
func TestRecordedChatCacheThreshold(t *testing.T) {
	srv := replayServer(t, "chat-cache-threshold.sse")
	c := newTestClient(t, srv.URL+"/v1", nil)
	res := do(t, c, chatRequest())
	expectOutcome(t, res, OutcomeSuccess, "")
	if res.FinishReason != "cache_threshold" || FinishReasonLabel(res.FinishReason) != "other" {
		t.Errorf("finish reason %q (label %q)", res.FinishReason, FinishReasonLabel(res.FinishReason))
	}
	if res.FirstToken || res.Chunks != 0 || res.TTFT != 0 || res.E2E <= 0 {
		t.Errorf("first token %v, chunks %d, TTFT %v, E2E %v", res.FirstToken, res.Chunks, res.TTFT, res.E2E)
	}
	if !res.UsageReported || res.OutputTokens != 0 || res.PromptTokens != 10 || res.CachedTokensReported {
		t.Errorf("usage reported %v, output %d, prompt %d, cached reported %v", res.UsageReported, res.OutputTokens, res.PromptTokens, res.CachedTokensReported)
	}
}
