// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package exporter

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/llmprobe/llmprobe/internal/otlptest"
	"github.com/llmprobe/llmprobe/probe"
)

// daemon is the exporter wired over a real engine as cmd/llmprobe wires
// it: the request metrics, the recent-request log and the status
// collector over the engine, a reloader that applies the configuration
// file to all three, and the web handler (lifecycle endpoints on) served
// on loopback. The configuration is not loaded until the test reloads.
type daemon struct {
	reg      *prometheus.Registry
	metrics  *Metrics
	recent   *Recent
	engine   *probe.Engine
	reloader *Reloader
	web      *webFixture
}

// startDaemon wires a daemon over the configuration file at path. opts
// are the engine's options; opts.Observer, when set, observes besides the
// metrics and the recent-request log. The web server stops when the test
// ends; the engine is the test's to stop (daemon.stop).
func startDaemon(t *testing.T, path string, logger *slog.Logger, opts probe.Options) *daemon {
	t.Helper()
	d := &daemon{reg: prometheus.NewRegistry()}
	d.metrics = NewMetrics(d.reg)
	d.recent = NewRecent(logger)
	observers := probe.Observers{d.metrics, d.recent}
	if opts.Observer != nil {
		observers = append(observers, opts.Observer)
	}
	opts.Logger, opts.Observer = logger, observers
	d.engine = probe.NewEngine(opts)
	d.reg.MustRegister(NewStatusCollector(d.engine.Status))
	d.reloader = NewReloader(fileLoader(path), logger, d.reg, Infallible(d.metrics.SetConfig), Infallible(d.recent.SetConfig), d.engine.Apply)
	srv := httptest.NewServer(NewHandler(WebOptions{Logger: logger, Gatherer: d.reg, Status: d.engine.Status, Recent: d.recent,
		Metrics: d.metrics, Reloader: d.reloader, Ready: func() bool { return d.reloader.Current() != nil }, EnableLifecycle: true}))
	t.Cleanup(srv.Close)
	d.web = &webFixture{srv: srv}
	return d
}

// reload loads the configuration file, failing the test if it cannot.
func (d *daemon) reload(t *testing.T) {
	t.Helper()
	if err := d.reloader.Reload(); err != nil {
		t.Fatal(err)
	}
}

// stop shuts the engine down within 15s; then, given tracing pipelines,
// gives the spans a server ends as its responses end a moment and flushes
// and shuts down each pipeline.
func (d *daemon) stop(t *testing.T, pipelines ...*Tracing) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := d.engine.Shutdown(ctx); err != nil {
		t.Fatalf("engine shutdown: %v", err)
	}
	if len(pipelines) == 0 {
		return
	}
	time.Sleep(100 * time.Millisecond)
	for i, tr := range pipelines {
		if err := tr.Shutdown(ctx); err != nil {
			t.Errorf("tracing pipeline %d shutdown: %v", i, err)
		}
	}
}

// waitUntil polls done every interval until it holds, for at most
// timeout, and reports whether it held.
func waitUntil(timeout, every time.Duration, done func() bool) bool {
	for deadline := time.Now().Add(timeout); !done(); time.Sleep(every) {
		if time.Now().After(deadline) {
			return false
		}
	}
	return true
}

// spansJSON is every span the receiver got, as JSON, for searching.
func spansJSON(recv *otlptest.Receiver) string {
	var b strings.Builder
	for _, s := range recv.Spans() {
		b.WriteString(protojson.Format(s.Span))
	}
	return b.String()
}
