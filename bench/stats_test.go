// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package bench_test

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/llmprobe/llmprobe/bench"
	"github.com/llmprobe/llmprobe/dist"
)

// TestBootstrapQuantileDiff: the p99 interval is deterministic for a
// seed, brackets the observed difference, covers 0 for samples of one
// distribution and excludes it for a clear change; the resampler's
// quantiles agree with dist.Quantile of a sorted resample.
func TestBootstrapQuantileDiff(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	sample := func(n int, scale float64) []float64 {
		v := make([]float64, n)
		for i := range v {
			v[i] = scale * math.Exp(rng.NormFloat64()*0.5)
		}
		return v
	}
	a, b := sample(3000, 1), sample(3000, 1)
	lo, hi, ok := bench.BootstrapQuantileDiff(a, b, 0.99, 2000, 1, 0.99)
	lo2, hi2, _ := bench.BootstrapQuantileDiff(a, b, 0.99, 2000, 1, 0.99)
	if !ok || lo != lo2 || hi != hi2 {
		t.Fatalf("not deterministic: [%v, %v] then [%v, %v]", lo, hi, lo2, hi2)
	}
	if !(lo < 0 && hi > 0) {
		t.Errorf("same distribution: interval [%v, %v] excludes 0", lo, hi)
	}
	sa, sb := slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b))
	if d := dist.Quantile(sb, 0.99) - dist.Quantile(sa, 0.99); d < lo || d > hi {
		t.Errorf("observed difference %v outside [%v, %v]", d, lo, hi)
	}
	c := sample(3000, 1.5)
	lo, hi, _ = bench.BootstrapQuantileDiff(a, c, 0.99, 2000, 1, 0.99)
	if !(lo > 0) {
		t.Errorf("a 50%% slower p99: interval [%v, %v] includes 0", lo, hi)
	}
	lo, hi, _ = bench.BootstrapQuantileDiff(a, a, 0.5, 500, 9, 0.9)
	if !(lo <= 0 && hi >= 0) || hi-lo > 0.2 {
		t.Errorf("median of a against itself: [%v, %v]", lo, hi)
	}
	if _, _, ok := bench.BootstrapQuantileDiff(nil, a, 0.99, 10, 1, 0.99); ok {
		t.Error("an empty side gave an interval")
	}
	// With one value the resample is that value.
	if lo, hi, _ := bench.BootstrapQuantileDiff([]float64{1}, []float64{3}, 0.99, 10, 1, 0.99); lo != 2 || hi != 2 {
		t.Errorf("single values: [%v, %v]", lo, hi)
	}
}

// TestBootstrapMatchesSorting: the counting resampler gives exactly what
// sorting each resample and taking dist.Quantile gives, on the same
// random draws (the generator BootstrapQuantileDiff documents).
func TestBootstrapMatchesSorting(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	a := make([]float64, 301)
	b := make([]float64, 97)
	for i := range a {
		a[i] = math.Round(rng.ExpFloat64()*100) / 10 // ties too
	}
	for i := range b {
		b[i] = math.Round(rng.ExpFloat64()*120) / 10
	}
	for _, q := range []float64{0.99, 0.5, 0.1} {
		const seed, resamples = 11, 200
		lo, hi, _ := bench.BootstrapQuantileDiff(a, b, q, resamples, seed, 0.9)
		ref := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
		sa, sb := slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b))
		draw := func(s []float64) float64 {
			r := make([]float64, len(s))
			for i := range r {
				r[i] = s[ref.IntN(len(s))]
			}
			slices.Sort(r)
			return dist.Quantile(r, q)
		}
		diffs := make([]float64, resamples)
		for i := range diffs {
			qa := draw(sa)
			diffs[i] = draw(sb) - qa
		}
		slices.Sort(diffs)
		wlo, whi := dist.Quantile(diffs, 0.05), dist.Quantile(diffs, 0.95)
		if math.Abs(lo-wlo) > 1e-12 || math.Abs(hi-whi) > 1e-12 {
			t.Errorf("q=%v: [%v, %v], sorting gives [%v, %v]", q, lo, hi, wlo, whi)
		}
	}
}
