// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package probe

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/llmprobe/llmprobe/config"
	"github.com/llmprobe/llmprobe/discovery"
	"github.com/llmprobe/llmprobe/internal/httpclient"
	"github.com/llmprobe/llmprobe/internal/scrub"
	"github.com/llmprobe/llmprobe/probe/harness"
	"github.com/llmprobe/llmprobe/probe/wire"
	"github.com/llmprobe/llmprobe/probe/workload"
)

// GCPercent is the garbage-collection target the llmprobe binary runs with
// unless GOGC is set. The engine's live heap is a few MiB, so at the
// default (100) the collector runs many times a second at high request
// rates, and each cycle takes a quarter of the CPUs from the arrival loop
// (schedule lag p99 at 3,000 req/s on 2 cores: ~4.7 ms at 100, ~2.2 ms at
// 400, BenchmarkHarnessCapacity). 400 costs a few MiB of heap.
const GCPercent = 400

// Options configure an Engine.
type Options struct {
	Logger   *slog.Logger
	Observer Observer
	// Replicas is the number of llmprobe processes sharing every target's
	// rate: each sends rate/Replicas (scale-out without a coordinator;
	// Prometheus sums the replicas). Zero means 1.
	Replicas int
	// UserAgent is sent with every request.
	UserAgent string
	// Tracer starts one span per request; nil disables tracing at no cost.
	Tracer     trace.Tracer
	Propagator propagation.TextMapPropagator
	// RecordContent records prompt and completion text on the spans
	// (tracing.record_content); off, no text is kept beyond what a
	// conversation's history needs.
	RecordContent bool
	// Prompts, when set, supplies the prompts of single-turn requests in
	// place of synthesised ones (bench --dataset); conversations keep
	// theirs.
	Prompts workload.PromptSource
	// Timelines, when set, gives each target the timeline it walks in
	// place of its arrival process and workload (bench --replay,
	// timeline.go); it is called once per runner started.
	Timelines func(target string) (Timeline, error)
	// Stream, when non-zero, is mixed into every runner's seed of its
	// draws (arrival gaps, class picks, request plans and each request's
	// own stream), not into the shared prefixes' text, which global.seed
	// alone sets: bench gives each stage its own, so that its stages draw
	// independently and the same seed still repeats them.
	Stream uint64
	// Discovery is what the discoverers of targets with a discovery block
	// are built with (tests: a fake Kubernetes clientset); its Logger is
	// the engine's.
	Discovery discovery.Options
}

// Engine runs one runner per configured target and reconciles them with
// each applied configuration.
type Engine struct {
	opts Options

	mu      sync.Mutex
	runners map[string]*runner
	// budgets are the targets' in-flight counters, kept across reloads:
	// a replaced runner's requests still count against max_inflight.
	budgets map[string]*atomic.Int64
	// identities are the targets' identity trackers, kept across reloads
	// like budgets (identity.go).
	identities map[string]*identityTracker
	// conns are the targets' open-connection counts, kept across reloads
	// like budgets: a replaced runner's streams still hold connections.
	conns map[string]*httpclient.Conns
	// banks are the targets' regression detectors, kept across reloads
	// (regression.go).
	banks map[string]*regressionBank
	// failLogs are the targets' failing logs, kept across reloads like
	// identities (failing.go).
	failLogs map[string]*failLog
	// pools are the targets with discovery, kept across reloads (pool.go).
	pools map[string]*pool
	// readers are the targets' server-view readers reading one URL
	// (server_metrics: url), kept across reloads that leave them
	// unchanged (serverview.go); a pool's replicas' are the pool's.
	readers map[string]*serverReader
	closed  bool

	// harness samples the process' measurement-inflation figures once a
	// second for every runner's verdict; started by the first Apply.
	harness     *harness.Monitor
	stopHarness context.CancelFunc
	harnessDone chan struct{}

	arrivalHook func(planned time.Time) // tests: see runner.arrivalHook
	// failWindow is the span a runner's failing verdict judges and
	// logEvery how often a repeated log line (a failing target, a
	// flapping identity) may be written (failing.go); zero: the defaults.
	// Tests shorten them (SetLogTiming).
	failWindow, logEvery time.Duration
}

// NewEngine returns an engine with no targets; Apply starts them.
func NewEngine(opts Options) *Engine {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Replicas < 1 {
		opts.Replicas = 1
	}
	if opts.Observer == nil {
		opts.Observer = Observers{}
	}
	if opts.UserAgent == "" {
		opts.UserAgent = "llmprobe"
	}
	return &Engine{opts: opts, runners: map[string]*runner{}, budgets: map[string]*atomic.Int64{}, identities: map[string]*identityTracker{},
		pools: map[string]*pool{}, readers: map[string]*serverReader{}}
}

// Apply reconciles the running targets with cfg: new targets start,
// removed ones stop scheduling (their in-flight requests finish), changed
// ones restart (and warm up again), unchanged ones keep running
// untouched. Apply builds every new runner before changing anything, so
// an error leaves the engine as it was.
func (e *Engine) Apply(cfg *config.Config) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return errors.New("engine is shut down")
	}
	e.startHarness(time.Duration(cfg.Global.Saturation.Window))
	next := map[string]*runner{}
	banks := map[string]*regressionBank{}
	plans := map[*regressionBank]bankPlan{}
	var fresh []*runner
	type poolPlan struct {
		old  *pool
		spec runnerSpec
		disc discovery.Discoverer // nil: the old pool's discoverer goes on
		bank *regressionBank
		sm   *config.ServerMetrics
	}
	var poolPlans []poolPlan
	for _, t := range cfg.Targets {
		spec := runnerSpec{Target: *t, Workload: *cfg.Workload(t), Global: newRunnerGlobal(cfg.Global), Timeout: t.Timeout(cfg.Global), Replicas: e.opts.Replicas}
		// The server view is the readers' business: a reload that changes
		// only server_metrics restarts no probing.
		spec.Target.ServerMetrics = nil
		// Nor does pricing, which only llmprobe plan's figures read.
		spec.Target.Pricing = nil
		bank := e.banks[t.Name]
		if bank == nil {
			bank = &regressionBank{}
		}
		banks[t.Name] = bank
		plan := bank.plan(cfg, t, &spec.Workload)
		plans[bank] = plan
		if t.Discovery != nil {
			old := e.pools[t.Name]
			d, err := e.preparePool(old, spec)
			if err != nil {
				return fmt.Errorf("target %q: %w", t.Name, err)
			}
			poolPlans = append(poolPlans, poolPlan{old: old, spec: spec, disc: d, bank: bank, sm: t.ServerMetrics})
			continue
		}
		if old := e.runners[t.Name]; old != nil && reflect.DeepEqual(old.spec, spec) {
			next[t.Name] = old
			continue
		}
		budget := e.budgets[t.Name]
		if budget == nil {
			budget = new(atomic.Int64)
		}
		identity := e.identityFor(t.Name)
		identity.bank.Store(bank)
		conns := e.conns[t.Name]
		if conns == nil {
			conns = &httpclient.Conns{}
		}
		r, err := e.newRunner(spec, budget, identity, conns, float64(spec.Replicas))
		if err != nil {
			return fmt.Errorf("target %q: %w", t.Name, err)
		}
		r.bank, r.detectors = bank, plan.classes
		r.failLog = e.failLogFor(t.Name)
		next[t.Name] = r
		fresh = append(fresh, r)
	}
	for name, old := range e.runners {
		if next[name] != old {
			e.opts.Logger.Info("stopping target", "target", name)
			go e.retire(old)
		}
	}
	budgets := make(map[string]*atomic.Int64, len(next))
	for name, r := range next {
		budgets[name] = r.inflight
	}
	e.budgets = budgets
	conns := make(map[string]*httpclient.Conns, len(next))
	for name, r := range next {
		conns[name] = r.conns
	}
	e.conns = conns
	for bank, p := range plans {
		bank.commit(p)
	}
	e.banks = banks
	readers := e.applyReaders(cfg)
	for name, r := range next {
		r.feed(readers[name])
	}
	pools := make(map[string]*pool, len(poolPlans))
	for _, pp := range poolPlans {
		pools[pp.spec.Target.Name] = e.applyPool(pp.old, pp.spec, pp.disc, pp.bank, plans[pp.bank].classes, pp.sm, cfg.Global.Diagnosis.Prometheus, readers[pp.spec.Target.Name])
	}
	for name, p := range e.pools {
		if pools[name] == nil {
			e.dropPool(p)
		}
	}
	e.pools = pools
	e.keepIdentities(next)
	failLogs := make(map[string]*failLog, len(next)+len(pools))
	for name, r := range next {
		failLogs[name] = r.failLog
	}
	for name, p := range pools {
		e.identities[name] = p.identity
		failLogs[name] = p.fails
	}
	e.failLogs = failLogs
	for _, r := range fresh {
		arrivals := r.arr().String()
		if r.timeline != nil {
			arrivals = r.timeline.String()
		}
		e.opts.Logger.Info("probing target", "target", r.name, "url", r.url, "model", r.model, "api", r.api,
			"arrivals", arrivals, "max_inflight", r.maxInflight, "warmup", r.warmupUntil.Sub(r.start))
		ctx, cancel := context.WithCancel(context.Background())
		r.stopSched = cancel
		r.run(ctx)
	}
	e.runners = next
	return nil
}

// applyReaders keeps, starts and stops the target-level server-view
// readers (server_metrics: url) for cfg, and returns them by target.
// e.mu is held.
func (e *Engine) applyReaders(cfg *config.Config) map[string]*serverReader {
	readers := map[string]*serverReader{}
	for _, t := range cfg.Targets {
		if sm := t.ServerMetrics; sm != nil && sm.URL != "" {
			readers[t.Name] = keepOrStart(e.readers[t.Name], newReaderSpec(t, sm, cfg.Global.Diagnosis.Prometheus, sm.URL, nil, t.Name))
		}
	}
	for name, sr := range e.readers {
		if readers[name] != sr {
			sr.stop()
		}
	}
	e.readers = readers
	return readers
}

// startHarness starts sampling the harness figures (once), sized for the
// judgement window.
func (e *Engine) startHarness(window time.Duration) {
	if e.harness != nil {
		e.harness.Resize(window)
		return
	}
	e.harness = harness.NewMonitor(window)
	ctx, cancel := context.WithCancel(context.Background())
	e.stopHarness, e.harnessDone = cancel, make(chan struct{})
	hb := make(chan struct{})
	go func() {
		defer close(hb)
		e.harness.Heartbeat(ctx)
	}()
	go func() {
		defer close(e.harnessDone)
		everySecond(ctx, e.harness.Sample)
		<-hb
	}()
}

// Harness returns the process' measurement-inflation figures over the
// judgement window and since start; ok is false before the first Apply.
func (e *Engine) Harness() (window harness.Stats, total harness.Totals, ok bool) {
	e.mu.Lock()
	m := e.harness
	bound := time.Duration(config.DefaultGlobal.Saturation.MaxInflation)
	for _, r := range e.runners {
		bound = r.judgement.MaxInflation()
		break
	}
	e.mu.Unlock()
	if m == nil {
		return harness.Stats{}, harness.Totals{}, false
	}
	return m.Stats(bound), m.Totals(), true
}

// retire stops a runner that a reload removed or replaced: scheduling
// stops now; in-flight requests end on their own (bounded by the request
// timeout).
func (e *Engine) retire(r *runner) {
	r.stop()
	r.reqs.Wait()
	r.cancelReqs()
	r.httpClient.CloseIdleConnections()
}

// targetArrivals is t's arrival process at its rate divided by div (the
// processes and replicas sharing it).
func targetArrivals(t *config.Target, div float64) (Arrivals, error) {
	if a := t.Arrival; a.Process == ArrivalTraceShape && a.Trace != nil {
		return NewShapeArrivals(a.Rate/div, a.Trace.Curve(), a.Trace.BinWidth(), time.Duration(a.Trace.Period))
	}
	return NewArrivals(t.Arrival.Process, t.Arrival.Rate/div, t.Arrival.Burstiness)
}

// streamMix spreads a stream number over the seed's bits; stream 0
// leaves the seed as it is.
func streamMix(stream uint64) uint64 {
	if stream == 0 {
		return 0
	}
	return workload.SplitMix64(stream)
}

// newRunner builds the runner of spec, its rate divided by div.
func (e *Engine) newRunner(spec runnerSpec, budget *atomic.Int64, identity *identityTracker, conns *httpclient.Conns, div float64) (*runner, error) {
	t := &spec.Target
	g := spec.Global
	arr, err := targetArrivals(t, div)
	if err != nil {
		return nil, err
	}
	client, httpClient, err := NewTargetClient(t, ClientOptions{
		Timeout:       spec.Timeout,
		UserAgent:     e.opts.UserAgent,
		RecordContent: e.opts.RecordContent,
		Tracer:        e.opts.Tracer,
		Propagator:    e.opts.Propagator,
		Inspect:       identity.inspect(t.Model),
		Conns:         conns,
		DialAddress:   spec.DialAddress,
	})
	if err != nil {
		return nil, err
	}
	redactor := wire.NewRedactor(t.HTTPClientConfig)
	seed := g.Seed
	if seed == 0 {
		seed = rand.Uint64()
	}
	h := fnv.New64a()
	h.Write([]byte(t.Name))
	wl := workload.NewWorkload(&spec.Workload).ForTarget(&spec.Target)
	now := time.Now()
	reqCtx, cancelReqs := context.WithCancel(context.Background())
	r := &runner{
		name:        t.Name,
		replica:     spec.Replica,
		model:       t.Model,
		api:         wire.API(t.API),
		url:         scrub.URL(t.URL),
		spec:        spec,
		client:      client,
		httpClient:  httpClient,
		builder:     workload.NewBuilder(t, h.Sum64()^g.Seed),
		prompts:     e.opts.Prompts,
		perArrival:  wl.RequestsPerArrival(),
		obs:         e.opts.Observer,
		arrivalHook: e.arrivalHook,
		logger:      e.opts.Logger,
		seed:        seed ^ h.Sum64() ^ streamMix(e.opts.Stream),
		start:       now,
		warmupUntil: now.Add(g.Warmup),
		lateAfter:   g.LateAfter,
		maxInflight: int64(t.MaxInflight),
		inflight:    budget,
		redactor:    redactor,
		identity:    identity,
		conns:       conns,
		judgement:   harness.NewJudgement(g.Saturation),
		harness:     e.harness,
		win:         harness.NewWindow(time.Duration(g.Saturation.Window), time.Duration(g.Saturation.MaxLag)),
		fails:       newFailWindow(e.failWindow),
		reqCtx:      reqCtx,
		cancelReqs:  cancelReqs,
	}
	r.arrivals.Store(&arrivalBox{arr})
	r.builder.ForReplica(spec.Replica)
	if e.opts.Timelines != nil {
		if r.timeline, err = e.opts.Timelines(t.Name); err != nil {
			cancelReqs()
			httpClient.CloseIdleConnections()
			return nil, err
		}
		wl = timelineWorkload(t)
		r.perArrival = 1
	}
	r.workload.Store(wl)
	return r, nil
}

// Status returns a snapshot of every running target, sorted by name.
func (e *Engine) Status() []TargetStatus {
	e.mu.Lock()
	rs := make([]*runner, 0, len(e.runners))
	for _, r := range e.runners {
		rs = append(rs, r)
	}
	readers := make(map[string]*serverReader, len(e.readers))
	for name, sr := range e.readers {
		readers[name] = sr
	}
	ps := make([]poolSnapshot, 0, len(e.pools))
	for _, p := range e.pools {
		ps = append(ps, p.snapshot())
	}
	e.mu.Unlock()
	now := time.Now()
	out := make([]TargetStatus, 0, len(rs)+len(ps))
	for _, r := range rs {
		st := r.status(now)
		st.Server = readers[r.name].snapshot()
		st.Diagnosis = readers[r.name].diagnosis()
		if st.Diagnosis == nil {
			st.DiagnosisWhy = noViewWhy(&st)
		}
		out = append(out, st)
	}
	for _, p := range ps {
		out = append(out, poolStatus(p, now))
	}
	slices.SortFunc(out, func(a, b TargetStatus) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Shutdown stops scheduling on every target, then waits for in-flight
// requests until ctx is done, after which they are cancelled (and end as
// timeout/cancelled). It returns ctx.Err() when the grace period ran out.
func (e *Engine) Shutdown(ctx context.Context) error {
	e.mu.Lock()
	e.closed = true
	rs := slices.Collect(maps.Values(e.runners))
	e.runners = map[string]*runner{}
	var readers []*serverReader
	for _, sr := range e.readers {
		readers = append(readers, sr)
	}
	e.readers = map[string]*serverReader{}
	for _, p := range e.pools {
		for _, sr := range p.readers {
			readers = append(readers, sr)
		}
	}
	var discs []chan struct{}
	for _, p := range e.pools {
		rs = append(rs, e.closePool(p)...)
		if p.discDone != nil {
			discs = append(discs, p.discDone)
		}
	}
	e.mu.Unlock()
	for _, d := range discs {
		<-d
	}
	for _, sr := range readers {
		sr.stop()
	}
	for _, sr := range readers {
		sr.wait()
	}

	for _, r := range rs {
		r.stop()
	}
	done := make(chan struct{})
	go func() {
		for _, r := range rs {
			r.reqs.Wait()
		}
		close(done)
	}()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = ctx.Err()
		for _, r := range rs {
			r.cancelReqs()
		}
		<-done
	}
	for _, r := range rs {
		r.cancelReqs()
		r.httpClient.CloseIdleConnections()
	}
	if e.stopHarness != nil {
		e.stopHarness()
		<-e.harnessDone
	}
	return err
}
