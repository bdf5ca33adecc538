// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package exporter

import (
	"testing"
	"time"

	"github.com/llmprobe/llmprobe/probe/wire"
)

// TestSLOCounters: every request after warm-up is judged good or bad
// against its target's SLO, violations count once per broken bound, and
// only (target, class) pairs with an SLO have series, all from 0.
func TestSLOCounters(t *testing.T) {
	m, reg := configuredMetrics(t) // alpha: objective 0.99, TTFT ≤ 500ms, TPOT ≤ 60ms

	mfs := gather(t, reg)
	for _, class := range []string{"chat", "agent"} {
		for _, result := range []string{"good", "bad"} {
			if s := series(mfs, "llmprobe_slo_requests_total", map[string]string{"target": "alpha", "class": class, "result": result}); s == nil || s.GetCounter().GetValue() != 0 {
				t.Errorf("alpha/%s %s: %v, want a series at 0", class, result, s)
			}
		}
		for _, bound := range []string{"ttft", "tpot", "e2e", "error"} {
			if s := series(mfs, "llmprobe_slo_violations_total", map[string]string{"target": "alpha", "class": class, "bound": bound}); s == nil {
				t.Errorf("alpha/%s violations{bound=%q} missing", class, bound)
			}
		}
		if s := series(mfs, "llmprobe_slo_objective_ratio", map[string]string{"target": "alpha", "class": class}); s.GetGauge().GetValue() != 0.99 {
			t.Errorf("objective %v, want 0.99", s)
		}
		if s := series(mfs, "llmprobe_slo_window_seconds", map[string]string{"target": "alpha", "class": class}); s.GetGauge().GetValue() != (28 * 24 * time.Hour).Seconds() {
			t.Errorf("window %v, want 28d", s)
		}
	}
	if n := countSeries(mfs, "llmprobe_slo_requests_total", map[string]string{"target": "beta"}); n != 0 {
		t.Errorf("beta has no SLO but %d series", n)
	}

	good := successResult("alpha", "model-a", "chat") // TTFT 250ms, TPOT ~24.7ms
	slowFirst := successResult("alpha", "model-a", "chat")
	slowFirst.TTFT = 800 * time.Millisecond
	slowBoth := successResult("alpha", "model-a", "chat")
	slowBoth.TTFT, slowBoth.TPOT = time.Second, 100*time.Millisecond
	oneToken := successResult("alpha", "model-a", "chat")
	oneToken.OutputTokens, oneToken.TPOT = 1, time.Hour // no TPOT to judge
	failed := &wire.Result{Target: "alpha", Model: "model-a", Class: "chat", Outcome: wire.OutcomeHTTPError, ErrorType: "http_503", StatusCode: 503}
	cancelled := &wire.Result{Target: "alpha", Model: "model-a", Class: "chat", Outcome: wire.OutcomeTimeout, ErrorType: wire.ErrorTypeCancelled}
	warm := successResult("alpha", "model-a", "chat")
	warm.Warmup, warm.TTFT = true, time.Minute
	for _, r := range []*wire.Result{good, slowFirst, slowBoth, oneToken, failed, cancelled, warm, good} {
		m.Observe(r)
	}

	mfs = gather(t, reg)
	value := func(name string, l map[string]string) float64 {
		t.Helper()
		l["target"], l["class"] = "alpha", "chat"
		s := series(mfs, name, l)
		if s == nil {
			t.Fatalf("%s%v missing", name, l)
		}
		return s.GetCounter().GetValue()
	}
	for l, want := range map[[2]string]float64{
		{"result", "good"}: 3, // good twice, oneToken
		{"result", "bad"}:  3, // slowFirst, slowBoth, failed; cancelled and warm-up not judged
		{"bound", "ttft"}:  2,
		{"bound", "tpot"}:  1,
		{"bound", "e2e"}:   0,
		{"bound", "error"}: 1,
	} {
		name := "llmprobe_slo_requests_total"
		if l[0] == "bound" {
			name = "llmprobe_slo_violations_total"
		}
		if got := value(name, map[string]string{l[0]: l[1]}); got != want {
			t.Errorf("%s{%s=%q} = %v, want %v", name, l[0], l[1], got, want)
		}
	}

	// A reload that drops alpha's SLO drops its series; one that keeps it
	// keeps the counts.
	m.SetConfig(mustConfig(t, testConfigYAML))
	if got := value("llmprobe_slo_requests_total", map[string]string{"result": "good"}); got != 3 {
		t.Errorf("after an unchanged reload good = %v, want 3", got)
	}
	m.SetConfig(mustConfig(t, alphaOnlyYAML))
	if n := countSeries(gather(t, reg), "llmprobe_slo_requests_total", nil); n != 0 {
		t.Errorf("the SLO was removed but %d series remain", n)
	}
	m.Observe(slowFirst)
	if n := countSeries(gather(t, reg), "llmprobe_slo_violations_total", nil); n != 0 {
		t.Errorf("a request without an SLO made %d violation series", n)
	}
}
