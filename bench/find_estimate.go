// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package bench

import (
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/llmprobe/llmprobe/config"
)

// The capacity estimate (FindOptions.StartRate unset): closed-loop
// bursts at concurrency 1, 2, 4, ... give, by Little's law, the rate the
// target serves at each (concurrency / mean E2E); once doubling the
// concurrency no longer raises it by MinGain the target is saturated and
// the highest is the estimate. The ramp then starts at estimate / Factor,
// below the capacity, so its next stages cross it: the capacity is still
// the trusted open-loop stage with the highest served rate, by the same
// rules; the estimate only saves the stages from 1 req/s up.
const (
	estimateMinCompleted = 8                // completed requests a burst holds at least (and 2 × concurrency)
	estimateMinBurst     = time.Second      // a burst lasts at least this
	estimateMaxBurst     = 15 * time.Second // and at most this
	estimateBudget       = time.Minute      // no burst starts after this
	estimateMaxC         = 1024             // highest concurrency (and the target's max_inflight)
)

// CapacityEstimate is how the capacity ramp chose its first rate
// (FindReport.Estimate).
type CapacityEstimate struct {
	// Bursts are the closed-loop bursts, in order.
	Bursts []EstimateBurst `json:"bursts"`
	// RequestsPerSecond is the estimate (0: none); StartRate the ramp's
	// first rate.
	RequestsPerSecond float64       `json:"requests_per_second"`
	StartRate         float64       `json:"ramp_start_rate"`
	Duration          time.Duration `json:"duration_ns"`
	Note              string        `json:"note"`
}

// EstimateBurst is one closed-loop burst of the estimate.
type EstimateBurst struct {
	Concurrency int           `json:"concurrency"`
	Duration    time.Duration `json:"duration_ns"`
	Completed   int           `json:"completed"`
	Errors      int           `json:"errors"`
	MeanE2E     float64       `json:"mean_e2e_seconds"`
	// Rate is Concurrency / MeanE2E (Little's law).
	Rate float64 `json:"littles_law_requests_per_second"`
}

// estimate runs the bursts and returns the ramp's first rate.
func (s *search) estimate() float64 {
	start := time.Now()
	est := &CapacityEstimate{}
	s.find.Estimate = est
	var targets []*config.Target
	for _, t := range s.opts.Config.Targets {
		if len(s.opts.Targets) == 0 || slices.Contains(s.opts.Targets, t.Name) {
			targets = append(targets, t)
		}
	}
	maxC := estimateMaxC
	if m := targets[0].MaxInflight; m > 0 {
		maxC = min(maxC, m)
	}
	best, prev := 0.0, 0.0
	saturated := false
	for c := 1; c <= maxC && s.ctx.Err() == nil && time.Since(start) < estimateBudget; c *= 2 {
		levels, err := runClosed(s.ctx, s.opts, s.opts.Config, targets, closedSpec{concurrency: c, duration: estimateMaxBurst,
			minCompleted: max(estimateMinCompleted, 2*c), minDuration: estimateMinBurst, grace: s.opts.Grace})
		if err != nil || len(levels) != 1 {
			est.Note = fmt.Sprintf("burst at concurrency %d failed: %v", c, err)
			break
		}
		l := levels[0]
		b := EstimateBurst{Concurrency: c, Duration: l.Duration, Completed: l.E2E.Count, Errors: l.errors(), MeanE2E: l.E2E.Mean, Rate: l.LittleRate}
		est.Bursts = append(est.Bursts, b)
		s.opts.Logger.Info("bench capacity estimate burst", "concurrency", c, "completed", b.Completed, "mean_e2e", b.MeanE2E, "rate", b.Rate)
		if b.Completed == 0 || b.Errors > b.Completed {
			est.Note = fmt.Sprintf("the burst at concurrency %d completed %d requests with %d errors", c, b.Completed, b.Errors)
			break
		}
		best = max(best, b.Rate)
		if prev > 0 && b.Rate < prev*(1+s.f.MinGain) {
			saturated = true
			break
		}
		prev = max(prev, b.Rate)
	}
	est.Duration = time.Since(start)
	switch {
	case best > 0 && saturated:
		est.RequestsPerSecond = best
		est.StartRate = best / s.f.Factor
		est.Note = fmt.Sprintf("saturated: doubling the concurrency raised c / mean E2E by less than %.0f%%", 100*s.f.MinGain)
	case best > 0:
		est.RequestsPerSecond = best
		est.StartRate = best / s.f.Factor
		if est.Note == "" {
			est.Note = "not saturated within the bursts' bounds: the estimate is a lower bound, the ramp goes on from it"
		}
	default:
		est.StartRate = DefaultFindStartRate
		if est.Note == "" {
			est.Note = "no estimate"
		}
		est.Note += fmt.Sprintf("; the ramp starts at %g req/s", DefaultFindStartRate)
	}
	est.StartRate = min(est.StartRate, config.MaxArrivalRate)
	return est.StartRate
}

// estimateRule states the estimate for FindReport.Rules.
func (s *search) estimateRule() string {
	return fmt.Sprintf("capacity estimate (no --find.start-rate): closed-loop bursts at concurrency 1, 2, 4, ... (at most %d and max_inflight), each until max(%d, 2 × concurrency) requests completed and %v passed (at most %v; none starts after %v), until concurrency / mean E2E (Little's law) grows by less than %.0f%%; the ramp starts at the highest such rate / %g, below the capacity. The estimate is not evidence: the capacity is the trusted open-loop stage with the highest served rate",
		estimateMaxC, estimateMinCompleted, estimateMinBurst, estimateMaxBurst, estimateBudget, 100*s.f.MinGain, s.f.Factor)
}

// writeEstimate writes the estimate's bursts before the ramp.
func writeEstimate(w io.Writer, e *CapacityEstimate) {
	if e == nil {
		return
	}
	for _, b := range e.Bursts {
		fmt.Fprintf(w, "  estimate burst (closed loop, not evidence): concurrency %d, %d completed, %d errors, mean E2E %s: %.3g req/s by Little's law\n",
			b.Concurrency, b.Completed, b.Errors, fmtSeconds(b.MeanE2E), b.Rate)
	}
	fmt.Fprintf(w, "  estimate: %.3g req/s in %s (%s); the ramp starts at %.3g req/s\n",
		e.RequestsPerSecond, e.Duration.Round(100*time.Millisecond), e.Note, e.StartRate)
}
