// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package report

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
	"unsafe"

	"github.com/llmprobe/llmprobe/dist"
)

// TestDurationHistogramError: every percentile the ITL histogram gives is
// within 0.1% of numpy's linear percentile of the values themselves (and
// exact below a microsecond), its count, mean, standard deviation and
// maximum are exact, over values from 0 to an hour: zeros (coalesced
// chunks), nanoseconds, a log-normal body around 20 ms and a tail.
func TestDurationHistogramError(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var h durationHistogram
	var v []float64
	add := func(d time.Duration) {
		h.add(d)
		v = append(v, float64(d))
	}
	for range 200 {
		add(0)
		add(time.Duration(rng.IntN(2000)))
	}
	for range 100000 {
		add(time.Duration(20e6 * math.Exp(0.8*rng.NormFloat64())))
	}
	for range 100 {
		add(time.Duration(rng.Int64N(int64(time.Hour))))
	}
	add(time.Hour)
	slices.Sort(v)
	worst := 0.0
	for p := 0.0; p <= 100; p += 0.1 {
		want, got := dist.Quantile(v, p/100), h.percentile(p)
		if want == 0 {
			if got != 0 {
				t.Errorf("p%g: %v, want 0", p, got)
			}
			continue
		}
		e := math.Abs(got/want - 1)
		worst = max(worst, e)
		if e > 1e-3 || want < histLinear && got != want {
			t.Errorf("p%g: %v, want %v (%.4f%%)", p, got, want, 100*e)
		}
	}
	sum, ss := 0.0, 0.0
	for _, x := range v {
		sum += x
	}
	mean := sum / float64(len(v))
	for _, x := range v {
		ss += (x - mean) * (x - mean)
	}
	if h.n != int64(len(v)) || math.Abs(h.mean()/mean-1) > 1e-12 || math.Abs(h.std()/math.Sqrt(ss/float64(len(v)))-1) > 1e-9 ||
		float64(h.max) != v[len(v)-1] {
		t.Errorf("n %d mean %v std %v max %v; want %d, %v, %v, %v", h.n, h.mean(), h.std(), h.max, len(v), mean, math.Sqrt(ss/float64(len(v))), v[len(v)-1])
	}
	if len(h.counts) > histMaxBucket+1 || len(h.counts)*8 > 100<<10 {
		t.Errorf("%d buckets for values up to an hour", len(h.counts))
	}
	t.Logf("largest error of a percentile: %.4f%%; %d buckets (%d KiB) for values up to an hour", 100*worst, len(h.counts), len(h.counts)*8>>10)
}

// TestRequestSize: what a stage keeps of a request is the 40 bytes
// docs/bench.md states ("Bounded memory").
func TestRequestSize(t *testing.T) {
	if n := unsafe.Sizeof(Request{}); n != 40 {
		t.Errorf("a Request is %d bytes, docs/bench.md says 40", n)
	}
}
