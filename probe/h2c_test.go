// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package probe_test

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/llmprobe/llmprobe/internal/h2test"
	"github.com/llmprobe/llmprobe/internal/simtest"
	"github.com/llmprobe/llmprobe/probe"
	"github.com/llmprobe/llmprobe/probe/wire"
	"github.com/llmprobe/llmprobe/sim"
)

// TestEngineSpeaksHTTPVersion: against one simulator port, a target with
// http_version "2" on an http:// URL speaks h2c and one without speaks
// HTTP/1.1, which the engine's status says (the protocol of the last
// response, the open connections) and the simulator's request log
// confirms request by request.
func TestEngineSpeaksHTTPVersion(t *testing.T) {
	simCfg := sim.DefaultConfig()
	simCfg.ZeroLatency = true
	simCfg.EOSProbability = 0
	srv := simtest.Start(t, simCfg)
	cfg := loadConfig(t, `
global: {warmup: 0s, seed: 7}
workloads:
  w:
    classes:
      - {name: c, prompt_tokens: 16, output_tokens: 4}
targets:
  - {name: h1, url: %[1]s, model: sim-model, workload: w, arrival: {process: constant, rate: 20}}
  - {name: h2, url: %[1]s, model: sim-model, workload: w, arrival: {process: constant, rate: 20}, http_version: "2"}
`, srv.URL())
	rec := newRecorder()
	e := probe.NewEngine(probe.Options{Observer: rec, Logger: slog.New(slog.DiscardHandler)})
	if err := e.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"h1": "HTTP/1.1", "h2": "HTTP/2.0"}
	deadline := time.Now().Add(30 * time.Second)
	var st []probe.TargetStatus
	for {
		st = e.Status()
		ready := len(st) == 2
		for _, s := range st {
			ready = ready && s.Outcomes[wire.OutcomeSuccess] >= 5 && s.Protocol != ""
		}
		if ready || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, s := range st {
		if s.Protocol != want[s.Name] || s.Connections < 1 {
			t.Errorf("%s: protocol %q with %d connections open, want %s over at least one", s.Name, s.Protocol, s.Connections, want[s.Name])
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := e.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	for name, proto := range want {
		results := rec.byTarget(name)
		if len(results) < 5 {
			t.Fatalf("%s: %d results", name, len(results))
		}
		for _, r := range results[:5] {
			if r.Outcome != wire.OutcomeSuccess || r.Proto != proto {
				t.Fatalf("%s: %s/%s %q over %q", name, r.Outcome, r.ErrorType, r.Error, r.Proto)
			}
			if e := srv.Entry(t, r.ResponseID); e.Proto != proto {
				t.Errorf("%s: the simulator logged %s over %q, want %s", name, r.ResponseID, e.Proto, proto)
			}
		}
	}
}

// TestTargetClientHTTPVersionOverTLS: over TLS, http_version "1.1" is
// HTTP/1.1 although the server offers HTTP/2, "2" is HTTP/2 by ALPN, and
// a target without the key keeps what enable_http2 said before it
// existed (prometheus/common's default: HTTP/2 when offered; false:
// HTTP/1.1). The server is the simulator's handler under httptest's TLS.
func TestTargetClientHTTPVersionOverTLS(t *testing.T) {
	simCfg := sim.DefaultConfig()
	simCfg.ZeroLatency = true
	simCfg.EOSProbability = 0
	s, _ := simtest.Listen(t, simCfg)
	tlsSrv := httptest.NewUnstartedServer(s.Handler())
	tlsSrv.EnableHTTP2 = true
	tlsSrv.StartTLS()
	defer tlsSrv.Close()
	for _, tc := range []struct{ name, lines, want string }{
		{"unset", "", "HTTP/2.0"},
		{"unset without enable_http2", "    http_client_config: {enable_http2: false, tls_config: {insecure_skip_verify: true}}\n", "HTTP/1.1"},
		{"1.1", "    http_version: \"1.1\"\n", "HTTP/1.1"},
		{"2", "    http_version: \"2\"\n", "HTTP/2.0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lines := tc.lines
			if !strings.Contains(lines, "http_client_config") {
				lines += "    http_client_config: {tls_config: {insecure_skip_verify: true}}\n"
			}
			cfg := loadConfig(t, `
workloads:
  w:
    classes: [{name: c, prompt_tokens: 16, output_tokens: 4}]
targets:
  - name: tls
    url: %s/v1
    model: sim-model
    workload: w
    arrival: {rate: 1}
`+lines, tlsSrv.URL)
			client, hc, err := probe.NewTargetClient(cfg.Targets[0], probe.ClientOptions{Timeout: 30 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer hc.CloseIdleConnections()
			res := &wire.Result{}
			client.Do(context.Background(), &wire.Request{API: wire.APIChat, Model: "sim-model", MaxTokens: 4,
				Messages: []wire.Message{{Role: "user", Content: "hello"}}}, res)
			if res.Outcome != wire.OutcomeSuccess || res.Proto != tc.want {
				t.Errorf("%s/%s %q over %q, want success over %s", res.Outcome, res.ErrorType, res.Error, res.Proto, tc.want)
			}
		})
	}
}

// TestEngineRefusedStreamsHoldNoSlot: against a server that refuses
// every HTTP/2 stream (REFUSED_STREAM), over h2c and over TLS, each
// request ends at once as stream_error refused_stream after one counted
// re-send, and gives its in-flight slot back: with max_inflight 1 and a
// 60 s request timeout, ten requests end one after the other within a
// few seconds (a request that held its slot until the timeout would let
// none of the others be sent).
func TestEngineRefusedStreamsHoldNoSlot(t *testing.T) {
	h2c := h2test.ResetEveryStream(t, http2.ErrCodeRefusedStream, false)
	overTLS := h2test.ResetEveryStream(t, http2.ErrCodeRefusedStream, true)
	cfg := loadConfig(t, `
global: {warmup: 0s, seed: 7, request_timeout: 60s}
workloads:
  w:
    classes: [{name: c, prompt_tokens: 16, output_tokens: 4}]
targets:
  - {name: h2c, url: %s/v1, model: m, workload: w, arrival: {process: constant, rate: 10}, http_version: "2", max_inflight: 1}
  - {name: tls, url: %s/v1, model: m, workload: w, arrival: {process: constant, rate: 10}, max_inflight: 1,
     http_client_config: {tls_config: {insecure_skip_verify: true}}}
`, h2c.URL, overTLS.URL)
	rec := newRecorder()
	e := probe.NewEngine(probe.Options{Observer: rec, Logger: slog.New(slog.DiscardHandler)})
	if err := e.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	const want = 10
	for _, name := range []string{"h2c", "tls"} {
		st := waitTarget(t, e, name, "ten refused requests", 20*time.Second, func(s probe.TargetStatus) bool {
			return s.Outcomes[wire.OutcomeStreamError] >= want
		})
		t.Logf("%s: %d ended, %d in flight, dropped %v", name, st.Outcomes[wire.OutcomeStreamError], st.Inflight, st.Dropped)
	}
	shutdown(t, e)
	for _, name := range []string{"h2c", "tls"} {
		results := rec.byTarget(name)
		if len(results) < want {
			t.Fatalf("%s: %d results", name, len(results))
		}
		for _, r := range results {
			if r.Outcome != wire.OutcomeStreamError || r.ErrorType != wire.ErrorTypeRefusedStream || r.Retries != 1 {
				t.Fatalf("%s: %s/%s %q with %d retries, want stream_error/%s with 1", name, r.Outcome, r.ErrorType, r.Error, r.Retries, wire.ErrorTypeRefusedStream)
			}
		}
	}
}
