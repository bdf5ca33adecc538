// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package report

import (
	"math"
	"math/rand/v2"
	"slices"
)

// MaxSamples bounds the per-request values a stage's report keeps of each
// metric: at most this many, drawn uniformly without replacement (with a
// fixed seed) when the stage had more. 10,000 values locate a median to
// about 1% of the spread and leave about 100 above the p99.
const MaxSamples = 10000

// Samples are per-request values of a stage, in seconds: enough to test
// whether two runs differ (Compare), bounded by MaxSamples each.
type Samples struct {
	TTFT []float64 `json:"ttft_seconds"`
	TPOT []float64 `json:"tpot_seconds"`
	E2E  []float64 `json:"e2e_seconds"`
}

// NewSamples keeps up to MaxSamples of each metric's values of a stage.
func NewSamples(ttft, tpot, e2e []float64) *Samples {
	return &Samples{TTFT: reservoir(ttft), TPOT: reservoir(tpot), E2E: reservoir(e2e)}
}

// reservoir returns up to MaxSamples of v, rounded to the nanosecond (the
// clock's resolution: the JSON stays short), as a new slice.
func reservoir(v []float64) []float64 {
	out := slices.Clone(v)
	if len(out) > MaxSamples {
		rng := rand.New(rand.NewPCG(1, uint64(len(out))))
		for i := range MaxSamples { // a partial Fisher–Yates shuffle
			j := i + rng.IntN(len(out)-i)
			out[i], out[j] = out[j], out[i]
		}
		out = out[:MaxSamples:MaxSamples]
	}
	for i, x := range out {
		out[i] = math.Round(x*1e9) / 1e9
	}
	return out
}

// SLOBound is one latency bound of the SLO a run was judged by.
type SLOBound struct {
	Metric string `json:"metric"` // ttft, tpot, itl or e2e
	// Quantile is 0 for a per-request bound (every request should be
	// within it, up to the objective's ratio), else the quantile bounded.
	Quantile float64 `json:"quantile,omitempty"`
	Seconds  float64 `json:"seconds"`
	// Label says where it came from, e.g. "--slo ttft" or "sim-chat/chat".
	Label string `json:"label"`
}
