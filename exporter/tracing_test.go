// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package exporter

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.opentelemetry.io/otel"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/llmprobe/llmprobe/config"
	"github.com/llmprobe/llmprobe/internal/otlptest"
	"github.com/llmprobe/llmprobe/internal/simtest"
	"github.com/llmprobe/llmprobe/probe"
	"github.com/llmprobe/llmprobe/probe/wire"
	"github.com/llmprobe/llmprobe/sim"
)

func spanAttr(s *tracepb.Span, key string) (string, bool) {
	for _, kv := range s.GetAttributes() {
		if kv.GetKey() == key {
			return anyValueString(kv.GetValue()), true
		}
	}
	return "", false
}

// anyValueString renders an OTLP value: scalars as Go prints them, arrays
// comma-separated.
func anyValueString(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return fmt.Sprint(x.IntValue)
	case *commonpb.AnyValue_DoubleValue:
		return fmt.Sprint(x.DoubleValue)
	case *commonpb.AnyValue_BoolValue:
		return fmt.Sprint(x.BoolValue)
	case *commonpb.AnyValue_ArrayValue:
		var parts []string
		for _, e := range x.ArrayValue.GetValues() {
			parts = append(parts, anyValueString(e))
		}
		return strings.Join(parts, ",")
	}
	return v.String()
}

func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// clearOTelEnv unsets the OTEL_* variables these tests depend on, so that
// the machine's environment cannot change their outcome.
func clearOTelEnv(t *testing.T) {
	for _, k := range []string{envSDKDisabled, envTracesExporter, envEndpoint, envTracesEndpoint, envProtocol, envTracesProtocol,
		envBSPQueueSize, envBSPBatchSize, "OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES", "OTEL_TRACES_SAMPLER", "OTEL_TRACES_SAMPLER_ARG",
		"OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS", "OTEL_EXPORTER_OTLP_INSECURE", "OTEL_EXPORTER_OTLP_TRACES_INSECURE",
		"OTEL_BSP_SCHEDULE_DELAY", "OTEL_EXPORTER_OTLP_TIMEOUT", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
		"OTEL_EXPORTER_OTLP_COMPRESSION", "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION"} {
		t.Setenv(k, "")
	}
}

func TestTracingEnabled(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		cfg  config.Tracing
		want bool
	}{
		{"nothing configured", nil, config.Tracing{}, false},
		{"generic endpoint", map[string]string{envEndpoint: "http://otel:4317"}, config.Tracing{}, true},
		{"traces endpoint", map[string]string{envTracesEndpoint: "http://otel:4317"}, config.Tracing{}, true},
		{"config endpoint", nil, config.Tracing{Endpoint: "otel:4317"}, true},
		{"SDK disabled", map[string]string{envSDKDisabled: "true", envEndpoint: "http://otel:4317"}, config.Tracing{Endpoint: "otel:4317"}, false},
		{"exporter none", map[string]string{envTracesExporter: "none"}, config.Tracing{Endpoint: "otel:4317"}, false},
		{"SDK disabled=false", map[string]string{envSDKDisabled: "false"}, config.Tracing{Endpoint: "otel:4317"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clearOTelEnv(t)
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			if got := TracingEnabled(tc.cfg); got != tc.want {
				t.Errorf("TracingEnabled = %v, want %v", got, tc.want)
			}
			tr, err := NewTracing(context.Background(), TracingOptions{Config: tc.cfg})
			if err != nil {
				t.Fatal(err)
			}
			if (tr != nil) != tc.want {
				t.Errorf("NewTracing returned %v, want a pipeline: %v", tr, tc.want)
			}
			if tr != nil {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				defer cancel()
				_ = tr.Shutdown(ctx)
			}
		})
	}
}

func TestTracingBadEnv(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{envProtocol: "http/json"}, `OTEL_EXPORTER_OTLP_PROTOCOL="http/json": http/json is not supported: llmprobe sends OTLP/HTTP as protobuf (use http/protobuf, or grpc)`},
		{map[string]string{envTracesProtocol: "http/json", envProtocol: "grpc"}, `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL="http/json": http/json is not supported`},
		{map[string]string{envTracesProtocol: "thrift"}, `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL="thrift": unsupported protocol "thrift" (supported: grpc, http/protobuf)`},
		{map[string]string{envProtocol: "HTTP/PROTOBUF"}, `OTEL_EXPORTER_OTLP_PROTOCOL="HTTP/PROTOBUF": unsupported protocol`},
		{map[string]string{envTracesExporter: "zipkin"}, `OTEL_TRACES_EXPORTER="zipkin": supported values are otlp and none`},
		{map[string]string{envBSPQueueSize: "lots"}, `OTEL_BSP_MAX_QUEUE_SIZE="lots": want a positive integer`},
		{map[string]string{envBSPBatchSize: "0"}, `OTEL_BSP_MAX_EXPORT_BATCH_SIZE="0": want a positive integer`},
	} {
		clearOTelEnv(t)
		for k, v := range tc.env {
			t.Setenv(k, v)
		}
		_, err := NewTracing(context.Background(), TracingOptions{Config: config.Tracing{Endpoint: "127.0.0.1:4317"}})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("env %v: error %v, want %q", tc.env, err, tc.want)
		}
	}
	// The traces-specific protocol wins over the generic one, which is
	// then not looked at.
	clearOTelEnv(t)
	t.Setenv(envTracesProtocol, "grpc")
	t.Setenv(envProtocol, "http/json")
	tr, err := NewTracing(context.Background(), TracingOptions{Config: config.Tracing{Endpoint: "127.0.0.1:4317"}})
	if err != nil {
		t.Fatalf("traces protocol grpc: %v", err)
	}
	if tr.Protocol() != "grpc" {
		t.Errorf("protocol %q, want grpc", tr.Protocol())
	}
	_ = tr.Shutdown(context.Background())
	// So does the config file's tracing.protocol (and a bad value there,
	// which config.Load would have refused, is still refused).
	tr, err = NewTracing(context.Background(), TracingOptions{Config: config.Tracing{Endpoint: "127.0.0.1:4318", Protocol: "http/protobuf"}})
	if err != nil {
		t.Fatalf("tracing.protocol http/protobuf: %v", err)
	}
	if tr.Protocol() != "http/protobuf" {
		t.Errorf("protocol %q, want http/protobuf", tr.Protocol())
	}
	_ = tr.Shutdown(context.Background())
	if _, err := NewTracing(context.Background(), TracingOptions{Config: config.Tracing{Endpoint: "127.0.0.1:4318", Protocol: "http/json"}}); err == nil ||
		!strings.Contains(err.Error(), "tracing.protocol: http/json is not supported") {
		t.Errorf("tracing.protocol http/json: error %v", err)
	}
}

func TestTracingResource(t *testing.T) {
	get := func(t *testing.T, opts TracingOptions) map[string]string {
		t.Helper()
		res, err := tracingResource(context.Background(), opts)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]string{}
		for _, kv := range res.Attributes() {
			m[string(kv.Key)] = kv.Value.Emit()
		}
		return m
	}
	clearOTelEnv(t)
	r := get(t, TracingOptions{DefaultServiceName: "llmprobe", ServiceVersion: "1.2.3"})
	if r["service.name"] != "llmprobe" || r["service.version"] != "1.2.3" || r["telemetry.sdk.language"] != "go" || r["host.name"] == "" {
		t.Errorf("default resource %v", r)
	}
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "service.name=from-attrs,deployment.environment.name=prod")
	if r := get(t, TracingOptions{DefaultServiceName: "llmprobe"}); r["service.name"] != "from-attrs" || r["deployment.environment.name"] != "prod" {
		t.Errorf("OTEL_RESOURCE_ATTRIBUTES not applied: %v", r)
	}
	t.Setenv("OTEL_SERVICE_NAME", "from-env")
	if r := get(t, TracingOptions{DefaultServiceName: "llmprobe"}); r["service.name"] != "from-env" {
		t.Errorf("OTEL_SERVICE_NAME not applied: %v", r)
	}
	if r := get(t, TracingOptions{DefaultServiceName: "llmprobe", Config: config.Tracing{ServiceName: "from-config"}}); r["service.name"] != "from-config" {
		t.Errorf("tracing.service_name does not override the environment: %v", r)
	}
	if r := get(t, TracingOptions{ServiceName: "llmprobe-sim", Config: config.Tracing{ServiceName: "from-config"}}); r["service.name"] != "llmprobe-sim" || r["deployment.environment.name"] != "prod" {
		t.Errorf("a forced service name must win and keep the other attributes: %v", r)
	}
}

// collectingObserver keeps every result of an engine run. (The embedded
// empty Observers provides the events it ignores.)
type collectingObserver struct {
	probe.Observers
	mu        sync.Mutex
	results   []*wire.Result
	endDelays []time.Duration
	dropped   int
	// saturated is the harness' verdict at the end of the run: why its
	// figures are not to be trusted, "" when they are.
	saturated string
}

func (o *collectingObserver) Dropped(string, string, string, probe.DropReason) {
	o.mu.Lock()
	o.dropped++
	o.mu.Unlock()
}
func (o *collectingObserver) Observe(r *wire.Result) {
	// How long after its last event the request was handed over: the
	// stream's drain and the span's end.
	delay := time.Since(r.Start.Add(r.E2E))
	o.mu.Lock()
	o.results = append(o.results, r)
	o.endDelays = append(o.endDelays, delay)
	o.mu.Unlock()
}

// quantile returns the q-quantile of the results' schedule lags, or of
// their end delays.
func (o *collectingObserver) quantile(q float64, endDelay bool) time.Duration {
	o.mu.Lock()
	defer o.mu.Unlock()
	var ds []time.Duration
	if endDelay {
		ds = slices.Clone(o.endDelays)
	} else {
		for _, r := range o.results {
			ds = append(ds, r.ScheduleLag)
		}
	}
	slices.Sort(ds)
	if len(ds) == 0 {
		return 0
	}
	return ds[int(q*float64(len(ds)-1))]
}

func loopbackSim(t *testing.T, cfg sim.Config) string {
	t.Helper()
	_, base := simtest.Listen(t, cfg)
	return base
}

// tracedSim starts the simulator (cfg) on loopback, tracing through a
// pipeline of its own (opts, as service llmprobe-sim). It returns the
// simulator's base URL and the pipeline, which the test shuts down.
func tracedSim(t *testing.T, cfg sim.Config, opts TracingOptions) (string, *Tracing) {
	t.Helper()
	opts.ServiceName = "llmprobe-sim"
	tr, err := NewTracing(context.Background(), opts)
	if err != nil || tr == nil {
		t.Fatalf("simulator tracing: %v %v", tr, err)
	}
	cfg.TracerProvider = tr.TracerProvider()
	return loopbackSim(t, cfg), tr
}

func probeConfig(t *testing.T, base string, rate float64, extra string) *config.Config {
	t.Helper()
	cfg, err := config.Load([]byte(fmt.Sprintf(`
global: {warmup: 0s, request_timeout: 10s, seed: 3}
workloads:
  w:
    classes:
      - {name: chat, prompt_tokens: 48, output_tokens: 6, prefix: {groups: 1, tokens: 32}}
targets:
  - name: sim
    url: %s/v1
    model: sim-model
    workload: w
    arrival: {process: constant, rate: %v}
    extra_body: {ignore_eos: true}
%s`, base, rate, extra)), "tracing-test.yml")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// runEngine probes cfg for d and returns what the observer saw.
func runEngine(t *testing.T, cfg *config.Config, d time.Duration, opts probe.Options) *collectingObserver {
	t.Helper()
	obs := &collectingObserver{}
	if opts.Observer != nil {
		opts.Observer = probe.Observers{obs, opts.Observer}
	} else {
		opts.Observer = obs
	}
	eng := probe.NewEngine(opts)
	if err := eng.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	time.Sleep(d)
	for _, st := range eng.Status() {
		if st.Saturated {
			obs.saturated = st.Name + ": " + st.SaturationReason
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := eng.Shutdown(ctx); err != nil {
		t.Errorf("engine shutdown: %v", err)
	}
	return obs
}

// TestTracingUnreachableCollector: with the collector's port closed, the
// probe runs exactly as without tracing (no request waits for the
// collector), the bounded queue drops and counts what it cannot hold, the
// failed exports are counted too, and shutdown is bounded.
func TestTracingUnreachableCollector(t *testing.T) {
	clearOTelEnv(t)
	otel.SetErrorHandler(OTelErrorHandler(slog.New(slog.DiscardHandler), time.Hour)) // the failures are expected
	t.Setenv(envBSPQueueSize, "32")
	t.Setenv(envBSPBatchSize, "8")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "300")
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
	simCfg := sim.DefaultConfig()
	simCfg.ZeroLatency = true
	base := loopbackSim(t, simCfg)
	// 100 req/s fill the 32-span queue within a second (exports of 8
	// spans time out after 300 ms each) and leave a loaded machine room
	// to deliver them.
	const rate, run = 100.0, 2 * time.Second

	// "As without tracing" is judged on runs the harness says it
	// delivered and timed: on a busy machine the run without tracing
	// dropped late sends too (the verdict said so), and both run again.
	type runs struct {
		off, on *collectingObserver
		tr      *Tracing
	}
	r := simtest.RetryFor(t, 3, 30*time.Second, func(int) (runs, string) {
		off := runEngine(t, probeConfig(t, base, rate, ""), run, probe.Options{})
		insecure := true
		tr, err := NewTracing(context.Background(), TracingOptions{Config: config.Tracing{Endpoint: closedPort(t), Insecure: &insecure}})
		if err != nil || tr == nil {
			t.Fatalf("NewTracing: %v, %v", tr, err)
		}
		on := runEngine(t, probeConfig(t, base, rate, ""), run, probe.Options{Tracer: tr.Tracer(), Propagator: tr.Propagator()})
		var why []string
		for name, o := range map[string]*collectingObserver{"without tracing": off, "collector unreachable": on} {
			if o.saturated != "" {
				why = append(why, name+": "+o.saturated)
			}
		}
		if len(why) > 0 {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			_ = tr.Shutdown(ctx)
			slices.Sort(why)
			return runs{}, strings.Join(why, "; ")
		}
		return runs{off, on, tr}, ""
	})
	off, on, tr := r.off, r.on, r.tr

	// Every request was sent and ended on time, as without tracing.
	for name, o := range map[string]*collectingObserver{"off": off, "unreachable": on} {
		if want := int(0.9 * rate * run.Seconds()); len(o.results) < want || o.dropped > 0 {
			t.Errorf("%s: %d requests ended, %d dropped; want at least %d and none dropped", name, len(o.results), o.dropped, want)
		}
		for _, r := range o.results {
			if r.Outcome != wire.OutcomeSuccess {
				t.Errorf("%s: a request ended %s (%s)", name, r.Outcome, r.Error)
				break
			}
		}
	}
	// A span end that waited for the collector would hold its request for
	// the 300 ms export timeout; the machine's noise is far below that.
	if lo, lt := off.quantile(0.5, true), on.quantile(0.5, true); lt > 3*lo+50*time.Millisecond {
		t.Errorf("median delay between a request's last event and its result: %v with an unreachable collector, %v without tracing", lt, lo)
	}
	if d := on.quantile(0.9, true); d > 250*time.Millisecond {
		t.Errorf("p90 delay between a request's last event and its result %v with an unreachable collector", d)
	}
	if lo, lt := off.quantile(0.99, false), on.quantile(0.99, false); lt > 5*lo+200*time.Millisecond {
		t.Errorf("schedule lag p99 %v with an unreachable collector, %v without tracing", lt, lo)
	}
	t.Logf("end delay p50/p90: off %v/%v, unreachable %v/%v; lag p99: off %v, unreachable %v",
		off.quantile(0.5, true), off.quantile(0.9, true), on.quantile(0.5, true), on.quantile(0.9, true),
		off.quantile(0.99, false), on.quantile(0.99, false))
	traced := 0
	for _, r := range on.results {
		if r.TraceID != "" {
			traced++
		}
	}
	if traced != len(on.results) {
		t.Errorf("%d of %d requests sampled, want all (the default sampler)", traced, len(on.results))
	}

	// Export attempts time out after 300 ms; wait for at least one.
	waitUntil(5*time.Second, 20*time.Millisecond, func() bool { return tr.Stats().ExportFailures != 0 })
	// Every span is accounted for: dropped because the queue was full,
	// lost in a failed export, or still queued (read until the counters
	// are not caught between an export's end and its accounting).
	var s TracingStats
	waitUntil(3*time.Second, 10*time.Millisecond, func() bool {
		s = tr.Stats()
		return s.DroppedFull+s.DroppedFailed+uint64(s.Queued) == uint64(traced)
	})
	if got := s.DroppedFull + s.DroppedFailed + uint64(s.Queued); got != uint64(traced) {
		t.Errorf("stats %+v account for %d spans, %d were ended", s, got, traced)
	}
	if s.Exported != 0 || s.ExportFailures == 0 || s.DroppedFailed == 0 {
		t.Errorf("stats %+v: want failed exports counted and nothing exported", s)
	}
	if s.DroppedFull == 0 || s.Queued > 32 || s.Queued < 0 {
		t.Errorf("stats %+v: want queue-full drops and at most 32 spans queued", s)
	}

	// The same counts as metrics.
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(tr)
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP llmprobe_trace_queue_capacity_spans Bound of the span export queue (OTEL_BSP_MAX_QUEUE_SIZE).
# TYPE llmprobe_trace_queue_capacity_spans gauge
llmprobe_trace_queue_capacity_spans 32
# HELP llmprobe_trace_spans_exported_total Request spans the OTLP collector accepted.
# TYPE llmprobe_trace_spans_exported_total counter
llmprobe_trace_spans_exported_total 0
`), "llmprobe_trace_queue_capacity_spans", "llmprobe_trace_spans_exported_total"); err != nil {
		t.Error(err)
	}
	mfs := gather(t, reg)
	full := series(mfs, "llmprobe_trace_spans_dropped_total", map[string]string{"reason": "queue_full"}).GetCounter().GetValue()
	failed := series(mfs, "llmprobe_trace_spans_dropped_total", map[string]string{"reason": "export_failed"}).GetCounter().GetValue()
	failures := series(mfs, "llmprobe_trace_export_failures_total", nil).GetCounter().GetValue()
	if full < float64(s.DroppedFull) || failed < float64(s.DroppedFailed) || failures < float64(s.ExportFailures) {
		t.Errorf("metrics dropped{queue_full}=%v dropped{export_failed}=%v failures=%v, stats %+v", full, failed, failures, s)
	}
	if lint, err := testutil.GatherAndLint(reg); err != nil || len(lint) > 0 {
		t.Errorf("lint: %v %v", lint, err)
	}

	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = tr.Shutdown(ctx)
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("shutdown took %v with a 1s deadline", d)
	}
}

// TestTracingSamplingRatioZero: with tracing.sampling_ratio 0 nothing is
// recorded or exported and results carry no trace id, so the latency
// histograms get no exemplar; the not-sampled trace context still reaches
// the server.
func TestTracingSamplingRatioZero(t *testing.T) {
	clearOTelEnv(t)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
	recv := otlptest.Start(t)
	insecure, zero := true, 0.0
	tr, err := NewTracing(context.Background(), TracingOptions{Config: config.Tracing{Endpoint: recv.Addr, Insecure: &insecure, SamplingRatio: &zero}})
	if err != nil {
		t.Fatal(err)
	}
	simCfg := sim.DefaultConfig()
	simCfg.ZeroLatency = true
	base, simTr := tracedSim(t, simCfg, TracingOptions{Config: config.Tracing{Endpoint: recv.Addr, Insecure: &insecure}})

	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	cfg := probeConfig(t, base, 50, "")
	m.SetConfig(cfg)
	obs := runEngine(t, cfg, time.Second, probe.Options{Logger: logger, Observer: m, Tracer: tr.Tracer(), Propagator: tr.Propagator()})
	if len(obs.results) < 20 {
		t.Fatalf("%d requests ended", len(obs.results))
	}
	for _, r := range obs.results {
		if r.TraceID != "" {
			t.Fatalf("an unsampled request has TraceID %q", r.TraceID)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := tr.Shutdown(ctx); err != nil {
		t.Error(err)
	}
	if err := simTr.Shutdown(ctx); err != nil {
		t.Error(err)
	}
	if n := len(recv.Spans()); n != 0 {
		t.Errorf("%d spans exported at sampling ratio 0 (the simulator must follow the caller's decision too)", n)
	}
	srv := httptest.NewServer(NewHandler(WebOptions{Logger: logger, Gatherer: reg}))
	defer srv.Close()
	f := &webFixture{srv: srv}
	_, _, body := f.do(t, "GET", "/metrics", map[string]string{"Accept": "application/openmetrics-text;version=1.0.0"})
	if !strings.Contains(body, "llmprobe_ttft_seconds_bucket") {
		t.Fatalf("/metrics lacks the TTFT histogram:\n%.2000s", body)
	}
	if strings.Contains(body, "trace_id") {
		t.Error("/metrics carries a trace_id exemplar although no request was sampled")
	}
}

func TestOTelErrorHandlerRateLimits(t *testing.T) {
	var buf syncWriter
	h := OTelErrorHandler(slog.New(slog.NewTextHandler(&buf, nil)), time.Hour)
	for i := 0; i < 5; i++ {
		h.Handle(fmt.Errorf("export failed %d", i))
	}
	out := buf.String()
	if strings.Count(out, "OpenTelemetry error") != 1 || !strings.Contains(out, "export failed 0") {
		t.Errorf("log:\n%s\nwant the first error only", out)
	}
}

type syncWriter struct {
	mu sync.Mutex
	b  strings.Builder
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// traceIDHex renders an OTLP trace id as exemplars and results do.
func traceIDHex(b []byte) string { return hex.EncodeToString(b) }
