// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package report_test

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/llmprobe/llmprobe/bench/report"
	"github.com/llmprobe/llmprobe/dist"
)

// syntheticStage is a stage whose samples are n lognormal values (median
// 100 ms) times scale, with quantiles summarising them.
func syntheticStage(stage int, rate float64, n int, scale float64, seed uint64) *report.StageReport {
	rng := rand.New(rand.NewPCG(seed, 1))
	draw := func(median float64) ([]float64, report.Quantiles) {
		v := make([]float64, n)
		for i := range v {
			v[i] = scale * median * math.Exp(0.4*rng.NormFloat64())
		}
		s := slices.Sorted(slices.Values(v))
		return v, report.Quantiles{Count: n, P50: dist.Quantile(s, 0.5), P99: dist.Quantile(s, 0.99)}
	}
	sr := &report.StageReport{Stage: stage, Target: "t", RequestedRate: rate, Trusted: true, Samples: &report.Samples{}}
	sr.Samples.TTFT, sr.TTFT = draw(0.1)
	sr.Samples.TPOT, sr.TPOT = draw(0.02)
	sr.Samples.E2E, sr.E2E = draw(1)
	return sr
}

// TestCompare: a run against itself, or against another draw of the same
// distributions, shows no real change; 40% slower is worse and 30% faster
// better on every metric's median and p99, with Δ% near the change;
// stages match by rate, else by number; a report without samples says so.
// The p99 test needs some thousands of samples to tell 30% (about 25
// values above the pooled p99 a side).
func TestCompare(t *testing.T) {
	old := &report.Report{Stages: []*report.StageReport{syntheticStage(1, 5, 2500, 1, 1), syntheticStage(2, 10, 2500, 1, 2)}}
	same := &report.Report{Stages: []*report.StageReport{syntheticStage(1, 5, 2000, 1, 3), syntheticStage(2, 10, 2000, 1, 4)}}
	for name, r := range map[string]*report.Report{"itself": old, "a redraw": same} {
		cs, unmatched := report.Compare(old, r)
		if len(cs) != 2*3*2 || len(unmatched) != 0 {
			t.Fatalf("%s: %d comparisons, unmatched %v", name, len(cs), unmatched)
		}
		for _, c := range cs {
			if c.Verdict != report.VerdictNoChange {
				t.Errorf("%s: %s %s: %s (Δ %.3f, p %.3g, adjusted %.3g)", name, c.Stage, c.Metric, c.Verdict, c.Delta, c.P, c.PAdjusted)
			}
		}
	}
	// The new run was stage 2 only, at another stage number: matched by rate.
	slower := &report.Report{Stages: []*report.StageReport{syntheticStage(1, 10, 2000, 1.4, 5)}}
	faster := &report.Report{Stages: []*report.StageReport{syntheticStage(7, 5, 2000, 0.7, 6), syntheticStage(2, 99, 2000, 0.7, 7)}}
	cs, unmatched := report.Compare(old, slower)
	if len(unmatched) != 1 || !strings.HasPrefix(unmatched[0], "1 t @5/s") {
		t.Errorf("unmatched %v", unmatched)
	}
	for _, c := range cs {
		if c.Verdict != report.VerdictWorse || math.Abs(c.Delta-0.4) > 0.15 { // a p99 of 2000 varies by ±5%
			t.Errorf("40%% slower: %s %s: %s, Δ %.3f", c.Stage, c.Metric, c.Verdict, c.Delta)
		}
		if !(c.P >= 0 && c.PAdjusted >= c.P && c.PAdjusted < report.CompareAlpha) {
			t.Errorf("%s: p=%v, adjusted %v", c.Metric, c.P, c.PAdjusted)
		}
	}
	cs, unmatched = report.Compare(old, faster)
	if len(cs) != 12 || len(unmatched) != 0 {
		t.Fatalf("%d comparisons, unmatched %v", len(cs), unmatched)
	}
	for _, c := range cs {
		if c.Verdict != report.VerdictBetter || math.Abs(c.Delta+0.3) > 0.1 {
			t.Errorf("30%% faster: %s %s: %s, Δ %.3f", c.Stage, c.Metric, c.Verdict, c.Delta)
		}
	}
	var sb strings.Builder
	if err := report.WriteCompare(&sb, cs, []string{"3 t @20/s"}); err != nil {
		t.Fatal(err)
	}
	out := sb.String()
	t.Logf("\n%s", out)
	for _, want := range []string{"old", "new", "Δ%", "verdict", "TTFT p50", "E2E p99", "Holm p", "better", "stage 3 t @20/s: no matching stage", "Mann-Whitney", "Fisher", "over all 12 tests"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in the table", want)
		}
	}
	for _, line := range strings.Split(out, "\n") {
		if len([]rune(line)) > 100 {
			t.Errorf("%d columns: %q", len([]rune(line)), line)
		}
	}
	// Reports written before samples were kept.
	bare := &report.Report{Stages: []*report.StageReport{{Stage: 1, Target: "t", RequestedRate: 5}}}
	cs, _ = report.Compare(bare, old)
	for _, c := range cs {
		if c.Verdict != report.VerdictNoSamples {
			t.Errorf("%s without samples: %s", c.Metric, c.Verdict)
		}
	}
}
