// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package bench

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/llmprobe/llmprobe/bench/report"
	"github.com/llmprobe/llmprobe/probe/wire"
)

// The ceiling search of `llmprobe selftest`: the highest rate this host
// drives with an honest verdict, measured with stages of one request
// shape against a server that answers at once (selftest: a zero-latency
// simulator in a child process), so that every limit found is the
// harness' (or the host's). It ramps the rate up by doubling until a step
// is not delivered and measured honestly (the daemon's verdicts, bench's
// stage rules: JudgeStep), then bisects; when even the start rate is not
// honest it halves the rate until one is, down to the lowest rate asked
// for.

// CeilingOptions say which rates SearchCeiling measures (req/s).
type CeilingOptions struct {
	StartRate, MinRate, MaxRate float64
	Bisections                  int
}

// CeilingStep is one measured rate.
type CeilingStep struct {
	Rate  float64
	Stage *report.StageReport
	// ServerCPU is the CPU the target's server used over the step, in
	// seconds per second (0: not measured; selftest: the simulator's).
	ServerCPU float64
	// Good: the stage was delivered and measured honestly. Failed: its
	// requests failed (not the harness' timing). Because says why it is
	// not good.
	Good, Failed bool
	Because      string
}

// MeasureRate runs one stage of opts at rate for d (opts.Stages is
// replaced) and judges it (JudgeStep).
func MeasureRate(ctx context.Context, opts Options, rate float64, d time.Duration) (CeilingStep, error) {
	opts.Stages = []Stage{{Rate: rate, Duration: d}}
	rep, err := Run(ctx, opts)
	if err != nil {
		return CeilingStep{}, err
	}
	return JudgeStep(rate, rep.Stages[0]), nil
}

// JudgeStep says whether stage s, run at rate, was delivered and measured
// honestly: not when more than 1% of its requests failed (failing
// requests first: they fail at every rate, and a saturated verdict beside
// them is not what to fix), nor when the verdict did not trust it, nor
// when it sent fewer requests than chance explains.
func JudgeStep(rate float64, s *report.StageReport) CeilingStep {
	st := CeilingStep{Rate: rate, Stage: s}
	errs, _, _ := s.ErrorShare()
	switch {
	case errs > s.Sent/100:
		st.Failed = true
		st.Because = fmt.Sprintf("%d of %d requests failed (%s)", errs, s.Sent, outcomeBreakdown(s.Outcomes))
	case !s.Trusted:
		st.Because = strings.Join(s.Reasons, "; ")
	case s.Shortfall() != "":
		st.Because = s.Shortfall()
	default:
		st.Good = true
	}
	return st
}

// SearchCeiling measures rates (measure) from o.StartRate: doubling while
// they hold (up to o.MaxRate), or, when the start rate does not, halving
// until one does (down to o.MinRate); then o.Bisections steps between the
// last good and the first bad rate. step is told of every step measured.
// good is nil when no rate held, bad when every rate up to o.MaxRate did.
func SearchCeiling(ctx context.Context, o CeilingOptions, measure func(float64) (CeilingStep, error), step func(CeilingStep)) (good, bad *CeilingStep, err error) {
	run := func(rate float64) (*CeilingStep, error) {
		st, err := measure(rate)
		if err != nil {
			return nil, err
		}
		step(st)
		return &st, nil
	}
	// try measures rate and files it as the good or the bad rate.
	try := func(rate float64) error {
		st, err := run(rate)
		if err != nil {
			return err
		}
		if st.Good {
			good = st
		} else {
			bad = st
		}
		return nil
	}
	for rate := o.StartRate; rate <= o.MaxRate && ctx.Err() == nil; rate *= 2 {
		st, err := run(rate)
		if err != nil {
			return nil, nil, err
		}
		if !st.Good {
			bad = st
			break
		}
		good = st
	}
	// Even the start rate failed: downward, halving.
	for rate := o.StartRate / 2; good == nil && bad != nil && rate >= o.MinRate && ctx.Err() == nil; rate /= 2 {
		if err := try(rate); err != nil {
			return nil, nil, err
		}
	}
	if good == nil && bad != nil && bad.Rate > o.MinRate && ctx.Err() == nil {
		// The halving stepped over the floor: try the floor itself.
		if err := try(o.MinRate); err != nil {
			return nil, nil, err
		}
	}
	for i := 0; i < o.Bisections && good != nil && bad != nil && ctx.Err() == nil; i++ {
		mid := bisectRate(good.Rate, bad.Rate)
		if mid <= good.Rate || mid >= bad.Rate {
			break // as close as rates are told apart
		}
		if err := try(mid); err != nil {
			return nil, nil, err
		}
	}
	return good, bad, ctx.Err()
}

// bisectRate is the geometric mean of two rates, whole above 10 req/s and
// to a tenth below.
func bisectRate(good, bad float64) float64 {
	mid := math.Sqrt(good * bad)
	if mid >= 10 {
		return math.Round(mid)
	}
	return math.Round(mid*10) / 10
}

// outcomeBreakdown lists a stage's outcomes other than success, most
// frequent first: "connect_error 16, http_4xx 2".
func outcomeBreakdown(outcomes map[wire.Outcome]int) string {
	type count struct {
		o wire.Outcome
		n int
	}
	var cs []count
	for o, n := range outcomes {
		if o != wire.OutcomeSuccess && n > 0 {
			cs = append(cs, count{o, n})
		}
	}
	slices.SortFunc(cs, func(a, b count) int {
		if a.n != b.n {
			return b.n - a.n
		}
		return strings.Compare(string(a.o), string(b.o))
	})
	parts := make([]string, len(cs))
	for i, c := range cs {
		parts[i] = fmt.Sprintf("%s %d", c.o, c.n)
	}
	return strings.Join(parts, ", ")
}
