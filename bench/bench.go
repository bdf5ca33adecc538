// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

// Package bench runs finite benchmark sweeps with the probe engine: a list
// of stages, each a requested rate held for a duration, measured exactly
// like the daemon measures (open-loop arrivals, same client, same
// definitions), and summarised in a report that always says at which load
// the numbers were taken and whether the harness delivered it. Beside the
// stages it runs the preflight, closed-loop levels, a trace's replay and
// the searches built of stages (Find: the capacity, the highest rate
// meeting an SLO).
//
// bench drives the engine (probe, probe/wire, probe/workload,
// probe/harness), reads its results into a bench/report Report, and has
// servermetrics read the servers beside each stage; it must not import
// exporter (its tests compare with it) or cmd.
package bench

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/prometheus/common/model"

	"github.com/llmprobe/llmprobe/bench/report"
	"github.com/llmprobe/llmprobe/config"
	"github.com/llmprobe/llmprobe/dist"
	"github.com/llmprobe/llmprobe/probe"
	"github.com/llmprobe/llmprobe/probe/harness"
	"github.com/llmprobe/llmprobe/probe/wire"
	"github.com/llmprobe/llmprobe/servermetrics"
	"github.com/llmprobe/llmprobe/slo"
)

// Stage is one step of a sweep: every selected target is probed at Rate
// (req/s) for Duration.
type Stage struct {
	Rate     float64
	Duration time.Duration
}

// Options configure a sweep.
type Options struct {
	// Config supplies targets, workloads and global settings. Its targets'
	// arrival rates are replaced by each stage's rate.
	Config *config.Config
	// Targets selects targets by name; empty means all.
	Targets []string
	Stages  []Stage
	// Warmup overrides global.warmup for every stage (negative: keep the
	// config's).
	Warmup time.Duration
	// Grace bounds the wait for in-flight requests at the end of a stage
	// (they still count for it; those still running when it ends are
	// cancelled). Zero means the longest request timeout of the targets.
	Grace  time.Duration
	Logger *slog.Logger
	// StopWhenSaturated ends the sweep after the first stage whose load
	// was not delivered (the harness or the target could not keep up).
	StopWhenSaturated bool
	// Tracer and Propagator, when set, trace every request as the daemon
	// does (probe.Options).
	Tracer     trace.Tracer
	Propagator propagation.TextMapPropagator
	// SLO, when set, judges every class's requests by its per-request
	// bounds instead of the configuration's slo, and each stage by its
	// quantile bounds. Without it, classes with an slo in the
	// configuration are judged by theirs.
	SLO *slo.Spec
	// Requests, when set, receives one JSON line per request as its
	// result arrives (report.RequestLog); nothing is kept in memory for it.
	Requests *report.RequestLog
	// Progress, when set, is called about every ProgressInterval (default
	// a second) during each stage, and once at its end with Done set.
	Progress         func(Progress)
	ProgressInterval time.Duration

	// StageOffset numbers the stages from StageOffset+1 in the report,
	// the request log and the progress (a search that runs one stage per
	// Run sets it to the stages it already ran).
	StageOffset int
	// CommonRandomNumbers makes every stage reuse the same draws
	// (arrival gaps, class picks, request plans), rescaled to its rate,
	// for paired comparisons; by default each stage draws its own stream,
	// derived from global.seed and the stage's number (probe.Options.Stream).
	CommonRandomNumbers bool

	// ServerMetrics are the targets' own Prometheus exposition URLs,
	// scraped at each stage's start (after the warm-up), every
	// ServerMetricsInterval (default 2s) and at its end (package servermetrics):
	// one URL for every target, one per target in the targets' order, or
	// TARGET=URL; comma-separated lists are split. A failed scrape is
	// reported in the stage, never fatal.
	ServerMetrics         []string
	ServerMetricsInterval time.Duration
	// PrometheusURL, when set, is asked at each stage's end for the
	// dcgm-exporter series matching GPUSelector averaged over the
	// stage's window (servermetrics.QueryGPU).
	PrometheusURL string
	GPUSelector   string
	// GPUPricePerHour (what one GPU costs per hour) and GPUCount (the
	// GPUs serving the targets; 0: those Prometheus reports) give each
	// stage's GPU time and cost per generated token (servermetrics.StageCost).
	GPUPricePerHour float64
	GPUCount        int

	// Dataset, when set, supplies the prompts of single-turn requests
	// (dataset.go); conversations keep synthesised ones.
	Dataset *Dataset
	// MaxRequests, when positive, ends every stage (open- or closed-loop)
	// once each target was sent this many requests, before its duration
	// if sooner (--max-requests, --num-prompts).
	MaxRequests int
	// Percentiles are the percentiles (in percent, e.g. 50, 90, 99)
	// reported for every metric beside the fixed p50/p95/p99 and shown
	// in their place in the text and Markdown tables (report.AddPercentiles).
	Percentiles []float64
	// Concurrency, when set, runs one closed-loop level per value after
	// the open-loop stages (closedloop.go), each for ClosedLoopDuration:
	// reported apart, in report.Report.ClosedLoop.
	Concurrency        []int
	ClosedLoopDuration time.Duration
	// Replay, when set, runs one stage that replays a trace (replay.go)
	// instead of Stages: not with Stages or Concurrency. MaxRequests is
	// the replay's (OpenReplay), not a bound on the stage.
	Replay *Replay

	stage      int               // the stage runStage runs (1-based), set by Run
	serverURLs map[string]string // target → metrics URL, set by Run
}

// costOptions are the options' GPU count and price.
func (opts Options) costOptions() servermetrics.CostOptions {
	return servermetrics.CostOptions{GPUPricePerHour: opts.GPUPricePerHour, GPUCount: opts.GPUCount, Prometheus: opts.PrometheusURL != ""}
}

// Progress is a running stage's figures so far, summed over its targets.
type Progress struct {
	Stage, Stages     int
	Elapsed, Duration time.Duration
	RequestedRate     float64 // the stage's rate, req/s
	Sent, Dropped     int
	// Rate is Sent per second of Elapsed.
	Rate   float64
	Errors int // results other than success
	// TTFTP50 and TTFTP99 are over the latest (up to progressWindow)
	// first tokens after warm-up (seconds; TTFTCount 0: none yet).
	TTFTP50, TTFTP99 float64
	TTFTCount        int
	Done             bool
	// Targets are the same figures per target, by name (Rate: each
	// target's Sent per second of Elapsed).
	Targets []TargetProgress
}

// TargetProgress is one target's share of a Progress.
type TargetProgress struct {
	Target           string
	Sent, Dropped    int
	Rate             float64
	Errors           int
	TTFTP50, TTFTP99 float64
	TTFTCount        int
}

// Run executes the stages one after another and returns the report. A
// cancelled ctx ends the current stage early (its partial figures are
// kept) and skips the rest.
func Run(ctx context.Context, opts Options) (*report.Report, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Replay != nil && (len(opts.Stages) > 0 || len(opts.Concurrency) > 0) {
		return nil, fmt.Errorf("a replay is a stage of its own: not with stages or closed-loop levels")
	}
	if len(opts.Stages) == 0 && len(opts.Concurrency) == 0 && opts.Replay == nil {
		return nil, fmt.Errorf("no stages")
	}
	base := opts.Config
	var targets []*config.Target
	for _, t := range base.Targets {
		if len(opts.Targets) == 0 || slices.Contains(opts.Targets, t.Name) {
			targets = append(targets, t)
		}
	}
	if len(targets) == 0 {
		return nil, fmt.Errorf("no target matches %v", opts.Targets)
	}
	for _, name := range opts.Targets {
		if base.Target(name) == nil {
			return nil, fmt.Errorf("unknown target %q", name)
		}
	}
	if err := opts.costOptions().Check(); err != nil {
		return nil, err
	}
	if len(opts.ServerMetrics) > 0 {
		urls, err := resolveServerMetrics(opts.ServerMetrics, targets)
		if err != nil {
			return nil, err
		}
		opts.serverURLs = urls
	}
	if len(opts.Percentiles) == 0 {
		opts.Percentiles = report.DefaultPercentiles
	}
	rep := &report.Report{Started: time.Now(), SLOBounds: sloBounds(base, targets, opts.SLO), Percentiles: opts.Percentiles,
		SchemaVersion: report.ReportSchemaVersion}
	for _, t := range targets {
		for _, c := range base.Workload(t).Classes {
			rep.Sampling = append(rep.Sampling, report.SamplingInfo{
				Target: t.Name, Class: c.Name,
				Temperature: c.Sampling.Temperature, TopP: c.Sampling.TopP, TopK: c.Sampling.TopK,
				ExtraBody: t.ExtraBody,
			})
		}
		rep.Workloads = append(rep.Workloads, describeWorkload(base, t))
	}
	for i, st := range opts.Stages {
		if !(st.Rate > 0) || st.Duration <= 0 {
			return nil, fmt.Errorf("stage %d: rate and duration must be positive", i+1)
		}
		if st.Rate > config.MaxArrivalRate {
			return nil, fmt.Errorf("stage %d: rate %g is above the arrival cap of %d requests per second (for more, split the load over several targets)", i+1, st.Rate, config.MaxArrivalRate)
		}
	}
	stages := opts.Stages
	if rp := opts.Replay; rp != nil {
		// The stage's rate is what the status and the report say was
		// requested (the timeline's own); the arrival process it sets is
		// not used.
		opts.Stages = []Stage{{Rate: max(rp.OfferedRate(), 1e-3), Duration: max(rp.PlannedWall(), time.Millisecond)}}
		stages = opts.Stages
	}
	for i, st := range stages {
		if ctx.Err() != nil {
			break
		}
		cfg := stageConfig(base, targets, st.Rate, st.Duration, opts.Warmup)
		if opts.Replay != nil {
			opts.Logger.Info("bench replay", "file", opts.Replay.opts.Path, "format", opts.Replay.format, "records", opts.Replay.records,
				"time_scale", opts.Replay.opts.TimeScale, "offered_rate", opts.Replay.OfferedRate(), "planned", opts.Replay.PlannedWall())
		} else {
			opts.Logger.Info("bench stage", "stage", i+1, "of", len(opts.Stages), "rate", st.Rate, "duration", st.Duration)
		}
		opts.stage = opts.StageOffset + i + 1
		srs, err := runStage(ctx, cfg, st, opts)
		if err != nil {
			return nil, fmt.Errorf("stage %d: %w", i+1, err)
		}
		for _, sr := range srs {
			sr.Stage = opts.StageOffset + i + 1
			rep.Stages = append(rep.Stages, sr)
			opts.Logger.Info("bench stage done", "stage", i+1, "target", sr.Target, "achieved", fmt.Sprintf("%.1f/s", sr.AchievedRate),
				"ttft_p50", sr.TTFT.P50, "ttft_p99", sr.TTFT.P99, "trusted", sr.Trusted)
		}
		if opts.StopWhenSaturated && slices.ContainsFunc(srs, func(s *report.StageReport) bool { return !s.Trusted }) {
			break
		}
	}
	if err := runClosedLoopLevels(ctx, opts, base, targets, rep); err != nil {
		return nil, err
	}
	if opts.Dataset != nil {
		rep.Dataset = opts.Dataset.Info()
	}
	rep.Finished = time.Now()
	return rep, nil
}

// stageConfig copies base keeping only targets, each at rate.
func stageConfig(base *config.Config, targets []*config.Target, rate float64, duration, warmup time.Duration) *config.Config {
	cfg := *base
	cfg.Targets = nil
	for _, t := range targets {
		tc := *t
		tc.Arrival.Rate = rate
		if tc.Arrival.Process == config.ProcessTraceShape {
			// A stage offers its rate, not a day's curve at this hour.
			tc.Arrival.Process, tc.Arrival.Trace = config.ProcessPoisson, nil
		}
		cfg.Targets = append(cfg.Targets, &tc)
	}
	cfg.Workloads = maps.Clone(base.Workloads)
	if warmup >= 0 {
		cfg.Global.Warmup = modelDuration(warmup)
	}
	// The verdicts judge the whole stage (at least a second).
	cfg.Global.Saturation.Window = modelDuration(max(duration, time.Second).Truncate(time.Second))
	return &cfg
}

// The verdicts' reasons for not trusting a stage begin with these: the
// harness could not deliver the load, or the target had max_inflight
// requests running and arrivals were dropped (a search names the bound
// that capped it by them, find.go).
const (
	reasonHarness    = "harness saturated: "
	reasonOverloaded = "target overloaded: "
)

// judge takes the engine's verdicts on the stage (judged over the whole
// stage: stageConfig sets the saturation window to its duration), so that
// bench and the daemon flag the same numbers for the same reasons. A
// reason that counts drops gives the stage's own counts, those of the
// report, not those of the verdict's sliding window (which, judged once a
// second over whole seconds, misses the stage's first and last arrivals):
// a report has one count of its drops.
func judge(s *report.StageReport, ts probe.TargetStatus) {
	if ts.Saturated {
		s.Reasons = append(s.Reasons, reasonHarness+stageDropCounts(s, ts))
	}
	if ts.Overloaded {
		s.Reasons = append(s.Reasons, fmt.Sprintf(reasonOverloaded+"%d of %d scheduled requests were dropped because max_inflight (%d) requests were still running: the target does not absorb the offered load",
			s.Dropped[probe.DropInflightLimit], s.Scheduled, ts.MaxInflight))
	}
	if s.Sent == 0 {
		s.Reasons = append(s.Reasons, "no request was sent")
	}
	if ri := s.Replay; ri != nil && ri.Error != "" {
		s.Reasons = append(s.Reasons, "the replay stopped early: "+ri.Error)
	}
	s.Trusted = len(s.Reasons) == 0
}

// warn adds to the stage's warnings what makes its figures weaker than
// they look; ps are the percentiles reported.
func warn(s *report.StageReport, ps []float64) {
	add := func(format string, args ...any) { s.Warnings = append(s.Warnings, fmt.Sprintf(format, args...)) }
	switch f := s.Serving; {
	case s.Sent == 0:
	case s.WarmupDuration >= s.PlannedDuration:
		add("the stage (%s) is no longer than its warm-up (%s): every request was planned in the warm-up, so none is in the figures; make the stage longer than --warmup",
			s.PlannedDuration, s.WarmupDuration)
	case f == nil:
		add("no request planned after the %s warm-up ended by itself: the stage has no figures", s.WarmupDuration)
	case f.Completed == 0:
		add("none of the %d requests planned after the warm-up succeeded: the stage's latencies and throughputs are 0", f.Failed)
	case len(ps) > 0:
		top := slices.Max(ps)
		if need := int(math.Ceil(100/(100-top) - 1e-9)); top < 100 && f.Completed < need {
			add("P%s of %d completed requests is the top of the sample, not a tail: a percentile P needs at least 100/(100 − P) of them (%d); run the stage longer",
				strconv.FormatFloat(top, 'g', -1, 64), f.Completed, need)
		}
	}
	if s.CutAtGrace > 0 {
		add("%d requests still running when the grace (%s) after the stage ran out were cancelled (%s): they are in no figure, which leaves out the slowest requests; a longer --stage.grace waits for them",
			s.CutAtGrace, s.Grace, report.OutcomeCancelledAtGrace)
	}
}

// stageDropCounts is the harness' saturation reasons in words, its
// reason for late drops restated with the stage's counts (judge).
func stageDropCounts(s *report.StageReport, ts probe.TargetStatus) string {
	parts := strings.Split(ts.SaturationReason, "; ")
	if len(parts) != len(ts.SaturationReasons) {
		return ts.SaturationReason
	}
	for i, r := range ts.SaturationReasons {
		if r == harness.ReasonLateDrops {
			parts[i] = fmt.Sprintf("%d of %d scheduled requests could not be sent in time (late_after)", s.Dropped[probe.DropLate], s.Scheduled)
		}
	}
	return strings.Join(parts, "; ")
}

func modelDuration(d time.Duration) model.Duration { return model.Duration(d) }

// maxPrealloc bounds the values the collector makes room for per metric
// before a stage (they grow past it on demand): room for rate × duration
// at a high rate is gigabytes, which take seconds to map before the
// stage even starts.
const maxPrealloc = 1 << 16

// expectedResults is the room the collector makes per metric for a stage:
// 20% over the expected count, at most maxPrealloc.
func expectedResults(rate float64, d time.Duration) int {
	n := 1.2*rate*d.Seconds() + 16
	if !(n < maxPrealloc) {
		return maxPrealloc
	}
	return int(n)
}

func runStage(ctx context.Context, cfg *config.Config, st Stage, opts Options) ([]*report.StageReport, error) {
	col := newCollector(cfg, expectedResults(st.Rate, st.Duration), opts.SLO)
	col.stage, col.requests = opts.stage, opts.Requests
	col.setLimits(opts)
	popts := probe.Options{Logger: opts.Logger, Observer: col, UserAgent: "llmprobe-bench",
		Tracer: opts.Tracer, Propagator: opts.Propagator}
	if opts.Dataset != nil {
		popts.Prompts = opts.Dataset
	}
	if !opts.CommonRandomNumbers {
		popts.Stream = uint64(opts.stage)
	}
	var replay *replayRun
	var replayDone <-chan struct{}
	if opts.Replay != nil {
		replay = opts.Replay.run(len(cfg.Targets))
		defer replay.close()
		popts.Timelines, replayDone = replay.open, replay.done
		col.limits.maxRequests = 0 // the replay reads at most MaxRequests records
	}
	eng := probe.NewEngine(popts)
	cpu0 := cpuTime()
	start := time.Now()
	col.start, col.warmup = start, time.Duration(cfg.Global.Warmup)
	measureFrom := start.Add(min(col.warmup, st.Duration))
	scrapers := map[string]*servermetrics.Sampler{} // by URL: one scrape serves every target behind it
	if len(opts.serverURLs) > 0 {
		every := opts.ServerMetricsInterval
		if every <= 0 {
			every = defaultServerMetricsInterval
		}
		client := servermetrics.NewClient("llmprobe_bench_server_metrics")
		defer client.CloseIdleConnections()
		for _, t := range cfg.Targets {
			if u := opts.serverURLs[t.Name]; u != "" && scrapers[u] == nil {
				scrapers[u] = servermetrics.StartSampler(context.WithoutCancel(ctx), client, u, measureFrom, every)
			}
		}
	}
	stopScrapers := func() {
		for _, s := range scrapers {
			s.StopNow()
		}
	}
	if err := eng.Apply(cfg); err != nil {
		stopScrapers()
		return nil, err
	}
	// A replay's stage ends with its timelines (replayDone), not at its
	// planned length: the schedule may run late.
	timer := time.NewTimer(st.Duration)
	stageTimer := timer.C
	if replay != nil {
		stageTimer = nil
	}
	var tick <-chan time.Time
	if opts.Progress != nil {
		every := opts.ProgressInterval
		if every <= 0 {
			every = time.Second
		}
		ticker := time.NewTicker(every)
		defer ticker.Stop()
		tick = ticker.C
	}
	interrupted := false
wait:
	for {
		select {
		case <-ctx.Done():
			interrupted = true
			break wait
		case <-stageTimer:
			break wait
		case <-replayDone:
			break wait
		case <-col.reached:
			break wait
		case <-tick:
			p := col.progress(opts.stage, opts.StageOffset+len(opts.Stages), time.Since(start), st.Duration, false)
			p.RequestedRate = st.Rate
			opts.Progress(p)
		}
	}
	timer.Stop()
	stopScrapers() // the last sample is taken now, beside the grace period
	status := eng.Status()
	elapsed := time.Since(start)
	stageEnd := start.Add(elapsed)
	grace := opts.Grace
	if grace <= 0 {
		for _, t := range cfg.Targets {
			grace = max(grace, t.Timeout(cfg.Global))
		}
	}
	// What was in flight when the stage ended is waited for, at most the
	// grace; what still runs then is counted and cancelled (its results
	// are reported as such).
	inflight := col.inFlight()
	shut := make(chan struct{})
	sctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = eng.Shutdown(sctx); close(shut) }()
	graceTimer := time.NewTimer(grace)
	select {
	case <-shut:
	case <-graceTimer.C:
		cancel() // what is cancelled is counted as such (report.OutcomeCancelledAtGrace)
		<-shut
	}
	graceTimer.Stop()
	drain := time.Since(stageEnd)
	cpu := cpuTime() - cpu0
	if opts.Progress != nil {
		p := col.progress(opts.stage, opts.StageOffset+len(opts.Stages), elapsed, st.Duration, true)
		p.RequestedRate = st.Rate
		opts.Progress(p)
	}

	servers := map[string]*servermetrics.Stats{}
	for u, s := range scrapers {
		servers[u] = servermetrics.NewStats(u, s.Results())
	}
	var gpu *servermetrics.GPUStats
	if opts.PrometheusURL != "" {
		gpu = servermetrics.QueryGPU(context.WithoutCancel(ctx), opts.PrometheusURL, opts.GPUSelector, stageEnd, stageEnd.Sub(measureFrom))
	}

	var out []*report.StageReport
	for _, ts := range status {
		sr := col.report(ts.Name, elapsed)
		if ss := servers[opts.serverURLs[ts.Name]]; ss != nil {
			sr.Server = ss
			if ss.TTFT != nil && ss.TTFT.Count > 0 && sr.TTFT.Count > 0 {
				sr.TTFTGap = &report.TTFTGap{P50: servermetrics.Float(sr.TTFT.P50) - ss.TTFT.P50, P99: servermetrics.Float(sr.TTFT.P99) - ss.TTFT.P99}
			}
		}
		sr.GPU = gpu
		sr.Interrupted, sr.PlannedDuration = interrupted, st.Duration
		sr.InFlightAtEnd, sr.Grace, sr.Drain = inflight[ts.Name], grace, drain
		sr.Model = ts.Model
		sr.RequestedRate = ts.RequestedRate
		sr.Duration = elapsed
		sr.AchievedRate = float64(sr.Sent) / elapsed.Seconds()
		weight := 0.0
		for _, c := range ts.Classes {
			sr.ReuseIntent += c.ReuseIntent * c.Weight
			weight += c.Weight
		}
		if weight > 0 {
			sr.ReuseIntent /= weight
		}
		if sr.Sent > 0 {
			// Process CPU is shared by every target of the stage.
			sr.ClientCPUPer1000 = cpu.Seconds() / float64(col.totalSent()) * 1000
		}
		if replay != nil {
			sr.Replay = replay.info(ts.Name, elapsed, sr.Sent)
		}
		judge(sr, ts)
		warn(sr, opts.Percentiles)
		out = append(out, sr)
	}
	costs := make([]servermetrics.CostTarget, len(out))
	for i, sr := range out {
		costs[i] = servermetrics.CostTarget{Server: sr.Server, ServedOutputTokensPerSec: sr.ServedOutputTokensPerSec}
	}
	if cost := servermetrics.StageCost(costs, gpu, opts.costOptions()); cost != nil {
		for _, sr := range out {
			sr.Cost = cost
		}
	}
	return out, nil
}

// collector is the Observer of a stage: it keeps every measurement. The
// arrival loop's events (scheduled, dropped, sent) only touch atomics, so
// the loop never waits behind a result being recorded.
type collector struct {
	targets  map[string]*targetData // fixed before the stage starts
	stage    int                    // 1-based, for the request log
	requests *report.RequestLog     // nil: no per-request export
	// start and warmup (set before the engine starts) bound the window
	// the served figures count completions in.
	start  time.Time
	warmup time.Duration
	// limits: Options.MaxRequests and Options.Percentiles (limits.go).
	limits  collectorLimits
	reached <-chan struct{} // closed when every target was sent MaxRequests
}

type targetData struct {
	scheduled, sent atomic.Int64
	ended           atomic.Int64 // results observed
	dropped         [len(probe.DropReasons)]atomic.Int64

	mu            sync.Mutex // guards the rest
	outcomes      map[wire.Outcome]int
	conversations map[probe.ConversationOutcome]int
	// reqs are the ended requests but those cut at the grace's end
	// (warm-up included, for the served figures): the figures' source.
	reqs           *report.Requests
	lag            []float64
	cachedTokens   int
	cachedReported int
	estimated      int
	warmup         int
	slo            *sloJudge // nil: no SLO to judge by
	sloCounts      sloCounts
}

// newCollector prepares for the targets of cfg, with room for about
// expected results each.
func newCollector(cfg *config.Config, expected int, spec *slo.Spec) *collector {
	c := &collector{targets: map[string]*targetData{}}
	for _, t := range cfg.Targets {
		c.targets[t.Name] = &targetData{
			slo:           newSLOJudge(cfg, t, spec),
			outcomes:      map[wire.Outcome]int{},
			conversations: map[probe.ConversationOutcome]int{},
			reqs:          report.NewRequests(expected),
			lag:           make([]float64, 0, expected),
		}
	}
	return c
}

func (c *collector) Scheduled(target, _, _ string) {
	if d := c.targets[target]; d != nil {
		d.scheduled.Add(1)
	}
}

func (c *collector) Dropped(target, _, _ string, reason probe.DropReason) {
	if d := c.targets[target]; d != nil {
		for i, r := range probe.DropReasons {
			if r == reason {
				d.dropped[i].Add(1)
			}
		}
	}
}

func (c *collector) Sent(target, _, _ string) {
	if d := c.targets[target]; d != nil {
		c.limits.sent(d.sent.Add(1), len(c.targets))
	}
}

func (c *collector) ConversationEnded(target, _, _ string, outcome probe.ConversationOutcome) {
	if d := c.targets[target]; d != nil {
		d.mu.Lock()
		d.conversations[outcome]++
		d.mu.Unlock()
	}
}

func (c *collector) Observe(r *wire.Result) {
	d := c.targets[r.Target]
	if d == nil {
		return
	}
	defer d.ended.Add(1)
	if c.requests != nil {
		c.requests.Write(c.stage, c.start, r)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.outcomes[report.OutcomeOf(r)]++
	d.lag = append(d.lag, r.ScheduleLag.Seconds())
	good := false
	if !r.Warmup && d.slo != nil {
		good = d.sloCounts.observe(d.slo, r)
	}
	if !c.start.IsZero() { // a stage's (not the capacity estimate's, which counts only)
		t := report.NewTiming(r, c.start)
		t.Good = good
		d.reqs.Add(t)
	}
	if r.Warmup {
		if r.ErrorType != wire.ErrorTypeCancelled { // counted as cancelled
			d.warmup++
		}
		return
	}
	if r.Outcome != wire.OutcomeSuccess {
		return
	}
	if r.CachedTokensReported {
		d.cachedTokens += r.CachedTokens
		d.cachedReported += r.PromptTokens
	}
	if !r.UsageReported {
		d.estimated++
	}
}

// inFlight is, per target, the requests sent whose result has not been
// observed yet.
func (c *collector) inFlight() map[string]int {
	out := map[string]int{}
	for name, d := range c.targets {
		if n := d.sent.Load() - d.ended.Load(); n > 0 {
			out[name] = int(n)
		}
	}
	return out
}

func (c *collector) totalSent() int {
	n := 0
	for _, d := range c.targets {
		n += int(d.sent.Load())
	}
	return n
}

// report is the target's StageReport of a stage that ran for elapsed:
// its counts, its figures (report.Requests: vLLM's, the tables'
// quantiles and the served ones), its SLO.
func (c *collector) report(target string, elapsed time.Duration) *report.StageReport {
	d := c.targets[target]
	d.mu.Lock()
	defer d.mu.Unlock()
	dropped := map[probe.DropReason]int{}
	for i, r := range probe.DropReasons {
		if n := d.dropped[i].Load(); n > 0 {
			dropped[r] = int(n)
		}
	}
	ps := c.limits.ps
	sr := &report.StageReport{
		Target:         target,
		Scheduled:      int(d.scheduled.Load()),
		Sent:           int(d.sent.Load()),
		Dropped:        dropped,
		Outcomes:       maps.Clone(d.outcomes),
		Conversations:  maps.Clone(d.conversations),
		Warmup:         d.warmup,
		WarmupDuration: c.warmup,
		Lag:            report.Summarize(d.lag),
		Estimated:      d.estimated,
		Serving:        d.reqs.Figures(ps, d.slo != nil && d.slo.perRequest()),
	}
	sr.CutAtGrace = sr.Outcomes[report.OutcomeCancelledAtGrace]
	sr.TTFT, sr.TPOT, sr.ITL, sr.E2E = d.reqs.Quantiles(ps)
	report.AddPercentiles(&sr.Lag, d.lag, ps)
	sr.Samples = report.NewSamples(d.reqs.Values())
	if d.slo != nil {
		sr.SLO = d.slo.report(&d.sloCounts, sr.Serving, d.reqs.Quantile)
	}
	// Served: successes that ended inside [warm-up, stage end], whatever
	// they started, so the grace period's completions are not counted.
	if window := elapsed - c.warmup; window > 0 {
		tokens := 0
		for _, x := range d.reqs.All() {
			if x.Success() && x.End >= c.warmup && x.End <= elapsed {
				sr.Served++
				tokens += int(x.OutputTokens)
			}
		}
		sr.ServedRate = float64(sr.Served) / window.Seconds()
		sr.ServedOutputTokensPerSec = float64(tokens) / window.Seconds()
	}
	if d.cachedReported > 0 {
		sr.CacheHitRatio = float64(d.cachedTokens) / float64(d.cachedReported)
	}
	return sr
}

// progressWindow bounds the first tokens a progress report's quantiles
// are taken over (the latest ones), so a report costs the same at any
// stage length.
const progressWindow = 4096

// progress sums the stage's figures so far over its targets.
func (c *collector) progress(stage, stages int, elapsed, duration time.Duration, done bool) Progress {
	p := Progress{Stage: stage, Stages: stages, Elapsed: elapsed, Duration: duration, Done: done}
	var ttft []float64
	secs := elapsed.Seconds()
	for _, name := range slices.Sorted(maps.Keys(c.targets)) {
		d := c.targets[name]
		tp := TargetProgress{Target: name, Sent: int(d.sent.Load())}
		for i := range d.dropped {
			tp.Dropped += int(d.dropped[i].Load())
		}
		d.mu.Lock()
		for o, n := range d.outcomes {
			if o != wire.OutcomeSuccess && o != report.OutcomeCancelledAtGrace {
				tp.Errors += n
			}
		}
		own := d.reqs.LatestTTFT(nil, progressWindow)
		d.mu.Unlock()
		ttft = append(ttft, own...)
		if secs > 0 {
			tp.Rate = float64(tp.Sent) / secs
		}
		if len(own) > 0 {
			slices.Sort(own)
			tp.TTFTCount = len(own)
			tp.TTFTP50, tp.TTFTP99 = dist.Quantile(own, 0.5), dist.Quantile(own, 0.99)
		}
		p.Sent += tp.Sent
		p.Dropped += tp.Dropped
		p.Errors += tp.Errors
		p.Targets = append(p.Targets, tp)
	}
	if secs > 0 {
		p.Rate = float64(p.Sent) / secs
	}
	if len(ttft) > 0 {
		slices.Sort(ttft)
		p.TTFTCount = len(ttft)
		p.TTFTP50, p.TTFTP99 = dist.Quantile(ttft, 0.5), dist.Quantile(ttft, 0.99)
	}
	return p
}
