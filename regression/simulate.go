// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package regression

import (
	"math"
	"slices"
	"time"
)

// Offline runs of a Detector: what the figures of docs/design.md
// ("Regression detection") are measured with, and what `llmprobe plan`
// predicts a class's detection delays with, on the same code. A Series
// draws requests; Run feeds them to a detector with an evaluation at a
// fixed interval, as the daemon does; a Step is one simulated change
// (history, then the change, until an alarm or a horizon), and Summarise
// reduces many of them to the delays and misses the figures state.

// The reference TTFT model of the figures (docs/design.md, "Regression
// detection"): 25 ms plus 0.12 ms per prompt token (the simulator's
// prefill), times a log-normal jitter of σ 0.15.
const (
	ReferenceTTFTBase     = 0.025   // seconds
	ReferenceTTFTPerToken = 0.00012 // seconds per prompt token
	ReferenceJitterSigma  = 0.15
)

// The reference model's prompt lengths: log-normal with median 120 and
// p99 2048 tokens (llmprobe's default chat lengths).
const (
	ReferencePromptMedian = 120
	ReferencePromptP99    = 2048
)

var referencePromptSigma = math.Log(float64(ReferencePromptP99)/ReferencePromptMedian) / 2.326347874

// ReferencePromptTokens is the reference model's prompt length (at
// least 1 token) for the standard normal score z.
func ReferencePromptTokens(z float64) float64 {
	return max(1, math.Round(ReferencePromptMedian*math.Exp(referencePromptSigma*z)))
}

// ReferenceTTFT is the reference model's TTFT in seconds of a request of
// promptTokens tokens whose jitter has the standard normal score z.
func ReferenceTTFT(promptTokens, z float64) float64 {
	return (ReferenceTTFTBase + ReferenceTTFTPerToken*promptTokens) * math.Exp(ReferenceJitterSigma*z)
}

// SimStart is where simulated runs begin by default.
var SimStart = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// Series is a simulated series of one metric's requests.
type Series interface {
	// Gap draws the time from one request to the next.
	Gap() time.Duration
	// Value draws the next request's value: seconds (Latency) or 0/1
	// (Ratio). changed says the simulated change has begun.
	Value(changed bool) float64
}

// Run feeds d the requests of s from start for dur, with an Evaluate
// every `every` from start+phase, calling onEval with each Result (it
// stops when onEval returns false). The first request comes a Gap after
// start; from change on (when not zero) s's values are drawn changed.
func Run(d *Detector, s Series, start time.Time, phase, every, dur time.Duration, change time.Time, onEval func(now time.Time, r Result) bool) {
	runSeries(d, s, start, phase, every, dur, change, true, onEval)
}

// runSeries is Run; describe false skips the description of the current
// window in the Results that raise no alarm (Detector.evaluate).
func runSeries(d *Detector, s Series, start time.Time, phase, every, dur time.Duration, change time.Time, describe bool, onEval func(now time.Time, r Result) bool) {
	end := start.Add(dur)
	t := start.Add(s.Gap())
	next := start.Add(phase)
	changed := false
	for {
		for !next.After(t) {
			if next.After(end) {
				return
			}
			if !onEval(next, d.evaluate(next, describe)) {
				return
			}
			next = next.Add(every)
		}
		if !change.IsZero() && !changed && !t.Before(change) {
			changed = true
		}
		d.Add(t, s.Value(changed))
		t = t.Add(s.Gap())
	}
}

// Step is one simulated change: a fresh detector fed History of the
// series, then the change, until an alarm or History+Horizon.
type Step struct {
	Kind    Kind
	Options Options
	Series  Series
	// Start is when the history begins (zero: SimStart).
	Start time.Time
	// History is how long the series runs unchanged; Horizon how long
	// after the change the run goes on without an alarm.
	History, Horizon time.Duration
	// Every is the evaluation interval (zero: a minute) and Phase the
	// first evaluation's offset from Start.
	Every, Phase time.Duration
	// AtAlarm, when not nil, is called with the detector as it is when
	// an alarm rises at or after the change.
	AtAlarm func(*Detector)
}

// Trial is the outcome of one Step.
type Trial struct {
	Detected bool          // an alarm rose at or after the change, before the horizon
	Early    bool          // an alarm rose before the change (a false alarm)
	Delay    time.Duration // from the change to the alarm
	Test     string        // the test that raised it
	// ChangePointError is the alarm's change point minus the change.
	ChangePointError time.Duration
	Result           Result
}

// Run runs the step.
func (st Step) Run() Trial {
	d := NewDetector(st.Kind, st.Options)
	start := st.Start
	if start.IsZero() {
		start = SimStart
	}
	every := st.Every
	if every <= 0 {
		every = time.Minute
	}
	step := start.Add(st.History)
	var tr Trial
	// Only the alarm's Result is read: the others need not describe the
	// window.
	runSeries(d, st.Series, start, st.Phase, every, st.History+st.Horizon, step, false, func(now time.Time, r Result) bool {
		if !r.Regressed {
			return true
		}
		if now.Before(step) {
			tr.Early = true
		} else {
			tr.Detected = true
			if st.AtAlarm != nil {
				st.AtAlarm(d)
			}
		}
		tr.Delay, tr.Test, tr.ChangePointError, tr.Result = now.Sub(step), r.Test, r.ChangePoint.Sub(step), r
		return false
	})
	return tr
}

// Never is the delay Summary gives a change that was not detected (or
// whose alarm rose before it).
const Never = time.Duration(math.MaxInt64)

// Summary describes many trials of one change.
type Summary struct {
	// Median and P90 are the delays from the change to the alarm; a
	// change not detected counts as Never.
	Median, P90 time.Duration
	// ChangePointError is the median distance of the detected alarms'
	// change points from the change.
	ChangePointError time.Duration
	// Missed is the share of trials not detected within the deadline
	// (early alarms included).
	Missed float64
	// Early counts the alarms that rose before the change.
	Early int
}

// Summarise reduces trials (at least one) to their Summary, a trial
// missed when not detected within deadline.
func Summarise(trials []Trial, deadline time.Duration) Summary {
	var s Summary
	delays := make([]time.Duration, 0, len(trials))
	var cps []time.Duration
	missed := 0
	for _, tr := range trials {
		switch {
		case tr.Early:
			s.Early++
			delays = append(delays, Never)
			missed++
		case tr.Detected:
			delays = append(delays, tr.Delay)
			cps = append(cps, max(tr.ChangePointError, -tr.ChangePointError))
			if tr.Delay > deadline {
				missed++
			}
		default:
			delays = append(delays, Never)
			missed++
		}
	}
	slices.Sort(delays)
	slices.Sort(cps)
	s.Median, s.P90 = delays[len(delays)/2], delays[len(delays)*9/10]
	if len(cps) > 0 {
		s.ChangePointError = cps[len(cps)/2]
	}
	s.Missed = float64(missed) / float64(len(trials))
	return s
}

// TailChange is the figures' tail regression (factor 2): it multiplies
// the p99 by factor and leaves the median alone, stretching the values
// above the p90 away from it, linearly, so that the p99 lands at factor
// times its place.
func TailChange(p90, p99, factor float64) func(float64) float64 {
	k := (factor*p99 - p90) / (p99 - p90)
	return func(v float64) float64 {
		if v <= p90 {
			return v
		}
		return p90 + (v-p90)*k
	}
}

// TestsPerEvaluation is how many tests one evaluation of a full current
// window runs with options o (after WithDefaults): the median (Latency)
// or errors (Ratio) tests, and the tail tests. It is the count of the
// union bound of FalseAlarmBound.
func TestsPerEvaluation(kind Kind, o Options) (first, tail int) {
	o = o.WithDefaults()
	for c := o.MinSamples; c < CurrentCapacity; c *= 2 {
		first++
		if kind == Latency && c >= TailMinSamples {
			tail++
		}
	}
	first++ // all of it
	if kind == Latency {
		tail++
	}
	return first, tail
}

// FalseAlarmBound is the union bound on the false alarms of one
// stationary series over evaluations evaluations (43200 are 30 days at
// one a minute): every test of every evaluation at its level, whatever
// the dependence between them (docs/design.md, "Levels and the union
// bound"). The measured rate is lower.
func FalseAlarmBound(kind Kind, o Options, evaluations float64) float64 {
	o = o.WithDefaults()
	first, tail := TestsPerEvaluation(kind, o)
	if kind == Ratio {
		return evaluations * float64(first) * o.ErrorLevel
	}
	return evaluations * (float64(first)*o.MedianLevel + float64(tail)*o.TailLevel)
}
