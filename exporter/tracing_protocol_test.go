// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package exporter

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"go.opentelemetry.io/otel"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/llmprobe/llmprobe/config"
	"github.com/llmprobe/llmprobe/internal/otlptest"
	"github.com/llmprobe/llmprobe/internal/testio"
	"github.com/llmprobe/llmprobe/probe"
	"github.com/llmprobe/llmprobe/sim"
)

// exportOneSpan starts the pipeline of cfg and the environment, ends one
// span and shuts the pipeline down (which exports it).
func exportOneSpan(t *testing.T, cfg config.Tracing) *Tracing {
	t.Helper()
	tr, err := NewTracing(context.Background(), TracingOptions{Config: cfg})
	if err != nil || tr == nil {
		t.Fatalf("NewTracing: %v, %v", tr, err)
	}
	_, span := tr.Tracer().Start(context.Background(), "one")
	span.End()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := tr.Shutdown(ctx); err != nil {
		t.Errorf("shutdown (the export of the span): %v", err)
	}
	return tr
}

// TestTracingProtocolChoice: the exporter follows tracing.protocol, else
// OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, else OTEL_EXPORTER_OTLP_PROTOCOL,
// else grpc; over OTLP/HTTP the traces go to the specification's paths.
// Each case points the endpoint at a receiver of the protocol it expects
// and checks that the span arrived there, in a request of that protocol
// on that path (a wrong protocol fails the export: gRPC to an HTTP server
// or the reverse).
func TestTracingProtocolChoice(t *testing.T) {
	grpcRecv := otlptest.Start(t)
	httpRecv := otlptest.StartHTTP(t)
	yes := true
	for _, tc := range []struct {
		name string
		env  map[string]string
		cfg  config.Tracing
		want string // protocol
		path string // OTLP/HTTP request path
	}{
		{name: "default grpc", env: map[string]string{envEndpoint: "http://" + grpcRecv.Addr}, want: "grpc"},
		{name: "generic http/protobuf", env: map[string]string{envEndpoint: "http://" + httpRecv.Addr, envProtocol: "http/protobuf"},
			want: "http/protobuf", path: "/v1/traces"},
		{name: "generic endpoint is a base URL", env: map[string]string{envEndpoint: "http://" + httpRecv.Addr + "/otlp", envProtocol: "http/protobuf"},
			want: "http/protobuf", path: "/otlp/v1/traces"},
		{name: "generic grpc", env: map[string]string{envEndpoint: "http://" + grpcRecv.Addr, envProtocol: "grpc"}, want: "grpc"},
		{name: "traces protocol over generic (http)", env: map[string]string{envEndpoint: "http://" + httpRecv.Addr, envTracesProtocol: "http/protobuf", envProtocol: "grpc"},
			want: "http/protobuf", path: "/v1/traces"},
		{name: "traces protocol over generic (grpc)", env: map[string]string{envEndpoint: "http://" + grpcRecv.Addr, envTracesProtocol: "grpc", envProtocol: "http/protobuf"},
			want: "grpc"},
		{name: "traces endpoint used as is", env: map[string]string{envTracesEndpoint: "http://" + httpRecv.Addr + "/custom/traces", envProtocol: "http/protobuf"},
			want: "http/protobuf", path: "/custom/traces"},
		{name: "traces endpoint without path is the root", env: map[string]string{envTracesEndpoint: "http://" + httpRecv.Addr, envTracesProtocol: "http/protobuf"},
			want: "http/protobuf", path: "/"},
		{name: "config protocol over env", env: map[string]string{envTracesProtocol: "grpc", envProtocol: "grpc"},
			cfg: config.Tracing{Protocol: "http/protobuf", Endpoint: "http://" + httpRecv.Addr}, want: "http/protobuf", path: "/v1/traces"},
		{name: "config grpc over env http", env: map[string]string{envTracesProtocol: "http/protobuf"},
			cfg: config.Tracing{Protocol: "grpc", Endpoint: grpcRecv.Addr, Insecure: &yes}, want: "grpc"},
		{name: "config host:port over http", cfg: config.Tracing{Protocol: "http/protobuf", Endpoint: httpRecv.Addr, Insecure: &yes},
			want: "http/protobuf", path: "/v1/traces"},
		{name: "config URL with a path over http", cfg: config.Tracing{Protocol: "http/protobuf", Endpoint: "http://" + httpRecv.Addr + "/tenant-a/v1/traces"},
			want: "http/protobuf", path: "/tenant-a/v1/traces"},
		{name: "config endpoint, env protocol", env: map[string]string{envProtocol: "http/protobuf"},
			cfg: config.Tracing{Endpoint: "http://" + httpRecv.Addr + "/"}, want: "http/protobuf", path: "/v1/traces"},
		{name: "gzip over http", env: map[string]string{envEndpoint: "http://" + httpRecv.Addr, envProtocol: "http/protobuf", "OTEL_EXPORTER_OTLP_COMPRESSION": "gzip"},
			want: "http/protobuf", path: "/v1/traces"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clearOTelEnv(t)
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			recv := grpcRecv
			if tc.want == "http/protobuf" {
				recv = httpRecv
			}
			before, otherBefore := len(recv.Requests()), len(grpcRecv.Requests())+len(httpRecv.Requests())-len(recv.Requests())
			tr := exportOneSpan(t, tc.cfg)
			if tr.Protocol() != tc.want {
				t.Errorf("Protocol() = %q, want %q", tr.Protocol(), tc.want)
			}
			reqs := recv.Requests()[before:]
			if len(reqs) != 1 || reqs[0].Spans != 1 || reqs[0].Protocol != tc.want {
				t.Fatalf("requests received over %s: %+v, want one of 1 span", tc.want, reqs)
			}
			if other := len(grpcRecv.Requests()) + len(httpRecv.Requests()) - len(recv.Requests()); other != otherBefore {
				t.Errorf("the other receiver got %d requests", other-otherBefore)
			}
			if tc.path != "" && reqs[0].Path != tc.path {
				t.Errorf("OTLP/HTTP path %q, want %q", reqs[0].Path, tc.path)
			}
			if tc.want == "http/protobuf" && reqs[0].Header["content-type"][0] != "application/x-protobuf" {
				t.Errorf("Content-Type %q", reqs[0].Header["content-type"])
			}
		})
	}
}

// captureOTelLogger sends OpenTelemetry's global logger (where the OTLP
// exporters report what they cannot parse) to a buffer for the test.
func captureOTelLogger(t *testing.T) *testio.Buffer {
	buf := &testio.Buffer{}
	otel.SetLogger(funcr.New(func(prefix, args string) { fmt.Fprintln(buf, prefix, args) }, funcr.Options{Verbosity: 10}))
	t.Cleanup(func() { otel.SetLogger(funcr.New(func(string, string) {}, funcr.Options{})) })
	return buf
}

// TestTracingBadHeadersEnvStaysSecret: OTLP header variables the
// exporters could not parse are a startup error naming the variable and
// the entry's position, never its text (the exporters would log it,
// value included, and drop it).
func TestTracingBadHeadersEnvStaysSecret(t *testing.T) {
	const secret = "sk-SECRET-0123456789"
	logs := captureOTelLogger(t)
	for _, tc := range []struct {
		name, value, want string
	}{
		{envHeaders, "api-key: " + secret, "OTEL_EXPORTER_OTLP_HEADERS: entry 1 is not name=value"},
		{envTracesHeaders, "x-a=b,Authorization: Bearer " + secret + "==", "OTEL_EXPORTER_OTLP_TRACES_HEADERS: entry 2 has an invalid header name"},
		{envHeaders, "api-key=" + secret + "%zz", `OTEL_EXPORTER_OTLP_HEADERS: the value of header "api-key" is not valid percent-encoding`},
	} {
		for _, proto := range []string{"grpc", "http/protobuf"} {
			clearOTelEnv(t)
			t.Setenv(tc.name, tc.value)
			t.Setenv(envProtocol, proto)
			t.Setenv(envEndpoint, "http://"+closedPort(t))
			_, err := NewTracing(context.Background(), TracingOptions{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s=%q over %s: error %v, want %q", tc.name, tc.value, proto, err, tc.want)
			} else if strings.Contains(err.Error(), secret) {
				t.Errorf("the error shows the secret: %v", err)
			}
		}
	}
	// Well-formed headers (a trailing comma is harmless) start.
	clearOTelEnv(t)
	t.Setenv(envHeaders, "api-key="+secret+",x-scope-orgid=probes%20eu,")
	t.Setenv(envProtocol, "http/protobuf")
	t.Setenv(envEndpoint, "http://"+closedPort(t))
	tr, err := NewTracing(context.Background(), TracingOptions{})
	if err != nil {
		t.Fatalf("good headers: %v", err)
	}
	_ = tr.Shutdown(context.Background())
	if strings.Contains(logs.String(), secret) {
		t.Errorf("OpenTelemetry's logger shows the secret:\n%s", logs)
	}
}

// TestTracingOverHTTPDaemon wires the pipeline as the daemon does, with
// OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf and an API key in
// OTEL_EXPORTER_OTLP_HEADERS (and another in the config file's
// tracing.headers, which replaces it): the engine probes the simulator,
// the request spans arrive over OTLP/HTTP with the config's key, the
// simulator's server spans (traced by the environment alone) with the
// environment's key, and in one trace. Neither key shows in the logs, in
// the export errors once the collector refuses, on the status page, the
// /config page or /metrics.
func TestTracingOverHTTPDaemon(t *testing.T) {
	const envSecret, fileSecret = "env-SECRET-4f9a2c", "file-SECRET-77d1e0"
	clearOTelEnv(t)
	recv := otlptest.StartHTTP(t)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "2000")
	t.Setenv(envProtocol, "http/protobuf")
	t.Setenv(envEndpoint, "http://"+recv.Addr)
	t.Setenv(envHeaders, "x-api-key="+envSecret)
	logs := &testio.Buffer{}
	logger := newTextLogger(logs)
	otelLogs := captureOTelLogger(t)
	otel.SetErrorHandler(OTelErrorHandler(logger, time.Millisecond))

	// The simulator: traced by the environment alone.
	simCfg := sim.DefaultConfig()
	simCfg.ZeroLatency = true
	base, simTr := tracedSim(t, simCfg, TracingOptions{Logger: logger})

	path := filepath.Join(t.TempDir(), "llmprobe.yml")
	writeFile(t, path, fmt.Sprintf(`
global: {warmup: 0s, recent_requests: 10}
workloads:
  w:
    classes:
      - {name: chat, prompt_tokens: 32, output_tokens: 4}
targets:
  - {name: sim, url: "%s/v1", model: sim-model, workload: w, arrival: {process: constant, rate: 20}}
tracing:
  headers: {x-api-key: %s}
`, base, fileSecret))
	cfg, err := config.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := NewTracing(context.Background(), TracingOptions{Config: cfg.Tracing, DefaultServiceName: "llmprobe", Logger: logger})
	if err != nil || tr == nil {
		t.Fatalf("daemon tracing: %v %v", tr, err)
	}
	if tr.Protocol() != "http/protobuf" || tr.Endpoint() != "http://"+recv.Addr {
		t.Errorf("protocol %q endpoint %q", tr.Protocol(), tr.Endpoint())
	}
	d := startDaemon(t, path, logger, probe.Options{Tracer: tr.Tracer(), Propagator: tr.Propagator()})
	d.reg.MustRegister(tr)
	d.reload(t)
	clientSpans := func() int {
		n := 0
		for _, s := range recv.Spans() {
			if s.Service == "llmprobe" {
				n++
			}
		}
		return n
	}
	if !waitUntil(15*time.Second, 50*time.Millisecond, func() bool { return clientSpans() >= 15 }) {
		t.Fatalf("%d request spans received over OTLP/HTTP within 15s", clientSpans())
	}

	// The collector starts refusing: export errors are logged (rate
	// limited), without the keys.
	recv.RefuseWith(http.StatusUnauthorized)
	failedBefore := tr.Stats().ExportFailures
	if !waitUntil(10*time.Second, 20*time.Millisecond, func() bool { return tr.Stats().ExportFailures != failedBefore }) {
		t.Error("no export failure counted while the collector refused")
	}
	var pages []string
	for _, p := range []string{"/", "/config", "/metrics"} {
		code, _, body := d.web.do(t, "GET", p, nil)
		if code != http.StatusOK {
			t.Errorf("GET %s: %d", p, code)
		}
		pages = append(pages, p+":\n"+body)
	}
	recv.RefuseWith(0)

	d.stop(t)
	// The pipelines flush what they still hold; errors of the exports
	// refused above may surface here.
	sctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	time.Sleep(100 * time.Millisecond)
	_ = tr.Shutdown(sctx)
	_ = simTr.Shutdown(sctx)

	// The spans, and the keys they were sent with.
	clients := map[string]string{} // span id -> trace id
	var servers []*tracepb.Span
	for _, s := range recv.Spans() {
		switch {
		case s.Service == "llmprobe" && s.Span.GetKind() == tracepb.Span_SPAN_KIND_CLIENT:
			clients[traceIDHex(s.Span.GetSpanId())] = traceIDHex(s.Span.GetTraceId())
		case s.Service == "llmprobe-sim" && s.Span.GetKind() == tracepb.Span_SPAN_KIND_SERVER:
			servers = append(servers, s.Span)
		}
	}
	if len(clients) < 10 || len(servers) < 10 {
		t.Fatalf("%d client and %d server spans received over OTLP/HTTP", len(clients), len(servers))
	}
	// (Spans of the refused exports are lost: a server span may lack its
	// client span.)
	joined := 0
	for _, s := range servers {
		trace, ok := clients[traceIDHex(s.GetParentSpanId())]
		switch {
		case ok && trace == traceIDHex(s.GetTraceId()):
			joined++
		case ok:
			t.Errorf("server span in trace %s, its client span in %s", traceIDHex(s.GetTraceId()), trace)
		}
	}
	if joined < 10 {
		t.Errorf("%d of %d server spans are children of a received client span", joined, len(servers))
	}
	var fromFile, fromEnv int
	for _, rq := range recv.Requests() {
		if rq.Protocol != "http/protobuf" || rq.Path != "/v1/traces" {
			t.Errorf("request %s %s", rq.Protocol, rq.Path)
		}
		switch k := strings.Join(rq.Header["x-api-key"], ","); k {
		case fileSecret:
			fromFile++
		case envSecret:
			fromEnv++
		default:
			t.Errorf("request with x-api-key %q", k)
		}
	}
	if fromFile == 0 || fromEnv == 0 {
		t.Errorf("%d requests with the config's key, %d with the environment's; want both (the daemon's and the simulator's)", fromFile, fromEnv)
	}

	if !strings.Contains(logs.String(), "OpenTelemetry error") {
		t.Errorf("the refused exports were not logged:\n%s", logs)
	}
	all := logs.String() + otelLogs.String() + strings.Join(pages, "\n")
	for _, secret := range []string{envSecret, fileSecret} {
		if strings.Contains(all, secret) {
			t.Errorf("%s shows in the logs or pages:\n%s", secret, all)
		}
	}
}
