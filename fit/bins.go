// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package fit

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/llmprobe/llmprobe/dist"
)

// Bin is one histogram bucket: Count observations in (Lo, Hi]. Hi may be
// +Inf (a classic histogram's last bucket).
type Bin struct {
	Lo, Hi float64
	Count  float64
}

// Cumulative is one classic histogram bucket: Count observations <= LE.
type Cumulative struct {
	LE    float64
	Count float64
}

// BinsFromCumulative turns classic (cumulative, `le`) buckets into bins.
// The buckets may come in any order and must include le=+Inf, whose count
// is the total. Counts that decrease with le (PromQL's extrapolation of
// increase() can make them do so slightly) are raised to the running
// maximum, as histogram_quantile does.
func BinsFromCumulative(buckets []Cumulative) ([]Bin, error) {
	if len(buckets) == 0 {
		return nil, errors.New("no buckets")
	}
	bs := slices.Clone(buckets)
	slices.SortFunc(bs, func(a, b Cumulative) int { return cmp.Compare(a.LE, b.LE) })
	for i, b := range bs {
		if math.IsNaN(b.LE) || math.IsNaN(b.Count) || math.IsInf(b.Count, 0) || b.Count < 0 {
			return nil, fmt.Errorf("invalid bucket le=%g count=%g", b.LE, b.Count)
		}
		if i > 0 && b.LE == bs[i-1].LE {
			return nil, fmt.Errorf("bucket le=%g is given twice", b.LE)
		}
	}
	if !math.IsInf(bs[len(bs)-1].LE, 1) {
		return nil, errors.New(`no le="+Inf" bucket`)
	}
	out := make([]Bin, 0, len(bs))
	lo, runMax, emitted := 0.0, 0.0, 0.0
	for _, b := range bs {
		c := max(b.Count, runMax)
		runMax = c
		if b.LE <= 0 {
			// Token lengths are not negative: what lies at or below 0
			// joins the first bin.
			continue
		}
		out = append(out, Bin{Lo: lo, Hi: b.LE, Count: c - emitted})
		lo, emitted = b.LE, c
	}
	return out, nil
}

// normalizeBins sorts bins, checks them, and trims empty buckets at both
// ends.
func normalizeBins(bins []Bin) ([]Bin, error) {
	bs := slices.Clone(bins)
	slices.SortFunc(bs, func(a, b Bin) int { return cmp.Compare(a.Lo, b.Lo) })
	for i, b := range bs {
		if math.IsNaN(b.Lo) || math.IsNaN(b.Hi) || b.Lo < 0 || !(b.Hi > b.Lo) || math.IsInf(b.Lo, 0) {
			return nil, fmt.Errorf("invalid bucket (%g, %g]", b.Lo, b.Hi)
		}
		if math.IsNaN(b.Count) || math.IsInf(b.Count, 0) || b.Count < 0 {
			return nil, fmt.Errorf("bucket (%g, %g] has an invalid count %g", b.Lo, b.Hi, b.Count)
		}
		if i > 0 && b.Lo < bs[i-1].Hi {
			return nil, fmt.Errorf("buckets (%g, %g] and (%g, %g] overlap", bs[i-1].Lo, bs[i-1].Hi, b.Lo, b.Hi)
		}
	}
	first := slices.IndexFunc(bs, func(b Bin) bool { return b.Count > 0 })
	if first < 0 {
		return nil, errors.New("the histogram holds no observations")
	}
	last := len(bs) - 1
	for bs[last].Count == 0 {
		last--
	}
	return bs[first : last+1], nil
}

// HistogramQuantile returns the p-quantile of the observations in bins
// (sorted, non-overlapping). Within its bucket the quantile is
// interpolated log-linearly, value = lo·(hi/lo)^f for the fraction f of
// the bucket's count below it, which assumes lengths spread evenly in
// ln(tokens); a bucket with lower edge 0 interpolates linearly. A quantile
// in a bucket whose upper edge is +Inf is that bucket's lower edge, as in
// PromQL's histogram_quantile. It is NaN for p outside [0, 1] or no
// observations.
func HistogramQuantile(bins []Bin, p float64) float64 {
	total := 0.0
	for _, b := range bins {
		total += b.Count
	}
	if !(p >= 0 && p <= 1) || !(total > 0) {
		return math.NaN()
	}
	rank := p * total
	last := len(bins) - 1
	for bins[last].Count == 0 {
		last--
	}
	below := 0.0
	for i, b := range bins[:last+1] {
		if b.Count == 0 || (below+b.Count < rank && i < last) {
			below += b.Count
			continue
		}
		f := min(max((rank-below)/b.Count, 0), 1)
		switch {
		case math.IsInf(b.Hi, 1):
			return b.Lo
		case b.Lo <= 0:
			return b.Hi * f
		}
		// Rounding must not step outside the bucket.
		return min(max(b.Lo*math.Pow(b.Hi/b.Lo, f), b.Lo), b.Hi)
	}
	return math.NaN()
}

// LogBins bins non-negative values into log-spaced bins for a histogram
// plot: ten per decade, with edges at whole numbers (10^(k/10) rounded up,
// duplicates merged) so that every bin holds at least one integer and
// small token counts show no empty comb. A bin covers the integers from
// its edge up to the next edge; as a Bin it reads (edge-½, next-½], the
// continuous range those integers stand for. Bins run from the tenth of a
// decade holding the smallest value to the one holding the largest;
// values below ½ (zeros) fall in the first bin, whose Lo is then 0. Empty
// bins in between are kept.
func LogBins(values []float64) []Bin {
	if len(values) == 0 {
		return nil
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, v := range values {
		lo, hi = min(lo, v), max(hi, v)
	}
	lo, hi = max(lo, 1), max(hi, 1)
	k0 := int(math.Floor(math.Log10(lo)*10 + 1e-9))
	k1 := int(math.Floor(math.Log10(hi)*10+1e-9)) + 1
	var edges []float64
	for k := k0; k <= k1; k++ {
		e := math.Ceil(math.Pow(10, float64(k)/10) - 1e-9)
		if len(edges) == 0 || e > edges[len(edges)-1] {
			edges = append(edges, e)
		}
	}
	// The first edge must not lie above the smallest value, the last
	// must lie above the largest.
	if edges[0] > math.Floor(lo) {
		edges = slices.Insert(edges, 0, math.Floor(lo))
	}
	if edges[len(edges)-1]-0.5 < hi {
		edges = append(edges, math.Floor(hi+0.5)+1)
	}
	bins := make([]Bin, len(edges)-1)
	for i := range bins {
		bins[i] = Bin{Lo: edges[i] - 0.5, Hi: edges[i+1] - 0.5}
	}
	for _, v := range values {
		if v <= bins[0].Lo {
			bins[0].Lo = 0
		}
		i, _ := slices.BinarySearchFunc(bins, v, func(b Bin, v float64) int {
			switch {
			case v <= b.Lo:
				return 1
			case v > b.Hi:
				return -1
			}
			return 0
		})
		bins[min(i, len(bins)-1)].Count++
	}
	return bins
}

// FitLogNormalBinned fits a log-normal distribution to histogram buckets
// by binned maximum likelihood: it maximises Σ nᵢ·ln P(loᵢ < X <= hiᵢ)
// with the Nelder–Mead method over (mu, ln sigma), started from the least-
// squares line through the points (NormQuantile(F(le)), ln le) of the
// cumulative distribution. It needs observations in at least three
// buckets with positive edges, or two interior cumulative points.
func FitLogNormalBinned(bins []Bin) (mu, sigma float64, err error) {
	bs, err := normalizeBins(bins)
	if err != nil {
		return 0, 0, err
	}
	total := 0.0
	for _, b := range bs {
		total += b.Count
	}
	// Interior points of the cumulative distribution.
	var xs, zs []float64
	cum := 0.0
	for _, b := range bs[:len(bs)-1] {
		cum += b.Count
		if b.Hi > 0 && !math.IsInf(b.Hi, 1) && cum > 0 && cum < total {
			xs = append(xs, math.Log(b.Hi))
			zs = append(zs, dist.NormQuantile(cum/total))
		}
	}
	if len(xs) < 2 {
		return 0, 0, fmt.Errorf("lognormal fit: the observations fill %d bucket(s); at least 3 are needed", len(bs))
	}
	// Least squares: x = mu + sigma·z.
	mx, mz := mean(xs), mean(zs)
	sxz, szz := 0.0, 0.0
	for i := range xs {
		sxz += (xs[i] - mx) * (zs[i] - mz)
		szz += (zs[i] - mz) * (zs[i] - mz)
	}
	s0 := sxz / szz
	if !(s0 > 1e-6) || math.IsInf(s0, 0) {
		s0 = 1
	}
	m0 := mx - s0*mz

	nll := func(v [2]float64) float64 {
		m, s := v[0], math.Exp(v[1])
		ll := 0.0
		for _, b := range bs {
			if b.Count == 0 {
				continue
			}
			a, c := math.Inf(-1), math.Inf(1)
			if b.Lo > 0 {
				a = (math.Log(b.Lo) - m) / s
			}
			if !math.IsInf(b.Hi, 1) {
				c = (math.Log(b.Hi) - m) / s
			}
			ll += b.Count * math.Log(max(normInterval(a, c), 1e-300))
		}
		return -ll
	}
	best := nelderMead(nll, [2]float64{m0, math.Log(s0)}, [2]float64{0.5, 0.5})
	mu, sigma = best[0], math.Exp(best[1])
	if math.IsNaN(mu) || math.IsInf(mu, 0) || !(sigma > 0) || math.IsInf(sigma, 0) {
		return 0, 0, errors.New("lognormal fit: the binned fit did not converge")
	}
	return mu, sigma, nil
}

// normInterval returns Φ(c) − Φ(a) for a <= c without cancellation in
// either tail.
func normInterval(a, c float64) float64 {
	if a > 0 {
		// Upper tail: Q(a) − Q(c).
		return 0.5 * (math.Erfc(a/math.Sqrt2) - math.Erfc(c/math.Sqrt2))
	}
	return 0.5 * (math.Erfc(-c/math.Sqrt2) - math.Erfc(-a/math.Sqrt2))
}

func mean(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

// nelderMead minimises f over two variables from x0 with initial steps,
// until the simplex' values agree to 1e-12 (relative) or 2000 iterations.
func nelderMead(f func([2]float64) float64, x0, step [2]float64) [2]float64 {
	type vertex struct {
		x [2]float64
		f float64
	}
	s := [3]vertex{{x: x0}, {x: [2]float64{x0[0] + step[0], x0[1]}}, {x: [2]float64{x0[0], x0[1] + step[1]}}}
	for i := range s {
		s[i].f = f(s[i].x)
	}
	at := func(a, b [2]float64, t float64) [2]float64 {
		return [2]float64{a[0] + t*(b[0]-a[0]), a[1] + t*(b[1]-a[1])}
	}
	for range 2000 {
		slices.SortFunc(s[:], func(a, b vertex) int { return cmp.Compare(a.f, b.f) })
		if math.Abs(s[2].f-s[0].f) <= 1e-12*(math.Abs(s[0].f)+1e-12) {
			break
		}
		c := at(s[0].x, s[1].x, 0.5) // centroid of the best two
		r := vertex{x: at(c, s[2].x, -1)}
		r.f = f(r.x)
		switch {
		case r.f < s[0].f:
			e := vertex{x: at(c, s[2].x, -2)}
			e.f = f(e.x)
			if e.f < r.f {
				s[2] = e
			} else {
				s[2] = r
			}
		case r.f < s[1].f:
			s[2] = r
		default:
			k := vertex{x: at(c, s[2].x, 0.5)}
			if r.f < s[2].f {
				k.x = at(c, r.x, 0.5)
			}
			k.f = f(k.x)
			if k.f < min(r.f, s[2].f) {
				s[2] = k
				continue
			}
			for i := 1; i < 3; i++ {
				s[i].x = at(s[0].x, s[i].x, 0.5)
				s[i].f = f(s[i].x)
			}
		}
	}
	slices.SortFunc(s[:], func(a, b vertex) int { return cmp.Compare(a.f, b.f) })
	return s[0].x
}
