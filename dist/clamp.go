// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package dist

import (
	"math"
	"math/rand/v2"
)

type clamped struct {
	s      Sampler
	inner  analytic
	lo, hi float64 // -Inf / +Inf on an unbounded side
	mean   float64
}

// Clamp bounds s to [min, max]: a draw below min becomes min and a draw
// above max becomes max (they are not redrawn). A NaN or infinite bound
// leaves that side unbounded; with both sides unbounded Clamp returns s
// itself. Quantile and Mean account for the clamping. If min > max, every
// draw is max; the config layer rejects such bounds before they get here.
func Clamp(s Sampler, min, max float64) Sampler {
	lo, hi := min, max
	if !finite(lo) {
		lo = math.Inf(-1)
	}
	if !finite(hi) {
		hi = math.Inf(1)
	}
	if math.IsInf(lo, -1) && math.IsInf(hi, 1) {
		return s
	}
	c := &clamped{s: s, inner: analyticOf(s), lo: lo, hi: hi}
	// The mean of a clamped distribution lies within the bounds; clamping
	// the computed value removes rounding just outside them.
	c.mean = c.clamp(c.partialMean(math.Inf(1)))
	return c
}

func (c *clamped) clamp(x float64) float64 {
	if x < c.lo {
		x = c.lo
	}
	if x > c.hi {
		x = c.hi
	}
	return x
}

func (c *clamped) Sample(r *rand.Rand) float64 { return c.clamp(c.s.Sample(r)) }
func (c *clamped) Quantile(p float64) float64  { return c.clamp(c.s.Quantile(p)) } // NaN stays NaN
func (c *clamped) Mean() float64               { return c.mean }

func (c *clamped) String() string {
	lo, hi := "(-Inf", "+Inf)"
	if !math.IsInf(c.lo, -1) {
		lo = "[" + num(c.lo)
	}
	if !math.IsInf(c.hi, 1) {
		hi = num(c.hi) + "]"
	}
	return c.s.String() + " clamped " + lo + ", " + hi
}

// cdf of Y = clamp(X): 0 below lo, 1 from hi on, F(x) between.
func (c *clamped) cdf(x float64) float64 {
	switch {
	case x >= c.hi:
		return 1
	case x < c.lo:
		return 0
	}
	return c.inner.cdf(x)
}

// partialMean of Y = clamp(X): E[Y; Y <= x] =
// lo·F(lo) + E[X; lo < X <= min(x, hi)] + hi·(1-F(hi)) [when x >= hi].
func (c *clamped) partialMean(x float64) float64 {
	if x < c.lo || c.lo > c.hi {
		if c.lo > c.hi && x >= c.hi { // degenerate: every draw is hi
			return c.hi
		}
		return 0
	}
	m, pmLo := 0.0, 0.0
	if !math.IsInf(c.lo, -1) {
		m = c.lo * c.inner.cdf(c.lo)
		pmLo = c.inner.partialMean(c.lo)
	}
	if x < c.hi {
		return m + c.inner.partialMean(x) - pmLo
	}
	pmHi := c.s.Mean()
	if !math.IsInf(c.hi, 1) {
		pmHi = c.inner.partialMean(c.hi)
		m += c.hi * (1 - c.inner.cdf(c.hi))
	}
	return m + pmHi - pmLo
}

// analyticOf returns s's exact cdf and partial mean when it has them, and a
// numerical stand-in otherwise (a Sampler implemented outside this package).
func analyticOf(s Sampler) analytic {
	if a, ok := s.(analytic); ok {
		return a
	}
	return numeric{s}
}

// numeric computes cdf and partial means of any Sampler from its Quantile.
type numeric struct{ s Sampler }

// cdf bisects for sup{p : Quantile(p) <= x}.
func (n numeric) cdf(x float64) float64 {
	if n.s.Quantile(1) <= x {
		return 1
	}
	if !(n.s.Quantile(0) <= x) {
		return 0
	}
	lo, hi := 0.0, 1.0
	for range 64 {
		mid := lo + (hi-lo)/2
		if n.s.Quantile(mid) <= x {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo
}

// Gauss–Legendre 8-point nodes and weights on [-1, 1].
var (
	glNodes   = [8]float64{-0.9602898564975363, -0.7966664774136267, -0.5255324099163290, -0.1834346424956498, 0.1834346424956498, 0.5255324099163290, 0.7966664774136267, 0.9602898564975363}
	glWeights = [8]float64{0.1012285362903763, 0.2223810344533745, 0.3137066376686637, 0.3626837833783620, 0.3626837833783620, 0.3137066376686637, 0.2223810344533745, 0.1012285362903763}
)

// partialMean integrates Quantile over [0, cdf(x)] with Gauss–Legendre
// panels, dense towards both ends where an unbounded quantile function
// diverges (the nodes never touch 0 or 1).
func (n numeric) partialMean(x float64) float64 {
	end := 1.0
	if !math.IsInf(x, 1) {
		end = n.cdf(x)
	}
	// Breakpoints: 0, 1e-12 … 1e-2 (geometric), 64 equal panels between
	// 0.01 and 0.99, then mirrored towards 1.
	var br []float64
	br = append(br, 0)
	for e := -12; e <= -3; e++ {
		br = append(br, math.Pow(10, float64(e)))
	}
	for i := range 65 {
		br = append(br, 0.01+0.98*float64(i)/64)
	}
	for e := -3; e >= -12; e-- {
		br = append(br, 1-math.Pow(10, float64(e)))
	}
	br = append(br, 1)
	sum := 0.0
	for i := 0; i+1 < len(br) && br[i] < end; i++ {
		a, b := br[i], min(br[i+1], end)
		half, mid := (b-a)/2, (a+b)/2
		for k, node := range glNodes {
			sum += glWeights[k] * half * n.s.Quantile(mid+half*node)
		}
	}
	return sum
}
