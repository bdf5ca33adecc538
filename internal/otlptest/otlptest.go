// Package otlptest runs a real OTLP/gRPC trace receiver (the collector's
// trace service from go.opentelemetry.io/proto/otlp) on a loopback port,
// for tests that check the spans llmprobe and its simulator export.
package otlptest

import (
	"context"
	"net"
	"slices"
	"sync"
	"testing"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
)

// Receiver keeps every span it receives with its resource's service.name.
type Receiver struct {
	collectortrace.UnimplementedTraceServiceServer
	// Addr is the host:port it listens on.
	Addr string

	mu    sync.Mutex
	spans []Span
}

// Span is a received span and the service that sent it.
type Span struct {
	Service string
	Span    *tracepb.Span
}

// Start serves a Receiver on 127.0.0.1 until the test ends.
func Start(tb testing.TB) *Receiver {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	r, stop := Serve(l)
	tb.Cleanup(stop)
	return r
}

// Serve serves a Receiver on l; stop ends it after the calls in progress.
func Serve(l net.Listener) (r *Receiver, stop func()) {
	r = &Receiver{Addr: l.Addr().String()}
	srv := grpc.NewServer()
	collectortrace.RegisterTraceServiceServer(srv, r)
	go func() { _ = srv.Serve(l) }()
	return r, srv.GracefulStop
}

// Export implements collectortrace.TraceServiceServer.
func (r *Receiver) Export(_ context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		service := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				service = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				r.spans = append(r.spans, Span{Service: service, Span: s})
			}
		}
	}
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

// Spans returns the spans received so far.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.spans)
}

// Count returns how many spans were received so far.
func (r *Receiver) Count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.spans)
}
