// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package bench_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/llmprobe/llmprobe/bench"
	"github.com/llmprobe/llmprobe/dist"
)

// syntheticStage is a stage whose samples are n lognormal values (median
// 100 ms) times scale, with quantiles summarising them.
func syntheticStage(stage int, rate float64, n int, scale float64, seed uint64) *bench.StageReport {
	rng := rand.New(rand.NewPCG(seed, 1))
	draw := func(median float64) ([]float64, bench.Quantiles) {
		v := make([]float64, n)
		for i := range v {
			v[i] = scale * median * math.Exp(0.4*rng.NormFloat64())
		}
		s := slices.Sorted(slices.Values(v))
		return v, bench.Quantiles{Count: n, P50: dist.Quantile(s, 0.5), P99: dist.Quantile(s, 0.99)}
	}
	sr := &bench.StageReport{Stage: stage, Target: "t", RequestedRate: rate, Trusted: true, Samples: &bench.Samples{}}
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
	old := &bench.Report{Stages: []*bench.StageReport{syntheticStage(1, 5, 2500, 1, 1), syntheticStage(2, 10, 2500, 1, 2)}}
	same := &bench.Report{Stages: []*bench.StageReport{syntheticStage(1, 5, 2000, 1, 3), syntheticStage(2, 10, 2000, 1, 4)}}
	for name, r := range map[string]*bench.Report{"itself": old, "a redraw": same} {
		cs, unmatched := bench.Compare(old, r)
		if len(cs) != 2*3*2 || len(unmatched) != 0 {
			t.Fatalf("%s: %d comparisons, unmatched %v", name, len(cs), unmatched)
		}
		for _, c := range cs {
			if c.Verdict != bench.VerdictNoChange {
				t.Errorf("%s: %s %s: %s (Δ %.3f, p %.3g, adjusted %.3g)", name, c.Stage, c.Metric, c.Verdict, c.Delta, c.P, c.PAdjusted)
			}
		}
	}
	// The new run was stage 2 only, at another stage number: matched by rate.
	slower := &bench.Report{Stages: []*bench.StageReport{syntheticStage(1, 10, 2000, 1.4, 5)}}
	faster := &bench.Report{Stages: []*bench.StageReport{syntheticStage(7, 5, 2000, 0.7, 6), syntheticStage(2, 99, 2000, 0.7, 7)}}
	cs, unmatched := bench.Compare(old, slower)
	if len(unmatched) != 1 || !strings.HasPrefix(unmatched[0], "1 t @5/s") {
		t.Errorf("unmatched %v", unmatched)
	}
	for _, c := range cs {
		if c.Verdict != bench.VerdictWorse || math.Abs(c.Delta-0.4) > 0.15 { // a p99 of 2000 varies by ±5%
			t.Errorf("40%% slower: %s %s: %s, Δ %.3f", c.Stage, c.Metric, c.Verdict, c.Delta)
		}
		if !(c.P >= 0 && c.PAdjusted >= c.P && c.PAdjusted < bench.CompareAlpha) {
			t.Errorf("%s: p=%v, adjusted %v", c.Metric, c.P, c.PAdjusted)
		}
	}
	cs, unmatched = bench.Compare(old, faster)
	if len(cs) != 12 || len(unmatched) != 0 {
		t.Fatalf("%d comparisons, unmatched %v", len(cs), unmatched)
	}
	for _, c := range cs {
		if c.Verdict != bench.VerdictBetter || math.Abs(c.Delta+0.3) > 0.1 {
			t.Errorf("30%% faster: %s %s: %s, Δ %.3f", c.Stage, c.Metric, c.Verdict, c.Delta)
		}
	}
	var sb strings.Builder
	if err := bench.WriteCompare(&sb, cs, []string{"3 t @20/s"}); err != nil {
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
	bare := &bench.Report{Stages: []*bench.StageReport{{Stage: 1, Target: "t", RequestedRate: 5}}}
	cs, _ = bench.Compare(bare, old)
	for _, c := range cs {
		if c.Verdict != bench.VerdictNoSamples {
			t.Errorf("%s without samples: %s", c.Metric, c.Verdict)
		}
	}
}

// TestCompareRealRun: a real run's JSON report keeps at most MaxSamples
// samples per metric (as many as the quantiles rest on below that), reads
// back, and compared with itself shows no real change; a file that is
// not a report is an error naming it.
func TestCompareRealRun(t *testing.T) {
	sw := runSweep(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "run.json")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := sw.rep.WriteJSON(f); err != nil {
		t.Fatal(err)
	}
	f.Close()
	rep, err := bench.ReadReport(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range rep.Stages {
		if s.Samples == nil || len(s.Samples.TTFT) != s.TTFT.Count || len(s.Samples.TPOT) != s.TPOT.Count || len(s.Samples.E2E) != s.E2E.Count {
			t.Fatalf("stage %d: samples %+v for counts %d %d %d", s.Stage, s.Samples, s.TTFT.Count, s.TPOT.Count, s.E2E.Count)
		}
	}
	cs, unmatched := bench.Compare(rep, rep)
	if len(cs) != 6*len(rep.Stages) || len(unmatched) != 0 {
		t.Fatalf("%d comparisons, unmatched %v", len(cs), unmatched)
	}
	trusted := map[string]bool{}
	for _, s := range rep.Stages {
		trusted[fmt.Sprintf("%d %s @%g/s", s.Stage, s.Target, s.RequestedRate)] = s.Trusted
	}
	for _, c := range cs {
		want := bench.VerdictNoChange
		if !trusted[c.Stage] { // a busy machine: the stage gets no verdict
			want = bench.VerdictUntrusted
		}
		if c.Verdict != want || c.Delta != 0 {
			t.Errorf("%s %s against itself: %s, Δ %v", c.Stage, c.Metric, c.Verdict, c.Delta)
		}
	}
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte("{\"stages\": 3}"), 0o644)
	if _, err := bench.ReadReport(bad); err == nil || !strings.Contains(err.Error(), bad) || strings.Contains(err.Error(), "\n") {
		t.Errorf("bad file: %v", err)
	}
	empty := filepath.Join(dir, "empty.json")
	os.WriteFile(empty, []byte("{}"), 0o644)
	if _, err := bench.ReadReport(empty); err == nil {
		t.Error("a report without stages was read")
	}
}
