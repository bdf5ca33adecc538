// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package dist

import (
	"fmt"
	"math"
	"slices"
)

// The lower tail of Acklam's rational approximation of the normal quantile.
// The standard library's math.Erfinv serves the central range, but
// math.Erfcinv is Erfinv(1-x), so below p ≈ 1e-8 the argument 1-2p has lost
// most of its digits and below 1e-16 it is exactly 1 (an infinite z): the
// tail needs its own approximation in sqrt(-2 ln p), whose error here is
// 1.15e-9 before refinement.
var (
	acklamC = [6]float64{-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00, -2.549732539343734e+00, 4.374664141464968e+00, 2.938163982698783e+00}
	acklamD = [4]float64{7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00, 3.754408661907416e+00}
)

// NormQuantile is the standard normal inverse CDF: z with Φ(z) = p. It is
// -Inf at 0, +Inf at 1 and NaN outside [0, 1]. The start is math.Erfinv
// (central range) or Acklam's tail approximation (p < 0.02425), refined by
// one Halley step against math.Erfc, which brings it to about 1e-15 over the
// whole range.
func NormQuantile(p float64) float64 {
	switch {
	case badP(p):
		return math.NaN()
	case p == 0:
		return math.Inf(-1)
	case p == 1:
		return math.Inf(1)
	case p > 0.5:
		// 1-p is exact here; the lower half keeps Φ free of cancellation.
		return -NormQuantile(1 - p)
	}
	const pLow = 0.02425
	var x float64
	if p < pLow {
		c, d := &acklamC, &acklamD
		q := math.Sqrt(-2 * math.Log(p))
		x = (((((c[0]*q+c[1])*q+c[2])*q+c[3])*q+c[4])*q + c[5]) /
			((((d[0]*q+d[1])*q+d[2])*q+d[3])*q + 1)
	} else {
		x = math.Sqrt2 * math.Erfinv(2*p-1)
	}
	// Halley refinement.
	e := normCDF(x) - p
	u := e * math.Sqrt(2*math.Pi) * math.Exp(x*x/2)
	return x - u/(1+x*u/2)
}

// Quantile returns the p-quantile of sorted (ascending) values with linear
// interpolation between order statistics (Hyndman and Fan type 7, the
// default of R and NumPy). It is NaN for no values or p outside [0, 1].
func Quantile(sorted []float64, p float64) float64 {
	n := len(sorted)
	if n == 0 || badP(p) {
		return math.NaN()
	}
	h := p * float64(n-1)
	i := int(h)
	if i >= n-1 {
		return sorted[n-1]
	}
	lo, hi := sorted[i], sorted[i+1]
	if lo == hi {
		return lo
	}
	return lo + (h-float64(i))*(hi-lo)
}

// Summary describes a set of values. Quantiles are type 7 (see Quantile).
// For no values every field is zero.
type Summary struct {
	Count                    int
	Mean, Min, Max           float64
	P50, P90, P95, P99, P999 float64
}

// Summarize computes the Summary of values, ignoring NaNs. The input is not
// modified.
func Summarize(values []float64) Summary {
	s := make([]float64, 0, len(values))
	for _, v := range values {
		if !math.IsNaN(v) {
			s = append(s, v)
		}
	}
	if len(s) == 0 {
		return Summary{}
	}
	slices.Sort(s)
	sum := 0.0
	for _, v := range s {
		sum += v
	}
	return Summary{
		Count: len(s),
		Mean:  sum / float64(len(s)),
		Min:   s[0],
		Max:   s[len(s)-1],
		P50:   Quantile(s, 0.5),
		P90:   Quantile(s, 0.9),
		P95:   Quantile(s, 0.95),
		P99:   Quantile(s, 0.99),
		P999:  Quantile(s, 0.999),
	}
}

// FitLogNormal fits a log-normal distribution by maximum likelihood: mu and
// sigma are the mean and the (population) standard deviation of ln(v) over
// the positive, finite values. Other values are ignored. It needs at least
// two positive values that are not all equal.
func FitLogNormal(values []float64) (mu, sigma float64, err error) {
	n, sum := 0, 0.0
	for _, v := range values {
		if v > 0 && !math.IsInf(v, 1) {
			n++
			sum += math.Log(v)
		}
	}
	if n < 2 {
		return 0, 0, fmt.Errorf("lognormal fit: need at least 2 positive values, got %d", n)
	}
	mu = sum / float64(n)
	ss := 0.0
	for _, v := range values {
		if v > 0 && !math.IsInf(v, 1) {
			d := math.Log(v) - mu
			ss += d * d
		}
	}
	sigma = math.Sqrt(ss / float64(n))
	if sigma < 1e-12 { // equal values, up to rounding in ln
		return 0, 0, fmt.Errorf("lognormal fit: all %d positive values are equal (%s); use a fixed distribution", n, num(math.Exp(mu)))
	}
	return mu, sigma, nil
}
