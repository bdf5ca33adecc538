// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

// Package otlptest runs real OTLP trace receivers on a loopback port, for
// tests that check the spans llmprobe and its simulator export: the
// collector's gRPC trace service (from go.opentelemetry.io/proto/otlp),
// and OTLP/HTTP with protobuf bodies (POST of an ExportTraceServiceRequest
// as application/x-protobuf, as the specification defines it).
//
// It is test support: only tests import it, and it imports no llmprobe
// package.
package otlptest

import (
	"context"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// Receiver keeps every span it receives with its resource's service.name,
// and what each export request carried (its headers or metadata).
type Receiver struct {
	collectortrace.UnimplementedTraceServiceServer
	// Addr is the host:port it listens on.
	Addr string

	mu       sync.Mutex
	spans    []Span
	requests []Request
	status   int // OTLP/HTTP: answer with this status instead (0: accept)
}

// Span is a received span and the service that sent it.
type Span struct {
	Service string
	Span    *tracepb.Span
}

// Request is one export call as received.
type Request struct {
	// Protocol is "grpc" or "http/protobuf".
	Protocol string
	// Path is the URL path of an OTLP/HTTP request, the method of a
	// gRPC call.
	Path string
	// Header holds the HTTP headers, or the gRPC metadata, by lower-case
	// name.
	Header map[string][]string
	// Spans is how many spans the request carried (0 for a request that
	// could not be decoded or was refused).
	Spans int
}

// Start serves an OTLP/gRPC Receiver on 127.0.0.1 until the test ends.
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

// Serve serves an OTLP/gRPC Receiver on l; stop ends it after the calls
// in progress.
func Serve(l net.Listener) (r *Receiver, stop func()) {
	r = &Receiver{Addr: l.Addr().String()}
	srv := grpc.NewServer()
	collectortrace.RegisterTraceServiceServer(srv, r)
	go func() { _ = srv.Serve(l) }()
	return r, srv.GracefulStop
}

// Export implements collectortrace.TraceServiceServer.
func (r *Receiver) Export(ctx context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	header := map[string][]string{}
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		for k, v := range md {
			header[strings.ToLower(k)] = slices.Clone(v)
		}
	}
	path := "/" + collectortrace.TraceService_ServiceDesc.ServiceName + "/Export"
	r.record(Request{Protocol: "grpc", Path: path, Header: header}, req)
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

// record keeps the spans of req, and the request.
func (r *Receiver) record(rq Request, req *collectortrace.ExportTraceServiceRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := len(r.spans)
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
	rq.Spans = len(r.spans) - n
	r.requests = append(r.requests, rq)
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

// Requests returns the export requests received so far, in order.
func (r *Receiver) Requests() []Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.requests)
}

// WaitFor waits until at least n spans were received or d has passed,
// and returns how many were.
func (r *Receiver) WaitFor(n int, d time.Duration) int {
	deadline := time.Now().Add(d)
	for {
		c := r.Count()
		if c >= n || time.Now().After(deadline) {
			return c
		}
		time.Sleep(10 * time.Millisecond)
	}
}
