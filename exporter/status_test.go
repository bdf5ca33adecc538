package exporter

import (
	"testing"

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

func TestStatusCollectorNilFunc(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewStatusCollector(nil))
	if mfs := gather(t, reg); len(mfs) != 0 {
		t.Errorf("got %d families from a nil status func", len(mfs))
	}
}
