// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package probe_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/llmprobe/llmprobe/probe"
	"github.com/llmprobe/llmprobe/sim"
)

// The engine feeds every judged request to its class's detectors and
// decides on them every global.regression_interval: a simulator that
// becomes twice as slow at a known instant is held regressed on TTFT,
// TPOT and E2E (not errors), with the change point after the step, while
// an identical simulator without the step, probed at the same time, is
// not. The simulator's own record says when the step happened; the test
// waits for a decision, never for a fixed time.
func TestEngineDetectsARegression(t *testing.T) {
	if testing.Short() {
		t.Skip("probes two simulators for about 30 s")
	}
	const stepAfter = 15 * time.Second
	started := time.Now()
	_, slow := startSim(t, func(c *sim.Config) { c.TimingSteps = []sim.TimingStep{{After: stepAfter, Factor: 2}} })
	_, steady := startSim(t, nil)
	cfg := loadConfig(t, `
global: {warmup: 0s, regression_interval: 1s}
workloads:
  w: {classes: [{name: c, prompt_tokens: {dist: lognormal, median: 64, p99: 512, max: 1024}, output_tokens: 8}]}
targets:
  - {name: slow, url: %s, model: sim-model, workload: w, tokenize: "off", arrival: {process: poisson, rate: 10}, extra_body: {ignore_eos: true}, regression: {min_span: 3s}}
  - {name: steady, url: %s, model: sim-model, workload: w, tokenize: "off", arrival: {process: poisson, rate: 10}, extra_body: {ignore_eos: true}, regression: {min_span: 3s}}
`, slow, steady)
	e := probe.NewEngine(probe.Options{Logger: slog.New(slog.DiscardHandler), Observer: probe.Observers{}})
	if err := e.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = e.Shutdown(ctx)
	}()

	held := func(st probe.TargetStatus, metric string) (probe.RegressionStatus, bool) {
		for _, r := range st.Regressions {
			if r.Class == "c" && r.Metric == metric {
				return r, true
			}
		}
		return probe.RegressionStatus{}, false
	}
	deadline := time.Now().Add(stepAfter + 60*time.Second)
	var last []probe.TargetStatus
	for time.Now().Before(deadline) {
		time.Sleep(500 * time.Millisecond)
		last = e.Status()
		all := true
		for _, m := range []string{probe.RegressionTTFT, probe.RegressionTPOT, probe.RegressionE2E} {
			r, _ := held(last[0], m)
			all = all && r.Regressed
		}
		if all {
			break
		}
	}
	if len(last) != 2 || last[0].Name != "slow" {
		t.Fatalf("status = %+v", last)
	}
	for _, st := range last {
		if len(st.Regressions) != len(probe.RegressionMetrics) {
			t.Fatalf("%s: %d regression series, want %d", st.Name, len(st.Regressions), len(probe.RegressionMetrics))
		}
	}
	for _, m := range []string{probe.RegressionTTFT, probe.RegressionTPOT, probe.RegressionE2E} {
		r, ok := held(last[0], m)
		if !ok || !r.Regressed {
			if last[0].Saturated {
				t.Skipf("the harness judged its own numbers untrusted (%s): no verdict on the target can be drawn", last[0].SaturationReason)
			}
			t.Errorf("slow %s: not regressed after the 2× step: %+v", m, r)
			continue
		}
		if cp := r.ChangePoint; cp.Before(started.Add(stepAfter - 2*time.Second)) {
			t.Errorf("slow %s: change point %s is before the step (%s after the simulator started)", m, cp.Sub(started), stepAfter)
		}
		// How much of TTFT and E2E the step doubles depends on what the
		// machine adds (loopback, the race detector), so only the
		// direction is known here.
		if !(r.MedianRatio > 1) {
			t.Errorf("slow %s: median ratio %.2f, want above 1", m, r.MedianRatio)
		}
	}
	if r, _ := held(last[0], probe.RegressionErrors); r.Regressed {
		t.Errorf("slow errors regressed, but every request succeeded: %+v", r)
	}
	for _, m := range probe.RegressionMetrics {
		if r, _ := held(last[1], m); r.Regressed {
			t.Errorf("steady %s regressed: %+v", m, r)
		}
	}
}
