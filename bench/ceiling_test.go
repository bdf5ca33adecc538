// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package bench_test

import (
	"context"
	"slices"
	"testing"

	"github.com/llmprobe/llmprobe/bench"
	"github.com/llmprobe/llmprobe/bench/report"
)

// TestSelftestSearchesDown: when the start rate is not honest, the
// search halves the rate until one is, then bisects between it and the
// lowest bad one; when none down to --min-rate is, it reports no good
// rate (the search is exercised on a host whose rates above 30 req/s
// are not honest).
func TestSelftestSearchesDown(t *testing.T) {
	run := func(o bench.CeilingOptions, limit float64) (rates []float64, good, bad *bench.CeilingStep) {
		t.Helper()
		measure := func(rate float64) (bench.CeilingStep, error) {
			return bench.CeilingStep{Rate: rate, Stage: &report.StageReport{}, Good: rate <= limit, Because: "too fast"}, nil
		}
		good, bad, err := bench.SearchCeiling(context.Background(), o, measure, func(st bench.CeilingStep) { rates = append(rates, st.Rate) })
		if err != nil {
			t.Fatal(err)
		}
		return rates, good, bad
	}
	rates, good, bad := run(bench.CeilingOptions{StartRate: 250, MinRate: 1, MaxRate: 20000, Bisections: 3}, 30)
	if want := []float64{250, 125, 62.5, 31.25, 15.625, 22, 26, 29}; !slices.Equal(rates, want) {
		t.Errorf("rates measured %v, want %v", rates, want)
	}
	if good == nil || good.Rate != 29 || bad == nil || bad.Rate != 31.25 {
		t.Errorf("good %+v, bad %+v; want 29 and 31.25", good, bad)
	}

	// Upward, as before: doubling, then bisecting.
	rates, good, _ = run(bench.CeilingOptions{StartRate: 20, MinRate: 1, MaxRate: 20000, Bisections: 1}, 50)
	if want := []float64{20, 40, 80, 57}; !slices.Equal(rates, want) || good.Rate != 40 {
		t.Errorf("rates measured %v (good %v), want %v", rates, good.Rate, want)
	}

	// Nothing holds: down to the floor, which is measured itself.
	rates, good, bad = run(bench.CeilingOptions{StartRate: 250, MinRate: 5, MaxRate: 20000, Bisections: 3}, 0)
	if want := []float64{250, 125, 62.5, 31.25, 15.625, 7.8125, 5}; !slices.Equal(rates, want) || good != nil || bad.Rate != 5 {
		t.Errorf("rates measured %v (good %v, bad %v), want %v and no good rate", rates, good, bad, want)
	}

	// Low rates bisect to a tenth, and stop when no rate is left between.
	rates, good, _ = run(bench.CeilingOptions{StartRate: 4, MinRate: 1, MaxRate: 8, Bisections: 5}, 1.3)
	if want := []float64{4, 2, 1, 1.4, 1.2, 1.3}; !slices.Equal(rates, want) || good.Rate != 1.3 {
		t.Errorf("rates measured %v (good %v), want %v", rates, good.Rate, want)
	}
}
