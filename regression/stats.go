// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package regression

import (
	"math"
	"slices"
)

// MannWhitney tests whether a and b come from distributions with the same
// median location (two-sided Mann–Whitney U test, normal approximation
// with tie correction and continuity correction). It returns the U of a
// (the pairs in which a's value is the larger, ties counting half) and the
// p-value; p is 1 when either side is empty or every value ties.
func MannWhitney(a, b []float64) (u, p float64) {
	n1, n2 := len(a), len(b)
	if n1 == 0 || n2 == 0 {
		return 0, 1
	}
	type obs struct {
		v     float64
		fromA bool
	}
	all := make([]obs, 0, n1+n2)
	for _, v := range a {
		all = append(all, obs{v, true})
	}
	for _, v := range b {
		all = append(all, obs{v, false})
	}
	slices.SortFunc(all, func(x, y obs) int { return cmpFloat(x.v, y.v) })
	var rankA, ties float64
	for i := 0; i < len(all); {
		j := i + 1
		for j < len(all) && all[j].v == all[i].v {
			j++
		}
		rank := float64(i+j+1) / 2 // mean of the 1-based ranks i+1..j
		for k := i; k < j; k++ {
			if all[k].fromA {
				rankA += rank
			}
		}
		if t := float64(j - i); t > 1 {
			ties += t*t*t - t
		}
		i = j
	}
	f1, f2 := float64(n1), float64(n2)
	n := f1 + f2
	u = rankA - f1*(f1+1)/2
	mean := f1 * f2 / 2
	variance := f1 * f2 / 12 * ((n + 1) - ties/(n*(n-1)))
	if !(variance > 0) {
		return u, 1
	}
	z := math.Abs(u-mean) - 0.5
	if z < 0 {
		z = 0
	}
	z /= math.Sqrt(variance)
	return u, math.Erfc(z / math.Sqrt2) // 2 × (1 − Φ(z))
}

// cmpFloat orders floats; NaN compares equal to everything, as the
// original bench code did (callers do not pass NaN).
func cmpFloat(x, y float64) int {
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

// RankSumGreater is the one-sided p-value that n values are stochastically
// larger than m others, given U, the pairs (one of the n against one of
// the m) in which the first is the larger, ties counting half: the normal
// approximation of the Mann–Whitney U with continuity correction and
// without tie correction (ties only make it conservative), with the null
// variance multiplied by inflate (1 for independent values; see
// [Detector] for the autocorrelated case). It is 1 when n or m is 0.
//
// For small n against a large m the normal tail is conservative: U/m is
// then close to a sum of n uniform placements, whose tail is lighter than
// the normal's (20 values at z = 5.2: 1e-8 against the normal's 1e-7).
func RankSumGreater(u float64, n, m int, inflate float64) float64 {
	if n <= 0 || m <= 0 {
		return 1
	}
	fn, fm := float64(n), float64(m)
	sd := math.Sqrt(inflate * fn * fm * (fn + fm + 1) / 12)
	z := (u - fn*fm/2 - 0.5) / sd
	return normalGreater(z)
}

// normalGreater is 1 − Φ(z), accurate in the far tail.
func normalGreater(z float64) float64 { return 0.5 * math.Erfc(z/math.Sqrt2) }

// lchoose is ln C(n, k) for 0 ≤ k ≤ n.
func lchoose(n, k int) float64 {
	a, _ := math.Lgamma(float64(n) + 1)
	b, _ := math.Lgamma(float64(k) + 1)
	c, _ := math.Lgamma(float64(n-k) + 1)
	return a - b - c
}

// FisherGreater is the one-sided p-value of Fisher's exact test that a
// current ratio k/n is larger than a baseline ratio bk/bn: conditional on
// the k+bk events of the n+bn trials, the current side's count is
// hypergeometric, and the p-value is P(X ≥ k). It is exact (and so
// conservative by discreteness), where a normal approximation is badly
// wrong for the handful of events a low rate gives. It is 1 when k is 0
// or either side is empty.
func FisherGreater(k, n, bk, bn int) float64 {
	if n <= 0 || bn <= 0 || k <= 0 || k > n || bk < 0 || bk > bn {
		return 1
	}
	N, T := n+bn, k+bk
	lo, hi := max(0, T-bn), min(T, n)
	// pmf(x) = C(T, x) C(N−T, n−x) / C(N, n)
	lpmf := func(x int) float64 { return lchoose(T, x) + lchoose(N-T, n-x) - lchoose(N, n) }
	// pmf(x+1)/pmf(x)
	up := func(x int) float64 {
		return float64(T-x) * float64(n-x) / (float64(x+1) * float64(N-T-n+x+1))
	}
	return discreteGreater(k, lo, hi, float64(n)*float64(T)/float64(N), lpmf, up)
}

// ExceedanceGreater is the one-sided p-value that more of n new values lie
// above the r-th largest of m reference values than chance allows: under
// the null (all n+m values exchangeable and continuous) the count X of
// exceedances has the distribution of Gumbel and von Schelling (1950),
// P(X = x) = C(x+r−1, x) C(n−x+m−r, n−x) / C(n+m, n), whatever the
// distribution; the p-value is P(X ≥ k). It is exact, and right for a
// threshold that is an order statistic of the reference (a p99 estimated
// from it), where a binomial test that took the threshold's exceedance
// probability as known would not be. It is 1 when k is 0, and for r
// outside 1..m or n ≤ 0.
func ExceedanceGreater(k, n, r, m int) float64 {
	if n <= 0 || r < 1 || r > m || k <= 0 || k > n {
		return 1
	}
	lpmf := func(x int) float64 { return lchoose(x+r-1, x) + lchoose(n-x+m-r, n-x) - lchoose(n+m, n) }
	up := func(x int) float64 {
		return float64(x+r) / float64(x+1) * float64(n-x) / float64(n-x+m-r)
	}
	return discreteGreater(k, 0, n, float64(n)*float64(r)/float64(m+1), lpmf, up)
}

// discreteGreater is P(X ≥ k) for a unimodal distribution on lo..hi, from
// its log pmf at one point and the ratio up(x) = pmf(x+1)/pmf(x): the upper
// tail summed directly when k is above the mean, else one minus the lower
// tail, each summed outward until the terms no longer count.
func discreteGreater(k, lo, hi int, mean float64, lpmf func(int) float64, up func(int) float64) float64 {
	if k <= lo {
		return 1
	}
	if k > hi {
		return 0
	}
	const tiny = 1e-18
	if float64(k) > mean {
		term := math.Exp(lpmf(k))
		sum := term
		for x := k; x < hi && term > tiny*sum; x++ {
			term *= up(x)
			sum += term
		}
		return min(sum, 1)
	}
	// 1 − P(X ≤ k−1), summing down from k−1.
	term := math.Exp(lpmf(k - 1))
	sum := term
	for x := k - 1; x > lo && term > tiny*sum; x-- {
		term /= up(x - 1)
		sum += term
	}
	return max(0, min(1, 1-sum))
}
