// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package fit

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/llmprobe/llmprobe/dist"
)

// lognormalDraws returns n log-normal draws with the given median and p99
// from a fixed seed.
func lognormalDraws(seed uint64, n int, median, p99 float64) []float64 {
	r := rand.New(rand.NewPCG(seed, 1))
	mu, sigma := math.Log(median), math.Log(p99/median)/z99
	out := make([]float64, n)
	for i := range out {
		out[i] = math.Exp(mu + sigma*r.NormFloat64())
	}
	return out
}

// drawQuantiles samples s n times (fixed seed) and returns the sorted
// draws.
func drawQuantiles(s dist.Sampler, seed uint64, n int) []float64 {
	r := rand.New(rand.NewPCG(seed, 2))
	xs := make([]float64, n)
	for i := range xs {
		xs[i] = math.Round(s.Sample(r))
	}
	slices.Sort(xs)
	return xs
}

func relErr(got, want float64) float64 { return math.Abs(got/want - 1) }

// TestFitSamplesRecoversLogNormal fits 20k draws of a known log-normal
// (median 120, p99 2048) and checks the fitted median and p99, the data
// quantiles and the table's sampler against the truth.
func TestFitSamplesRecoversLogNormal(t *testing.T) {
	const median, p99 = 120.0, 2048.0
	for _, seed := range []uint64{1, 2, 3} {
		l, err := FitSamples(lognormalDraws(seed, 20000, median, p99))
		if err != nil {
			t.Fatal(err)
		}
		fm, f99 := l.LogNormalQuantile(0.5), l.LogNormalQuantile(0.99)
		t.Logf("seed %d: fitted median %.1f (%.2f%% off), p99 %.0f (%.2f%% off); data p50 %.1f p99 %.0f",
			seed, fm, 100*relErr(fm, median), f99, 100*relErr(f99, p99), l.Quantile(0.5), l.Quantile(0.99))
		if relErr(fm, median) > 0.03 {
			t.Errorf("seed %d: fitted median %g, want %g within 3%%", seed, fm, median)
		}
		if relErr(f99, p99) > 0.05 {
			t.Errorf("seed %d: fitted p99 %g, want %g within 5%%", seed, f99, p99)
		}
		if relErr(l.Quantile(0.5), median) > 0.04 || relErr(l.Quantile(0.99), p99) > 0.08 {
			t.Errorf("seed %d: data p50 %g p99 %g, want near %g and %g", seed, l.Quantile(0.5), l.Quantile(0.99), median, p99)
		}
		// 20k supports every point but p99.9 (20 beyond it: yes, too).
		var ps []float64
		for _, pt := range l.Table {
			ps = append(ps, pt.P)
		}
		if !slices.Equal(ps, TableProbabilities) {
			t.Errorf("table points %v, want all of %v for n=20000", ps, TableProbabilities)
		}
		s, err := l.Sampler()
		if err != nil {
			t.Fatal(err)
		}
		draws := drawQuantiles(s, seed, 50000)
		for _, p := range []float64{0.5, 0.9, 0.99} {
			if got, want := dist.Quantile(draws, p), l.Quantile(p); relErr(got, want) > 0.05 {
				t.Errorf("seed %d: sampler p%g = %g, data %g (more than 5%% apart)", seed, p*100, got, want)
			}
		}
	}
}

// vllmBuckets are the simulator's (vLLM's) token buckets up to 10000.
var vllmBuckets = []float64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000}

// binLogNormal returns the exact expected bucket counts of n log-normal
// observations.
func binLogNormal(n, mu, sigma float64, les []float64) []Cumulative {
	var out []Cumulative
	for _, le := range les {
		out = append(out, Cumulative{LE: le, Count: n * 0.5 * math.Erfc(-(math.Log(le)-mu)/sigma/math.Sqrt2)})
	}
	return append(out, Cumulative{LE: math.Inf(1), Count: n})
}

// binSamples bins values into classic cumulative buckets.
func binSamples(values, les []float64) []Cumulative {
	out := make([]Cumulative, len(les)+1)
	for i, le := range les {
		out[i].LE = le
	}
	out[len(les)].LE = math.Inf(1)
	for _, v := range values {
		for i := range out {
			if v <= out[i].LE {
				out[i].Count++
			}
		}
	}
	return out
}

// TestFitLogNormalBinnedRecovers fits vLLM's coarse 1-2-5 buckets, first
// with exact expected counts, then with 20k binned draws (fixed seeds).
func TestFitLogNormalBinnedRecovers(t *testing.T) {
	cases := []struct{ median, p99 float64 }{{120, 2048}, {800, 4000}, {40, 600}}
	for _, c := range cases {
		mu, sigma := math.Log(c.median), math.Log(c.p99/c.median)/z99
		bins, err := BinsFromCumulative(binLogNormal(100000, mu, sigma, vllmBuckets))
		if err != nil {
			t.Fatal(err)
		}
		gm, gs, err := FitLogNormalBinned(bins)
		if err != nil {
			t.Fatal(err)
		}
		fm, f99 := math.Exp(gm), math.Exp(gm+gs*z99)
		t.Logf("exact buckets, median %g p99 %g: fitted median %.2f (%.3f%% off), p99 %.1f (%.3f%% off)",
			c.median, c.p99, fm, 100*relErr(fm, c.median), f99, 100*relErr(f99, c.p99))
		if relErr(fm, c.median) > 0.005 || relErr(f99, c.p99) > 0.01 {
			t.Errorf("exact buckets: fitted median %g p99 %g, want %g and %g", fm, f99, c.median, c.p99)
		}

		for _, seed := range []uint64{7, 8} {
			values := lognormalDraws(seed, 20000, c.median, c.p99)
			bins, err := BinsFromCumulative(binSamples(values, vllmBuckets))
			if err != nil {
				t.Fatal(err)
			}
			l, err := FitHistogram(bins, math.NaN())
			if err != nil {
				t.Fatal(err)
			}
			fm, f99 := l.LogNormalQuantile(0.5), l.LogNormalQuantile(0.99)
			t.Logf("20k draws (seed %d), median %g p99 %g: fitted median %.1f (%.2f%% off), p99 %.0f (%.2f%% off)",
				seed, c.median, c.p99, fm, 100*relErr(fm, c.median), f99, 100*relErr(f99, c.p99))
			if relErr(fm, c.median) > 0.03 || relErr(f99, c.p99) > 0.06 {
				t.Errorf("seed %d: fitted median %g p99 %g, want %g and %g within 3%%/6%%", seed, fm, f99, c.median, c.p99)
			}
			// Every interpolated quantile lies in the bucket that holds
			// the true one (the order statistic of rank ceil(p·n)).
			sorted := slices.Sorted(slices.Values(values))
			for _, p := range TableProbabilities {
				q := l.Quantile(p)
				truth := sorted[int(math.Ceil(p*float64(len(sorted))))-1]
				b := bucketOf(bins, q)
				if !(truth > b.Lo && truth <= b.Hi) {
					t.Errorf("seed %d: p%g: interpolated %g in bucket (%g, %g], true quantile %g is not", seed, p*100, q, b.Lo, b.Hi, truth)
				}
			}
		}
	}
}

// bucketOf returns the bucket holding v (the first whose upper edge is
// not below v).
func bucketOf(bins []Bin, v float64) Bin {
	for _, b := range bins {
		if v <= b.Hi {
			return b
		}
	}
	return bins[len(bins)-1]
}

func TestFitLogNormalBinnedNeedsSpread(t *testing.T) {
	_, _, err := FitLogNormalBinned([]Bin{{0, 10, 0}, {10, 20, 5}, {20, 50, 0}})
	if err == nil || !strings.Contains(err.Error(), "fill 1 bucket") {
		t.Errorf("one bucket: err = %v, want an error saying the observations fill 1 bucket", err)
	}
	l, err := FitHistogram([]Bin{{10, 20, 5}, {20, 50, 3}}, 150)
	if err != nil {
		t.Fatal(err)
	}
	if l.FitErr == nil || l.Sigma != 0 {
		t.Errorf("two buckets: FitErr = %v, sigma %g; want no fit", l.FitErr, l.Sigma)
	}
	if l.Mean != 150.0/8 || l.Min != 10 || l.Max != 50 {
		t.Errorf("mean/min/max = %g/%g/%g, want 18.75/10/50", l.Mean, l.Min, l.Max)
	}
	if _, err := FitHistogram([]Bin{{10, 20, 0}}, 0); err == nil {
		t.Error("empty histogram: want an error")
	}
	if _, err := FitHistogram([]Bin{{10, 20, 1}, {15, 30, 1}}, 0); err == nil || !strings.Contains(err.Error(), "overlap") {
		t.Errorf("overlapping buckets: err = %v", err)
	}
}

func TestBinsFromCumulative(t *testing.T) {
	inf := math.Inf(1)
	bins, err := BinsFromCumulative([]Cumulative{{inf, 10}, {5, 4}, {1, 1}, {2, 3.9}, {10, 3.5}})
	if err != nil {
		t.Fatal(err)
	}
	// le=10 decreased (extrapolation noise): raised to the running max.
	want := []Bin{{0, 1, 1}, {1, 2, 2.9}, {2, 5, 0.1}, {5, 10, 0}, {10, inf, 6}}
	for i := range want {
		if math.Abs(bins[i].Count-want[i].Count) > 1e-9 || bins[i].Lo != want[i].Lo || bins[i].Hi != want[i].Hi {
			t.Fatalf("bins = %v, want %v", bins, want)
		}
	}
	// A bucket at le=0 joins the first positive one.
	bins, err = BinsFromCumulative([]Cumulative{{0, 2}, {10, 5}, {inf, 5}})
	if err != nil || bins[0] != (Bin{0, 10, 5}) {
		t.Errorf("le=0 bucket: bins = %v, err = %v; want the first bin (0, 10] with 5", bins, err)
	}
	for _, bad := range [][]Cumulative{
		{{1, 1}, {2, 2}},
		{{1, 1}, {1, 2}, {inf, 2}},
		{{1, -1}, {inf, 2}},
		{{math.NaN(), 1}, {inf, 2}},
		nil,
	} {
		if _, err := BinsFromCumulative(bad); err == nil {
			t.Errorf("BinsFromCumulative(%v): want an error", bad)
		}
	}
}

func TestHistogramQuantile(t *testing.T) {
	inf := math.Inf(1)
	bins := []Bin{{0, 1, 10}, {1, 10, 0}, {10, 100, 10}, {100, inf, 0}}
	cases := []struct{ p, want float64 }{
		{0, 0},
		{0.25, 0.5},            // linear in the first bucket
		{0.5, 1},               // end of the first bucket
		{0.75, math.Sqrt(1e3)}, // log-linear: half way between 10 and 100 in ln
		{1, 100},
	}
	for _, c := range cases {
		if got := HistogramQuantile(bins, c.p); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("p%g = %g, want %g", c.p, got, c.want)
		}
	}
	// In the +Inf bucket: its lower edge.
	if got := HistogramQuantile([]Bin{{0, 5, 1}, {5, inf, 3}}, 0.9); got != 5 {
		t.Errorf("+Inf bucket quantile = %g, want 5", got)
	}
	for _, p := range []float64{-0.1, 1.1, math.NaN()} {
		if got := HistogramQuantile(bins, p); !math.IsNaN(got) {
			t.Errorf("p=%g: got %g, want NaN", p, got)
		}
	}
	if got := HistogramQuantile([]Bin{{0, 5, 0}}, 0.5); !math.IsNaN(got) {
		t.Errorf("empty histogram: got %g, want NaN", got)
	}
}

// TestTableRule checks which points a count supports and that the table
// stays valid with ties and zeros.
func TestTableRule(t *testing.T) {
	cases := []struct {
		n    int
		want []float64
	}{
		{3, []float64{0.5, 0.9, 0.99}},
		{40, []float64{0.25, 0.5, 0.75, 0.9, 0.99}},
		{100, []float64{0.1, 0.25, 0.5, 0.75, 0.9, 0.99}},
		{200, []float64{0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99}},
		{1000, []float64{0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99}},
		{10000, TableProbabilities},
	}
	for _, c := range cases {
		values := lognormalDraws(uint64(c.n), c.n, 100, 1000)
		l, err := FitSamples(values)
		if err != nil {
			t.Fatal(err)
		}
		var ps []float64
		for _, pt := range l.Table {
			ps = append(ps, pt.P)
		}
		if !slices.Equal(ps, c.want) {
			t.Errorf("n=%d: table points %v, want %v", c.n, ps, c.want)
		}
	}

	// Ties and zeros: mostly 0 with a few 7s. Values are at least 1 and
	// non-decreasing, and the table builds a sampler.
	values := make([]float64, 500)
	for i := 480; i < 500; i++ {
		values[i] = 7
	}
	l, err := FitSamples(values)
	if err != nil {
		t.Fatal(err)
	}
	if l.Zeros != 480 || l.Min != 0 || l.TableMin() != 1 {
		t.Errorf("zeros %d, min %g, table min %g; want 480, 0, 1", l.Zeros, l.Min, l.TableMin())
	}
	prev := 0.0
	for _, pt := range l.Table {
		if pt.V < 1 || pt.V < prev || pt.V != math.Round(pt.V) {
			t.Errorf("table %v: values must be whole, at least 1 and non-decreasing", l.Table)
		}
		prev = pt.V
	}
	if l.Table[len(l.Table)-1].V != 7 {
		t.Errorf("p99 = %g, want 7", l.Table[len(l.Table)-1].V)
	}
	if _, err := l.Sampler(); err != nil {
		t.Errorf("sampler of a table with ties: %v", err)
	}
	// All equal: a flat table and no log-normal fit.
	l, err = FitSamples([]float64{64, 64, 64})
	if err != nil {
		t.Fatal(err)
	}
	if l.FitErr == nil {
		t.Error("equal values: want no log-normal fit")
	}
	s, err := l.Sampler()
	if err != nil {
		t.Fatal(err)
	}
	if q := s.Quantile(0.999); q != 64 {
		t.Errorf("flat table: p99.9 = %g, want 64", q)
	}

	if _, err := FitSamples(nil); err == nil {
		t.Error("no values: want an error")
	}
	if _, err := FitSamples([]float64{1, -2}); err == nil {
		t.Error("negative value: want an error")
	}
	if _, err := FitSamples([]float64{1, math.Inf(1)}); err == nil {
		t.Error("infinite value: want an error")
	}
}

func TestLogBins(t *testing.T) {
	values := []float64{0, 1, 1, 2, 3, 9, 10, 11, 99, 100, 1234}
	bins := LogBins(values)
	total := 0.0
	for i, b := range bins {
		total += b.Count
		if i > 0 && b.Lo != bins[i-1].Hi {
			t.Fatalf("bins %v are not contiguous", bins)
		}
		// Every bin holds at least one integer.
		if math.Floor(b.Hi) <= b.Lo && b.Lo > 0 {
			t.Errorf("bin (%g, %g] holds no integer", b.Lo, b.Hi)
		}
	}
	if total != float64(len(values)) {
		t.Errorf("bins hold %g values, want %d", total, len(values))
	}
	if bins[0].Lo != 0 || bins[0].Count != 3 { // 0, 1, 1
		t.Errorf("first bin %v, want (0, 1.5] with the zero and both ones", bins[0])
	}
	if last := bins[len(bins)-1]; !(last.Hi >= 1234) {
		t.Errorf("last bin %v does not reach the maximum", last)
	}
	// Ten bins per decade at most.
	if len(bins) > 10*4+2 {
		t.Errorf("%d bins for 4 decades", len(bins))
	}
	if LogBins(nil) != nil {
		t.Error("no values: want no bins")
	}
}
