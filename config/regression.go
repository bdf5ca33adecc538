// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package config

import (
	"time"

	"github.com/prometheus/common/model"

	"github.com/llmprobe/llmprobe/regression"
)

// Regression configures the daemon's regression detection of a target
// (Target.Regression) and refines it per class (Class.Regression): each
// field a class sets wins over the target's, unset fields take the
// defaults (see Config.Regression). docs/design.md "Regression detection"
// says what the numbers mean and what false-alarm rate they give.
type Regression struct {
	// Enabled turns detection off with false; on by default.
	Enabled *bool `yaml:"enabled,omitempty"`
	// MinEffect is the smallest change worth an alarm: a real 3% shift
	// must not page anyone.
	MinEffect RegressionEffect `yaml:"min_effect,omitempty"`
	// MinSamples is the evidence the current window needs before the
	// median or error test runs (the tail test needs at least 100).
	MinSamples int `yaml:"min_samples,omitempty"`
	// MinSpan is the least time the current requests a test judges must
	// span: requests that run together share the server's moment (one
	// batch, one burst of load), so a few seconds of them are fewer
	// independent observations than their count says.
	MinSpan model.Duration `yaml:"min_span,omitempty"`
	// AcceptAfter is how long a regression is held against the old
	// baseline before its level is accepted as the new normal.
	AcceptAfter model.Duration `yaml:"accept_after,omitempty"`
}

// RegressionEffect holds the minimum effects of Regression.MinEffect.
type RegressionEffect struct {
	// Median is the smallest relative rise of the median (0.2: 20%).
	Median float64 `yaml:"median,omitempty"`
	// P99 is the smallest relative rise of the 99th percentile.
	P99 float64 `yaml:"p99,omitempty"`
	// Errors is the smallest absolute rise of the error ratio (0.02: two
	// points); the ratio must also at least double.
	Errors float64 `yaml:"errors,omitempty"`
}

// Defaults of the regression settings.
const (
	DefaultRegressionMedian      = 0.2
	DefaultRegressionP99         = 0.5
	DefaultRegressionErrors      = 0.02
	DefaultRegressionMinSamples  = 20
	DefaultRegressionAcceptAfter = model.Duration(24 * time.Hour)
	DefaultRegressionMinSpan     = model.Duration(time.Minute)
)

// UnmarshalYAML implements yaml.Unmarshaler (unknown keys are rejected).
func (r *Regression) UnmarshalYAML(unmarshal func(any) error) error {
	type plain Regression
	return decodePlain(unmarshal, (*plain)(r))
}

// UnmarshalYAML implements yaml.Unmarshaler (unknown keys are rejected).
func (e *RegressionEffect) UnmarshalYAML(unmarshal func(any) error) error {
	type plain RegressionEffect
	return decodePlain(unmarshal, (*plain)(e))
}

// validateRegression positions a regression block's problems at its keys.
// Unset (zero) fields are valid: they take the target's or the default.
func validateRegression(errs *fieldErrors, path string, r *Regression) {
	if r == nil {
		return
	}
	e := r.MinEffect
	if e.Median != 0 && !(e.Median > 0 && e.Median <= 10) {
		errs.add(path+".min_effect.median", "must be a relative rise in (0, 10], e.g. 0.2 for 20%%, got %v", e.Median)
	}
	if e.P99 != 0 && !(e.P99 > 0 && e.P99 <= 100) {
		errs.add(path+".min_effect.p99", "must be a relative rise in (0, 100], e.g. 0.5 for 50%%, got %v", e.P99)
	}
	if e.Errors != 0 && !(e.Errors > 0 && e.Errors < 1) {
		errs.add(path+".min_effect.errors", "must be a rise of the error ratio in (0, 1), e.g. 0.02 for two points, got %v", e.Errors)
	}
	if r.MinSamples != 0 && (r.MinSamples < 5 || r.MinSamples > 2048) {
		errs.add(path+".min_samples", "must be in [5, 2048] (half the detector's window), got %d", r.MinSamples)
	}
	if r.MinSpan != 0 && (time.Duration(r.MinSpan) < time.Second || time.Duration(r.MinSpan) > time.Hour) {
		errs.add(path+".min_span", "must be from 1s to 1h, got %s", r.MinSpan)
	}
	if r.AcceptAfter != 0 && time.Duration(r.AcceptAfter) < time.Hour {
		errs.add(path+".accept_after", "must be at least 1h (a regression must be seen before it is accepted), got %s", r.AcceptAfter)
	}
}

// Regression returns the regression settings of class of target t: the
// target's refined by the class's, with defaults for what neither sets.
func (c *Config) Regression(t *Target, class *Class) Regression {
	out := Regression{
		MinEffect: RegressionEffect{
			Median: DefaultRegressionMedian,
			P99:    DefaultRegressionP99,
			Errors: DefaultRegressionErrors,
		},
		MinSamples:  DefaultRegressionMinSamples,
		MinSpan:     DefaultRegressionMinSpan,
		AcceptAfter: DefaultRegressionAcceptAfter,
	}
	on := true
	var layers []*Regression
	if t != nil {
		layers = append(layers, t.Regression)
	}
	if class != nil {
		layers = append(layers, class.Regression)
	}
	for _, r := range layers {
		if r == nil {
			continue
		}
		if r.Enabled != nil {
			on = *r.Enabled
		}
		if r.MinEffect.Median != 0 {
			out.MinEffect.Median = r.MinEffect.Median
		}
		if r.MinEffect.P99 != 0 {
			out.MinEffect.P99 = r.MinEffect.P99
		}
		if r.MinEffect.Errors != 0 {
			out.MinEffect.Errors = r.MinEffect.Errors
		}
		if r.MinSamples != 0 {
			out.MinSamples = r.MinSamples
		}
		if r.MinSpan != 0 {
			out.MinSpan = r.MinSpan
		}
		if r.AcceptAfter != 0 {
			out.AcceptAfter = r.AcceptAfter
		}
	}
	out.Enabled = &on
	return out
}

// On reports whether detection is enabled (nil Enabled: yes).
func (r Regression) On() bool { return r.Enabled == nil || *r.Enabled }

// DetectorOptions are the regression detector's options for r, with the
// detector's defaults where r leaves a field unset: the one mapping the
// daemon's detectors and llmprobe plan's simulations share.
func (r Regression) DetectorOptions() regression.Options {
	return regression.Options{
		MedianEffect: r.MinEffect.Median,
		TailEffect:   r.MinEffect.P99,
		ErrorEffect:  r.MinEffect.Errors,
		MinSamples:   r.MinSamples,
		MinSpan:      time.Duration(r.MinSpan),
		AcceptAfter:  time.Duration(r.AcceptAfter),
	}.WithDefaults()
}
