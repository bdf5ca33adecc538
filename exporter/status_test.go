// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package exporter

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/llmprobe/llmprobe/probe"
)

func TestStatusCollector(t *testing.T) {
	statuses := testStatus()
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewStatusCollector(func() []probe.TargetStatus { return statuses }))
	mfs := gather(t, reg)

	want := []struct {
		name   string
		labels map[string]string
		value  float64
	}{
		{"llmprobe_inflight_requests", map[string]string{"target": "alpha"}, 2},
		{"llmprobe_inflight_requests", map[string]string{"target": "beta"}, 64},
		{"llmprobe_target_request_rate", map[string]string{"target": "alpha"}, 1},
		{"llmprobe_target_request_rate", map[string]string{"target": "beta"}, 2},
		{"llmprobe_harness_saturated", map[string]string{"target": "alpha"}, 0},
		{"llmprobe_harness_saturated", map[string]string{"target": "beta"}, 1},
		{"llmprobe_warmup", map[string]string{"target": "alpha"}, 0},
		{"llmprobe_warmup", map[string]string{"target": "beta"}, 1},
		{"llmprobe_prefix_reuse_target_ratio", map[string]string{"target": "alpha", "class": "chat"}, 0.25},
		{"llmprobe_prefix_reuse_target_ratio", map[string]string{"target": "alpha", "class": "agent"}, 0},
		{"llmprobe_prefix_reuse_target_ratio", map[string]string{"target": "beta", "class": "ping"}, 0},
	}
	for _, w := range want {
		s := series(mfs, w.name, w.labels)
		if s == nil {
			t.Errorf("%s%v missing", w.name, w.labels)
			continue
		}
		if got := s.GetGauge().GetValue(); got != w.value {
			t.Errorf("%s%v = %v, want %v", w.name, w.labels, got, w.value)
		}
	}

	// A target the engine no longer runs disappears at the next scrape.
	statuses = statuses[:1]
	mfs = gather(t, reg)
	for _, name := range []string{"llmprobe_inflight_requests", "llmprobe_harness_saturated", "llmprobe_prefix_reuse_target_ratio"} {
		if n := countSeries(mfs, name, map[string]string{"target": "beta"}); n != 0 {
			t.Errorf("%s still has beta after it stopped", name)
		}
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}

// TestStatusConnectionsAndProtocol: every target has its open
// connections; the protocol info series is the protocol of its last
// response, none before the first, and replaced when it changes.
func TestStatusConnectionsAndProtocol(t *testing.T) {
	statuses := testStatus()
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewStatusCollector(func() []probe.TargetStatus { return statuses }))
	mfs := gather(t, reg)
	for target, want := range map[string]float64{"alpha": 3, "beta": 64} {
		s := series(mfs, "llmprobe_target_connections", map[string]string{"target": target})
		if s == nil || s.GetGauge().GetValue() != want {
			t.Errorf("llmprobe_target_connections{target=%q} = %v, want %v", target, s.GetGauge().GetValue(), want)
		}
	}
	if s := series(mfs, "llmprobe_target_http_protocol_info", map[string]string{"target": "alpha", "protocol": "HTTP/2.0"}); s == nil || s.GetGauge().GetValue() != 1 {
		t.Errorf("alpha's protocol info: %v", s)
	}
	if n := countSeries(mfs, "llmprobe_target_http_protocol_info", map[string]string{"target": "beta"}); n != 0 {
		t.Errorf("beta has %d protocol series before any response", n)
	}
	statuses[0].Protocol = "HTTP/1.1"
	mfs = gather(t, reg)
	if n := countSeries(mfs, "llmprobe_target_http_protocol_info", map[string]string{"target": "alpha"}); n != 1 ||
		series(mfs, "llmprobe_target_http_protocol_info", map[string]string{"target": "alpha", "protocol": "HTTP/1.1"}) == nil {
		t.Errorf("alpha has %d protocol series after the change, want HTTP/1.1 alone", n)
	}
}

func TestStatusCollectorNilFunc(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewStatusCollector(nil))
	if mfs := gather(t, reg); len(mfs) != 0 {
		t.Errorf("got %d families from a nil status func", len(mfs))
	}
}

// A target that follows production (workload_from) exports its refits;
// the fitted quantiles appear only after a success.
func TestStatusCollectorRefit(t *testing.T) {
	st := testStatus()[:1]
	st[0].Refit = &probe.RefitStatus{Failures: 2}
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewStatusCollector(func() []probe.TargetStatus { return st }))
	mfs := gather(t, reg)
	if s := series(mfs, "llmprobe_workload_refits_total", map[string]string{"target": "alpha", "result": "failure"}); s.GetCounter().GetValue() != 2 {
		t.Errorf("failures = %v", s)
	}
	if n := countSeries(mfs, "llmprobe_workload_fitted_tokens", nil); n != 0 {
		t.Errorf("%d fitted-token series before any success", n)
	}
	if s := series(mfs, "llmprobe_workload_refit_success_timestamp_seconds", map[string]string{"target": "alpha"}); s.GetGauge().GetValue() != 0 {
		t.Errorf("timestamp before success = %v", s)
	}

	st[0].Refit = &probe.RefitStatus{Successes: 1, Failures: 2, LastSuccess: time.Unix(1700000000, 0), Prompt: [3]float64{700, 900, 990}, Output: [3]float64{60, 80, 99}}
	mfs = gather(t, reg)
	for _, w := range []struct {
		labels map[string]string
		value  float64
	}{
		{map[string]string{"target": "alpha", "kind": "prompt", "percentile": "p50"}, 700},
		{map[string]string{"target": "alpha", "kind": "prompt", "percentile": "p99"}, 990},
		{map[string]string{"target": "alpha", "kind": "output", "percentile": "p90"}, 80},
	} {
		if s := series(mfs, "llmprobe_workload_fitted_tokens", w.labels); s.GetGauge().GetValue() != w.value {
			t.Errorf("fitted tokens %v = %v, want %v", w.labels, s, w.value)
		}
	}
	if s := series(mfs, "llmprobe_workload_refit_success_timestamp_seconds", map[string]string{"target": "alpha"}); s.GetGauge().GetValue() != 1700000000 {
		t.Errorf("timestamp = %v", s)
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}
