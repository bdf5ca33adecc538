// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package probe

import (
	"errors"
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

// ArrivalTraceShape is the arrival process that follows a trace's rate
// curve (config arrival.process trace_shape).
const ArrivalTraceShape = "trace_shape"

// TimedArrivals is an arrival process whose rate changes along the
// timeline: the gap to the next arrival depends on the instant it is
// drawn from. The arrival loop calls NextAt with the last planned
// instant (never "now"), so the timeline stays absolute.
type TimedArrivals interface {
	Arrivals
	// NextAt returns the gap from the arrival planned at from to the
	// next one.
	NextAt(r *rand.Rand, from time.Time) time.Duration
	// RateAt is the requested rate at t, in requests per second: the
	// curve's value, what the status and llmprobe_requested_rate report.
	RateAt(t time.Time) float64
}

// shapeArrivals is a non-homogeneous Poisson process whose rate is a
// piecewise-constant curve over a period, repeated; the period is aligned
// on the Unix epoch (with a 24h period, bin 0 starts at 00:00 UTC), so
// that replicas and restarts follow the same curve at the same instants.
type shapeArrivals struct {
	rates  []float64 // requests per second, per bin
	bin    time.Duration
	period time.Duration
	last   time.Duration // width of the last bin (the period's remainder)
	mean   float64
	hazard float64 // expected arrivals per period
	desc   string
}

// NewShapeArrivals returns the arrival process that follows curve (the
// relative rate of each bin of width bin over period; mean 1 over the
// period) scaled to the mean rate: a non-homogeneous Poisson process,
// drawn by time-rescaling (an exponential amount of the integrated rate
// per gap), open-loop on the absolute timeline.
func NewShapeArrivals(rate float64, curve []float64, bin, period time.Duration) (Arrivals, error) {
	if !(rate > 0) || math.IsInf(rate, 1) {
		return nil, fmt.Errorf("arrival: rate (%s) must be > 0 requests per second", fnum(rate))
	}
	n := len(curve)
	if n == 0 || bin <= 0 || period <= 0 || time.Duration(n-1)*bin >= period || time.Duration(n)*bin < period {
		return nil, fmt.Errorf("arrival: trace_shape: %d bins of %v do not cover the period %v", n, bin, period)
	}
	a := &shapeArrivals{bin: bin, period: period, last: period - time.Duration(n-1)*bin, rates: make([]float64, n)}
	for i, c := range curve {
		if !(c >= 0) || math.IsInf(c, 0) {
			return nil, fmt.Errorf("arrival: trace_shape: bin %d has rate %v", i, c)
		}
		a.rates[i] = rate * c
		a.hazard += a.rates[i] * a.width(i).Seconds()
	}
	if !(a.hazard > 0) {
		return nil, errors.New("arrival: trace_shape: the curve is zero everywhere")
	}
	a.mean = a.hazard / period.Seconds()
	a.desc = "trace_shape(rate=" + fnum(a.mean) + "/s, period=" + period.String() + ", bins=" + strconv.Itoa(n) + ")"
	return a, nil
}

func (a *shapeArrivals) width(i int) time.Duration {
	if i == len(a.rates)-1 {
		return a.last
	}
	return a.bin
}

// phase is t's position in the period.
func (a *shapeArrivals) phase(t time.Time) time.Duration {
	p := time.Duration(t.UnixNano() % int64(a.period))
	if p < 0 {
		p += a.period
	}
	return p
}

func (a *shapeArrivals) NextAt(r *rand.Rand, from time.Time) time.Duration {
	e := r.ExpFloat64() // the integrated rate to the next arrival
	var gap time.Duration
	if whole := math.Floor(e / a.hazard); whole > 0 {
		if whole*a.period.Seconds() >= maxGap.Seconds()/2 {
			return maxGap
		}
		gap = time.Duration(whole) * a.period
		e -= whole * a.hazard
	}
	pos := a.phase(from)
	i := min(int(pos/a.bin), len(a.rates)-1)
	into := pos - time.Duration(i)*a.bin
	for range 2*len(a.rates) + 1 { // less than two periods are left
		left := a.width(i) - into
		h := a.rates[i] * left.Seconds()
		if h >= e {
			return gap + time.Duration(math.Round(e/a.rates[i]*1e9))
		}
		e -= h
		gap += left
		i, into = (i+1)%len(a.rates), 0
	}
	return gap
}

// Next draws a gap from the curve's phase now; the arrival loop uses
// NextAt.
func (a *shapeArrivals) Next(r *rand.Rand) time.Duration { return a.NextAt(r, time.Now()) }

func (a *shapeArrivals) RateAt(t time.Time) float64 {
	return a.rates[min(int(a.phase(t)/a.bin), len(a.rates)-1)]
}

func (a *shapeArrivals) Rate() float64  { return a.mean }
func (a *shapeArrivals) String() string { return a.desc }
