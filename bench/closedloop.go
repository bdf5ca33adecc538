// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/llmprobe/llmprobe/bench/report"
	"github.com/llmprobe/llmprobe/config"
	"github.com/llmprobe/llmprobe/probe"
	"github.com/llmprobe/llmprobe/probe/wire"
	"github.com/llmprobe/llmprobe/probe/workload"
)

// closedSpec is one closed-loop level to run.
type closedSpec struct {
	concurrency int
	duration    time.Duration // upper bound
	warmup      time.Duration
	maxRequests int // per target; 0: no bound
	// minCompleted, when positive, ends the level once every target has
	// that many completed requests and minDuration has passed (the
	// capacity estimate).
	minCompleted int
	minDuration  time.Duration
	grace        time.Duration
}

// runClosedLoopLevels runs opts.Concurrency's levels after the
// open-loop stages.
func runClosedLoopLevels(ctx context.Context, opts Options, base *config.Config, targets []*config.Target, rep *report.Report) error {
	if len(opts.Concurrency) == 0 {
		return nil
	}
	d := opts.ClosedLoopDuration
	if d <= 0 {
		d = time.Minute
	}
	warmup := opts.Warmup
	if warmup < 0 {
		warmup = time.Duration(base.Global.Warmup)
	}
	for i, c := range opts.Concurrency {
		if c < 1 {
			return fmt.Errorf("closed-loop level %d: concurrency must be at least 1, got %d", i+1, c)
		}
	}
	for i, c := range opts.Concurrency {
		if ctx.Err() != nil {
			break
		}
		opts.Logger.Info("bench closed-loop level", "level", i+1, "of", len(opts.Concurrency), "concurrency", c, "duration", d)
		levels, err := runClosed(ctx, opts, base, targets, closedSpec{concurrency: c, duration: d, warmup: min(warmup, d),
			maxRequests: opts.MaxRequests, grace: opts.Grace})
		if err != nil {
			return fmt.Errorf("closed-loop level %d: %w", i+1, err)
		}
		for _, l := range levels {
			l.Level = i + 1
			rep.ClosedLoop = append(rep.ClosedLoop, l)
			opts.Logger.Info("bench closed-loop level done", "level", i+1, "target", l.Target, "concurrency", c,
				"throughput", fmt.Sprintf("%.2f/s", l.Throughput), "e2e_p50", l.E2E.P50)
		}
	}
	return nil
}

// closedTarget is what one target's workers share.
type closedTarget struct {
	t       *config.Target
	client  *wire.Client
	hc      interface{ CloseIdleConnections() }
	builder *workload.Builder
	wl      *workload.Workload
	sent    atomic.Int64
	done    atomic.Int64 // completed successfully
	failed  atomic.Int64 // ended otherwise
}

// runClosed runs one closed-loop level against targets at once and
// reports each, measured by the collector of the open-loop stages.
func runClosed(ctx context.Context, opts Options, base *config.Config, targets []*config.Target, spec closedSpec) ([]*report.ClosedLoopStage, error) {
	cfg := stageConfig(base, targets, 1, spec.duration, spec.warmup)
	col := newCollector(cfg, expectedResults(float64(spec.concurrency)*10, spec.duration), opts.SLO)
	col.setLimits(Options{Percentiles: opts.Percentiles})
	var cts []*closedTarget
	for _, t := range cfg.Targets {
		ct, err := newClosedTarget(cfg, t, opts)
		if err != nil {
			for _, c := range cts {
				c.hc.CloseIdleConnections()
			}
			return nil, fmt.Errorf("target %q: %w", t.Name, err)
		}
		cts = append(cts, ct)
	}
	defer func() {
		for _, c := range cts {
			c.hc.CloseIdleConnections()
		}
	}()
	start := time.Now()
	col.start, col.warmup = start, spec.warmup
	warmupUntil := start.Add(spec.warmup)
	stop := make(chan struct{}) // no new request after it closes
	var stopOnce sync.Once
	halt := func() { stopOnce.Do(func() { close(stop) }) }
	reqCtx, cancelReqs := context.WithCancel(context.Background())
	defer cancelReqs()
	var wg sync.WaitGroup
	for ti, ct := range cts {
		for w := range spec.concurrency {
			wg.Add(1)
			seed := cfg.Global.Seed ^ uint64(ti)<<32 ^ uint64(w+1)*0x9e3779b97f4a7c15
			go func() {
				defer wg.Done()
				ct.work(reqCtx, stop, rand.New(rand.NewPCG(seed, ^seed)), col, opts.Dataset, spec.maxRequests, warmupUntil)
			}()
		}
	}
	timer := time.NewTimer(spec.duration)
	defer timer.Stop()
	poll := time.NewTicker(50 * time.Millisecond)
	defer poll.Stop()
wait:
	for {
		select {
		case <-ctx.Done():
			break wait
		case <-timer.C:
			break wait
		case <-poll.C:
			if spec.maxRequests > 0 && allSent(cts, spec.maxRequests) {
				break wait
			}
			if spec.minCompleted > 0 && time.Since(start) >= spec.minDuration && allDone(cts, spec.minCompleted) {
				break wait
			}
		}
	}
	halt()
	elapsed := time.Since(start)
	inFlight := col.inFlight()
	grace := spec.grace
	if grace <= 0 {
		for _, t := range cfg.Targets {
			grace = max(grace, t.Timeout(cfg.Global))
		}
	}
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	gt := time.NewTimer(grace)
	select {
	case <-finished:
	case <-gt.C:
		cancelReqs() // what is cancelled is counted as such (report.OutcomeCancelledAtGrace)
		<-finished
	}
	gt.Stop()
	var out []*report.ClosedLoopStage
	for _, ct := range cts {
		sr := col.report(ct.t.Name, elapsed)
		l := &report.ClosedLoopStage{Target: ct.t.Name, Model: ct.t.Model, Concurrency: spec.concurrency, Duration: elapsed,
			Sent: sr.Sent, Outcomes: sr.Outcomes, Warmup: sr.Warmup, Served: sr.Served, Throughput: sr.ServedRate,
			OutputTokensPerSec: sr.ServedOutputTokensPerSec, TTFT: sr.TTFT, TPOT: sr.TPOT, ITL: sr.ITL, E2E: sr.E2E,
			InFlightAtEnd: inFlight[ct.t.Name], CutAtGrace: sr.CutAtGrace, Note: report.ClosedLoopNote, Serving: sr.Serving}
		if sr.E2E.Count > 0 && sr.E2E.Mean > 0 {
			l.LittleRate = float64(spec.concurrency) / sr.E2E.Mean
		}
		out = append(out, l)
	}
	return out, nil
}

func allSent(cts []*closedTarget, n int) bool {
	for _, c := range cts {
		if c.sent.Load() < int64(n) {
			return false
		}
	}
	return true
}

func allDone(cts []*closedTarget, n int) bool {
	for _, c := range cts {
		if c.done.Load() < int64(n) {
			return false
		}
	}
	return true
}

// newClosedTarget builds the client and the request builder of t as the
// engine does (same HTTP client, same measurements).
func newClosedTarget(cfg *config.Config, t *config.Target, opts Options) (*closedTarget, error) {
	client, hc, err := probe.NewTargetClient(t, probe.ClientOptions{
		Timeout:    t.Timeout(cfg.Global),
		UserAgent:  "llmprobe-bench",
		Tracer:     opts.Tracer,
		Propagator: opts.Propagator,
	})
	if err != nil {
		return nil, err
	}
	return &closedTarget{t: t, client: client, hc: hc,
		builder: workload.NewBuilder(t, cfg.Global.Seed),
		wl:      workload.NewWorkload(cfg.Workload(t)).ForTarget(t)}, nil
}

// work is one worker: it sends a request, waits for its end, and sends
// the next, until stop closes or maxRequests were sent to the target.
// Multi-turn classes send their first turn only.
func (ct *closedTarget) work(ctx context.Context, stop <-chan struct{}, rng *rand.Rand, col *collector, ds *Dataset, maxRequests int, warmupUntil time.Time) {
	name := ct.t.Name
	for {
		select {
		case <-stop:
			return
		default:
		}
		if maxRequests > 0 && ct.sent.Add(1) > int64(maxRequests) {
			return
		} else if maxRequests <= 0 {
			ct.sent.Add(1)
		}
		class := ct.wl.Pick(rng)
		plan := class.Plan(rng)
		var p *workload.Prepared
		if ds != nil {
			if d, ok := ds.Next(name); ok {
				p = ct.builder.FromDataset(&plan, d)
			}
		}
		if p == nil {
			p = ct.builder.FirstTurn(&plan, rng, nil)
		}
		res := p.Res
		now := time.Now()
		res.Planned, res.Dispatched = now, now
		res.Warmup = now.Before(warmupUntil)
		col.Scheduled(name, "", class.Name)
		col.Sent(name, "", class.Name)
		ct.client.Do(ctx, p.Req, res)
		p.Learn(res)
		if res.Outcome == wire.OutcomeSuccess {
			ct.done.Add(1)
		} else {
			ct.failed.Add(1)
		}
		col.Observe(res)
	}
}
