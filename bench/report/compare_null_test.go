// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package report_test

import (
	"math"
	"strings"
	"testing"

	"github.com/llmprobe/llmprobe/bench/report"
)

// nullReport is a report of four stages (at 1, 2, 4 and 8 req/s) whose
// samples are sizes[i] lognormal draws of the same distributions whatever
// the seed: two of them differ by chance only.
func nullReport(sizes [4]int, seed uint64) *report.Report {
	r := &report.Report{}
	for i, n := range sizes {
		r.Stages = append(r.Stages, syntheticStage(i+1, float64(int(1)<<i), n, 1, seed*16+uint64(i)))
	}
	return r
}

// judged says whether c is a verdict of a real change.
func judged(c report.Comparison) bool {
	return c.Verdict == report.VerdictBetter || c.Verdict == report.VerdictWorse
}

// TestCompareFamilyWiseRate compares many pairs of reports that differ by
// chance only (four stages of 40 to 2000 samples, 24 tests a comparison,
// seeded draws): the share of comparisons with any verdict of a real
// change, the family-wise error rate, is at most CompareAlpha (Holm's
// procedure controls it over all the tests of a comparison), and no
// single test rejects more often than its level either. Without a
// correction 24 tests at 1% each would give a verdict in about one
// comparison in five.
func TestCompareFamilyWiseRate(t *testing.T) {
	const comparisons = 1000
	families, tests, rejected, rawRejected := 0, 0, 0, 0
	for i := range uint64(comparisons) {
		sizes := [4]int{40, 200, 800, 2000}
		if i%2 == 1 {
			sizes = [4]int{2000, 40, 200, 800}
		}
		old, cur := nullReport(sizes, 2*i+1), nullReport(sizes, 2*i+2)
		cs, unmatched := report.Compare(old, cur)
		if len(cs) != 24 || len(unmatched) != 0 {
			t.Fatalf("%d comparisons, unmatched %v", len(cs), unmatched)
		}
		any := false
		for _, c := range cs {
			tests++
			if judged(c) {
				any = true
				rejected++
			}
			if c.P >= 0 && c.P < report.CompareAlpha {
				rawRejected++
			}
		}
		if any {
			families++
		}
	}
	rate := float64(families) / comparisons
	t.Logf("%d null comparisons: %d with a verdict (family-wise rate %.2f%%), %d of %d tests judged real, %d of them p < %g before the correction",
		comparisons, families, 100*rate, rejected, tests, rawRejected, report.CompareAlpha)
	// A binomial count of mean CompareAlpha × comparisons (10) exceeds 20
	// with probability below 0.002: more is a rate above the level.
	if limit := report.CompareAlpha*comparisons + 3.2*math.Sqrt(report.CompareAlpha*comparisons); float64(families) > limit {
		t.Errorf("%d of %d null comparisons had a verdict of a real change, more than a family-wise rate of %g allows (%.0f)",
			families, comparisons, report.CompareAlpha, limit)
	}
	// Each test on its own is at its level: 24,000 tests at 1% give about
	// 240 raw rejections.
	if limit := report.CompareAlpha*float64(tests) + 4*math.Sqrt(report.CompareAlpha*float64(tests)); float64(rawRejected) > limit {
		t.Errorf("%d of %d tests had p < %g unadjusted, more than the level allows (%.0f)", rawRejected, tests, report.CompareAlpha, limit)
	}
}

// TestCompareFindsATwentyPercentShift: one stage of four 20% slower, the
// others alike: with the most samples a report keeps (MaxSamples) the
// change is found on every metric's p50 and p99 after the correction,
// with 1000 samples on every p50, and the stages that did not change get
// no verdict. The adjusted p-values are Holm's: at least the raw ones, in
// the raw ones' order, and at most 1.
func TestCompareFindsATwentyPercentShift(t *testing.T) {
	for _, n := range []int{report.MaxSamples, 1000} {
		old := nullReport([4]int{n, n, n, n}, 1)
		cur := nullReport([4]int{n, n, n, n}, 2)
		cur.Stages[2] = syntheticStage(3, 4, n, 1.2, 99)
		cs, _ := report.Compare(old, cur)
		for _, c := range cs {
			shifted := strings.HasPrefix(c.Stage, "3 ")
			want := shifted && (n == report.MaxSamples || strings.HasSuffix(c.Metric, "p50"))
			switch {
			case want && c.Verdict != report.VerdictWorse:
				t.Errorf("n=%d, 20%% slower: %s %s: %s (Δ %+.1f%%, p %.3g, adjusted %.3g)", n, c.Stage, c.Metric, c.Verdict, 100*c.Delta, c.P, c.PAdjusted)
			case !shifted && judged(c):
				t.Errorf("n=%d, alike: %s %s: %s (p %.3g, adjusted %.3g)", n, c.Stage, c.Metric, c.Verdict, c.P, c.PAdjusted)
			}
			if !(c.P >= 0 && c.PAdjusted >= c.P && c.PAdjusted <= 1) {
				t.Errorf("%s %s: p %v, adjusted %v", c.Stage, c.Metric, c.P, c.PAdjusted)
			}
			for _, d := range cs {
				if c.P < d.P && c.PAdjusted > d.PAdjusted {
					t.Errorf("adjusted p-values out of order: %s %s p %v → %v, %s %s p %v → %v", c.Stage, c.Metric, c.P, c.PAdjusted, d.Stage, d.Metric, d.P, d.PAdjusted)
				}
			}
		}
	}
}

// TestCompareUntrustedStage: a stage the verdict did not trust, in either
// report, gets no verdict however much it changed, and the table says why
// in the stage's own words; the trusted stages are judged as before and
// the correction counts only their tests.
func TestCompareUntrustedStage(t *testing.T) {
	old := &report.Report{Stages: []*report.StageReport{syntheticStage(1, 5, 800, 1, 1), syntheticStage(2, 10, 800, 1, 2)}}
	cur := &report.Report{Stages: []*report.StageReport{syntheticStage(1, 5, 800, 1.4, 3), syntheticStage(2, 10, 800, 1.4, 4)}}
	cur.Stages[1].Trusted = false
	cur.Stages[1].Reasons = []string{"harness saturated: 31% of sends were more than 10ms late"}
	for _, swap := range []bool{false, true} {
		a, b := old, cur
		if swap {
			a, b = cur, old
		}
		cs, _ := report.Compare(a, b)
		for _, c := range cs {
			untrusted := strings.HasPrefix(c.Stage, "2 ")
			if untrusted && (judged(c) || c.Verdict != report.VerdictUntrusted) {
				t.Errorf("untrusted %s %s: %s", c.Stage, c.Metric, c.Verdict)
			}
			if !untrusted && !judged(c) {
				t.Errorf("trusted %s %s, 40%% apart: %s", c.Stage, c.Metric, c.Verdict)
			}
		}
		var sb strings.Builder
		if err := report.WriteCompare(&sb, cs, nil); err != nil {
			t.Fatal(err)
		}
		out := sb.String()
		t.Logf("\n%s", out)
		side := "new"
		if swap {
			side = "old"
		}
		for _, want := range []string{"stage 2 t @10/s: no verdict: the " + side + " report's stage 2 was NOT TRUSTED: harness saturated: 31% of sends were more than 10ms late", "Holm"} {
			if !strings.Contains(out, want) {
				t.Errorf("no %q in:\n%s", want, out)
			}
		}
	}
}
