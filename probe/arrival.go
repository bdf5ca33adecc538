// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package probe

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/llmprobe/llmprobe/dist"
)

// Arrival process names, as written in the config's arrival.process.
const (
	ArrivalPoisson  = "poisson"
	ArrivalGamma    = "gamma"
	ArrivalConstant = "constant"
)

// Arrivals yields inter-arrival gaps of an open-loop arrival process. The
// caller adds them to an absolute timeline (planned_{i+1} = planned_i +
// gap), never to "now", so a slow server or a late send never slows the
// offered load down. Implementations are immutable and safe for concurrent
// use; randomness comes from the caller's *rand.Rand.
//
// A replica that takes a shard of a target's load (docs/design.md, Scale-out)
// gets Arrivals built with rate/replicas; the engine does that scaling. N
// independent Poisson shards add up to a Poisson process at the full rate.
// Gamma and constant shards add up to the full mean rate, but their sum
// tends towards Poisson: less bursty (burstiness < 1), or less regular
// (burstiness > 1, constant), than one stream at the full rate.
type Arrivals interface {
	// Next returns the gap to the next arrival. It is never negative and
	// does not allocate.
	Next(r *rand.Rand) time.Duration
	// Rate is the requested mean rate, in requests per second.
	Rate() float64
	// String describes the process, e.g. "gamma(rate=0.5/s, burstiness=0.25)".
	String() string
}

type arrivals struct {
	gaps dist.Sampler // seconds
	rate float64
	desc string
}

// NewArrivals returns the arrival process with the given mean rate
// (requests per second, > 0):
//
//   - "poisson": exponential gaps with mean 1/rate.
//   - "gamma": gamma-distributed gaps with shape = burstiness and scale =
//     1/(rate·burstiness), as in vLLM's benchmark: the mean gap stays 1/rate
//     and the coefficient of variation is 1/√burstiness. burstiness 1 is
//     Poisson, below 1 is burstier, above 1 smoother. It must be > 0.
//   - "constant": every gap is exactly 1/rate.
//
// burstiness applies to gamma only; for the others it must be 0 (unset) or
// 1. A paused target (rate 0) is the config layer's business, not an
// arrival process.
func NewArrivals(process string, rate, burstiness float64) (Arrivals, error) {
	if !(rate > 0) || math.IsInf(rate, 1) {
		return nil, fmt.Errorf("arrival: rate (%s) must be > 0 requests per second", fnum(rate))
	}
	if math.IsInf(1/rate, 1) {
		return nil, fmt.Errorf("arrival: rate (%s) is too small", fnum(rate))
	}
	if process != ArrivalGamma && burstiness != 0 && burstiness != 1 {
		return nil, fmt.Errorf("arrival: burstiness (%s) applies to the gamma process only, not %q", fnum(burstiness), process)
	}
	a := &arrivals{rate: rate}
	var err error
	switch process {
	case ArrivalPoisson:
		a.gaps, err = dist.Exponential(1 / rate)
		a.desc = "poisson(rate=" + fnum(rate) + "/s)"
	case ArrivalGamma:
		if !(burstiness > 0) || math.IsInf(burstiness, 1) {
			return nil, fmt.Errorf("arrival: burstiness (%s) must be > 0 (1 is Poisson, < 1 burstier, > 1 smoother)", fnum(burstiness))
		}
		a.gaps, err = dist.Gamma(burstiness, 1/(rate*burstiness))
		a.desc = "gamma(rate=" + fnum(rate) + "/s, burstiness=" + fnum(burstiness) + ")"
	case ArrivalConstant:
		a.gaps = dist.Fixed(1 / rate)
		a.desc = "constant(rate=" + fnum(rate) + "/s)"
	default:
		return nil, fmt.Errorf("arrival: unknown process %q (want %s, %s or %s)", process, ArrivalPoisson, ArrivalGamma, ArrivalConstant)
	}
	if err != nil { // rate·burstiness so extreme that the scale is not a float
		return nil, fmt.Errorf("arrival: rate (%s) and burstiness (%s): %w", fnum(rate), fnum(burstiness), err)
	}
	return a, nil
}

// maxGap is the longest gap Next returns (a rate of less than one request
// in 290 years saturates here instead of overflowing).
const maxGap = time.Duration(math.MaxInt64)

func (a *arrivals) Next(r *rand.Rand) time.Duration {
	ns := a.gaps.Sample(r) * 1e9
	if ns >= float64(maxGap) {
		return maxGap
	}
	if !(ns > 0) {
		return 0
	}
	return time.Duration(math.Round(ns))
}

func (a *arrivals) Rate() float64  { return a.rate }
func (a *arrivals) String() string { return a.desc }

func fnum(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
