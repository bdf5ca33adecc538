// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package otlptest

import (
	"compress/gzip"
	"context"
	"errors"
	"io"
	"mime"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// TracesPath is the URL path of OTLP/HTTP traces.
const TracesPath = "/v1/traces"

// maxBody bounds a request body (decoded), as a collector does.
const maxBody = 64 << 20

// StartHTTP serves an OTLP/HTTP Receiver on 127.0.0.1 until the test
// ends. It accepts POST of application/x-protobuf
// ExportTraceServiceRequest bodies (gzip-encoded or not) on any path and
// records the path: tests check that the exporter used /v1/traces, or the
// path its endpoint named.
func StartHTTP(tb testing.TB) *Receiver {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	r, stop := ServeHTTP(l)
	tb.Cleanup(stop)
	return r
}

// ServeHTTP serves an OTLP/HTTP Receiver on l; stop ends it after the
// requests in progress (at most 5s).
func ServeHTTP(l net.Listener) (r *Receiver, stop func()) {
	r = &Receiver{Addr: l.Addr().String()}
	srv := &http.Server{Handler: http.HandlerFunc(r.serveHTTP), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	return r, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if srv.Shutdown(ctx) != nil {
			_ = srv.Close()
		}
	}
}

// RefuseWith makes an OTLP/HTTP Receiver answer every request with status
// (and a short text body) instead of accepting it; 0 accepts again. The
// refused requests are recorded, their spans are not.
func (r *Receiver) RefuseWith(status int) {
	r.mu.Lock()
	r.status = status
	r.mu.Unlock()
}

// serveHTTP is the OTLP/HTTP trace endpoint.
func (r *Receiver) serveHTTP(w http.ResponseWriter, req *http.Request) {
	header := map[string][]string{}
	for k, v := range req.Header {
		header[strings.ToLower(k)] = v
	}
	rq := Request{Protocol: "http/protobuf", Path: req.URL.Path, Header: header}
	refuse := func(code int, msg string) {
		r.mu.Lock()
		r.requests = append(r.requests, rq)
		r.mu.Unlock()
		http.Error(w, msg, code)
	}
	if req.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		refuse(http.StatusMethodNotAllowed, "OTLP/HTTP takes POST")
		return
	}
	if ct, _, err := mime.ParseMediaType(req.Header.Get("Content-Type")); err != nil || ct != "application/x-protobuf" {
		refuse(http.StatusUnsupportedMediaType, "this receiver decodes application/x-protobuf only")
		return
	}
	r.mu.Lock()
	status := r.status
	r.mu.Unlock()
	if status != 0 {
		refuse(status, "refused by the test")
		return
	}
	var body io.Reader = http.MaxBytesReader(w, req.Body, maxBody)
	switch enc := strings.ToLower(req.Header.Get("Content-Encoding")); enc {
	case "", "identity":
	case "gzip":
		zr, err := gzip.NewReader(body)
		if err != nil {
			refuse(http.StatusBadRequest, "bad gzip body")
			return
		}
		defer zr.Close()
		body = io.LimitReader(zr, maxBody+1)
	default:
		refuse(http.StatusUnsupportedMediaType, "unsupported Content-Encoding "+enc)
		return
	}
	data, err := io.ReadAll(body)
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge) || len(data) > maxBody:
		refuse(http.StatusRequestEntityTooLarge, "body too large")
		return
	case err != nil:
		refuse(http.StatusBadRequest, "reading the body: "+err.Error())
		return
	}
	msg := &collectortrace.ExportTraceServiceRequest{}
	if err := proto.Unmarshal(data, msg); err != nil {
		refuse(http.StatusBadRequest, "not an ExportTraceServiceRequest: "+err.Error())
		return
	}
	r.record(rq, msg)
	out, err := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}
