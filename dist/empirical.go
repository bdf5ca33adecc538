// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package dist

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Point is one entry of a quantile table: the p-quantile is V, P(X <= V) = P.
type Point struct{ P, V float64 }

// piece is one part of an empirical quantile function on [p0, p1]: ln Q(p)
// is linear in t, where t = NormQuantile(p) when inZ and t = p otherwise,
// through the anchor (t0, l0 = ln va), a table point, with slope b >= 0.
type piece struct {
	p0, p1 float64
	inZ    bool
	t0, l0 float64
	va     float64
	b      float64
	z0     float64 // NormQuantile(p0), for integrals of z pieces
	v0, v1 float64 // Q(p0), Q(p1)
	cum    float64 // integral of Q over [0, p0]
}

func (pc *piece) value(p float64) float64 {
	if pc.b == 0 {
		return pc.va
	}
	t := p
	if pc.inZ {
		t = NormQuantile(p)
	}
	return pc.va * math.Exp(pc.b*(t-pc.t0))
}

// integral returns the integral of Q over [p0, p], p in [p0, p1].
func (pc *piece) integral(p float64) float64 {
	if p <= pc.p0 {
		return 0
	}
	if pc.b == 0 {
		return pc.va * (p - pc.p0)
	}
	if pc.inZ {
		// With z = NormQuantile(p): ∫ e^(l0 + b(z-t0)) φ(z) dz between the
		// ends, in log space (b²/2 can be huge while Φ(z-b) is tiny).
		hi := logExpNormInt(pc.b, pc.t0, NormQuantile(p))
		lo := logExpNormInt(pc.b, pc.t0, pc.z0)
		return math.Exp(pc.l0 + logSubExp(hi, lo))
	}
	// ∫ va·e^(b(u-t0)) du = va/b (e^(b(p-t0)) - e^(b(p0-t0))), in log space.
	return math.Exp(pc.l0 - math.Log(pc.b) + logSubExp(pc.b*(p-pc.t0), pc.b*(pc.p0-pc.t0)))
}

type empirical struct {
	points []Point
	pieces []piece
	mean   float64
}

// Empirical returns the distribution described by a quantile table. The
// points may come in any order; they are sorted by P. ln(value) is
// interpolated linearly in NormQuantile(p) between points, and the outer
// segments are extended beyond the first and last points unless p=0 or p=1
// is given (see the package documentation).
func Empirical(points []Point) (Sampler, error) {
	if len(points) < 2 {
		return nil, fmt.Errorf("empirical: need at least 2 quantile points, got %d", len(points))
	}
	pts := slices.Clone(points)
	for _, pt := range pts {
		if badP(pt.P) {
			return nil, fmt.Errorf("empirical: quantile p%s is outside [0, 1]", num(pt.P))
		}
		if !finite(pt.V) || pt.V <= 0 {
			return nil, fmt.Errorf("empirical: value at p%s (%s) must be > 0", num(pt.P), num(pt.V))
		}
	}
	slices.SortStableFunc(pts, func(a, b Point) int { return cmp.Compare(a.P, b.P) })
	for i := 1; i < len(pts); i++ {
		prev, cur := pts[i-1], pts[i]
		if cur.P == prev.P {
			return nil, fmt.Errorf("empirical: quantile p%s is given twice", num(cur.P))
		}
		if cur.V < prev.V {
			return nil, fmt.Errorf("empirical: quantiles must increase: p%s=%s < p%s=%s", num(cur.P), num(cur.V), num(prev.P), num(prev.V))
		}
	}

	n := len(pts)
	segs := make([]piece, 0, n+1)
	for i := 0; i+1 < n; i++ {
		a, b := pts[i], pts[i+1]
		pc := piece{p0: a.P, p1: b.P, l0: math.Log(a.V), va: a.V}
		dl := math.Log(b.V) - pc.l0
		if a.P > 0 && b.P < 1 {
			za, zb := NormQuantile(a.P), NormQuantile(b.P)
			if slope := dl / (zb - za); zb > za && finite(slope) {
				pc.inZ, pc.t0, pc.b = true, za, slope
			}
		}
		if !pc.inZ {
			pc.t0, pc.b = a.P, dl/(b.P-a.P)
			if !finite(pc.b) {
				return nil, fmt.Errorf("empirical: quantiles p%s and p%s are too close together", num(a.P), num(b.P))
			}
		}
		segs = append(segs, pc)
	}
	// Extend the outer segments into the tails.
	if pts[0].P > 0 {
		tail := segs[0]
		tail.p0, tail.p1 = 0, pts[0].P
		segs = slices.Insert(segs, 0, tail)
	}
	if pts[n-1].P < 1 {
		tail := segs[len(segs)-1]
		tail.p0, tail.p1 = pts[n-1].P, 1
		segs = append(segs, tail)
	}
	cum := 0.0
	for i := range segs {
		pc := &segs[i]
		pc.z0 = NormQuantile(pc.p0)
		pc.v0, pc.v1 = pc.value(pc.p0), pc.value(pc.p1)
		// Table points are exact, whatever exp(ln v) rounds to.
		for _, pt := range pts {
			if pt.P == pc.p0 {
				pc.v0 = pt.V
			}
			if pt.P == pc.p1 {
				pc.v1 = pt.V
			}
		}
		pc.cum = cum
		cum += pc.integral(pc.p1)
	}
	return &empirical{points: pts, pieces: segs, mean: cum}, nil
}

func (e *empirical) Sample(r *rand.Rand) float64 { return e.Quantile(openUnit(r)) }
func (e *empirical) Mean() float64               { return e.mean }

func (e *empirical) String() string {
	var b strings.Builder
	b.WriteString("empirical(")
	for i, pt := range e.points {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("p" + num(pt.P) + "=" + num(pt.V))
	}
	b.WriteString(")")
	return b.String()
}

// find returns the piece whose range holds p.
func (e *empirical) find(p float64) *piece {
	// A handful of pieces: a linear scan beats a binary search.
	for i := range e.pieces {
		if p <= e.pieces[i].p1 {
			return &e.pieces[i]
		}
	}
	return &e.pieces[len(e.pieces)-1]
}

func (e *empirical) Quantile(p float64) float64 {
	if badP(p) {
		return math.NaN()
	}
	pc := e.find(p)
	switch p {
	case pc.p0:
		return pc.v0
	case pc.p1:
		return pc.v1
	}
	// Rounding in exp(ln v) must not step outside the piece's ends.
	return min(max(pc.value(p), pc.v0), pc.v1)
}

func (e *empirical) cdf(x float64) float64 {
	for i := len(e.pieces) - 1; i >= 0; i-- {
		pc := &e.pieces[i]
		if pc.v0 > x {
			continue
		}
		if pc.v1 <= x {
			return pc.p1
		}
		// v0 <= x < v1, so the piece is not flat: invert it.
		t := pc.t0 + (math.Log(x)-pc.l0)/pc.b
		p := t
		if pc.inZ {
			p = normCDF(t)
		}
		return min(max(p, pc.p0), pc.p1)
	}
	return 0
}

func (e *empirical) partialMean(x float64) float64 {
	p := e.cdf(x)
	pc := e.find(p)
	return pc.cum + pc.integral(min(p, pc.p1))
}

// ---------------------------------------------------------------------------
// resampled observations

type samples struct {
	xs   []float64 // sorted
	mean float64
}

// FromSamples returns the empirical distribution of values: its quantile
// function interpolates linearly between the sorted values (see Quantile),
// and a draw is Quantile(U). Its Mean is the mean of that interpolated
// distribution, which differs from the plain average of the values by less
// than (max-min)/n. The values are copied.
func FromSamples(values []float64) (Sampler, error) {
	if len(values) == 0 {
		return nil, fmt.Errorf("empirical: no samples")
	}
	for i, v := range values {
		if !finite(v) {
			return nil, fmt.Errorf("empirical: sample %d (%s) is not a finite number", i+1, num(v))
		}
	}
	xs := slices.Clone(values)
	slices.Sort(xs)
	s := &samples{xs: xs}
	s.mean = s.partialMean(math.Inf(1))
	return s, nil
}

func (s *samples) Sample(r *rand.Rand) float64 { return Quantile(s.xs, openUnit(r)) }
func (s *samples) Quantile(p float64) float64  { return Quantile(s.xs, p) }
func (s *samples) Mean() float64               { return s.mean }

func (s *samples) String() string {
	g := func(v float64) string { return strconv.FormatFloat(v, 'g', 6, 64) }
	return fmt.Sprintf("empirical(%d samples, p50=%s, p99=%s)", len(s.xs), g(s.Quantile(0.5)), g(s.Quantile(0.99)))
}

func (s *samples) cdf(x float64) float64 {
	n := len(s.xs)
	k := sort.Search(n, func(i int) bool { return s.xs[i] > x }) // values <= x
	switch k {
	case 0:
		return 0
	case n:
		return 1
	}
	lo, hi := s.xs[k-1], s.xs[k]
	return (float64(k-1) + (x-lo)/(hi-lo)) / float64(n-1)
}

func (s *samples) partialMean(x float64) float64 {
	p := s.cdf(x)
	n := len(s.xs)
	if n == 1 {
		return p * s.xs[0]
	}
	// The quantile function is piecewise linear with n-1 pieces of width
	// 1/(n-1): add up trapezoids.
	h := p * float64(n-1)
	k := min(int(h), n-1)
	sum := 0.0
	for i := range k {
		sum += (s.xs[i] + s.xs[i+1]) / 2
	}
	if f := h - float64(k); f > 0 {
		sum += f * (s.xs[k] + Quantile(s.xs, p)) / 2
	}
	return sum / float64(n-1)
}
