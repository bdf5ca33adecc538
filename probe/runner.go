package probe

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/llmprobe/llmprobe/config"
)

// runner drives one target: it walks the target's open-loop arrival
// timeline, hands each arrival to its own goroutine (never waiting for
// responses), and judges whether it delivered the load it was asked for.
type runner struct {
	name       string
	model      string
	api        API
	url        string // redacted base URL, for status
	spec       runnerSpec
	workload   *Workload
	arrivals   Arrivals
	client     *Client
	httpClient *http.Client
	synth      *PromptSynth
	obs        Observer
	logger     *slog.Logger
	seed       uint64

	start       time.Time
	warmupUntil time.Time
	lateAfter   time.Duration
	maxInflight int64
	saturation  config.Saturation

	inflight  atomic.Int64
	scheduled atomic.Uint64
	sent      atomic.Uint64
	dropped   [len(DropReasons)]atomic.Uint64
	outcomes  [len(Outcomes)]atomic.Uint64
	win       *window

	satMu     sync.Mutex
	saturated bool
	satReason string
	last      windowStats

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
	Global   config.Global
	Replicas int
}

func (r *runner) run(ctx context.Context) {
	r.loops.Add(2)
	go func() {
		defer r.loops.Done()
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
// joining a catch-up burst.
func (r *runner) arrivalLoop(ctx context.Context) {
	rng := rand.New(rand.NewPCG(r.seed, r.seed^0x9e3779b97f4a7c15))
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	next := r.start
	for {
		next = next.Add(r.arrivals.Next(rng))
		if d := time.Until(next); d > 0 {
			timer.Reset(d)
			select {
			case <-ctx.Done():
				return
			case <-timer.C:
			}
		} else if ctx.Err() != nil {
			return
		}
		class := r.workload.Pick(rng)
		r.scheduled.Add(1)
		r.win.scheduled(time.Now())
		r.obs.Scheduled(r.name, class.Name)
		now := time.Now()
		if now.Sub(next) > r.lateAfter {
			r.drop(class, DropLate, now)
			continue
		}
		if r.inflight.Load() >= r.maxInflight {
			r.drop(class, DropInflightLimit, now)
			continue
		}
		plan := class.Plan(rng)
		seed := rng.Uint64()
		r.inflight.Add(1)
		r.reqs.Add(1)
		go r.send(plan, next, seed)
	}
}

func (r *runner) drop(c *Class, reason DropReason, now time.Time) {
	for i, d := range DropReasons {
		if d == reason {
			r.dropped[i].Add(1)
		}
	}
	r.win.dropped(now)
	r.obs.Dropped(r.name, c.Name, reason)
}

// send builds and sends one request, then hands its result to the
// observers. If the harness could not get it out within lateAfter of its
// planned instant (a starved goroutine), it is dropped as late instead.
func (r *runner) send(plan Plan, planned time.Time, seed uint64) {
	defer r.reqs.Done()
	defer r.inflight.Add(-1)

	rng := rand.New(rand.NewPCG(seed, ^seed))
	req := r.buildRequest(&plan, rng)
	if now := time.Now(); now.Sub(planned) > r.lateAfter {
		r.drop(plan.Class, DropLate, now)
		return
	}
	res := &Result{
		Target:              r.name,
		Model:               r.model,
		Class:               plan.Class.Name,
		Planned:             planned,
		PlannedPromptTokens: plan.PromptTokens,
		PlannedOutputTokens: plan.OutputTokens,
		PrefixGroup:         plan.PrefixGroup,
		PrefixTokens:        plan.PrefixTokens,
		MaxTokens:           req.MaxTokens,
		Sampling:            req.Sampling,
		Warmup:              planned.Before(r.warmupUntil),
	}
	res.Dispatched = time.Now()
	res.ScheduleLag = res.Dispatched.Sub(planned)
	r.sent.Add(1)
	r.win.sent(res.Dispatched, res.ScheduleLag)
	r.obs.Sent(r.name, plan.Class.Name)

	r.client.Do(r.reqCtx, req, res)

	for i, o := range Outcomes {
		if o == res.Outcome {
			r.outcomes[i].Add(1)
		}
	}
	r.obs.Observe(res)
}

// buildRequest synthesises the prompt for a plan: the group's shared
// prefix (stable, so a prefix cache can serve it), then a random nonce so
// that nothing after the prefix is cached by accident, then random text up
// to the planned length.
func (r *runner) buildRequest(p *Plan, rng *rand.Rand) *Request {
	req := &Request{
		API:       r.api,
		Model:     r.model,
		MaxTokens: p.OutputTokens,
		Sampling:  p.Class.Sampling,
		ExtraBody: r.spec.Target.ExtraBody,
	}
	body := max(p.PromptTokens-p.PrefixTokens-NonceTokens, 0)
	buf := make([]byte, 0, 8*(body+NonceTokens+1))
	buf = append(buf, r.synth.Nonce(rng)...)
	if body > 0 {
		buf = append(buf, ' ')
		buf = r.synth.AppendText(buf, rng, body)
	}
	text := string(buf)
	var prefix string
	if p.PrefixGroup >= 0 {
		prefix = r.synth.Prefix(p.PrefixGroup, p.PrefixTokens)
	}
	switch r.api {
	case APIChat:
		if prefix != "" {
			req.Messages = []Message{{Role: "system", Content: prefix}, {Role: "user", Content: text}}
		} else {
			req.Messages = []Message{{Role: "user", Content: text}}
		}
	default:
		if prefix != "" {
			text = prefix + " " + text
		}
		req.Prompt = text
	}
	return req
}

// judgeLoop re-evaluates, once a second, whether the harness delivered the
// load it was asked for, and logs every change of verdict.
func (r *runner) judgeLoop(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			r.judge(now)
		}
	}
}

func (r *runner) judge(now time.Time) {
	st := r.win.stats(now, r.start)
	reason := ""
	switch {
	case st.lagP99 > time.Duration(r.saturation.MaxLag):
		reason = fmt.Sprintf("schedule lag p99 %v over %v (max_lag %v)", st.lagP99, st.span, time.Duration(r.saturation.MaxLag))
	case st.scheduled > 0 && float64(st.dropped)/float64(st.scheduled) > r.saturation.MaxShortfall:
		reason = fmt.Sprintf("%d of %d scheduled requests not sent over %v (max_shortfall %.1f%%)", st.dropped, st.scheduled, st.span, 100*r.saturation.MaxShortfall)
	}
	r.satMu.Lock()
	was := r.saturated
	r.saturated, r.satReason, r.last = reason != "", reason, st
	r.satMu.Unlock()
	switch {
	case reason != "" && !was:
		r.logger.Warn("harness cannot deliver the requested load; its numbers for this target are flagged", "target", r.name, "reason", reason)
	case reason == "" && was:
		r.logger.Info("harness delivers the requested load again", "target", r.name)
	}
}

// stop ends scheduling; in-flight requests go on (reqCtx) until they end.
func (r *runner) stop() {
	r.stopSched()
	r.loops.Wait()
}

// TargetStatus is a point-in-time view of one target's runner, for the
// status page and gauges.
type TargetStatus struct {
	Name     string
	Model    string
	API      API
	URL      string // with credentials and query stripped
	Workload string
	Process  string
	Classes  []ClassStatus

	RequestedRate float64 // this process' share, req/s
	AchievedRate  float64 // sent per second over the judgement window
	Scheduled     uint64
	Sent          uint64
	Dropped       map[DropReason]uint64
	Outcomes      map[Outcome]uint64
	Inflight      int64
	MaxInflight   int64
	LagP50        time.Duration // over the judgement window
	LagP99        time.Duration
	Window        time.Duration

	Saturated        bool
	SaturationReason string
	Warmup           bool
	Since            time.Time
}

// ClassStatus describes one class of a target's workload.
type ClassStatus struct {
	Name        string
	Weight      float64
	ReuseIntent float64
}

func (r *runner) status(now time.Time) TargetStatus {
	r.satMu.Lock()
	sat, reason, st := r.saturated, r.satReason, r.last
	r.satMu.Unlock()
	s := TargetStatus{
		Name:             r.name,
		Model:            r.model,
		API:              r.api,
		URL:              r.url,
		Workload:         r.spec.Target.Workload,
		Process:          r.arrivals.String(),
		RequestedRate:    r.arrivals.Rate(),
		Scheduled:        r.scheduled.Load(),
		Sent:             r.sent.Load(),
		Dropped:          map[DropReason]uint64{},
		Outcomes:         map[Outcome]uint64{},
		Inflight:         r.inflight.Load(),
		MaxInflight:      r.maxInflight,
		LagP50:           st.lagP50,
		LagP99:           st.lagP99,
		Window:           st.span,
		Saturated:        sat,
		SaturationReason: reason,
		Warmup:           now.Before(r.warmupUntil),
		Since:            r.start,
	}
	if st.span > 0 {
		s.AchievedRate = float64(st.sent) / st.span.Seconds()
	}
	for i, d := range DropReasons {
		s.Dropped[d] = r.dropped[i].Load()
	}
	for i, o := range Outcomes {
		s.Outcomes[o] = r.outcomes[i].Load()
	}
	for _, c := range r.workload.Classes {
		s.Classes = append(s.Classes, ClassStatus{Name: c.Name, Weight: c.Weight, ReuseIntent: c.ReuseIntent})
	}
	return s
}
