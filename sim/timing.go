// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Timing steps: a schedule of speed changes of the timing model, to
// reproduce a latency regression (an SLO burn) at known instants.
//
//	timing_steps:
//	  - {after: 2m, factor: 5}   # from 2 minutes after the start, 5× slower
//	  - {after: 12m, factor: 1}  # back to normal
//
// A step's factor multiplies the duration of every engine step that
// starts at or after its instant (prefill_base, prefill_per_token,
// decode_base and decode_per_seq alike), until the next step. Before the
// first step the factor is 1. An engine step already under way when the
// instant passes keeps its duration; injected stalls are not scaled.

// TimingStep is one entry of Config.TimingSteps.
type TimingStep struct {
	// After is the offset from the server's start (New) at which the
	// step takes effect.
	After time.Duration `yaml:"after"`
	// Factor multiplies the timing model's durations from After on
	// (5: five times slower, 0.5: twice as fast, 1: normal).
	Factor float64 `yaml:"factor"`
}

// Bounds of the timing steps.
const (
	maxTimingSteps  = 64
	maxTimingFactor = 1000
)

func (c *Config) validateTimingSteps() []error {
	if len(c.TimingSteps) == 0 {
		return nil
	}
	var errs []error
	bad := func(path, format string, args ...any) {
		errs = append(errs, &fieldError{path: path, msg: fmt.Sprintf(format, args...)})
	}
	if c.ZeroLatency {
		bad("timing_steps", "cannot be combined with zero_latency (there is no step time to scale)")
	}
	if len(c.TimingSteps) > maxTimingSteps {
		bad("timing_steps", "at most %d steps, got %d", maxTimingSteps, len(c.TimingSteps))
	}
	for i, st := range c.TimingSteps {
		path := fmt.Sprintf("timing_steps[%d]", i)
		switch {
		case st.After < 0:
			bad(path+".after", "must not be negative, got %s", st.After)
		case i > 0 && st.After <= c.TimingSteps[i-1].After:
			bad(path+".after", "must be later than timing_steps[%d].after (%s), got %s", i-1, c.TimingSteps[i-1].After, st.After)
		}
		if !(st.Factor > 0 && st.Factor <= maxTimingFactor) {
			bad(path+".factor", "must be greater than 0 and at most %d, got %v", maxTimingFactor, st.Factor)
		}
	}
	return errs
}

// ParseTimingStep parses a timing step written AFTER:FACTOR, a Go
// duration and a number ("30s:5", "2m:0.5"), as the sim command's
// --sim.timing-step flag takes it. The step is checked with the others
// by Config.Validate.
func ParseTimingStep(s string) (TimingStep, error) {
	after, factor, ok := strings.Cut(strings.TrimSpace(s), ":")
	if !ok {
		return TimingStep{}, fmt.Errorf("timing step %q: want AFTER:FACTOR, e.g. 30s:5", s)
	}
	d, err := time.ParseDuration(after)
	if err != nil {
		return TimingStep{}, fmt.Errorf("timing step %q: after: %v", s, err)
	}
	f, err := strconv.ParseFloat(factor, 64)
	if err != nil {
		return TimingStep{}, fmt.Errorf("timing step %q: factor %q is not a number", s, factor)
	}
	return TimingStep{After: d, Factor: f}, nil
}

// scaleTimingSteps returns the steps with their After multiplied by the
// schedule scale (Config.ScheduleScale).
func scaleTimingSteps(steps []TimingStep, scale float64) []TimingStep {
	if scale == 1 || len(steps) == 0 {
		return steps
	}
	out := make([]TimingStep, len(steps))
	for i, st := range steps {
		out[i] = TimingStep{After: scaleAfter(st.After, scale), Factor: st.Factor}
	}
	return out
}

// timingSchedule answers the factor in force at an instant.
type timingSchedule struct {
	start time.Time
	steps []TimingStep // validated: increasing After
}

func newTimingSchedule(steps []TimingStep, start time.Time) timingSchedule {
	return timingSchedule{start: start, steps: steps}
}

// factorAt returns the factor of the last step whose instant is at or
// before now (1 before the first).
func (t *timingSchedule) factorAt(now time.Time) float64 {
	if len(t.steps) == 0 {
		return 1
	}
	el := now.Sub(t.start)
	// The first step that has not started yet; the one before is in force.
	i := sort.Search(len(t.steps), func(i int) bool { return t.steps[i].After > el })
	if i == 0 {
		return 1
	}
	return t.steps[i-1].Factor
}

// scale multiplies a step duration by f.
func scaleDuration(d time.Duration, f float64) time.Duration {
	if f == 1 || d <= 0 {
		return d
	}
	v := float64(d) * f
	if v >= float64(maxStepDuration) {
		return maxStepDuration
	}
	return time.Duration(v)
}

// maxStepDuration caps a scaled step (a 1000× factor on an already slow
// model must not overflow).
const maxStepDuration = 24 * time.Hour
