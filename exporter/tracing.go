// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package exporter

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/version"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/credentials"

	"github.com/llmprobe/llmprobe/config"
	"github.com/llmprobe/llmprobe/internal/scrub"
)

// OpenTelemetry traces: one SDK TracerProvider per service (the daemon,
// and in demo mode the in-process simulator), exporting over OTLP/gRPC or
// OTLP/HTTP (protobuf).
//
// The protocol is tracing.protocol, else
// OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, else OTEL_EXPORTER_OTLP_PROTOCOL,
// else grpc (the OTel specification's order: the signal-specific variable
// over the generic one, and, as for every key of the section, the config
// file over both). llmprobe's default stays grpc, where the SDK's is
// http/protobuf: it was llmprobe's only protocol, and deployments point
// OTEL_EXPORTER_OTLP_ENDPOINT at port 4317 without a protocol.
//
// Configuration: the standard environment (OTEL_EXPORTER_OTLP_*,
// OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES, OTEL_TRACES_SAMPLER(_ARG),
// OTEL_BSP_*) is read by the SDK and the exporter themselves; the config
// file's tracing section overrides it. Tracing is enabled by an endpoint
// (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or
// tracing.endpoint) and disabled by OTEL_SDK_DISABLED=true or
// OTEL_TRACES_EXPORTER=none.
//
// Spans never wait for the collector: ended spans go through a bounded
// queue (OTEL_BSP_MAX_QUEUE_SIZE, default 2048) to a batching exporter;
// when the queue is full, spans are dropped and counted. The SDK's batch
// processor drops silently, so the queue bound is enforced here, in front
// of it, where every drop is seen: pending counts the spans handed to the
// batch processor that have not yet come out of an export (exported or
// failed), and a span arriving when pending is at the bound is dropped.
// The batch processor's own queue has the same capacity, so it never
// drops by itself.

// Environment variables read here (the others are read by the SDK).
const (
	envSDKDisabled       = "OTEL_SDK_DISABLED"
	envTracesExporter    = "OTEL_TRACES_EXPORTER"
	envEndpoint          = "OTEL_EXPORTER_OTLP_ENDPOINT"
	envTracesEndpoint    = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	envProtocol          = "OTEL_EXPORTER_OTLP_PROTOCOL"
	envTracesProtocol    = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	envHeaders           = "OTEL_EXPORTER_OTLP_HEADERS"
	envTracesHeaders     = "OTEL_EXPORTER_OTLP_TRACES_HEADERS"
	envBSPQueueSize      = "OTEL_BSP_MAX_QUEUE_SIZE"
	envBSPBatchSize      = "OTEL_BSP_MAX_EXPORT_BATCH_SIZE"
	defaultQueueSize     = sdktrace.DefaultMaxQueueSize
	defaultBatchSize     = sdktrace.DefaultMaxExportBatchSize
	instrumentationScope = "github.com/llmprobe/llmprobe/probe"
)

// TracingOptions configure NewTracing.
type TracingOptions struct {
	// Config is the config file's tracing section; its keys override the
	// environment.
	Config config.Tracing
	// DefaultServiceName is service.name when neither OTEL_SERVICE_NAME,
	// OTEL_RESOURCE_ATTRIBUTES nor the config names the service.
	DefaultServiceName string
	// ServiceName, when set, is service.name whatever the environment and
	// the config say (the in-process simulator of demo mode is its own
	// service).
	ServiceName string
	// ServiceVersion is service.version.
	ServiceVersion string
	// Logger receives the export errors (rate-limited).
	Logger *slog.Logger
}

// Tracing is a running trace pipeline: a TracerProvider whose spans are
// exported over OTLP (gRPC or HTTP) through a bounded, non-blocking queue.
// It is a prometheus.Collector of what became of the spans.
type Tracing struct {
	provider   *sdktrace.TracerProvider
	propagator propagation.TextMapPropagator
	queue      *boundedProcessor
	exp        *countingExporter
	endpoint   string
	protocol   string
	service    string
}

// TracingEnabled reports whether tracing is on for cfg and the
// environment: an endpoint is configured, and neither OTEL_SDK_DISABLED
// nor OTEL_TRACES_EXPORTER=none turns it off.
func TracingEnabled(cfg config.Tracing) bool {
	if v, _ := strconv.ParseBool(strings.TrimSpace(os.Getenv(envSDKDisabled))); v {
		return false
	}
	if strings.EqualFold(strings.TrimSpace(os.Getenv(envTracesExporter)), "none") {
		return false
	}
	return cfg.Endpoint != "" || os.Getenv(envEndpoint) != "" || os.Getenv(envTracesEndpoint) != ""
}

// NewTracing starts the trace pipeline described by opts and the
// environment. It returns nil and no error when tracing is disabled (see
// TracingEnabled). It does not connect: an unreachable collector shows as
// export failures and dropped spans, never as an error here.
func NewTracing(ctx context.Context, opts TracingOptions) (*Tracing, error) {
	if !TracingEnabled(opts.Config) {
		return nil, nil
	}
	if err := checkEnv(); err != nil {
		return nil, err
	}
	protocol, err := tracesProtocol(opts.Config)
	if err != nil {
		return nil, err
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	cfg := opts.Config
	queueSize, batchSize, err := queueSizes()
	if err != nil {
		return nil, err
	}
	res, err := tracingResource(ctx, opts)
	if err != nil {
		return nil, err
	}

	endpoint := cfg.Endpoint
	if endpoint == "" {
		endpoint = os.Getenv(envTracesEndpoint)
		if endpoint == "" {
			endpoint = os.Getenv(envEndpoint)
		}
	}
	var client sdktrace.SpanExporter
	if protocol == config.TracingProtocolHTTPProtobuf {
		client, err = newHTTPExporter(ctx, cfg)
	} else {
		client, err = newGRPCExporter(ctx, cfg)
	}
	if err != nil {
		// The exporters' errors name no header value.
		return nil, fmt.Errorf("OTLP trace exporter (%s): %w", protocol, err)
	}

	queue := &boundedProcessor{limit: int64(queueSize)}
	exp := &countingExporter{next: client, done: queue.done}
	queue.next = sdktrace.NewBatchSpanProcessor(exp,
		sdktrace.WithMaxQueueSize(queueSize),
		sdktrace.WithMaxExportBatchSize(batchSize),
		// Never BlockOnQueueFull: the probe must not wait for the collector.
	)

	popts := []sdktrace.TracerProviderOption{
		sdktrace.WithResource(res),
		sdktrace.WithSpanProcessor(queue),
	}
	if r := cfg.SamplingRatio; r != nil {
		popts = append(popts, sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(*r))))
	}
	t := &Tracing{
		provider:   sdktrace.NewTracerProvider(popts...),
		propagator: propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}),
		queue:      queue,
		exp:        exp,
		endpoint:   scrub.URL(endpoint),
		protocol:   protocol,
	}
	if v, ok := res.Set().Value("service.name"); ok {
		t.service = v.AsString()
	}
	return t, nil
}

// newGRPCExporter is the OTLP/gRPC exporter of cfg; the exporter reads
// the OTEL_EXPORTER_OTLP_* environment that cfg does not override.
func newGRPCExporter(ctx context.Context, cfg config.Tracing) (sdktrace.SpanExporter, error) {
	var eopts []otlptracegrpc.Option
	switch ep := cfg.Endpoint; {
	case strings.Contains(ep, "://"):
		eopts = append(eopts, otlptracegrpc.WithEndpointURL(ep))
	case ep != "":
		eopts = append(eopts, otlptracegrpc.WithEndpoint(ep))
	}
	if cfg.Insecure != nil {
		if *cfg.Insecure {
			eopts = append(eopts, otlptracegrpc.WithInsecure())
		} else {
			eopts = append(eopts, otlptracegrpc.WithTLSCredentials(credentials.NewClientTLSFromCert(nil, "")))
		}
	}
	if h := configHeaders(cfg); h != nil {
		eopts = append(eopts, otlptracegrpc.WithHeaders(h))
	}
	return otlptracegrpc.New(ctx, eopts...)
}

// newHTTPExporter is the OTLP/HTTP (protobuf) exporter of cfg; the
// exporter reads the OTEL_EXPORTER_OTLP_* environment that cfg does not
// override, with the specification's default paths (/v1/traces appended
// to OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT used
// as it is, localhost:4318 without either). tracing.endpoint is a base
// URL when it has no path (/v1/traces is appended), used as it is
// otherwise.
func newHTTPExporter(ctx context.Context, cfg config.Tracing) (sdktrace.SpanExporter, error) {
	eopts := []otlptracehttp.Option{otlptracehttp.WithEncoding(otlptracehttp.EncodingProtobuf)}
	switch ep := cfg.Endpoint; {
	case strings.Contains(ep, "://"):
		eopts = append(eopts, otlptracehttp.WithEndpointURL(ep))
		if u, err := url.Parse(ep); err == nil && (u.Path == "" || u.Path == "/") {
			eopts = append(eopts, otlptracehttp.WithURLPath(defaultHTTPTracesPath))
		}
	case ep != "":
		eopts = append(eopts, otlptracehttp.WithEndpoint(ep), otlptracehttp.WithURLPath(defaultHTTPTracesPath))
	}
	if cfg.Insecure != nil {
		if *cfg.Insecure {
			eopts = append(eopts, otlptracehttp.WithInsecure())
		} else {
			eopts = append(eopts, otlptracehttp.WithTLSClientConfig(&tls.Config{MinVersion: tls.VersionTLS12}))
		}
	}
	if h := configHeaders(cfg); h != nil {
		eopts = append(eopts, otlptracehttp.WithHeaders(h))
	}
	return otlptracehttp.New(ctx, eopts...)
}

// defaultHTTPTracesPath is the OTLP/HTTP path of traces.
const defaultHTTPTracesPath = "/v1/traces"

// configHeaders are the config's export headers (nil: none configured,
// the environment's apply), with lower-case names.
func configHeaders(cfg config.Tracing) map[string]string {
	if len(cfg.Headers) == 0 {
		return nil
	}
	h := make(map[string]string, len(cfg.Headers))
	for k, v := range cfg.Headers {
		h[strings.ToLower(k)] = string(v)
	}
	return h
}

// tracesProtocol is the OTLP protocol of the pipeline: tracing.protocol,
// else OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, else
// OTEL_EXPORTER_OTLP_PROTOCOL, else grpc. A protocol llmprobe does not
// send is an error naming where it was set, rather than silently sending
// nothing (the variables of lower precedence are not looked at).
func tracesProtocol(cfg config.Tracing) (string, error) {
	if p := cfg.Protocol; p != "" {
		if msg := config.TracingProtocolProblem(p); msg != "" {
			return "", fmt.Errorf("tracing.protocol: %s", msg)
		}
		return p, nil
	}
	for _, name := range []string{envTracesProtocol, envProtocol} {
		v := strings.TrimSpace(os.Getenv(name))
		if v == "" {
			continue
		}
		if msg := config.TracingProtocolProblem(v); msg != "" {
			return "", fmt.Errorf("%s=%q: %s", name, v, msg)
		}
		return v, nil
	}
	return config.TracingProtocolGRPC, nil
}

// checkHeadersEnv rejects OTEL_EXPORTER_OTLP_(TRACES_)HEADERS that the
// OTLP exporters would not parse. They would log the offending entry,
// value included, through OpenTelemetry's global logger (to stderr) and
// drop it; the entry is likely a secret (an API key written as
// "api-key: value"), so it is refused here with an error that names the
// variable and the entry's position, never its text.
func checkHeadersEnv() error {
	for _, name := range []string{envHeaders, envTracesHeaders} {
		v := os.Getenv(name)
		if strings.TrimSpace(v) == "" {
			continue
		}
		for i, entry := range strings.Split(v, ",") {
			if strings.TrimSpace(entry) == "" {
				continue // nothing to leak (the exporter skips it)
			}
			k, val, found := strings.Cut(entry, "=")
			k = strings.TrimSpace(k)
			switch {
			case !found:
				return fmt.Errorf("%s: entry %d is not name=value (want name1=value1,name2=value2; the entry is not shown, it may hold a secret)", name, i+1)
			case !validHeaderToken(k):
				return fmt.Errorf("%s: entry %d has an invalid header name (an HTTP token: letters, digits, !#$%%&'*+-.^_`|~; the entry is not shown, it may hold a secret)", name, i+1)
			}
			if _, err := url.PathUnescape(val); err != nil {
				return fmt.Errorf("%s: the value of header %q is not valid percent-encoding (the value is not shown)", name, k)
			}
		}
	}
	return nil
}

// validHeaderToken reports whether name is an HTTP token (RFC 9110), as
// the OTLP exporters require of header names.
func validHeaderToken(name string) bool {
	if name == "" {
		return false
	}
	for _, c := range name {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', strings.ContainsRune("!#$%&'*+-.^_`|~", c):
		default:
			return false
		}
	}
	return true
}

// checkEnv rejects environment settings this build cannot honour, rather
// than silently sending nothing, and headers the exporters would log.
func checkEnv() error {
	if err := checkHeadersEnv(); err != nil {
		return err
	}
	if v := strings.ToLower(strings.TrimSpace(os.Getenv(envTracesExporter))); v != "" && v != "otlp" && v != "none" {
		return fmt.Errorf("%s=%q: supported values are otlp and none", envTracesExporter, v)
	}
	return nil
}

// queueSizes reads the queue bound and export batch size from
// OTEL_BSP_MAX_QUEUE_SIZE and OTEL_BSP_MAX_EXPORT_BATCH_SIZE.
func queueSizes() (queue, batch int, err error) {
	read := func(name string, def int) (int, error) {
		v := strings.TrimSpace(os.Getenv(name))
		if v == "" {
			return def, nil
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return 0, fmt.Errorf("%s=%q: want a positive integer", name, v)
		}
		return n, nil
	}
	if queue, err = read(envBSPQueueSize, defaultQueueSize); err != nil {
		return 0, 0, err
	}
	if batch, err = read(envBSPBatchSize, defaultBatchSize); err != nil {
		return 0, 0, err
	}
	return queue, min(batch, queue), nil
}

// tracingResource describes the service: service.name (the default, then
// OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME, then the config, then a
// forced name), service.version, the SDK and the host.
func tracingResource(ctx context.Context, opts TracingOptions) (*resource.Resource, error) {
	def := opts.DefaultServiceName
	if def == "" {
		def = "llmprobe"
	}
	base := []attribute.KeyValue{attribute.String("service.name", def)}
	if opts.ServiceVersion != "" {
		base = append(base, attribute.String("service.version", opts.ServiceVersion))
	}
	ropts := []resource.Option{
		resource.WithAttributes(base...),
		resource.WithFromEnv(),
		resource.WithTelemetrySDK(),
		resource.WithHost(),
	}
	name := opts.ServiceName
	if name == "" {
		name = opts.Config.ServiceName
	}
	if name != "" {
		ropts = append(ropts, resource.WithAttributes(attribute.String("service.name", name)))
	}
	res, err := resource.New(ctx, ropts...)
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("OTel resource: %w", err)
	}
	if err != nil {
		opts.Logger.Warn("some OTEL_RESOURCE_ATTRIBUTES could not be used", "err", err)
	}
	return res, nil
}

// TracerProvider returns the provider (for the simulator's server spans).
func (t *Tracing) TracerProvider() trace.TracerProvider { return t.provider }

// Tracer returns the tracer of llmprobe's request spans.
func (t *Tracing) Tracer() trace.Tracer {
	return t.provider.Tracer(instrumentationScope, trace.WithInstrumentationVersion(versionOrDev()))
}

// Propagator returns the W3C TraceContext + Baggage propagator.
func (t *Tracing) Propagator() propagation.TextMapPropagator { return t.propagator }

// ServiceName returns the service.name the spans carry.
func (t *Tracing) ServiceName() string { return t.service }

// Endpoint returns the collector endpoint for display (without
// credentials; empty when the exporter's default applies).
func (t *Tracing) Endpoint() string { return t.endpoint }

// Protocol returns the OTLP protocol: "grpc" or "http/protobuf".
func (t *Tracing) Protocol() string { return t.protocol }

// TracingStats are the counts of a pipeline's spans.
type TracingStats struct {
	Exported       uint64 // accepted by the collector
	DroppedFull    uint64 // dropped because the queue was full
	DroppedFailed  uint64 // lost in failed exports
	ExportFailures uint64 // failed export calls (batches)
	Queued         int64  // waiting for export or being exported
}

// Stats returns the current counts.
func (t *Tracing) Stats() TracingStats {
	return TracingStats{
		Exported:       t.exp.exported.Load(),
		DroppedFull:    t.queue.dropped.Load(),
		DroppedFailed:  t.exp.failedSpans.Load(),
		ExportFailures: t.exp.failures.Load(),
		Queued:         t.queue.pending.Load(),
	}
}

// Shutdown exports what is queued and stops the pipeline, within ctx: an
// unreachable collector delays it at most until ctx is done.
func (t *Tracing) Shutdown(ctx context.Context) error {
	return t.provider.Shutdown(ctx)
}

var (
	traceExportedDesc = prometheus.NewDesc("llmprobe_trace_spans_exported_total",
		"Request spans the OTLP collector accepted.", nil, nil)
	traceDroppedDesc = prometheus.NewDesc("llmprobe_trace_spans_dropped_total",
		"Request spans lost: queue_full (the export queue was full; spans never wait for the collector) or export_failed (the export of their batch failed).",
		[]string{"reason"}, nil)
	traceFailuresDesc = prometheus.NewDesc("llmprobe_trace_export_failures_total",
		"Failed OTLP export calls (each a batch of spans).", nil, nil)
	traceQueueDesc = prometheus.NewDesc("llmprobe_trace_queue_spans",
		"Ended spans waiting for export or being exported.", nil, nil)
	traceQueueCapDesc = prometheus.NewDesc("llmprobe_trace_queue_capacity_spans",
		"Bound of the span export queue (OTEL_BSP_MAX_QUEUE_SIZE).", nil, nil)
)

// Describe implements prometheus.Collector.
func (t *Tracing) Describe(ch chan<- *prometheus.Desc) {
	ch <- traceExportedDesc
	ch <- traceDroppedDesc
	ch <- traceFailuresDesc
	ch <- traceQueueDesc
	ch <- traceQueueCapDesc
}

// Collect implements prometheus.Collector.
func (t *Tracing) Collect(ch chan<- prometheus.Metric) {
	s := t.Stats()
	ch <- prometheus.MustNewConstMetric(traceExportedDesc, prometheus.CounterValue, float64(s.Exported))
	ch <- prometheus.MustNewConstMetric(traceDroppedDesc, prometheus.CounterValue, float64(s.DroppedFull), "queue_full")
	ch <- prometheus.MustNewConstMetric(traceDroppedDesc, prometheus.CounterValue, float64(s.DroppedFailed), "export_failed")
	ch <- prometheus.MustNewConstMetric(traceFailuresDesc, prometheus.CounterValue, float64(s.ExportFailures))
	ch <- prometheus.MustNewConstMetric(traceQueueDesc, prometheus.GaugeValue, float64(s.Queued))
	ch <- prometheus.MustNewConstMetric(traceQueueCapDesc, prometheus.GaugeValue, float64(t.queue.limit))
}

// boundedProcessor bounds the spans in flight to the batch processor and
// counts what it drops.
type boundedProcessor struct {
	next    sdktrace.SpanProcessor
	limit   int64
	pending atomic.Int64
	dropped atomic.Uint64
}

// OnStart implements sdktrace.SpanProcessor (the batch processor does
// nothing at start).
func (p *boundedProcessor) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

// OnEnd implements sdktrace.SpanProcessor: the span is queued for export,
// or dropped and counted when the queue is full. It never blocks.
func (p *boundedProcessor) OnEnd(s sdktrace.ReadOnlySpan) {
	if !s.SpanContext().IsSampled() {
		return
	}
	if p.pending.Add(1) > p.limit {
		p.pending.Add(-1)
		p.dropped.Add(1)
		return
	}
	p.next.OnEnd(s)
}

// done records n spans out of the pipeline (exported or failed).
func (p *boundedProcessor) done(n int) { p.pending.Add(-int64(n)) }

// Shutdown implements sdktrace.SpanProcessor.
func (p *boundedProcessor) Shutdown(ctx context.Context) error { return p.next.Shutdown(ctx) }

// ForceFlush implements sdktrace.SpanProcessor.
func (p *boundedProcessor) ForceFlush(ctx context.Context) error { return p.next.ForceFlush(ctx) }

// countingExporter counts exported and failed spans.
type countingExporter struct {
	next        sdktrace.SpanExporter
	done        func(n int)
	exported    atomic.Uint64
	failedSpans atomic.Uint64
	failures    atomic.Uint64
}

// ExportSpans implements sdktrace.SpanExporter. A partial success (the
// collector rejected some spans) counts the whole batch as failed.
func (e *countingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	err := e.next.ExportSpans(ctx, spans)
	if err != nil {
		e.failures.Add(1)
		e.failedSpans.Add(uint64(len(spans)))
	} else {
		e.exported.Add(uint64(len(spans)))
	}
	e.done(len(spans))
	return err
}

// Shutdown implements sdktrace.SpanExporter.
func (e *countingExporter) Shutdown(ctx context.Context) error { return e.next.Shutdown(ctx) }

// OTelErrorHandler returns an otel.ErrorHandler that logs the SDK's
// errors (failed exports, bad OTEL_* values) through logger, at most one
// line per interval; the lines in between are counted in the next one.
// Install it with otel.SetErrorHandler.
func OTelErrorHandler(logger *slog.Logger, interval time.Duration) otel.ErrorHandler {
	return &rateLimitedHandler{logger: logger, interval: interval}
}

type rateLimitedHandler struct {
	logger     *slog.Logger
	interval   time.Duration
	mu         sync.Mutex
	last       time.Time
	suppressed int
}

// Handle implements otel.ErrorHandler.
func (h *rateLimitedHandler) Handle(err error) {
	now := time.Now()
	h.mu.Lock()
	if !h.last.IsZero() && now.Sub(h.last) < h.interval {
		h.suppressed++
		h.mu.Unlock()
		return
	}
	n := h.suppressed
	h.last, h.suppressed = now, 0
	h.mu.Unlock()
	h.logger.Warn("OpenTelemetry error", "component", "tracing", "err", err, "suppressed_since_last", n)
}

func versionOrDev() string {
	if version.Version == "" {
		return "dev"
	}
	return version.Version
}
