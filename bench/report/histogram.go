// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package report

import (
	"math"
	"time"
)

// durationHistogram counts durations in fixed memory, for the inter-token
// latencies of a stage (one value per token-bearing event: billions in a
// long stage at thousands of requests per second, which a list would
// hold at 8 bytes each). Below histLinear nanoseconds each nanosecond has
// its bucket (exact); above, the buckets grow by histGrowth, so that the
// value a bucket stands for (its geometric middle) is within
// √histGrowth − 1 < 0.1% of every duration in it. So is every percentile
// taken from it (numpy's linear interpolation between two such values),
// and its maximum; the count, the mean and the standard deviation are
// exact. Its memory is 8 bytes per bucket up to the largest value seen:
// about 96 KiB for an hour.
type durationHistogram struct {
	counts []uint64
	n      int64
	sum    int64 // ns
	// shift, sd and sd2 give the variance: the sums of (x − shift) and
	// (x − shift)², shift being the first value, keep its digits.
	shift, sd, sd2 float64
	max            time.Duration
}

const (
	histLinear = 1024
	histGrowth = 1.002
	// histMaxBucket bounds the buckets (a value beyond ~2 days is counted
	// in the last).
	histMaxBucket = histLinear + 16384
)

var histLogGrowth = math.Log(histGrowth)

// histBucket is the bucket of d.
func histBucket(d time.Duration) int {
	if d < histLinear {
		return int(max(d, 0))
	}
	return min(histLinear+int(math.Log(float64(d)/histLinear)/histLogGrowth), histMaxBucket)
}

// histValue is what bucket i stands for, in ns.
func histValue(i int) float64 {
	if i < histLinear {
		return float64(i)
	}
	return histLinear * math.Exp((float64(i-histLinear)+0.5)*histLogGrowth)
}

func (h *durationHistogram) add(d time.Duration) {
	d = max(d, 0)
	i := histBucket(d)
	if i >= len(h.counts) {
		h.counts = append(h.counts, make([]uint64, i+1-len(h.counts))...)
	}
	h.counts[i]++
	if h.n == 0 {
		h.shift = float64(d)
	}
	h.n++
	h.sum += int64(d)
	x := float64(d) - h.shift
	h.sd += x
	h.sd2 += x * x
	h.max = max(h.max, d)
}

// at is the value of rank k (0-based, in ascending order), in ns.
func (h *durationHistogram) at(k int64) float64 {
	if k >= h.n-1 {
		return float64(h.max)
	}
	var acc int64
	for i, c := range h.counts {
		acc += int64(c)
		if acc > k {
			if i == histBucket(h.max) {
				// The largest value's own bucket: the maximum is known.
				return math.Min(histValue(i), float64(h.max))
			}
			return histValue(i)
		}
	}
	return float64(h.max)
}

// percentile is the p-th percentile (p in percent), numpy's linear
// interpolation between the two ranks around it, in ns.
func (h *durationHistogram) percentile(p float64) float64 {
	if h.n == 0 {
		return 0
	}
	r := p / 100 * float64(h.n-1)
	lo := int64(math.Floor(r))
	x := h.at(lo)
	if lo+1 >= h.n {
		return x
	}
	return x + (r-float64(lo))*(h.at(lo+1)-x)
}

// mean and std are the exact mean and population standard deviation, ns.
func (h *durationHistogram) mean() float64 {
	if h.n == 0 {
		return 0
	}
	return float64(h.sum) / float64(h.n)
}

func (h *durationHistogram) std() float64 {
	if h.n == 0 {
		return 0
	}
	n := float64(h.n)
	return math.Sqrt(max(h.sd2-h.sd*h.sd/n, 0) / n)
}

// latency is vLLM's summary of the histogram, in ms.
func (h *durationHistogram) latency(ps []float64) Latency {
	l := Latency{Mean: h.mean() / 1e6, Std: h.std() / 1e6, Median: h.percentile(50) / 1e6}
	for _, p := range ps {
		l.Percentiles = append(l.Percentiles, Percentile{P: p, Value: h.percentile(p) / 1e6})
	}
	return l
}

// quantiles is the table's summary of the histogram, in seconds.
func (h *durationHistogram) quantiles(ps []float64) Quantiles {
	if h.n == 0 {
		return Quantiles{}
	}
	q := Quantiles{Count: int(h.n), Mean: h.mean() / 1e9, P50: h.percentile(50) / 1e9, P95: h.percentile(95) / 1e9,
		P99: h.percentile(99) / 1e9, Max: float64(h.max) / 1e9}
	if len(ps) > 0 {
		q.Percentiles = make(map[string]float64, len(ps))
		for _, p := range ps {
			q.Percentiles[PercentileName(p)] = h.percentile(p) / 1e9
		}
	}
	return q
}
