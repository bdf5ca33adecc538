// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"context"
	"errors"
	"net"
	"net/http"
	"testing"
	"time"
)

// serveOwn serves s on a fresh loopback listener and reports Serve's result.
func serveOwn(t *testing.T, cfg Config) (string, *Server, <-chan error) {
	t.Helper()
	s, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve(l) }()
	t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	return "http://" + l.Addr().String(), s, served
}

// streamInFlight serves a server whose decode steps take decodeBase,
// streams body to path and returns once the engine runs it; done delivers
// the stream's result.
func streamInFlight(t *testing.T, decodeBase time.Duration, path string, body any) (base string, s *Server, served <-chan error, done <-chan *streamResult) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.EOSProbability = 0
	cfg.DecodeBase = decodeBase
	base, s, served = serveOwn(t, cfg)
	result := make(chan *streamResult)
	go func() { result <- stream(t, base+path, body) }()
	waitForMetric(t, base, `vllm:num_requests_running{engine="0",model_name="sim-model"}`, 1)
	return base, s, served, result
}

func TestGracefulShutdown(t *testing.T) {
	base, s, served, done := streamInFlight(t, 10*time.Millisecond, "/v1/chat/completions", chatBody("keep going", 30))

	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	took := time.Since(start)
	r := <-done
	if !r.done || len(r.tokens) != 30 || r.readErr != nil {
		t.Errorf("in-flight stream during graceful shutdown: done %v, %d tokens, err %v", r.done, len(r.tokens), r.readErr)
	}
	if took > 3*time.Second {
		t.Errorf("Shutdown took %v for a stream of ~300ms", took)
	}
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("Serve returned %v after Shutdown, want nil", err)
		}
	case <-time.After(5 * time.Second):
		t.Error("Serve did not return after Shutdown")
	}
	if _, err := testClient.Get(base + "/health"); err == nil {
		t.Error("the server still accepts connections after Shutdown")
	}
	if err := s.Shutdown(context.Background()); err != nil {
		t.Errorf("second Shutdown: %v", err)
	}
}

func TestShutdownDeadlineCutsStreams(t *testing.T) {
	_, s, _, done := streamInFlight(t, 5*time.Millisecond, "/v1/completions", completionBody("long", 5000))
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := s.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Shutdown past its deadline returned %v, want context.DeadlineExceeded", err)
	}
	select {
	case r := <-done:
		if r.done || len(r.tokens) >= 5000 {
			t.Errorf("cut stream: done %v, %d tokens", r.done, len(r.tokens))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the stream was not cut")
	}
	// Requests that reach a stopped server's handler are refused.
	req, _ := http.NewRequest(http.MethodPost, "/v1/completions", stringsReader(`{"prompt":"x"}`))
	rec := newRecorder()
	s.Handler().ServeHTTP(rec, req)
	if rec.Code != http.StatusServiceUnavailable {
		t.Errorf("handler after shutdown: status %d, want 503", rec.Code)
	}
}
