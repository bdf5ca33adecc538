// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package probe

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/llmprobe/llmprobe/config"
	"github.com/llmprobe/llmprobe/internal/httpclient"
	"github.com/llmprobe/llmprobe/probe/harness"
	"github.com/llmprobe/llmprobe/probe/wire"
	"github.com/llmprobe/llmprobe/probe/workload"
	"github.com/llmprobe/llmprobe/tracefile"
)

// runner drives one target: it walks the target's open-loop arrival
// timeline, hands each arrival to its own goroutine (never waiting for
// responses), and judges whether it delivered the load it was asked for.
type runner struct {
	name     string
	replica  string // the discovered replica this runner probes; "" for a target without discovery
	model    string
	api      wire.API
	url      string // redacted base URL, for status
	spec     runnerSpec
	workload atomic.Pointer[workload.Workload] // replaced by refits (workload_from)
	refits   refitter
	// arrivals is the arrival process; a discovery target whose rate is
	// shared across its replicas swaps it when their number changes
	// (pool.go).
	arrivals   atomic.Pointer[arrivalBox]
	client     *wire.Client
	httpClient *http.Client
	redactor   *wire.Redactor // the target's secrets, for what servers say in logs
	// refitRedactor holds workload_from's Prometheus secrets (set by the
	// refit loop before its first refit).
	refitRedactor *wire.Redactor
	builder       *workload.Builder     // prepares the requests: prompts, lengths, bodies
	prompts       workload.PromptSource // nil: every prompt is synthesised (Options.Prompts)
	perArrival    float64               // expected requests per arrival (multi-turn classes)
	obs           Observer
	logger        *slog.Logger
	seed          uint64

	// timeline, when set, replaces arrivals and the workload's class
	// sampler: its records at their planned offsets (timeline.go).
	timeline Timeline

	start       time.Time
	warmupUntil time.Time
	lateAfter   time.Duration
	maxInflight int64
	judgement   harness.Judgement
	harness     *harness.Monitor // the process' inflation figures; nil in some tests

	// inflight is the target's in-flight budget, shared with the runner a
	// reload replaced (whose requests still run), so that max_inflight
	// holds across a reload.
	inflight  *atomic.Int64
	scheduled atomic.Uint64
	sent      atomic.Uint64
	dropped   [len(DropReasons)]atomic.Uint64
	outcomes  [len(wire.Outcomes)]atomic.Uint64
	win       *harness.Window
	// fails is what the failing verdict judges, failing its last verdict
	// (nil: not failing), failLog the target's failing log (failing.go).
	fails   *failWindow
	failing atomic.Pointer[FailingStatus]
	failLog *failLog

	historyWarned atomic.Bool // a conversation passed MaxHistoryBytes (logged once)

	identity *identityTracker // the target's, kept across reloads (identity.go)

	// conns counts the target's open connections, shared with the runner
	// a reload replaced (its streams still hold theirs); proto is the
	// protocol of the last response (nil before the first).
	conns *httpclient.Conns
	proto atomic.Pointer[string]

	// evMu and folded: a retired replica folded early (pool.go) has its
	// series removed, and its later events carry no replica label, so
	// that they cannot bring the series back; fold takes evMu to wait
	// for the events being observed (beginEvent, endEvent).
	evMu   sync.RWMutex
	folded bool

	// arrivalHook, when set (tests), runs when an arrival's planned instant
	// has come, before it is admitted: a stall of the arrival loop.
	arrivalHook func(planned time.Time)

	satMu   sync.Mutex
	verdict harness.Verdict
	last    harness.WindowStats
	// saturated mirrors verdict.Saturated() for the request path: the
	// regression detectors leave out what the harness cannot vouch for.
	saturated atomic.Bool

	// srv is the server view's window of probe TTFTs this runner counts
	// into (serverview.go); nil without server_metrics.
	srv atomic.Pointer[probeAcc]

	// bank holds the target's regression detectors (kept across reloads);
	// detectors are this runner's, by class name.
	bank      *regressionBank
	detectors map[string]*classDetectors

	stopSched  context.CancelFunc // stops the arrival loop and the judge
	reqCtx     context.Context    // in-flight requests; cancelled after the grace period
	cancelReqs context.CancelFunc
	reqs       sync.WaitGroup // in-flight requests
	loops      sync.WaitGroup // arrival loop and judge
}

// runnerSpec is everything a runner's behaviour depends on; a reload that
// leaves it unchanged leaves the runner running (no new warm-up).
type runnerSpec struct {
	Target   config.Target
	Workload config.Workload
	Global   runnerGlobal
	Timeout  time.Duration // the target's effective request timeout
	Replicas int
	// Replica is the discovered replica probed (pool.go): its name and
	// the address every connection goes to; zero for a target without
	// discovery.
	Replica     string
	DialAddress string
}

// arrivalBox holds a runner's current arrival process.
type arrivalBox struct{ Arrivals }

// arr is the runner's current arrival process.
func (r *runner) arr() Arrivals { return r.arrivals.Load().Arrivals }

// runnerGlobal is the part of the global section a runner uses (changing
// recent_requests or shutdown_grace_period restarts no target).
type runnerGlobal struct {
	Warmup     time.Duration
	LateAfter  time.Duration
	Saturation config.Saturation
	Seed       uint64
	// RegressionEvery is how often the regression detectors decide.
	RegressionEvery time.Duration
}

func newRunnerGlobal(g config.Global) runnerGlobal {
	return runnerGlobal{
		Warmup:     time.Duration(g.Warmup),
		LateAfter:  time.Duration(g.LateAfter),
		Saturation: g.Saturation,
		Seed:       g.Seed,

		RegressionEvery: time.Duration(g.RegressionInterval),
	}
}

func (r *runner) run(ctx context.Context) {
	calibrate := r.spec.Target.Tokenize == config.TokenizeAuto && r.builder.Format() == workload.PromptText
	if calibrate && r.timeline == nil {
		r.loops.Add(1)
		go func() {
			defer r.loops.Done()
			r.calibrate(ctx)
		}()
	}
	if wf := r.spec.Target.WorkloadFrom; wf != nil && wf.Prometheus != nil && r.timeline == nil {
		r.refits.status.Source = redactedSource(wf.Prometheus.URL, wf.Prometheus.Selector)
		r.loops.Add(1)
		go func() {
			defer r.loops.Done()
			r.refitLoop(ctx)
		}()
	}
	if interval := r.spec.Target.VersionPollInterval(); interval > 0 {
		r.loops.Add(1)
		go func() {
			defer r.loops.Done()
			r.versionLoop(ctx, interval)
		}()
	}
	r.loops.Add(2)
	go func() {
		defer r.loops.Done()
		if calibrate && r.timeline != nil {
			// A timeline's requests are built with the server's own
			// token counts from the first: it starts once /tokenize
			// answered (or failed).
			r.calibrate(ctx)
		}
		r.arrivalLoop(ctx)
	}()
	go func() {
		defer r.loops.Done()
		r.judgeLoop(ctx)
	}()
}

// arrivalLoop walks the absolute timeline: planned instants are the sum
// of inter-arrival gaps from the start, never "now + gap", so a slow
// iteration cannot stretch the process. An arrival that cannot be sent
// within lateAfter of its planned instant is dropped as late rather than
// joining a catch-up burst. An arrival of a multi-turn class starts a
// conversation, whose later turns follow their own answers.
func (r *runner) arrivalLoop(ctx context.Context) {
	rng := rand.New(rand.NewPCG(r.seed, r.seed^0x9e3779b97f4a7c15))
	sl := harness.NewSleeper(ctx)
	defer sl.Close()
	next := r.start
	origin := r.start // of a timeline's offsets: when the loop starts walking it
	if r.timeline != nil {
		origin = time.Now()
	}
	for {
		var rec tracefile.Record
		switch {
		case r.timeline != nil:
			at, rc, err := r.timeline.Next()
			if err != nil {
				return // the end of the timeline (its owner reports an error)
			}
			next, rec = origin.Add(at), rc
		default:
			a := r.arr()
			if timed, ok := a.(TimedArrivals); ok {
				next = next.Add(timed.NextAt(rng, next))
			} else {
				next = next.Add(a.Next(rng))
			}
		}
		if !sl.Until(ctx, next) {
			return
		}
		if r.arrivalHook != nil {
			r.arrivalHook(next)
		}
		class := r.workload.Load().Pick(rng)
		if !r.admit(class, next) {
			continue
		}
		if r.timeline != nil {
			seed := rng.Uint64()
			r.reqs.Add(1)
			go r.replayed(class, rec, next, seed)
			continue
		}
		plan := class.Plan(rng)
		seed := rng.Uint64()
		r.reqs.Add(1)
		switch {
		case class.Trace != nil && class.Trace.Sessions:
			go r.replaySession(ctx, plan, next, seed)
		case class.Turns != nil:
			go r.converse(ctx, plan, next, seed)
		default:
			go r.single(plan, next, seed)
		}
	}
}

// admit counts an arrival planned at planned and decides whether it may be
// sent: not if it is already late, nor if max_inflight requests are
// running (then it is dropped, never delayed). An admitted arrival holds an
// in-flight slot that exchange releases.
func (r *runner) admit(c *workload.Class, planned time.Time) bool {
	r.schedule(c)
	now := time.Now()
	if now.Sub(planned) > r.lateAfter {
		r.drop(c, DropLate, now)
		return false
	}
	for {
		n := r.inflight.Load()
		if n >= r.maxInflight {
			r.drop(c, DropInflightLimit, now)
			return false
		}
		if r.inflight.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// beginEvent starts telling the observers of an event: it returns the
// replica label the event carries, r.replica, or "" once the replica is
// folded. endEvent ends it, once the observers returned.
func (r *runner) beginEvent() string {
	if r.replica == "" {
		return ""
	}
	r.evMu.RLock()
	if r.folded {
		return ""
	}
	return r.replica
}

func (r *runner) endEvent() {
	if r.replica != "" {
		r.evMu.RUnlock()
	}
}

// fold makes the runner's later events carry no replica label, once the
// events being told have been: what it does from now on counts in the
// target-level families only.
func (r *runner) fold() {
	r.evMu.Lock()
	r.folded = true
	r.evMu.Unlock()
}

// schedule counts an arrival of class c whose planned instant has come.
func (r *runner) schedule(c *workload.Class) {
	r.scheduled.Add(1)
	r.win.Scheduled(time.Now())
	r.obs.Scheduled(r.name, r.beginEvent(), c.Name)
	r.endEvent()
}

func (r *runner) drop(c *workload.Class, reason DropReason, now time.Time) {
	for i, d := range DropReasons {
		if d == reason {
			r.dropped[i].Add(1)
		}
	}
	r.win.Dropped(now, reason.cause())
	r.obs.Dropped(r.name, r.beginEvent(), c.Name, reason)
	r.endEvent()
}

// cause is what a drop of this reason says to the judgement.
func (d DropReason) cause() harness.DropCause {
	switch d {
	case DropLate:
		return harness.DropHarness
	case DropInflightLimit:
		return harness.DropTarget
	}
	return harness.DropOther
}

// single sends the request of a single-turn arrival.
func (r *runner) single(plan workload.Plan, planned time.Time, seed uint64) {
	defer r.reqs.Done()
	if len(plan.Records) > 0 {
		// from_trace: the record's lengths and prefix blocks, not a dataset's.
		rng := rand.New(rand.NewPCG(seed, ^seed))
		r.exchange(r.builder.FromRecord(plan.Class, plan.Records[0], plan.Class.Trace.BlockSize, rng), planned)
		return
	}
	if r.prompts != nil {
		if d, ok := r.prompts.Next(r.name); ok {
			r.exchange(r.builder.FromDataset(&plan, d), planned)
			return
		}
	}
	rng := rand.New(rand.NewPCG(seed, ^seed))
	r.exchange(r.builder.FirstTurn(&plan, rng, nil), planned)
}

// exchange sends one prepared request and hands its result to the
// observers; it releases the in-flight slot admit took. If the harness
// could not get the request out within lateAfter of its planned instant (a
// starved goroutine), it is dropped as late instead and exchange returns
// nil; so is a request whose answer the answer budget cannot take
// (memory_budget, budget.go).
func (r *runner) exchange(p *workload.Prepared, planned time.Time) *wire.Result {
	defer r.inflight.Add(-1)
	res := p.Res
	res.Planned = planned
	res.Warmup = planned.Before(r.warmupUntil)
	if now := time.Now(); now.Sub(planned) > r.lateAfter {
		r.drop(p.Class, DropLate, now)
		return nil
	}
	if n := wire.AnswerReservation(p.Req); n > 0 {
		if !answerBudget.reserve(n) {
			r.drop(p.Class, DropMemoryBudget, time.Now())
			return nil
		}
		defer answerBudget.release(n)
	}
	res.Dispatched = time.Now()
	res.ScheduleLag = res.Dispatched.Sub(planned)
	r.sent.Add(1)
	r.win.Sent(res.Dispatched, res.ScheduleLag)
	r.obs.Sent(r.name, r.beginEvent(), p.Class.Name)
	r.endEvent()

	r.client.Do(r.reqCtx, p.Req, res)

	if i := outcomeIndex(res.Outcome); i >= 0 {
		r.outcomes[i].Add(1)
		r.fails.observe(i, res, time.Now())
	}
	if res.Proto != "" {
		if cur := r.proto.Load(); cur == nil || *cur != res.Proto {
			r.proto.Store(&res.Proto)
		}
	}
	p.Learn(res)
	res.Replica = r.beginEvent()
	r.obs.Observe(res)
	r.endEvent()
	r.observeServerView(res)
	r.bank.observe(r.detectors[p.Class.Name], res, r.saturated.Load())
	return res
}

// calibrate asks the target's /tokenize how it counts prompts, so planned
// lengths hold from the first request; without it the length model
// learns from the usage responses report.
func (r *runner) calibrate(ctx context.Context) {
	c, err := r.builder.Calibrate(ctx, r.httpClient, r.spec.Target.URL)
	if err != nil {
		r.logger.Info("no usable /tokenize endpoint; prompt lengths are calibrated from reported usage", "target", r.name,
			"reason", r.redactor.Scrub(err.Error()))
		return
	}
	r.logger.Info("prompt lengths calibrated with /tokenize", "target", r.name,
		"tokens_per_word", c.TokensPerWord, "prompt_overhead_tokens", c.PromptOverhead, "per_message_tokens", c.PerMessage)
}

// judgeLoop re-evaluates, once a second, whether the harness delivered the
// load it was asked for, and logs every change of verdict; and whether the
// target's requests fail (failing.go), which the target's failing log
// hears.
func (r *runner) judgeLoop(ctx context.Context) {
	everySecond(ctx, r.judge)
}

// everySecond calls f with the time once a second until ctx is done.
func everySecond(ctx context.Context, f func(time.Time)) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			f(now)
		}
	}
}

func (r *runner) judge(now time.Time) {
	st := r.win.Stats(now, r.start)
	var h harness.Stats
	if r.harness != nil {
		h = r.harness.Stats(r.judgement.MaxInflation())
	}
	v := r.judgement.Judge(st, h)
	r.satMu.Lock()
	was := r.verdict
	r.verdict, r.last = v, st
	r.satMu.Unlock()
	r.saturated.Store(v.Saturated())
	r.diagnosisState(now)
	r.bank.evaluate(now, r.spec.Global.RegressionEvery, r.name, r.logger)
	fv, judged := r.fails.judge(now)
	r.failing.Store(fv)
	if judged {
		r.failLog.report(r, fv, now)
	}
	r.identity.flushLog(now)
	switch {
	case v.Saturated() && !was.Saturated():
		r.logger.Warn("harness cannot deliver or time the requested load; its numbers for this target are flagged", "target", r.name, "reasons", v.Reasons, "reason", v.Detail)
	case !v.Saturated() && was.Saturated():
		r.logger.Info("harness delivers and times the requested load again", "target", r.name)
	}
	switch {
	case v.Overloaded && !was.Overloaded:
		r.logger.Warn("target does not absorb the offered load: requests over max_inflight are dropped", "target", r.name, "reason", v.Overload)
	case !v.Overloaded && was.Overloaded:
		r.logger.Info("target absorbs the offered load again", "target", r.name)
	}
}

// stop ends scheduling; in-flight requests go on (reqCtx) until they end.
func (r *runner) stop() {
	r.stopSched()
	r.loops.Wait()
	r.failLog.forget(r)
}

// TargetStatus is a point-in-time view of one target's runner, for the
// status page and gauges.
type TargetStatus struct {
	Name     string
	Model    string
	API      wire.API
	URL      string // with credentials and query stripped
	Workload string
	Process  string
	Classes  []ClassStatus

	RequestedRate float64 // this process' share, req/s (arrivals × expected turns)
	ArrivalRate   float64 // arrivals (new conversations or single requests) per second
	AchievedRate  float64 // sent per second over the judgement window
	Scheduled     uint64
	Sent          uint64
	Dropped       map[DropReason]uint64
	Outcomes      map[wire.Outcome]uint64
	Inflight      int64
	MaxInflight   int64
	LagP50        time.Duration // over the judgement window
	LagP99        time.Duration
	Window        time.Duration

	// Saturated: the harness cannot deliver or time the load; its numbers
	// are suspect (SaturationReasons say why, SaturationReason in words).
	Saturated         bool
	SaturationReason  string
	SaturationReasons []harness.SaturationReason
	// Overloaded: the target does not absorb the load (drops over
	// max_inflight); the numbers are right, the load is not delivered.
	Overloaded     bool
	OverloadReason string
	LateSends      uint64 // sends later than max_lag, over the window
	// Refit is set for targets that follow production (workload_from).
	Refit *RefitStatus
	// Identity is what the target says it is, and its changes
	// (identity.go).
	Identity IdentityStatus
	Warmup   bool
	Since    time.Time
	// Regressions are the latest decisions of the target's regression
	// detectors, by class then metric (none for classes with detection
	// off).
	Regressions []RegressionStatus
	// Connections is the number of connections open to the target (its
	// HTTP client's pool, in use or idle).
	Connections int64
	// Protocol is the protocol of the target's last response: "HTTP/1.1",
	// "HTTP/2.0", "HTTP/1.0" or "other"; empty before the first.
	Protocol string

	// Discovery is set for a target with a discovery block; Replicas then
	// lists its replicas (live, then retired within the grace period) by
	// name, and the fields above are their sums (rates, counts, in-flight,
	// connections), their worst (lags), or any of them (saturated,
	// overloaded, warm-up: the reasons name the replicas).
	Discovery *DiscoveryStatus
	Replicas  []ReplicaStatus

	// Failing is set while half or more of the target's recent requests
	// fail (failing.go); for a discovery target, while any replica's do.
	Failing *FailingStatus

	// Server is the target's server view (server_metrics: url; nil
	// without); a discovery target reading path has one per replica
	// (ReplicaStatus.Server).
	Server *ServerStatus
	// Diagnosis is the target's latest verdict (diagnose.go): its
	// reader's judge's, or on a discovery target reading each replica's
	// path the one drawn from its replicas' (ReplicaStatus.Diagnosis);
	// nil before the first, or without server_metrics. DiagnosisWhy then
	// says why ("" without server_metrics).
	Diagnosis    *Diagnosis
	DiagnosisWhy string
}

// ClassStatus describes one class of a target's workload.
type ClassStatus struct {
	Name        string
	Weight      float64
	ReuseIntent float64
}

func (r *runner) status(now time.Time) TargetStatus {
	r.satMu.Lock()
	v, st := r.verdict, r.last
	r.satMu.Unlock()
	var sched interface {
		Rate() float64
		String() string
	} = r.arr()
	if r.timeline != nil {
		sched = r.timeline
	}
	s := TargetStatus{
		Name:              r.name,
		Model:             r.model,
		API:               r.api,
		URL:               r.url,
		Workload:          r.spec.Target.Workload,
		Process:           sched.String(),
		RequestedRate:     sched.Rate() * r.perArrival,
		ArrivalRate:       sched.Rate(),
		Scheduled:         r.scheduled.Load(),
		Sent:              r.sent.Load(),
		Dropped:           map[DropReason]uint64{},
		Outcomes:          map[wire.Outcome]uint64{},
		Inflight:          r.inflight.Load(),
		MaxInflight:       r.maxInflight,
		LagP50:            st.LagP50,
		LagP99:            st.LagP99,
		Window:            st.Span,
		Saturated:         v.Saturated(),
		SaturationReason:  v.Detail,
		SaturationReasons: v.Reasons,
		Overloaded:        v.Overloaded,
		OverloadReason:    v.Overload,
		LateSends:         st.Late,
		Warmup:            now.Before(r.warmupUntil),
		Since:             r.start,
		Regressions:       r.bank.status(),
		Connections:       r.conns.Open(),
		Failing:           r.failing.Load(),
	}
	if p := r.proto.Load(); p != nil {
		s.Protocol = *p
	}
	if timed, ok := r.arr().(TimedArrivals); ok {
		// The curve's value now: what achieved compares to.
		s.ArrivalRate = timed.RateAt(now)
		s.RequestedRate = s.ArrivalRate * r.perArrival
	}
	if st.Span > 0 {
		s.AchievedRate = float64(st.Sent) / st.Span.Seconds()
	}
	for i, d := range DropReasons {
		s.Dropped[d] = r.dropped[i].Load()
	}
	if r.spec.Target.WorkloadFrom != nil && r.timeline == nil {
		s.Refit = r.refits.snapshot()
	}
	s.Identity = r.identity.status()
	for i, o := range wire.Outcomes {
		s.Outcomes[o] = r.outcomes[i].Load()
	}
	for _, c := range r.workload.Load().Classes {
		s.Classes = append(s.Classes, ClassStatus{Name: c.Name, Weight: c.Weight, ReuseIntent: c.ReuseIntent})
	}
	return s
}
