// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package regression

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Kind is what a series' values are.
type Kind int

const (
	// Latency values are durations in seconds (positive): compared by rank
	// (the median test) and by exceedances of the baseline's p99 (the tail
	// test).
	Latency Kind = iota
	// Ratio values are 0 (success) or 1 (an error): compared by the error
	// ratio (the errors test).
	Ratio
)

func (k Kind) String() string {
	switch k {
	case Latency:
		return "latency"
	case Ratio:
		return "ratio"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Defaults of [Options] (WithDefaults fills a zero field with its default).
const (
	DefaultMedianEffect = 0.20
	DefaultTailEffect   = 0.50
	DefaultErrorEffect  = 0.02
	DefaultMinSamples   = 20
	DefaultMinBaseline  = 100
	DefaultAcceptAfter  = 24 * time.Hour
	// The per-test significance levels: one test of one window at one
	// evaluation rejects a true null with probability at most this. The
	// median and errors tests have power to spare, and their small windows
	// are all new samples at every evaluation above a few requests per
	// second, so the tail test, the one short of power, gets the larger
	// share of the budget. docs/design.md ("Regression detection") gives
	// the union bound they imply (0.03 false alarms per latency series per
	// 30 days, 0.004 per errors series) and the rate measured over
	// simulated years.
	DefaultMedianLevel = 1e-8
	DefaultTailLevel   = 1e-7
	DefaultErrorLevel  = 1e-8
)

// Fixed parts of the method (docs/design.md, "Regression detection").
const (
	// TailMinSamples is the fewest current samples the tail test runs on:
	// below 100 a window has no p99 of its own.
	TailMinSamples = 100
	// ExitLevel is the laxer level a held regression must stay below to
	// go on holding (hysteresis), with half the effect gate; a test below
	// it with half the gate also makes the detector "suspicious", which
	// stops samples moving into the baseline.
	ExitLevel = 1e-3
	// BaselineCapacity is the most baseline values a detector keeps, and
	// CurrentCapacity the most current samples.
	BaselineCapacity = 4096
	CurrentCapacity  = 4096
)

// Options tune a [Detector]. The zero value, through WithDefaults, is the
// recommended setting.
type Options struct {
	// MedianEffect is the least relative rise of the median that alarms
	// (current median / baseline median ≥ 1 + MedianEffect): a 3% shift
	// is real at a few thousand samples but must not page. Default 0.20.
	MedianEffect float64
	// TailEffect is the least relative rise of the p99 that alarms.
	// Default 0.50.
	TailEffect float64
	// ErrorEffect is the least absolute rise of the error ratio that
	// alarms; the ratio must also at least double. Default 0.02.
	ErrorEffect float64
	// MinSamples is the fewest current samples the median and errors
	// tests run on (default 20); the tail test needs TailMinSamples (100).
	MinSamples int
	// MinBaseline is the fewest baseline samples any test runs against
	// (default 100).
	MinBaseline int
	// AcceptAfter is how long a regression may hold before it is accepted
	// as the new baseline (Result.Accepted). Default 24h.
	AcceptAfter time.Duration
	// MinSpan is the least time a window's samples must span for it to
	// be tested for an alarm (0: none). Requests that run together share
	// the server's moment (one batch, one burst of load), so a few seconds
	// of them are fewer independent observations than their count says:
	// at 10 req/s against a continuous-batching server, 20 requests of 3 s
	// once passed the median test at p = 5e-8 after a build change that
	// changed nothing. A shorter window is still judged for suspicion,
	// which only holds samples back from the baseline. The daemon sets 1m
	// (config regression.min_span).
	MinSpan time.Duration
	// MedianLevel, TailLevel and ErrorLevel are the tests' per-test
	// significance levels (defaults DefaultMedianLevel, DefaultTailLevel,
	// DefaultErrorLevel).
	MedianLevel, TailLevel, ErrorLevel float64
}

// WithDefaults returns o with every zero field set to its default.
func (o Options) WithDefaults() Options {
	if o.MedianEffect == 0 {
		o.MedianEffect = DefaultMedianEffect
	}
	if o.TailEffect == 0 {
		o.TailEffect = DefaultTailEffect
	}
	if o.ErrorEffect == 0 {
		o.ErrorEffect = DefaultErrorEffect
	}
	if o.MinSamples == 0 {
		o.MinSamples = DefaultMinSamples
	}
	if o.MinBaseline == 0 {
		o.MinBaseline = DefaultMinBaseline
	}
	if o.AcceptAfter == 0 {
		o.AcceptAfter = DefaultAcceptAfter
	}
	if o.MedianLevel == 0 {
		o.MedianLevel = DefaultMedianLevel
	}
	if o.TailLevel == 0 {
		o.TailLevel = DefaultTailLevel
	}
	if o.ErrorLevel == 0 {
		o.ErrorLevel = DefaultErrorLevel
	}
	return o
}

// Validate reports every field of o (after WithDefaults) that is out of
// range, each message naming its field.
func (o Options) Validate() error {
	var errs []error
	effect := func(name string, v, hi float64) {
		if math.IsNaN(v) || v < 0 || v > hi {
			errs = append(errs, fmt.Errorf("regression: %s must be between 0 and %g, got %g", name, hi, v))
		}
	}
	effect("MedianEffect", o.MedianEffect, 100)
	effect("TailEffect", o.TailEffect, 100)
	effect("ErrorEffect", o.ErrorEffect, 1)
	if o.MinSamples < 5 || o.MinSamples > CurrentCapacity/2 {
		errs = append(errs, fmt.Errorf("regression: MinSamples must be between 5 and %d, got %d", CurrentCapacity/2, o.MinSamples))
	}
	if o.MinBaseline < 20 || o.MinBaseline > BaselineCapacity/2 {
		errs = append(errs, fmt.Errorf("regression: MinBaseline must be between 20 and %d, got %d", BaselineCapacity/2, o.MinBaseline))
	}
	if o.MinSpan < 0 {
		errs = append(errs, fmt.Errorf("regression: MinSpan must not be negative, got %s", o.MinSpan))
	}
	if o.AcceptAfter < time.Minute {
		errs = append(errs, fmt.Errorf("regression: AcceptAfter must be at least 1m, got %v", o.AcceptAfter))
	}
	level := func(name string, v float64) {
		if math.IsNaN(v) || v <= 0 || v >= ExitLevel {
			errs = append(errs, fmt.Errorf("regression: %s must be above 0 and below the exit level %g, got %g", name, ExitLevel, v))
		}
	}
	level("MedianLevel", o.MedianLevel)
	level("TailLevel", o.TailLevel)
	level("ErrorLevel", o.ErrorLevel)
	return errors.Join(errs...)
}
