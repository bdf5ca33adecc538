// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/exporter-toolkit/web"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/llmprobe/llmprobe/internal/otlptest"
	"github.com/llmprobe/llmprobe/internal/proctest"
	"github.com/llmprobe/llmprobe/sim"
)

// The tests here check the commands' tracing wiring: the OTEL_*
// environment enables it, the daemon and `llmprobe sim` trace as two
// services, and their spans join in one trace. (The spans' content, the
// exemplars and Prometheus are covered by exporter's end-to-end test.)

// tracingEnv points the OTEL_* environment at the sink, and clears what
// could change the outcome.
func tracingEnv(t *testing.T, sink *otlptest.Receiver) {
	for _, k := range []string{"OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_PROTOCOL",
		"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES", "OTEL_TRACES_SAMPLER", "OTEL_TRACES_SAMPLER_ARG",
		"OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS", "OTEL_BSP_MAX_QUEUE_SIZE", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE"} {
		t.Setenv(k, "")
	}
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+sink.Addr)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
}

// TestRunAndSimTrace runs `llmprobe sim` and `llmprobe run` (their run
// functions, in this process) with tracing enabled by the environment.
func TestRunAndSimTrace(t *testing.T) {
	sink := otlptest.Start(t)
	tracingEnv(t, sink)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	simCfg := sim.DefaultConfig()
	simCfg.ZeroLatency = true
	simAddr := proctest.FreeAddr(t)
	simDone := make(chan error, 1)
	go func() { simDone <- runSim(ctx, logger, simAddr, simCfg) }()
	waitHTTP(t, "http://"+simAddr+"/health")

	path := filepath.Join(t.TempDir(), "llmprobe.yml")
	if err := os.WriteFile(path, []byte(fmt.Sprintf(`
global: {warmup: 0s, shutdown_grace_period: 5s}
workloads:
  w:
    classes:
      - {name: chat, prompt_tokens: 32, output_tokens: 4}
targets:
  - {name: sim, url: "http://%s/v1", model: sim-model, workload: w, arrival: {process: constant, rate: 20}}
`, simAddr)), 0o644); err != nil {
		t.Fatal(err)
	}
	listen, webConfig, systemd := []string{proctest.FreeAddr(t)}, "", false
	runCtx, stopRun := context.WithCancel(ctx)
	runDone := make(chan error, 1)
	go func() {
		runDone <- runDaemon(runCtx, logger, &runOptions{configFile: path, replicas: 1,
			web: &web.FlagConfig{WebListenAddresses: &listen, WebConfigFile: &webConfig, WebSystemdSocket: &systemd}})
	}()
	waitHTTP(t, "http://"+listen[0]+"/-/ready")
	time.Sleep(1500 * time.Millisecond)
	resp, err := http.Get("http://" + listen[0] + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "llmprobe_trace_spans_exported_total") {
		t.Error("/metrics lacks the tracing pipeline's metrics")
	}

	stopRun() // the daemon flushes its spans on the way out
	waitDone(t, "llmprobe run", runDone)
	cancel()
	waitDone(t, "llmprobe sim", simDone)

	clients := map[string]bool{}
	var servers []otlptest.Span
	for _, s := range sink.Spans() {
		switch {
		case s.Service == "llmprobe" && s.Span.GetKind() == tracepb.Span_SPAN_KIND_CLIENT:
			clients[hex.EncodeToString(s.Span.GetSpanId())] = true
		case s.Service == "llmprobe-sim" && s.Span.GetKind() == tracepb.Span_SPAN_KIND_SERVER:
			servers = append(servers, s)
		}
	}
	if len(clients) < 10 || len(servers) < 10 {
		t.Fatalf("%d client spans from service llmprobe and %d server spans from llmprobe-sim, want about 30 each", len(clients), len(servers))
	}
	for _, s := range servers {
		if !clients[hex.EncodeToString(s.Span.GetParentSpanId())] {
			t.Errorf("server span %q has no client span as parent", s.Span.GetName())
		}
	}
}

// TestDemoSimIsItsOwnService: in demo mode the in-process simulator
// traces as llmprobe-sim even when OTEL_SERVICE_NAME names the daemon.
func TestDemoSimIsItsOwnService(t *testing.T) {
	sink := otlptest.Start(t)
	tracingEnv(t, sink)
	t.Setenv("OTEL_SERVICE_NAME", "llmprobe-eu")
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv, base, tr, err := startDemoSim(context.Background(), logger)
	if err != nil {
		t.Fatal(err)
	}
	if tr == nil {
		t.Fatal("no tracing for the demo simulator although the environment enables it")
	}
	req, _ := http.NewRequest(http.MethodPost, base+"/v1/completions",
		strings.NewReader(`{"model":"sim-model","prompt":"hello","max_tokens":2}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(ctx)
	stopTracing(logger, tr)

	var found bool
	for _, s := range sink.Spans() {
		if s.Span.GetKind() != tracepb.Span_SPAN_KIND_SERVER {
			continue
		}
		found = true
		if s.Service != "llmprobe-sim" {
			t.Errorf("demo simulator span from service %q, want llmprobe-sim", s.Service)
		}
		if got := hex.EncodeToString(s.Span.GetTraceId()); got != "4bf92f3577b34da6a3ce929d0e0e4736" {
			t.Errorf("server span in trace %s, want the caller's", got)
		}
	}
	if !found {
		t.Error("no server span from the demo simulator")
	}
}

func waitHTTP(t *testing.T, url string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not ready after 10s: %v", url, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func waitDone(t *testing.T, what string, done <-chan error) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("%s: %v", what, err)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("%s did not stop within 20s", what)
	}
}
