// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package fit

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/llmprobe/llmprobe/config"
	"github.com/llmprobe/llmprobe/dist"
)

// MinTail is the number of observations that must lie beyond an optional
// quantile point (below it for p < 0.5, above it for p > 0.5) for the
// point to enter a quantile table.
const MinTail = 10

// TableProbabilities are the quantile points a table may hold, in order.
var TableProbabilities = []float64{0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.999}

// requiredProbabilities are always in a table, whatever the count.
var requiredProbabilities = []float64{0.5, 0.9, 0.99}

// z99 is the standard normal 0.99 quantile.
var z99 = dist.NormQuantile(0.99)

// Lengths is the fitted distribution of one token length (prompt or
// completion) of a set of requests.
type Lengths struct {
	// Count is the number of observations. From Prometheus it is the
	// increase of the histogram's count over the range, which PromQL may
	// extrapolate to a fractional value.
	Count float64
	// Zeros is the number of observations equal to 0 (a completion
	// cancelled before its first token). They count everywhere but in the
	// log-normal fit; a table point never goes below 1 token.
	Zeros int
	// Mean is the average length (from a histogram: its sum / count, or
	// NaN when the sum is unknown).
	Mean float64
	// Min and Max are the extremes: observed from samples; from a
	// histogram the lower edge of the first and the upper edge of the last
	// non-empty bucket (Max is +Inf when that is the +Inf bucket).
	Min, Max float64
	// Table is the config-ready quantile table (see the package
	// documentation for which points it holds).
	Table []dist.Point
	// Mu and Sigma are the log-normal fit (ln tokens ~ N(Mu, Sigma²));
	// both are 0 when FitErr is set.
	Mu, Sigma float64
	// FitErr says why there is no log-normal fit (too few distinct
	// values, or all of them in one bucket).
	FitErr error

	samples []float64 // sorted; nil when binned
	bins    []Bin     // non-empty when binned
}

// Binned reports whether the lengths come from a histogram rather than
// from individual observations.
func (l *Lengths) Binned() bool { return l.samples == nil }

// Quantile returns the data's p-quantile: type 7 over samples, log-linear
// interpolation within the bucket for a histogram (see HistogramQuantile).
func (l *Lengths) Quantile(p float64) float64 {
	if l.samples != nil {
		return dist.Quantile(l.samples, p)
	}
	return HistogramQuantile(l.bins, p)
}

// Bins returns the data as histogram buckets: the source's buckets when
// binned, log-spaced bins (LogBins) of the samples otherwise.
func (l *Lengths) Bins() []Bin {
	if l.samples != nil {
		return LogBins(l.samples)
	}
	return slices.Clone(l.bins)
}

// LogNormalQuantile returns the p-quantile of the log-normal fit, NaN
// without a fit.
func (l *Lengths) LogNormalQuantile(p float64) float64 {
	if l.FitErr != nil || l.Sigma <= 0 {
		return math.NaN()
	}
	return math.Exp(l.Mu + l.Sigma*dist.NormQuantile(p))
}

// TableMin is the lower clamp written next to the table: the minimum
// rounded down to whole tokens, at least 1.
func (l *Lengths) TableMin() float64 {
	if !(l.Min >= 1) {
		return 1
	}
	return math.Floor(l.Min)
}

// TableMax is the upper clamp written next to the table: the maximum
// rounded up to whole tokens (never below the table's last point), or NaN
// (no upper clamp) when the maximum is unknown (the +Inf bucket).
func (l *Lengths) TableMax() float64 {
	if math.IsInf(l.Max, 0) || math.IsNaN(l.Max) {
		return math.NaN()
	}
	return max(1, math.Ceil(l.Max), l.Table[len(l.Table)-1].V)
}

// Sampler returns the distribution the table describes, clamped to
// TableMin and TableMax, as the configuration builds it from Dist.
func (l *Lengths) Sampler() (dist.Sampler, error) {
	s, err := dist.Empirical(l.Table)
	if err != nil {
		return nil, err
	}
	return dist.Clamp(s, l.TableMin(), l.TableMax()), nil
}

// Dist returns the table as a configuration distribution
// ({dist: empirical, quantiles: {...}, min, max}). It is not validated:
// loading it through the config package builds the same sampler as
// Sampler.
func (l *Lengths) Dist() config.Dist {
	q := make(map[float64]float64, len(l.Table))
	for _, pt := range l.Table {
		q[pt.P] = pt.V
	}
	d := config.Dist{Kind: config.DistEmpirical, Quantiles: q}
	lo := l.TableMin()
	d.Min = &lo
	if hi := l.TableMax(); !math.IsNaN(hi) {
		d.Max = &hi
	}
	return d
}

// FitSamples fits the lengths of individual requests. Values must be
// finite and non-negative; there must be at least one.
func FitSamples(values []float64) (*Lengths, error) {
	if len(values) == 0 {
		return nil, errors.New("no lengths to fit")
	}
	s := slices.Clone(values)
	slices.Sort(s)
	if !(s[0] >= 0) || math.IsInf(s[len(s)-1], 0) || math.IsNaN(s[len(s)-1]) {
		return nil, fmt.Errorf("lengths must be finite and non-negative (got %g .. %g)", s[0], s[len(s)-1])
	}
	l := &Lengths{Count: float64(len(s)), Min: s[0], Max: s[len(s)-1], samples: s}
	sum := 0.0
	for _, v := range s {
		sum += v
		if v == 0 {
			l.Zeros++
		}
	}
	l.Mean = sum / float64(len(s))
	l.Mu, l.Sigma, l.FitErr = dist.FitLogNormal(s)
	if l.FitErr != nil {
		l.Mu, l.Sigma = 0, 0
	}
	l.Table = buildTable(l.Count, l.Quantile)
	return l, nil
}

// FitHistogram fits lengths from histogram buckets. sum is the sum of the
// observations (NaN when unknown). The buckets must not overlap; empty
// ones are allowed and at least one must hold observations.
func FitHistogram(bins []Bin, sum float64) (*Lengths, error) {
	bs, err := normalizeBins(bins)
	if err != nil {
		return nil, err
	}
	total := 0.0
	for _, b := range bs {
		total += b.Count
	}
	if !(total > 0) {
		return nil, errors.New("the histogram holds no observations")
	}
	l := &Lengths{Count: total, Mean: sum / total, bins: bs}
	if math.IsNaN(sum) || math.IsInf(sum, 0) || sum < 0 {
		l.Mean = math.NaN()
	}
	l.Min, l.Max = bs[0].Lo, bs[len(bs)-1].Hi
	l.Mu, l.Sigma, l.FitErr = FitLogNormalBinned(bs)
	if l.FitErr != nil {
		l.Mu, l.Sigma = 0, 0
	}
	l.Table = buildTable(l.Count, l.Quantile)
	return l, nil
}

// Supported reports whether a count of n supports the quantile point p in
// a table: p is required, or at least MinTail observations lie beyond it.
func Supported(p, n float64) bool {
	return slices.Contains(requiredProbabilities, p) || n*min(p, 1-p) >= MinTail-1e-9
}

// buildTable makes the quantile table: supported points, whole tokens, at
// least 1, non-decreasing.
func buildTable(n float64, quantile func(float64) float64) []dist.Point {
	var t []dist.Point
	prev := 1.0
	for _, p := range TableProbabilities {
		if !Supported(p, n) {
			continue
		}
		v := quantile(p)
		if math.IsNaN(v) {
			continue
		}
		v = max(prev, math.Round(v))
		t = append(t, dist.Point{P: p, V: v})
		prev = v
	}
	return t
}
