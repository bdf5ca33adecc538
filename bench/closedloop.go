// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package bench

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/llmprobe/llmprobe/config"
	"github.com/llmprobe/llmprobe/probe"
	"github.com/llmprobe/llmprobe/probe/wire"
	"github.com/llmprobe/llmprobe/probe/workload"
)

// ClosedLoopNote is said beside every closed-loop result.
const ClosedLoopNote = "closed loop hides queueing: each of N workers sends its next request when its previous one ended, so the load follows the server " +
	"(a slow server is sent less, and no request waits behind those an arrival rate would have sent); its latencies are not those of any arrival rate " +
	"and must not be compared with the open-loop stages: use it for saturation throughput, the open-loop stages for latency under load"

// ClosedLoopStage is one closed-loop level of a target: Concurrency
// workers, each sending a request as soon as its previous one ended,
// for Duration (or until MaxRequests were sent). Report.ClosedLoop holds
// them, apart from the open-loop stages.
type ClosedLoopStage struct {
	Level       int           `json:"level"`
	Target      string        `json:"target"`
	Model       string        `json:"model"`
	Concurrency int           `json:"concurrency"`
	Duration    time.Duration `json:"duration_ns"`
	Sent        int           `json:"sent"`
	// Outcomes counts the results by outcome; Warmup the requests sent
	// in the warm-up (excluded from every figure).
	Outcomes map[wire.Outcome]int `json:"outcomes"`
	Warmup   int                  `json:"warmup_requests"`
	// Served counts the successes that ended in the measured window
	// (after the warm-up); Throughput and OutputTokensPerSec are per
	// second of it.
	Served             int     `json:"served_requests"`
	Throughput         float64 `json:"requests_per_second"`
	OutputTokensPerSec float64 `json:"output_tokens_per_second"`
	// LittleRate is Concurrency / mean E2E (Little's law): the rate the
	// workers' latencies explain; near Throughput when the level held
	// its concurrency.
	LittleRate float64 `json:"littles_law_requests_per_second"`

	TTFT Quantiles `json:"ttft_seconds"`
	TPOT Quantiles `json:"tpot_seconds"`
	ITL  Quantiles `json:"itl_seconds"`
	E2E  Quantiles `json:"e2e_seconds"`

	// InFlightAtEnd were running when the level ended (waited for at
	// most the grace; CutAtGrace of them were cancelled).
	InFlightAtEnd int    `json:"in_flight_at_end"`
	CutAtGrace    int    `json:"cut_at_grace"`
	Note          string `json:"note"`
}

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
func runClosedLoopLevels(ctx context.Context, opts Options, base *config.Config, targets []*config.Target, rep *Report) error {
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
func runClosed(ctx context.Context, opts Options, base *config.Config, targets []*config.Target, spec closedSpec) ([]*ClosedLoopStage, error) {
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
	var cut map[string]int
	gt := time.NewTimer(grace)
	select {
	case <-finished:
	case <-gt.C:
		cut = col.inFlight()
		cancelReqs()
		<-finished
	}
	gt.Stop()
	var out []*ClosedLoopStage
	for _, ct := range cts {
		sr := col.report(ct.t.Name, elapsed)
		l := &ClosedLoopStage{Target: ct.t.Name, Model: ct.t.Model, Concurrency: spec.concurrency, Duration: elapsed,
			Sent: sr.Sent, Outcomes: sr.Outcomes, Warmup: sr.Warmup, Served: sr.Served, Throughput: sr.ServedRate,
			OutputTokensPerSec: sr.ServedOutputTokensPerSec, TTFT: sr.TTFT, TPOT: sr.TPOT, ITL: sr.ITL, E2E: sr.E2E,
			InFlightAtEnd: inFlight[ct.t.Name], CutAtGrace: cut[ct.t.Name], Note: ClosedLoopNote}
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

// writeClosedLoop writes the closed-loop levels after the open-loop
// report, in a section of their own.
func writeClosedLoop(w io.Writer, r *Report) {
	if len(r.ClosedLoop) == 0 {
		return
	}
	fmt.Fprintf(w, "\nCLOSED-LOOP levels (concurrency sweep), not open-loop stages: %s\n", ClosedLoopNote)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "level\ttarget\tconcurrency\tsent\terr\treq/s\tLittle\ttok/s\t")
	for _, l := range r.ClosedLoop {
		fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%d\t%.2f\t%.2f\t%.0f\t\n", l.Level, l.Target, l.Concurrency, l.Sent, l.errors(),
			l.Throughput, l.LittleRate, l.OutputTokensPerSec)
	}
	_ = tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "level\ttarget\tconcurrency\tmetric\tn\t%s\tmax\t\n", strings.Join(quantileHeader(r.Percentiles), "\t"))
	for _, l := range r.ClosedLoop {
		for _, m := range l.metrics() {
			fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%d\t%s\t%s\t\n", l.Level, l.Target, l.Concurrency, m.name, m.q.Count,
				strings.Join(quantileCells(m.q, r.Percentiles), "\t"), fmtQ(m.q, m.q.Max))
		}
	}
	_ = tw.Flush()
	for _, l := range r.ClosedLoop {
		if l.InFlightAtEnd > 0 {
			fmt.Fprintf(w, "closed-loop level %d %s: %d requests in flight at the end were waited for (%d cancelled at the grace)\n",
				l.Level, l.Target, l.InFlightAtEnd, l.CutAtGrace)
		}
	}
}

// writeClosedLoopOnly is the text report of a run of closed-loop levels
// only.
func (r *Report) writeClosedLoopOnly(w io.Writer) error {
	writeClosedLoop(w, r)
	writeDataset(w, r.Dataset)
	var sampling []string
	for _, si := range r.Sampling {
		sampling = append(sampling, fmt.Sprintf("%s/%s temperature=%g top_p=%g", si.Target, si.Class, si.Temperature, si.TopP))
	}
	_, err := fmt.Fprintf(w, "sampling: %s\n", strings.Join(sampling, "; "))
	return err
}

func (l *ClosedLoopStage) errors() int {
	n := 0
	for o, c := range l.Outcomes {
		if o != wire.OutcomeSuccess {
			n += c
		}
	}
	return n
}

func (l *ClosedLoopStage) metrics() []namedQuantiles {
	return []namedQuantiles{{"TTFT", l.TTFT}, {"TPOT", l.TPOT}, {"ITL", l.ITL}, {"E2E", l.E2E}}
}

// writeDataset names the dataset of the run.
func writeDataset(w io.Writer, info *DatasetInfo) {
	if info != nil {
		fmt.Fprintf(w, "dataset: %s\n", info.describe())
	}
}

// writeClosedLoopMarkdown writes the dataset and the closed-loop levels
// at the end of the Markdown report.
func writeClosedLoopMarkdown(b *strings.Builder, r *Report) {
	if r.Dataset != nil {
		fmt.Fprintf(b, "## Dataset\n\n%s\n\n", mdEscape(r.Dataset.describe()))
	}
	if len(r.ClosedLoop) == 0 {
		return
	}
	fmt.Fprintf(b, "## Closed-loop levels (not open-loop stages)\n\n**Closed loop.** %s.\n\n", mdEscape(ClosedLoopNote))
	b.WriteString("| level | target | concurrency | sent | errors | req/s | Little's law req/s | output tok/s |\n|--:|---|--:|--:|--:|--:|--:|--:|\n")
	for _, l := range r.ClosedLoop {
		fmt.Fprintf(b, "| %d | %s | %d | %d | %d | %.2f | %.2f | %.0f |\n", l.Level, mdEscape(l.Target), l.Concurrency, l.Sent, l.errors(),
			l.Throughput, l.LittleRate, l.OutputTokensPerSec)
	}
	b.WriteString("\n")
	for _, l := range r.ClosedLoop {
		fmt.Fprintf(b, "### Closed-loop level %d: %s at concurrency %d\n\n", l.Level, mdEscape(l.Target), l.Concurrency)
		writeQuantileTable(b, l.metrics(), r.Percentiles)
		b.WriteString("\n")
	}
}
