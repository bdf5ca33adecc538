// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package bench_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/llmprobe/llmprobe/bench"
	"github.com/llmprobe/llmprobe/bench/report"
	"github.com/llmprobe/llmprobe/internal/simtest"
)

// findFastBudget is the goal of a capacity search with the defaults
// (issue #21): its estimate and stages, by their timers, take at most this.
const findFastBudget = 2 * time.Minute

// TestFindCapacityDefaults: --find=capacity with every default (the
// CLI's 5 s warm-up, no start rate: the estimate) finds the capacity of
// the simulator of findSimConfig within 15% of what the simulator served
// (as TestFindCapacity derives it from its request log; the timing
// model's is logged beside it), on a trusted stage, and its estimate and
// stages take at most findFastBudget by their own timers (the drains
// after each stage depend on the machine and are printed, not judged).
// The old ramp from 1 req/s held the first stage 2m10s.
func TestFindCapacityDefaults(t *testing.T) {
	if testing.Short() {
		t.Skip("a capacity search against a simulator, about a minute")
	}
	modelReq, _ := modelCapacity(t)
	base, simLog := startFindSim(t)
	cfg := findConfig(t, base)
	type found struct {
		rep      *report.Report
		requests []byte
		wall     time.Duration
	}
	got := simtest.RetryFor(t, 2, 75*time.Second, func(int) (found, string) {
		ctx, logger, cancel := untrustedStop()
		defer cancel()
		// Bounded: well past the goal, so that a slow search fails
		// instead of running for minutes.
		ctx, stop := context.WithTimeout(ctx, findFastBudget+time.Minute)
		defer stop()
		var buf bytes.Buffer
		log := report.NewRequestLog(&buf)
		began := time.Now()
		rep, err := bench.Find(ctx, bench.Options{Config: cfg, Warmup: 5 * time.Second, Logger: logger, Requests: log},
			bench.FindOptions{Mode: bench.FindCapacity})
		if err != nil {
			t.Fatal(err)
		}
		if err := log.Flush(); err != nil {
			t.Fatal(err)
		}
		return found{rep, buf.Bytes(), time.Since(began)}, untrustedReasons(rep)
	})
	rep := got.rep
	logReport(t, rep)
	f := rep.Find
	if f == nil || f.Capacity == nil || !f.Capacity.Found {
		t.Fatalf("capacity not found: %+v", f)
	}
	c := f.Capacity
	planned := time.Duration(0)
	if f.Estimate != nil {
		planned += f.Estimate.Duration
	}
	var drains time.Duration
	for _, s := range rep.Stages {
		planned += s.Duration
		drains += s.Drain
	}
	fmt.Printf("--- TestFindCapacityDefaults: capacity %.2f req/s (model %.2f) in %v wall, %v of estimate and stages, %v of drains, %d stages\n",
		c.RequestsPerSecond, modelReq, got.wall.Round(100*time.Millisecond), planned.Round(100*time.Millisecond), drains.Round(100*time.Millisecond), len(rep.Stages))
	if planned > findFastBudget {
		t.Errorf("the search's estimate and stages took %v, want at most %v", planned.Round(time.Second), findFastBudget)
	}
	if f.Estimate == nil || !(f.Estimate.RequestsPerSecond > 0) {
		t.Errorf("no capacity estimate: %+v", f.Estimate)
	}
	last := f.Ramp[len(f.Ramp)-1].Stage
	from, to := stageSpan(t, got.requests, last)
	tpot := medianTPOT(t, simtest.ReadLog(t, simLog), from, to)
	want := float64(8) / findOutput / tpot.Seconds() // max_num_seqs: 8
	t.Logf("capacity found %.2f req/s; the simulator's at stage %d: median TPOT %v, %.2f req/s (model %.2f)", c.RequestsPerSecond, last, tpot, want, modelReq)
	if r := c.RequestsPerSecond / want; r < 0.85 || r > 1.15 {
		t.Errorf("capacity %.2f req/s is %.0f%% of the simulator's %.2f", c.RequestsPerSecond, 100*r, want)
	}
	if !rep.Stages[c.Stage-1].Trusted {
		t.Errorf("capacity stage %d is not trusted", c.Stage)
	}
}
