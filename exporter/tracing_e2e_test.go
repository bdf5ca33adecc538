// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package exporter

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/llmprobe/llmprobe/config"
	"github.com/llmprobe/llmprobe/internal/otlptest"
	"github.com/llmprobe/llmprobe/internal/promtest"
	"github.com/llmprobe/llmprobe/probe"
	"github.com/llmprobe/llmprobe/probe/wire"
	"github.com/llmprobe/llmprobe/sim"
)

// TestTracingEndToEnd wires everything as the daemon does, over loopback:
// the engine probes the simulator; both trace through their own
// TracerProvider (services llmprobe and llmprobe-sim) to a real OTLP/gRPC
// receiver; /metrics serves the latency histograms with trace_id
// exemplars in OpenMetrics; a real Prometheus scrapes it with exemplar
// storage on. It checks that the spans arrive with their attributes, that
// client and simulator spans form one trace with the right parent, that a
// failed request's span is in error, that every exemplar (in /metrics and
// from Prometheus' query_exemplars) names a received trace, and that the
// status page shows the trace ids.
func TestTracingEndToEnd(t *testing.T) {
	promtest.PrometheusBinary(t) // skip (or, under CI, fail) early without the binary
	clearOTelEnv(t)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "100") // export within the test's time
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	recv := otlptest.Start(t)

	// The simulator: real timing, some injected failures.
	insecure := true
	simCfg := sim.DefaultConfig()
	simCfg.Seed = 1
	simCfg.Faults.HTTP500.Probability = 0.1
	simCfg.Faults.Reset.Probability = 0.05
	simCfg.Faults.Reset.AfterTokens = 2
	base, simTr := tracedSim(t, simCfg, TracingOptions{Config: config.Tracing{Endpoint: recv.Addr, Insecure: &insecure}, Logger: logger})

	// The daemon, configured from its file.
	path := filepath.Join(t.TempDir(), "llmprobe.yml")
	writeFile(t, path, fmt.Sprintf(`
global: {warmup: 0s, recent_requests: 10}
workloads:
  w:
    classes:
      - {name: chat, prompt_tokens: 64, output_tokens: 8, prefix: {groups: 1, tokens: 32}}
targets:
  - name: sim
    url: %s/v1
    model: sim-model
    workload: w
    arrival: {process: constant, rate: 25}
tracing:
  endpoint: %s
  insecure: true
`, base, recv.Addr))
	cfg, err := config.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := NewTracing(context.Background(), TracingOptions{Config: cfg.Tracing, DefaultServiceName: "llmprobe", ServiceVersion: "e2e", Logger: logger})
	if err != nil || tr == nil {
		t.Fatalf("daemon tracing: %v %v", tr, err)
	}
	d := startDaemon(t, path, logger, probe.Options{Tracer: tr.Tracer(), Propagator: tr.Propagator()})
	d.reg.MustRegister(tr)

	prom := promtest.Start(t, promtest.Options{
		Targets:        []promtest.ScrapeTarget{{JobName: "llmprobe", Address: d.web.srv.Listener.Addr().String()}},
		ScrapeInterval: time.Second,
	})
	d.reload(t)
	started := time.Now()

	// Probe until Prometheus holds exemplars (bounded), then stop.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var promExemplars []string
	for len(promExemplars) == 0 && ctx.Err() == nil {
		time.Sleep(500 * time.Millisecond)
		if time.Since(started) < 3*time.Second {
			continue
		}
		ex, err := prom.QueryExemplars(ctx, `llmprobe_ttft_seconds_bucket{target="sim"} or llmprobe_ttft_seconds{target="sim"} or llmprobe_e2e_seconds_bucket{target="sim"}`,
			started.Add(-time.Minute), time.Now())
		if err != nil {
			t.Fatalf("query_exemplars: %v", err)
		}
		for _, s := range ex {
			for _, e := range s.Exemplars {
				if id := e.Labels["trace_id"]; id != "" {
					promExemplars = append(promExemplars, id)
				}
			}
		}
	}
	if len(promExemplars) == 0 {
		t.Fatal("Prometheus returned no trace_id exemplar within 30s")
	}

	// The OpenMetrics exposition and the status page, while running.
	_, _, exposition := d.web.do(t, "GET", "/metrics", map[string]string{"Accept": "application/openmetrics-text;version=1.0.0"})
	_, _, page := d.web.do(t, "GET", "/", nil)

	d.stop(t, tr, simTr) // flushes the daemon's pipeline, then the simulator's

	// --- the spans ---
	spans := recv.Spans()
	client := map[string]*tracepb.Span{} // span id -> span
	traces := map[string]bool{}
	var server []*tracepb.Span
	children := map[string][]string{} // server span id -> child names
	for _, rs := range spans {
		s := rs.Span
		switch {
		case rs.Service == "llmprobe" && s.GetKind() == tracepb.Span_SPAN_KIND_CLIENT:
			client[traceIDHex(s.GetSpanId())] = s
			traces[traceIDHex(s.GetTraceId())] = true
		case rs.Service == "llmprobe-sim" && s.GetKind() == tracepb.Span_SPAN_KIND_SERVER:
			server = append(server, s)
		case rs.Service == "llmprobe-sim":
			children[traceIDHex(s.GetParentSpanId())] = append(children[traceIDHex(s.GetParentSpanId())], s.GetName())
		default:
			t.Errorf("unexpected span %q kind %v from service %q", s.GetName(), s.GetKind(), rs.Service)
		}
	}
	if len(client) < 40 {
		t.Fatalf("%d client spans received, want the ~25/s of the run", len(client))
	}
	st := tr.Stats()
	if st.Exported != uint64(len(client)) || st.DroppedFull != 0 || st.DroppedFailed != 0 {
		t.Errorf("daemon pipeline stats %+v, %d client spans received", st, len(client))
	}

	var ok, failed int
	for _, s := range client {
		if s.GetName() != "chat sim-model" {
			t.Errorf("client span name %q", s.GetName())
		}
		must := []string{"gen_ai.operation.name=chat", "gen_ai.provider.name=openai", "gen_ai.request.model=sim-model",
			"gen_ai.request.max_tokens=8", "gen_ai.request.temperature=0.7", "gen_ai.request.top_p=1", "server.address=127.0.0.1",
			"llmprobe.target=sim", "llmprobe.class=chat"}
		have := []string{"server.port", "llmprobe.planned_time", "llmprobe.schedule_lag_seconds", "llmprobe.outcome"}
		if s.GetStatus().GetCode() == tracepb.Status_STATUS_CODE_ERROR {
			failed++
			have = append(have, "error.type", "llmprobe.error")
		} else {
			ok++
			must = append(must, "gen_ai.response.model=sim-model", "gen_ai.response.finish_reasons=length", "gen_ai.usage.output_tokens=8",
				"llmprobe.outcome=success")
			have = append(have, "gen_ai.response.id", "gen_ai.usage.input_tokens", "gen_ai.usage.cache_read.input_tokens", "llmprobe.ttft_seconds")
			if ev := s.GetEvents(); len(ev) != 1 || ev[0].GetName() != wire.FirstTokenEvent {
				t.Errorf("successful client span events %v", ev)
			}
		}
		for _, kv := range must {
			k, want, _ := strings.Cut(kv, "=")
			if got, _ := spanAttr(s, k); got != want {
				t.Errorf("client span %s: %s = %q, want %q", traceIDHex(s.GetSpanId()), k, got, want)
			}
		}
		for _, k := range have {
			if _, found := spanAttr(s, k); !found {
				t.Errorf("client span %s (status %v): no %s", traceIDHex(s.GetSpanId()), s.GetStatus().GetCode(), k)
			}
		}
	}
	if ok == 0 || failed == 0 {
		t.Errorf("%d successful and %d failed client spans; the simulator injects failures, want both", ok, failed)
	}
	var errorTypes []string
	for _, s := range client {
		if et, found := spanAttr(s, "error.type"); found {
			errorTypes = append(errorTypes, et)
		}
	}
	if !strings.Contains(strings.Join(errorTypes, ","), "http_500") {
		t.Errorf("error types %v, want http_500 among them", errorTypes)
	}

	// Every request reached the simulator: its SERVER span is a child of
	// the client span, in the same trace, and successful ones have their
	// queue, prefill and decode spans.
	parents := map[string]bool{}
	for _, s := range server {
		parentID := traceIDHex(s.GetParentSpanId())
		c := client[parentID]
		if c == nil {
			t.Errorf("server span %q has parent %s, which is no client span", s.GetName(), parentID)
			continue
		}
		if traceIDHex(s.GetTraceId()) != traceIDHex(c.GetTraceId()) {
			t.Errorf("server span in trace %x, its client span in %x", s.GetTraceId(), c.GetTraceId())
		}
		if s.GetStartTimeUnixNano() < c.GetStartTimeUnixNano() {
			t.Errorf("server span starts before its client span")
		}
		parents[parentID] = true
		if code, _ := spanAttr(s, "http.response.status_code"); code == "200" && s.GetStatus().GetCode() != tracepb.Status_STATUS_CODE_ERROR {
			want := "queue,prefill,decode"
			if n, _ := spanAttr(s, "gen_ai.usage.output_tokens"); n == "0" {
				want = "queue,prefill" // an early stop before the first token
			}
			if got := strings.Join(children[traceIDHex(s.GetSpanId())], ","); got != want {
				t.Errorf("server span children %q, want %s", got, want)
			}
		}
	}
	if len(parents) != len(client) {
		t.Errorf("%d of %d client spans have a simulator SERVER child", len(parents), len(client))
	}

	// --- the exemplars ---
	exemplarRE := regexp.MustCompile(`(?m)^(llmprobe_(?:ttft|tpot|e2e|itl)_seconds)_bucket\{[^}]*target="sim"[^}]*\} \S+ # \{trace_id="([0-9a-f]{32})"\}`)
	perMetric := map[string]int{}
	for _, m := range exemplarRE.FindAllStringSubmatch(exposition, -1) {
		perMetric[m[1]]++
		if !traces[m[2]] {
			t.Errorf("%s exemplar trace_id %s is not among the received traces", m[1], m[2])
		}
	}
	for _, name := range []string{"llmprobe_ttft_seconds", "llmprobe_tpot_seconds", "llmprobe_e2e_seconds"} {
		if perMetric[name] == 0 {
			t.Errorf("/metrics has no trace_id exemplar on %s", name)
		}
	}
	for _, id := range promExemplars {
		if !traces[id] {
			t.Errorf("Prometheus exemplar trace_id %s is not among the received traces", id)
		}
	}

	// --- the status page ---
	shown := 0
	for id := range traces {
		if strings.Contains(page, id) {
			shown++
		}
	}
	if shown == 0 {
		t.Error("the status page shows no trace id of the received traces")
	}
}
