// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package wire

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/llmprobe/llmprobe/sim"
)

// What a response says of the serving stack (identity.go): the
// system_fingerprint of chat and completions chunks and the Server
// header, cleaned.

// TestIdentityFromSimulator: the simulator's fingerprint and Server header
// reach the result for every streamed API that carries them; the
// Responses and Messages APIs carry no fingerprint, the header still.
func TestIdentityFromSimulator(t *testing.T) {
	base := startSim(t, func(c *sim.Config) {
		c.Identity = sim.Identity{Fingerprint: "fp-a", Version: "0.1.0", Server: "llmprobe-sim"}
	})
	c := newTestClient(t, base, nil)
	for _, tc := range []struct {
		api         API
		fingerprint string
	}{{APIChat, "fp-a"}, {APICompletions, "fp-a"}, {APIResponses, ""}, {APIMessages, ""}} {
		req := simRequest(tc.api, 4)
		if tc.api == APIResponses || tc.api == APIMessages {
			req.Messages, req.Prompt = []Message{{Role: "user", Content: "hello there"}}, ""
		}
		res := do(t, c, req)
		expectOutcome(t, res, OutcomeSuccess, "")
		if res.SystemFingerprint != tc.fingerprint || res.Server != "llmprobe-sim" || res.ResponseModel != "sim-model" {
			t.Errorf("%s: fingerprint %q, Server %q, model %q; want %q, llmprobe-sim, sim-model", tc.api, res.SystemFingerprint, res.Server, res.ResponseModel, tc.fingerprint)
		}
	}
	// An error answer carries the header too (the result records it; the
	// engine judges identity on successes only).
	res := do(t, c, &Request{API: APIChat, Model: "no-such-model", Messages: []Message{{Role: "user", Content: "x"}}, MaxTokens: 2})
	if res.Outcome != OutcomeHTTPError || res.Server != "llmprobe-sim" || res.SystemFingerprint != "" {
		t.Errorf("404: outcome %s, Server %q, fingerprint %q", res.Outcome, res.Server, res.SystemFingerprint)
	}
	// A simulator without an identity sends neither.
	plain := newTestClient(t, startSim(t, nil), nil)
	if res := do(t, plain, simRequest(APIChat, 4)); res.SystemFingerprint != "" || res.Server != "" {
		t.Errorf("no identity: fingerprint %q, Server %q", res.SystemFingerprint, res.Server)
	}
}

// TestIdentityFromRecordedStreams: the recorded streams of real servers
// (testdata/servers) name their model; none of them carries a
// system_fingerprint (llm-d-inference-sim sends none, llama.cpp's
// Messages API has no such field), and the replay sends no Server header:
// nothing is made up.
func TestIdentityFromRecordedStreams(t *testing.T) {
	for _, tc := range []struct {
		file  string
		req   *Request
		model string
	}{
		{"chat-cache-threshold.sse", chatRequest(), "tiny-sim"},
		{"responses-function-call.sse", responsesRequest(), "tiny-sim"},
		{"messages-error-after-deltas.sse", messagesRequest(), "tiny-random"},
	} {
		srv := replayServer(t, tc.file)
		res := do(t, newTestClient(t, srv.URL+"/v1", nil), tc.req)
		if res.ResponseModel != tc.model || res.SystemFingerprint != "" || res.Server != "" {
			t.Errorf("%s: model %q, fingerprint %q, Server %q; want %q and none", tc.file, res.ResponseModel, res.SystemFingerprint, res.Server, tc.model)
		}
	}
}

// checkIdentityValue fails unless v is fit for a label value: at most
// MaxIdentityValue bytes and an ellipsis, valid UTF-8, no control
// character, none of the secrets or the prompt.
func checkIdentityValue(t *testing.T, what, v string, forbidden ...string) {
	t.Helper()
	if len(strings.TrimSuffix(v, "…")) > MaxIdentityValue || !utf8.ValidString(v) || strings.ContainsFunc(v, unicode.IsControl) {
		t.Errorf("%s %q: longer than %d bytes, invalid UTF-8 or a control character", what, v, MaxIdentityValue)
	}
	for _, f := range forbidden {
		if strings.Contains(v, f) || (len(f) > 8 && strings.Contains(v, f[:8])) {
			t.Errorf("%s %q contains %q", what, v, f)
		}
	}
}

// TestIdentityHostileValues: a server whose fingerprint is huge or holds
// control characters, and whose Server header echoes the request's
// bearer token, an API key or the prompt, leaves only cleaned, cut values
// in the result, on a success and on an error answer alike.
func TestIdentityHostileValues(t *testing.T) {
	const prompt = "my private question about the quarterly numbers"
	for _, tc := range []struct {
		name, server, fingerprint string
		status                    int
		wantServer                string // "" when only checked
	}{
		{"secret in Server", "gateway/1.0 (token " + hostileBearer + ")", "fp-ok", 200, "gateway/1.0 (token [secret])"},
		{"api key in Server", "proxy " + hostileAPIKey, "fp-ok", 200, "proxy [secret]"},
		{"prompt echo in Server", "echo: " + prompt, "fp-ok", 200, "echo: [prompt redacted]"},
		{"huge fingerprint", "s", strings.Repeat("fingerprint-", 10000), 200, "s"},
		{"control characters", "a\tb\u0085c", "fp\\u0000\\n\\u001b[31mred", 200, "a b c"},
		{"secret cut at the limit", strings.Repeat("x", MaxIdentityValue-6) + hostileBearer, "fp-ok", 200, ""},
		{"error answer", "edge " + hostileBearer, "", 503, "edge [secret]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				w.Header()["Server"] = []string{tc.server}
				if tc.status != 200 {
					w.WriteHeader(tc.status)
					return
				}
				w.Header().Set("Content-Type", "text/event-stream")
				fp := `,"system_fingerprint":"` + tc.fingerprint + `"`
				io.WriteString(w, sseBody(
					strings.Replace(chatContent("hi"), `"choices"`, fp[1:]+`,"choices"`, 1),
					strings.Replace(chatDelta("content", "!", "stop", ""), `"choices"`, fp[1:]+`,"choices"`, 1),
					"[DONE]"))
			}))
			defer srv.Close()
			c := hostileClient(t, srv.URL, hostileHTTPConfig(false))
			var res Result
			c.Do(context.Background(), hostileRequest(prompt, 8), &res)
			checkIdentityValue(t, "Server", res.Server, hostileBearer, hostileAPIKey, prompt)
			checkIdentityValue(t, "fingerprint", res.SystemFingerprint, hostileBearer, hostileAPIKey, prompt)
			if tc.wantServer != "" && res.Server != tc.wantServer {
				t.Errorf("Server %q, want %q", res.Server, tc.wantServer)
			}
			if tc.status == 200 && res.SystemFingerprint == "" {
				t.Errorf("fingerprint dropped entirely (outcome %s %s)", res.Outcome, res.Error)
			}
		})
	}
}

// TestIdentityCleanedOnce: the same raw values are cleaned once and kept;
// a new value is cleaned anew.
func TestIdentityCleanedOnce(t *testing.T) {
	var ic identityCleaner
	forms := NewRedactor(hostileHTTPConfig(false)).requestSet([2]string{})
	req := hostileRequest("hello there", 4)
	res := &Result{SystemFingerprint: "fp-1"}
	ic.clean(res, "uvicorn", forms, req)
	if res.Server != "uvicorn" || res.SystemFingerprint != "fp-1" {
		t.Fatalf("cleaned %q %q", res.Server, res.SystemFingerprint)
	}
	allocs := testing.AllocsPerRun(100, func() {
		res.SystemFingerprint = "fp-1"
		ic.clean(res, "uvicorn", forms, req)
	})
	if allocs != 0 {
		t.Errorf("cleaning unchanged values allocates %v times", allocs)
	}
	res.SystemFingerprint = "fp-2"
	ic.clean(res, "nginx", forms, req)
	if res.Server != "nginx" || res.SystemFingerprint != "fp-2" {
		t.Errorf("new values: %q %q", res.Server, res.SystemFingerprint)
	}
}
