// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package regression

import (
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"time"
)

// The simulated stream: TTFT = 25 ms + 0.12 ms per prompt token, prompt
// tokens log-normal with median 120 and p99 2048 (the simulator's prefill
// and llmprobe's default chat lengths), times a log-normal jitter of σ
// 0.15; Poisson arrivals. With rho > 0 both normal scores follow an AR(1)
// from request to request, so log TTFT is autocorrelated about rho (a
// queueing server).
//
// A narrow stream (narrow > 0) is a server whose TTFT barely varies: 40 ms
// times a log-normal of σ narrow, independent from request to request or,
// with wander, half of its variance a slow drift (an AR(1) from request to
// request with ρ 0.99, some 20 s at 5 req/s): such a server still follows
// its load and batch state, and against a baseline that narrow the drift
// moves a request's rank as much as its jitter does.
type stream struct {
	rng    *rand.Rand
	rate   float64 // requests per second
	rho    float64
	z1, z2 float64
	narrow float64
	wander bool
	// errRate is the error ratio of a Ratio stream.
	errRate float64
	// change maps a TTFT after the step (nil: none).
	change func(float64) float64
}

func newStream(seed uint64, rate, rho float64) *stream {
	return &stream{rng: rand.New(rand.NewPCG(seed, seed*0x9e3779b97f4a7c15+1)), rate: rate, rho: rho}
}

func (s *stream) gap() time.Duration {
	return time.Duration(s.rng.ExpFloat64() / s.rate * 1e9)
}

func (s *stream) score(z *float64) float64 {
	e := s.rng.NormFloat64()
	if s.rho == 0 {
		*z = e
	} else {
		*z = s.rho**z + math.Sqrt(1-s.rho*s.rho)*e
	}
	return *z
}

// ttft draws one TTFT in seconds.
func (s *stream) ttft() float64 {
	if s.narrow > 0 {
		z := s.rng.NormFloat64()
		if s.wander {
			s.z1 = 0.99*s.z1 + math.Sqrt(1-0.99*0.99)*s.rng.NormFloat64()
			z = (z + s.z1) / math.Sqrt2
		}
		return 0.04 * math.Exp(s.narrow*z)
	}
	return ReferenceTTFT(ReferencePromptTokens(s.score(&s.z1)), s.score(&s.z2))
}

// errorSample draws one 0/1 outcome.
func (s *stream) errorSample() float64 {
	if s.rng.Float64() < s.errRate {
		return 1
	}
	return 0
}

// ttftQuantiles are the stream's p90 and p99, from a large sample.
var ttftQuantiles = sync.OnceValues(func() (p90, p99 float64) {
	s := newStream(99, 1, 0)
	v := make([]float64, 400000)
	for i := range v {
		v[i] = s.ttft()
	}
	slices.Sort(v)
	return v[int(0.90*float64(len(v)))], v[int(0.99*float64(len(v)))]
})

var epoch = SimStart

// series is a stream as the Series of one metric: its TTFT (Latency),
// changed by its change from the step on, or its 0/1 outcomes (Ratio),
// whose error ratio becomes errAfter at the step.
type series struct {
	*stream
	kind     Kind
	errAfter float64
	switched bool
}

func (s *series) Gap() time.Duration { return s.gap() }

func (s *series) Value(changed bool) float64 {
	if s.kind == Ratio {
		if changed && !s.switched {
			s.switched, s.errRate = true, s.errAfter
		}
		return s.errorSample()
	}
	v := s.ttft()
	if changed && s.change != nil {
		v = s.change(v)
	}
	return v
}

// run feeds d the stream from start for dur, with an Evaluate every
// minute from start+phase, calling onEval with each Result (stop when
// it returns false). At change (when not zero) the stream's change
// begins (Latency) or its error ratio becomes errAfter (Ratio).
func run(d *Detector, s *stream, start time.Time, phase, dur time.Duration, kind Kind, change time.Time, errAfter float64,
	onEval func(now time.Time, r Result) bool) {
	Run(d, &series{stream: s, kind: kind, errAfter: errAfter}, start, phase, time.Minute, dur, change, onEval)
}

// trial is the outcome of one simulated step.
type trial = Trial

// stepTrial runs a fresh detector over hist of steady stream, then the
// change (mutate sets it up on the stream; Ratio streams go from 1% to
// errAfter errors), until an alarm or hist+horizon. The evaluations'
// phase against the step is drawn from the seed.
func stepTrial(kind Kind, o Options, rate float64, hist, horizon time.Duration, seed uint64, mutate func(*stream), errAfter float64) trial {
	return stepTrialWith(kind, o, rate, hist, horizon, seed, mutate, errAfter, nil)
}

// stepTrialWith is stepTrial, calling atAlarm (when not nil) with the
// detector as it is when the alarm rises at or after the step.
func stepTrialWith(kind Kind, o Options, rate float64, hist, horizon time.Duration, seed uint64, mutate func(*stream), errAfter float64,
	atAlarm func(*Detector)) trial {
	s := newStream(seed, rate, 0)
	s.errRate = 0.01
	if mutate != nil {
		mutate(s)
	}
	return Step{
		Kind: kind, Options: o, Series: &series{stream: s, kind: kind, errAfter: errAfter},
		Start: epoch, History: hist, Horizon: horizon,
		Phase:   time.Duration(seed*7919%60000) * time.Millisecond,
		AtAlarm: atAlarm,
	}.Run()
}

// nullRun feeds a fresh detector dur of a stationary stream and counts
// the alarms that rose; margin is the smallest ratio of a p-value to its
// level that any evaluation reported (whatever its effect: below 1, a
// test rejected and only the gate kept it quiet).
func nullRun(kind Kind, o Options, rate, rho float64, dur time.Duration, seed uint64) (alarms int, margin float64, d *Detector) {
	d = NewDetector(kind, o)
	s := newStream(seed, rate, rho)
	s.errRate = 0.01
	margin = math.Inf(1)
	prev := false
	run(d, s, epoch, 17*time.Second, dur, kind, time.Time{}, 0, func(now time.Time, r Result) bool {
		if r.Regressed && !prev {
			alarms++
		}
		if !r.Regressed || !prev { // not the hold tests of a (false) alarm
			margin = min(margin, r.P/r.Threshold)
		}
		prev = r.Regressed
		return true
	})
	return alarms, margin, d
}

func scale(f float64) func(*stream) {
	return func(s *stream) { s.change = func(v float64) float64 { return v * f } }
}

// narrowScale is scale(f) on a narrow stream of σ 0.01 (wandering or not).
func narrowScale(f float64, wander bool) func(*stream) {
	return func(s *stream) {
		s.narrow, s.wander = 0.01, wander
		scale(f)(s)
	}
}

func tail() func(*stream) {
	p90, p99 := ttftQuantiles()
	c := TailChange(p90, p99, 2)
	return func(s *stream) { s.change = c }
}
