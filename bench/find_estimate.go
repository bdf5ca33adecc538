// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/llmprobe/llmprobe/bench/report"
	"github.com/llmprobe/llmprobe/config"
)

// The capacity estimate (FindOptions.StartRate unset): closed-loop
// workers against the target, 4, then doubled level by level (8, 16,
// ...) without draining in between, so every level starts with the
// previous level's requests in flight. A new level's workers first wait
// out the previous level's mean E2E by Little's law (concurrency /
// rate, at most 5 s): until their first requests end, completions are
// the old level's. Then the level's rate is its completed requests per
// second; it lasts until max(16, 2 × concurrency) requests completed and
// max(1 s, 2 × that mean E2E) passed, at most 15 s. With heavy-tailed
// lengths (the demo's E2E runs from 0.1 s to 10 s) fewer completions, or
// a count that starts with the new workers, told a 20% gain from noise
// no better than a coin. Once a doubling raises the rate by less than
// MinGain over the best level the target is saturated and the highest
// rate is the estimate. The ramp then starts at the estimate: a closed
// loop that keeps the batch full serves at about the capacity, so the
// first stage is near it and the next one past it (when noise stopped the
// estimate early, below the knee, the ramp takes one stage more): the
// capacity is still the trusted open-loop stage with the highest served
// rate, by the same rules; the estimate only saves the stages from 1
// req/s up. (Two flat doublings and a start at estimate / Factor cost the
// demo two levels of 20 s and a stage: its capacity search took 2.5
// minutes.) At the end the requests still in flight are cancelled.
const (
	estimateStartC       = 4                // the first level's concurrency
	estimateMinCompleted = 16               // completed requests a level counts at least (and twice its concurrency)
	estimateMaxSettle    = 5 * time.Second  // a level waits at most this before it counts
	estimateMinLevel     = time.Second      // a level lasts at least this
	estimateMaxLevel     = 15 * time.Second // and at most this
	estimateBudget       = time.Minute      // no level starts after this
	estimateMaxC         = 1024             // highest concurrency (and the target's max_inflight)
)

// estimate runs the levels and returns the ramp's first rate.
func (s *search) estimate() float64 {
	start := time.Now()
	est := &report.CapacityEstimate{}
	s.find.Estimate = est
	best, err := s.estimateLevels(est)
	est.Duration = time.Since(start)
	saturated := err == nil && est.Note != ""
	switch {
	case best > 0:
		est.RequestsPerSecond = best
		est.StartRate = best
		if !saturated {
			msg := "not saturated within the levels' bounds"
			if err != nil {
				msg = err.Error()
			}
			est.Note = msg + ": the estimate is a lower bound, the ramp goes on from it"
		}
	default:
		est.StartRate = DefaultFindStartRate
		msg := "no estimate"
		if err != nil {
			msg = err.Error()
		}
		est.Note = fmt.Sprintf("%s; the ramp starts at %g req/s", msg, DefaultFindStartRate)
	}
	est.StartRate = min(est.StartRate, config.MaxArrivalRate)
	return est.StartRate
}

// estimateLevels runs the closed-loop levels and returns the highest
// rate; est.Note is set when the target saturated, err when a level
// failed.
func (s *search) estimateLevels(est *report.CapacityEstimate) (float64, error) {
	target := s.target
	maxC := estimateMaxC
	if m := target.MaxInflight; m > 0 && target.MaxInflightSet() {
		maxC = min(maxC, m)
	}
	cfg := stageConfig(s.opts.Config, []*config.Target{target}, 1, estimateBudget, 0)
	ct, err := newClosedTarget(cfg, cfg.Targets[0], s.opts)
	if err != nil {
		return 0, err
	}
	defer ct.hc.CloseIdleConnections()
	col := newCollector(cfg, 1024, nil)
	col.setLimits(Options{})
	stop := make(chan struct{})
	reqCtx, cancelReqs := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() {
		close(stop)
		cancelReqs() // what is still in flight is not waited for
		wg.Wait()
	}()
	began := time.Now()
	workers := 0
	best := 0.0
	flat := 0 // levels that did not raise the best rate by MinGain
	minLevel, settle := estimateMinLevel, time.Duration(0)
	for c := min(estimateStartC, maxC); c <= maxC && s.ctx.Err() == nil && time.Since(began) < estimateBudget; c *= 2 {
		for ; workers < c; workers++ {
			wg.Add(1)
			seed := cfg.Global.Seed ^ uint64(workers+1)*0x9e3779b97f4a7c15
			go func() {
				defer wg.Done()
				ct.work(reqCtx, stop, rand.New(rand.NewPCG(seed, ^seed)), col, s.opts.Dataset, 0, time.Time{})
			}()
		}
		if !sleepCtx(s.ctx, settle) {
			break
		}
		levelStart := time.Now()
		done0, failed0 := ct.done.Load(), ct.failed.Load()
		need := int64(max(estimateMinCompleted, 2*c))
		tick := time.NewTicker(20 * time.Millisecond)
		for s.ctx.Err() == nil {
			el := time.Since(levelStart)
			if el >= estimateMaxLevel || (el >= minLevel && ct.done.Load()-done0 >= need) {
				break
			}
			<-tick.C
		}
		tick.Stop()
		l := report.EstimateLevel{Concurrency: c, Duration: time.Since(levelStart),
			Completed: int(ct.done.Load() - done0), Errors: int(ct.failed.Load() - failed0)}
		l.Rate = float64(l.Completed) / l.Duration.Seconds()
		est.Levels = append(est.Levels, l)
		s.opts.Logger.Info("bench capacity estimate level", "concurrency", c, "completed", l.Completed, "errors", l.Errors, "rate", l.Rate)
		if l.Completed == 0 || l.Errors > l.Completed {
			return best, fmt.Errorf("the level at concurrency %d completed %d requests with %d errors", c, l.Completed, l.Errors)
		}
		if best > 0 && l.Rate < best*(1+s.f.MinGain) {
			flat++
		} else {
			flat = 0
		}
		best = max(best, l.Rate)
		if flat == 1 {
			est.Note = fmt.Sprintf("saturated: doubling the concurrency to %d raised the rate by less than %.0f%%", c, 100*s.f.MinGain)
			return best, nil
		}
		// The next level waits out this one's mean E2E before it counts,
		// and lasts at least twice that, so that its new requests have
		// completed a few times.
		e2e := time.Duration(float64(c) / l.Rate * float64(time.Second))
		settle = min(e2e, estimateMaxSettle)
		minLevel = min(max(estimateMinLevel, 2*e2e), estimateMaxLevel)
	}
	return best, nil
}

// estimateRule states the estimate for report.FindReport.Rules.
func (s *search) estimateRule() string {
	return fmt.Sprintf("capacity estimate (no --find.start-rate): closed-loop workers, %d then doubled level by level without draining (at most %d, and max_inflight where the configuration sets it); a level first waits out the previous level's mean E2E by Little's law (at most %v), then its rate is its completed requests per second, once max(%d, 2 × concurrency) completed and max(%v, 2 × that mean E2E) passed (at most %v; none starts after %v); when a doubling raises it by less than %.0f%% the target is saturated, and the search starts at the highest rate, about the capacity. The estimate is not evidence (a closed loop hides queueing): the capacity is the trusted open-loop stage with the highest served rate",
		estimateStartC, estimateMaxC, estimateMaxSettle, estimateMinCompleted, estimateMinLevel, estimateMaxLevel, estimateBudget, 100*s.f.MinGain)
}

// sleepCtx waits d, or until ctx ends (false).
func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
