// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package exporter

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/llmprobe/llmprobe/probe"
	"github.com/llmprobe/llmprobe/sim"
)

// TestEndToEnd runs the real engine against the built-in simulator over
// loopback, wired to the exporter as the daemon wires it, and reads the
// results back through the HTTP surface.
func TestEndToEnd(t *testing.T) {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	simCfg := sim.DefaultConfig()
	simCfg.Seed = 1
	s, err := sim.New(simCfg, logger)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(l)
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s.Shutdown(ctx)
	}()

	path := filepath.Join(t.TempDir(), "llmprobe.yml")
	writeFile(t, path, fmt.Sprintf(`
global:
  warmup: 0s
  recent_requests: 5
workloads:
  short:
    classes:
      - name: chat
        prompt_tokens: 64
        output_tokens: 8
        prefix: {groups: 1, tokens: 32, probability: 1}
targets:
  - name: sim
    url: http://%s/v1
    model: sim-model
    workload: short
    arrival: {process: constant, rate: 40}
`, l.Addr()))

	d := startDaemon(t, path, logger, probe.Options{})
	d.reload(t)

	// Wait (bounded) for a few dozen requests to end.
	var done float64
	if !waitUntil(20*time.Second, 100*time.Millisecond, func() bool {
		done = series(gather(t, d.reg), "llmprobe_requests_total", map[string]string{"target": "sim", "outcome": "success"}).GetCounter().GetValue()
		return done >= 20
	}) {
		t.Fatalf("only %v successful requests after 20s", done)
	}

	_, _, body := d.web.do(t, "GET", "/metrics", map[string]string{"Accept": "application/openmetrics-text;version=1.0.0"})
	for _, want := range []string{
		`llmprobe_ttft_seconds_count{class="chat",model="sim-model",target="sim"}`,
		`llmprobe_target_request_rate{target="sim"} 40`,
		`llmprobe_prefix_reuse_target_ratio{class="chat",target="sim"} 0.5`,
		`llmprobe_prefix_cache_hit_ratio{class="chat",target="sim"}`,
		`llmprobe_config_last_reload_successful 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if ratio, ok := d.metrics.HitRatio("sim", "chat"); !ok || ratio <= 0 || ratio > 1 {
		t.Errorf("observed hit ratio = %v (%v), want in (0, 1]: every prompt shares a 32-token prefix", ratio, ok)
	}
	_, _, page := d.web.do(t, "GET", "/", nil)
	for _, want := range []string{`id="target-sim"`, "Recent requests", "success", "sim-model"} {
		if !strings.Contains(page, want) {
			t.Errorf("status page lacks %q", want)
		}
	}
	if rec, _ := d.recent.Snapshot("sim"); len(rec) != 5 {
		t.Errorf("%d recent entries, want 5", len(rec))
	}

	// After a shutdown every scheduled arrival is accounted for: sent or
	// dropped, and every sent request ended with an outcome.
	d.stop(t)
	mfs := gather(t, d.reg)
	sum := func(name string) float64 { // every series is target="sim"
		total := 0.0
		for _, m := range mfs[name].GetMetric() {
			total += m.GetCounter().GetValue()
		}
		return total
	}
	scheduled, sent, dropped, ended := sum("llmprobe_requests_scheduled_total"), sum("llmprobe_requests_sent_total"),
		sum("llmprobe_requests_dropped_total"), sum("llmprobe_requests_total")
	if scheduled == 0 || scheduled != sent+dropped || sent != ended {
		t.Errorf("scheduled %v, sent %v, dropped %v, ended %v: want scheduled = sent + dropped and sent = ended", scheduled, sent, dropped, ended)
	}
	t.Logf("scheduled %v, sent %v, dropped %v, ended %v", scheduled, sent, dropped, ended)
}
