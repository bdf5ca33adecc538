// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package regression

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
)

// pairU counts, over every pair, a's wins plus half the ties: U by its
// definition, independent of ranks.
func pairU(a, b []float64) float64 {
	u := 0.0
	for _, x := range a {
		for _, y := range b {
			switch {
			case x > y:
				u++
			case x == y:
				u += 0.5
			}
		}
	}
	return u
}

// TestMannWhitney: U is the pair count (with ties); the p-value matches
// the normal approximation's textbook value, is symmetric, is 1 for
// identical samples, is tiny for a clear shift, and under the null
// rejects at α=0.01 about 1% of the time.
func TestMannWhitney(t *testing.T) {
	u, p := MannWhitney([]float64{1, 2, 3}, []float64{4, 5, 6})
	// U=0, mean 4.5, σ²=9·7/12: z=(4.5−0.5)/√5.25, p=erfc(z/√2)=0.0809
	// (scipy.stats.mannwhitneyu(..., method="asymptotic")).
	if u != 0 || math.Abs(p-0.0809) > 5e-4 {
		t.Errorf("U=%v p=%v, want 0 and 0.0809", u, p)
	}
	a := []float64{1, 1, 2, 2, 3, 5, 5, 8}
	b := []float64{2, 3, 3, 4, 5, 6, 6, 9, 9}
	u, p = MannWhitney(a, b)
	if u != pairU(a, b) {
		t.Errorf("U=%v, pairs say %v", u, pairU(a, b))
	}
	if _, q := MannWhitney(b, a); math.Abs(p-q) > 1e-12 {
		t.Errorf("p(a,b)=%v p(b,a)=%v", p, q)
	}
	if _, p := MannWhitney(a, a); p != 1 {
		t.Errorf("identical samples: p=%v", p)
	}
	if _, p := MannWhitney([]float64{3, 3, 3}, []float64{3, 3}); p != 1 {
		t.Errorf("all ties: p=%v", p)
	}
	if _, p := MannWhitney(nil, b); p != 1 {
		t.Errorf("empty: p=%v", p)
	}
	rng := rand.New(rand.NewPCG(7, 7))
	sample := func(n int, shift float64) []float64 {
		v := make([]float64, n)
		for i := range v {
			v[i] = math.Exp(rng.NormFloat64()*0.5) + shift
		}
		return v
	}
	if _, p := MannWhitney(sample(500, 0), sample(500, 0.3)); p > 1e-6 {
		t.Errorf("a 0.3 shift over 500 samples: p=%v", p)
	}
	rejected := 0
	const trials = 400
	for range trials {
		if _, p := MannWhitney(sample(200, 0), sample(150, 0)); p < 0.01 {
			rejected++
		}
	}
	if rejected > trials*3/100 {
		t.Errorf("the null rejected %d of %d times at α=0.01", rejected, trials)
	}
}

// TestRankSumGreater: without ties it is half MannWhitney's two-sided
// p-value on the larger side, and the inflation widens it.
func TestRankSumGreater(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	a, b := make([]float64, 60), make([]float64, 400)
	for i := range a {
		a[i] = rng.NormFloat64() + 0.4
	}
	for i := range b {
		b[i] = rng.NormFloat64()
	}
	u, two := MannWhitney(a, b)
	if got := RankSumGreater(u, len(a), len(b), 1); math.Abs(got-two/2) > 1e-12*two {
		t.Errorf("one-sided %v, two-sided/2 %v", got, two/2)
	}
	if q := RankSumGreater(u, len(a), len(b), 2); !(q > two/2) {
		t.Errorf("inflated %v not above %v", q, two/2)
	}
	if p := RankSumGreater(0, 0, 10, 1); p != 1 {
		t.Errorf("empty: %v", p)
	}
}

// choose is C(n, k) exactly.
func choose(n, k int) *big.Int { return new(big.Int).Binomial(int64(n), int64(k)) }

// TestFisherGreater: Fisher's tea-tasting table (17/70), and every
// upper tail of small tables against exact rational sums.
func TestFisherGreater(t *testing.T) {
	if p := FisherGreater(3, 4, 1, 4); math.Abs(p-17.0/70) > 1e-12 {
		t.Errorf("tea tasting: %v, want 17/70", p)
	}
	for _, c := range [][2]int{{5, 9}, {12, 40}, {20, 90}, {1, 1}} {
		n, bn := c[0], c[1]
		for T := 0; T <= n+bn; T++ {
			for k := max(0, T-bn); k <= min(T, n); k++ {
				// P(X ≥ k) with T events among n+bn.
				sum := new(big.Int)
				for x := k; x <= min(T, n); x++ {
					sum.Add(sum, new(big.Int).Mul(choose(T, x), choose(n+bn-T, n-x)))
				}
				want, _ := new(big.Rat).SetFrac(sum, choose(n+bn, n)).Float64()
				if k == 0 {
					want = 1
				}
				got := FisherGreater(k, n, T-k, bn)
				if math.Abs(got-want) > 1e-9*max(want, 1e-300) && math.Abs(got-want) > 1e-15 {
					t.Fatalf("n=%d bn=%d T=%d k=%d: %v, want %v", n, bn, T, k, got, want)
				}
			}
		}
	}
	// Far tails stay accurate (no 1 − (1 − p)).
	if p := FisherGreater(60, 1000, 40, 4096); !(p > 0 && p < 1e-15) {
		t.Errorf("far tail: %v", p)
	}
}

// TestExceedanceGreater: against every placement of n new values among m
// old ones (all orders equally likely), and its mean n·r/(m+1) at the
// sizes the detector uses.
func TestExceedanceGreater(t *testing.T) {
	const n, m = 5, 7
	// Each subset of the n+m ranks is the new values' ranks.
	total := 0
	counts := make(map[[2]int]int) // (r, exceedances) → subsets
	for mask := 0; mask < 1<<(n+m); mask++ {
		if popcount(mask) != n {
			continue
		}
		total++
		// Walk from the largest rank down; old values seen so far give
		// the threshold's rank from the top.
		old, exc := 0, 0
		for bit := n + m - 1; bit >= 0; bit-- {
			if mask&(1<<bit) != 0 {
				continue
			}
			old++
			// new values above this old value, the old-th largest
			exc = 0
			for hb := n + m - 1; hb > bit; hb-- {
				if mask&(1<<hb) != 0 {
					exc++
				}
			}
			counts[[2]int{old, exc}]++
		}
	}
	for r := 1; r <= m; r++ {
		for k := 0; k <= n; k++ {
			c := 0
			for x := k; x <= n; x++ {
				c += counts[[2]int{r, x}]
			}
			want := float64(c) / float64(total)
			if got := ExceedanceGreater(k, n, r, m); math.Abs(got-want) > 1e-12 {
				t.Errorf("r=%d k=%d: %v, want %v", r, k, got, want)
			}
		}
	}
	// E[X] = Σ_{k≥1} P(X ≥ k) = n·r/(m+1).
	for _, c := range [][3]int{{1000, 41, 4096}, {160, 2, 100}, {4096, 41, 4096}} {
		var mean float64
		for k := 1; k <= c[0]; k++ {
			mean += ExceedanceGreater(k, c[0], c[1], c[2])
		}
		if want := float64(c[0]*c[1]) / float64(c[2]+1); math.Abs(mean-want) > 1e-6*want {
			t.Errorf("%v: mean %v, want %v", c, mean, want)
		}
	}
}

func popcount(x int) int {
	c := 0
	for ; x != 0; x &= x - 1 {
		c++
	}
	return c
}
