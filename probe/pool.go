// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package probe

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/llmprobe/llmprobe/config"
	"github.com/llmprobe/llmprobe/discovery"
	"github.com/llmprobe/llmprobe/internal/httpclient"
	"github.com/llmprobe/llmprobe/internal/scrub"
	"github.com/llmprobe/llmprobe/probe/wire"
)

// DefaultGracePeriod is how long a vanished replica's series stay when
// discovery.grace_period is unset.
const DefaultGracePeriod = 5 * time.Minute

// pool is a target with a discovery block: one runner per replica its
// discovery lists, at most max_replicas (docs/design.md "Replicas"). It
// outlives reloads, as a target's in-flight budget does; every field
// below name is guarded by Engine.mu.
type pool struct {
	name string

	template runnerSpec // the target's spec; each replica's is derived from it (replicaSpec)
	disc     config.Discovery
	bank     *regressionBank
	classes  map[string]*classDetectors
	identity *identityTracker
	fails    *failLog // the target's, its replicas' verdicts (failing.go)

	gen      uint64             // the running discoverer's; updates of an older one are ignored
	stopDisc context.CancelFunc // stops the discoverer
	discDone chan struct{}      // closed when its loop returned

	known    []discovery.Replica // the last set a refresh listed
	live     map[string]*liveReplica
	retired  map[string]*retiredReplica
	budgets  map[string]*atomic.Int64 // by replica, kept while it is live or retired
	conns    map[string]*httpclient.Conns
	div      float64 // the divisor of the target's rate each live runner runs at
	status   DiscoveryStatus
	since    time.Time
	lastErr  string // the last failure logged, so that a failing discovery logs once per message
	lastOver int    // the over-limit count last logged
	// serverMetrics is the target's server_metrics (nil: none), gpu
	// global.diagnosis.prometheus; targetReader reads its url (one origin
	// for every replica), readers each replica's path (serverview.go).
	serverMetrics *config.ServerMetrics
	gpu           *config.DiagnosisPrometheus
	targetReader  *serverReader
	readers       map[string]*serverReader
	// foldLogged is when folding was last logged, and foldLoggedAt the
	// Folded count then: folds are logged at most once a minute.
	foldLogged   time.Time
	foldLoggedAt uint64
}

type liveReplica struct {
	rep   discovery.Replica
	r     *runner
	since time.Time
}

// retiredReplica is a replica discovery no longer lists: its runner no
// longer schedules, its requests end and count, and its series go when
// the grace period is over.
type retiredReplica struct {
	rep   discovery.Replica
	r     *runner
	since time.Time
	gone  time.Time
	timer *time.Timer
}

// replicaSpec is the spec of the runner probing rep: the target's, with
// its connections pinned to rep's address (the URL's host stays the Host
// header and TLS server name), or, without a URL, the replica's address
// as the URL's host.
func (p *pool) replicaSpec(rep discovery.Replica) runnerSpec {
	s := p.template
	// How replicas are found, bounded and share the rate is the pool's
	// business: a reload that changes only that restarts no replica.
	s.Target.Discovery, s.Target.RatePer, s.Target.MaxReplicas = nil, "", 0
	s.Replica = rep.Name
	if s.Target.URL == "" {
		s.Target.URL = "http://" + rep.Address + "/v1"
	} else {
		s.DialAddress = rep.Address
	}
	return s
}

// ratePerReplica says whether each replica is sent the target's whole
// rate (rate_per: replica) rather than a share of it.
func (p *pool) ratePerReplica() bool { return p.template.Target.RatePer == config.RatePerReplica }

func (p *pool) maxReplicas() int {
	return cmp.Or(p.template.Target.MaxReplicas, config.DefaultMaxReplicas)
}

func (p *pool) grace() time.Duration {
	return cmp.Or(time.Duration(p.disc.GracePeriod), DefaultGracePeriod)
}

// preparePool checks what Apply would build for the discovery target t:
// its discoverer when the discovery block is new or changed, and the
// arrival process and HTTP client of its replicas, so that a bad target
// fails the whole Apply before anything changed. e.mu is held.
func (e *Engine) preparePool(old *pool, spec runnerSpec) (discovery.Discoverer, error) {
	t := &spec.Target
	if e.opts.Timelines != nil {
		return nil, errors.New("discovery: a target with discovery cannot replay a timeline")
	}
	// What can fail in newRunner for every replica alike: the arrival
	// process and the HTTP client (a replica's address changes neither).
	check := (&pool{template: spec}).replicaSpec(discovery.Replica{Name: "check", Address: "127.0.0.1:1"})
	if _, err := targetArrivals(&check.Target, 1); err != nil {
		return nil, err
	}
	_, hc, err := NewTargetClient(&check.Target, ClientOptions{Timeout: check.Timeout, UserAgent: e.opts.UserAgent, DialAddress: check.DialAddress})
	if err != nil {
		return nil, err
	}
	hc.CloseIdleConnections()
	if old != nil && reflect.DeepEqual(old.disc, *t.Discovery) {
		return nil, nil
	}
	opts := e.opts.Discovery
	opts.Logger = e.opts.Logger.With("target", t.Name)
	d, err := discovery.New(t.Discovery, opts)
	if err != nil {
		return nil, fmt.Errorf("discovery: %w", err)
	}
	return d, nil
}

// applyPool commits a prepared discovery target: a new pool, or the old
// one with its new spec (replicas whose spec changed restart; the set
// last discovered is reconciled at once) and, when d is set, a new
// discoverer in place of the old. e.mu is held.
func (e *Engine) applyPool(p *pool, spec runnerSpec, d discovery.Discoverer, bank *regressionBank, classes map[string]*classDetectors,
	sm *config.ServerMetrics, gpu *config.DiagnosisPrometheus, target *serverReader) *pool {
	now := time.Now()
	if p == nil {
		p = &pool{name: spec.Target.Name, live: map[string]*liveReplica{}, retired: map[string]*retiredReplica{},
			budgets: map[string]*atomic.Int64{}, conns: map[string]*httpclient.Conns{}, since: now, readers: map[string]*serverReader{}}
		p.status.Mechanism = spec.Target.Discovery.Mechanism()
	}
	p.serverMetrics, p.gpu, p.targetReader = sm, gpu, target
	p.template, p.bank, p.classes = spec, bank, classes
	p.identity = e.identityFor(spec.Target.Name)
	p.identity.bank.Store(bank)
	p.fails = e.failLogFor(spec.Target.Name)
	p.disc = *spec.Target.Discovery
	p.status.MaxReplicas = p.maxReplicas()
	for _, lr := range p.live {
		lr.r.bank, lr.r.detectors = bank, classes
	}
	if d != nil {
		if p.stopDisc != nil {
			p.stopDisc()
		}
		p.gen++
		p.status.Mechanism = d.Mechanism()
		ctx, cancel := context.WithCancel(context.Background())
		p.stopDisc, p.discDone = cancel, make(chan struct{})
		go e.discover(ctx, p, p.gen, d, p.discDone)
		e.opts.Logger.Info("discovering replicas", "target", p.name, "mechanism", d.Mechanism(), "max_replicas", p.maxReplicas(),
			"rate_per", cmp.Or(spec.Target.RatePer, config.RatePerTarget))
	}
	e.reconcile(p, now)
	return p
}

// discover feeds the updates of d to p until ctx is done.
func (e *Engine) discover(ctx context.Context, p *pool, gen uint64, d discovery.Discoverer, done chan struct{}) {
	defer close(done)
	ch := make(chan discovery.Update)
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		d.Run(ctx, ch)
	}()
	for {
		select {
		case u := <-ch:
			e.mu.Lock()
			if p.gen == gen && !e.closed {
				e.update(p, u, time.Now())
			}
			e.mu.Unlock()
		case <-ctx.Done():
			<-ran
			return
		}
	}
}

// update takes one refresh's outcome: a failure keeps the last set; a
// success reconciles the replicas with the set listed. e.mu is held.
func (e *Engine) update(p *pool, u discovery.Update, now time.Time) {
	p.status.Refreshes++
	if u.Err != nil {
		p.status.Failures++
		msg := p.template.redactor().Scrub(u.Err.Error())
		p.status.LastError = msg
		if msg != p.lastErr {
			e.opts.Logger.Warn("replica discovery failed; the last known replicas are kept", "target", p.name,
				"mechanism", p.status.Mechanism, "replicas", len(p.live), "err", msg)
			p.lastErr = msg
		}
		return
	}
	if p.lastErr != "" {
		e.opts.Logger.Info("replica discovery works again", "target", p.name, "mechanism", p.status.Mechanism)
	}
	p.status.LastSuccess, p.status.LastError, p.lastErr = now, "", ""
	p.known = u.Replicas
	e.reconcile(p, now)
}

// choose returns the replicas to probe out of those listed: the ones
// already probed first (so that a long list does not swap them), then
// the others in the list's order, at most max; and how many are left out.
func choose(listed []discovery.Replica, live map[string]*liveReplica, max int) ([]discovery.Replica, int) {
	seen := make(map[string]bool, len(listed))
	var keep, rest []discovery.Replica
	for _, rep := range listed {
		if rep.Name == "" || seen[rep.Name] {
			continue // discovery promises unique names; a duplicate is not probed twice
		}
		seen[rep.Name] = true
		if live[rep.Name] != nil {
			keep = append(keep, rep)
		} else {
			rest = append(rest, rep)
		}
	}
	all := append(keep, rest...)
	if len(all) <= max {
		return all, 0
	}
	return all[:max], len(all) - max
}

// reconcile makes p's runners those of the replicas to probe: new ones
// start (and warm up), vanished ones retire, changed ones restart, and
// with a shared rate every runner's arrival process is rescaled to the
// new number of replicas. e.mu is held.
func (e *Engine) reconcile(p *pool, now time.Time) {
	want, over := choose(p.known, p.live, p.maxReplicas())
	if over != p.lastOver {
		if over > 0 {
			e.opts.Logger.Error("discovery lists more replicas than max_replicas; the rest are not probed", "target", p.name,
				"listed", len(want)+over, "max_replicas", p.maxReplicas(), "left_out", over)
		}
		p.lastOver = over
	}
	wanted := make(map[string]bool, len(want))
	for _, rep := range want {
		wanted[rep.Name] = true
	}
	for name, lr := range p.live {
		if !wanted[name] {
			delete(p.live, name)
			e.retireReplica(p, lr, now)
		}
	}
	// Before a new replica can have series: those that come back below
	// leave the retired set, the rest of it is bounded.
	e.foldRetired(p, wanted, now)
	div := float64(p.template.Replicas)
	if !p.ratePerReplica() {
		div *= float64(max(len(want), 1))
	}
	for _, rep := range want {
		spec := p.replicaSpec(rep)
		lr := p.live[rep.Name]
		if lr != nil && reflect.DeepEqual(lr.r.spec, spec) {
			lr.rep = rep // labels may change without a restart
			continue
		}
		budget := p.budgets[rep.Name]
		if budget == nil {
			budget = new(atomic.Int64)
			p.budgets[rep.Name] = budget
		}
		conns := p.conns[rep.Name]
		if conns == nil {
			conns = &httpclient.Conns{}
			p.conns[rep.Name] = conns
		}
		r, err := e.newRunner(spec, budget, p.identity, conns, div)
		if err != nil {
			// preparePool built this spec with another address; what
			// differs is the address discovery gave.
			e.opts.Logger.Error("replica cannot be probed", "target", p.name, "replica", rep.Name, "address", rep.Address, "err", err)
			continue
		}
		r.bank, r.detectors, r.failLog = p.bank, p.classes, p.fails
		since := now
		if lr != nil {
			since = lr.since
			e.opts.Logger.Info("restarting replica", "target", p.name, "replica", rep.Name, "address", rep.Address)
			go e.retire(lr.r)
		} else {
			p.status.Added++
			if rr := p.retired[rep.Name]; rr != nil {
				// Back within the grace period: its series stay.
				rr.timer.Stop()
				delete(p.retired, rep.Name)
				since = rr.since
			}
			e.opts.Logger.Info("probing replica", "target", p.name, "replica", rep.Name, "address", rep.Address,
				"arrivals", r.arr().String())
		}
		p.live[rep.Name] = &liveReplica{rep: rep, r: r, since: since}
		ctx, cancel := context.WithCancel(context.Background())
		r.stopSched = cancel
		r.run(ctx)
	}
	if div != p.div {
		for _, lr := range p.live {
			if lr.r.arr().Rate() != p.template.Target.Arrival.Rate/div {
				if a, err := targetArrivals(&lr.r.spec.Target, div); err == nil {
					lr.r.arrivals.Store(&arrivalBox{a})
				}
			}
		}
		p.div = div
	}
	p.status.Replicas, p.status.Discovered, p.status.OverLimit = len(p.live), len(want)+over, over
	p.identity.pollers.Store(int32(len(p.live)))
	p.syncReaders()
}

// retireReplica stops probing a replica discovery no longer lists; its
// series go after the grace period (ReplicaObserver). e.mu is held.
func (e *Engine) retireReplica(p *pool, lr *liveReplica, now time.Time) {
	p.status.Removed++
	e.opts.Logger.Info("replica gone; retiring it", "target", p.name, "replica", lr.rep.Name, "address", lr.rep.Address, "grace_period", p.grace())
	go e.retire(lr.r)
	rr := &retiredReplica{rep: lr.rep, r: lr.r, since: lr.since, gone: now}
	p.retired[lr.rep.Name] = rr // none before: coming back removed it
	rr.timer = time.AfterFunc(p.grace(), func() { e.forget(p, rr) })
}

// foldRetired bounds the retired replicas of p, but those in back (which
// come back now), to max_replicas, so that the replica label has at most
// 2 × max_replicas values (live and retired) however fast discovery
// churns: past it, the replicas retired longest are folded. A folded
// replica leaves the status at once, its series are removed
// (ReplicaObserver) before its grace period is over, and its requests
// still in flight end and count in the target-level families only. e.mu
// is held.
func (e *Engine) foldRetired(p *pool, back map[string]bool, now time.Time) {
	var staying []*retiredReplica
	for name, rr := range p.retired {
		if !back[name] {
			staying = append(staying, rr)
		}
	}
	over := len(staying) - p.maxReplicas()
	if over <= 0 {
		return
	}
	slices.SortFunc(staying, func(a, b *retiredReplica) int {
		return cmp.Or(a.gone.Compare(b.gone), strings.Compare(a.rep.Name, b.rep.Name))
	})
	for _, rr := range staying[:over] {
		rr.timer.Stop()
		p.dropRetired(rr.rep.Name)
		// No event of it told after this brings its series back.
		rr.r.fold()
		e.replicaRemoved(p.name, rr.rep.Name)
		p.status.Folded++
	}
	if now.Sub(p.foldLogged) >= time.Minute {
		e.opts.Logger.Warn("more replicas retired than max_replicas within the grace period; the series of those retired longest are removed early",
			"target", p.name, "max_replicas", p.maxReplicas(), "folded", p.status.Folded-p.foldLoggedAt, "grace_period", p.grace())
		p.foldLogged, p.foldLoggedAt = now, p.status.Folded
	}
}

// forget removes a retired replica's series once its grace period is over
// and its last requests ended.
func (e *Engine) forget(p *pool, rr *retiredReplica) {
	rr.r.reqs.Wait()
	e.mu.Lock()
	if p.retired[rr.rep.Name] != rr {
		e.mu.Unlock()
		return // back since, or its target went
	}
	p.dropRetired(rr.rep.Name)
	e.mu.Unlock()
	e.replicaRemoved(p.name, rr.rep.Name)
}

// dropRetired forgets a retired replica, and its budget and connection
// count unless it is live again (called with the engine's lock held).
func (p *pool) dropRetired(name string) {
	delete(p.retired, name)
	if p.live[name] == nil {
		delete(p.budgets, name)
		delete(p.conns, name)
		p.readers[name].stop()
		delete(p.readers, name)
	}
}

func (e *Engine) replicaRemoved(target, replica string) {
	if ro, ok := e.opts.Observer.(ReplicaObserver); ok {
		ro.ReplicaRemoved(target, replica)
	}
}

// closePool stops a pool whose target a reload removed (or whose
// discovery it removed) or that the engine shuts down: its discoverer
// stops, its runners stop scheduling, and it returns them (live and
// retired) for the caller to wait for. e.mu is held.
func (e *Engine) closePool(p *pool) []*runner {
	if p.stopDisc != nil {
		p.stopDisc()
	}
	p.gen++
	for _, sr := range p.readers {
		sr.stop()
	}
	var rs []*runner
	for _, lr := range p.live {
		rs = append(rs, lr.r)
	}
	for _, rr := range p.retired {
		rr.timer.Stop()
		rs = append(rs, rr.r)
	}
	return rs
}

// dropPool retires every runner of a pool whose target is gone and
// removes its replicas' series once their requests ended. e.mu is held.
func (e *Engine) dropPool(p *pool) {
	e.opts.Logger.Info("stopping target", "target", p.name, "replicas", len(p.live))
	names := make([]string, 0, len(p.live)+len(p.retired))
	for name := range p.live {
		names = append(names, name)
	}
	for name := range p.retired {
		names = append(names, name)
	}
	rs := e.closePool(p)
	p.live, p.retired, p.readers = map[string]*liveReplica{}, map[string]*retiredReplica{}, map[string]*serverReader{}
	go func() {
		for _, r := range rs {
			e.retire(r)
		}
		for _, name := range names {
			e.replicaRemoved(p.name, name)
		}
	}()
}

// poolStatus is a discovery target's status: its replicas' (live, then
// retired ones within their grace period), and the target's figures as
// their sums. It is called without e.mu, on what snapshot copied.
func poolStatus(s poolSnapshot, now time.Time) TargetStatus {
	t := &s.template.Target
	ts := TargetStatus{
		Name:     t.Name,
		Model:    t.Model,
		API:      wire.API(t.API),
		URL:      cmp.Or(scrub.URL(t.URL), "http://{replica}/v1"),
		Workload: t.Workload,
		Dropped:  map[DropReason]uint64{},
		Outcomes: map[wire.Outcome]uint64{},
		Since:    s.since,
		Identity: s.identity.status(),
	}
	if s.bank != nil {
		ts.Regressions = s.bank.status()
	}
	disc := s.status
	ts.Discovery = &disc
	var (
		reasons  []string
		process  string
		warm     = len(s.live) > 0
		verdicts []replicaVerdict // of the live replicas
	)
	ts.Server = s.targetReader.snapshot()
	add := func(rep discovery.Replica, r *runner, since, gone time.Time) {
		rs := r.status(now)
		st := ReplicaStatus{
			Name: rep.Name, Address: rep.Address, Labels: rep.Labels, Since: since, Started: rs.Since, Gone: gone,
			RequestedRate: rs.RequestedRate, AchievedRate: rs.AchievedRate,
			Scheduled: rs.Scheduled, Sent: rs.Sent, Dropped: rs.Dropped, Inflight: rs.Inflight, MaxInflight: rs.MaxInflight,
			LagP99: rs.LagP99, Warmup: rs.Warmup && gone.IsZero(),
			Saturated: rs.Saturated, SaturationReason: rs.SaturationReason, SaturationReasons: rs.SaturationReasons,
			Overloaded: rs.Overloaded, OverloadReason: rs.OverloadReason,
			Connections: rs.Connections, Protocol: rs.Protocol, Failing: rs.Failing,
			Server: s.readers[rep.Name].snapshot(), Diagnosis: s.readers[rep.Name].diagnosis(),
		}
		if !gone.IsZero() {
			st.RequestedRate, st.Saturated, st.Overloaded, st.Failing = 0, false, false, nil
		}
		ts.Replicas = append(ts.Replicas, st)
		ts.RequestedRate += st.RequestedRate
		ts.Scheduled += rs.Scheduled
		ts.Sent += rs.Sent
		ts.Inflight += rs.Inflight
		ts.Connections += rs.Connections
		ts.LateSends += rs.LateSends
		for k, v := range rs.Dropped {
			ts.Dropped[k] += v
		}
		for k, v := range rs.Outcomes {
			ts.Outcomes[k] += v
		}
		if !gone.IsZero() {
			return
		}
		ts.ArrivalRate += rs.ArrivalRate
		ts.AchievedRate += rs.AchievedRate
		ts.MaxInflight += rs.MaxInflight
		ts.LagP50, ts.LagP99 = max(ts.LagP50, rs.LagP50), max(ts.LagP99, rs.LagP99)
		ts.Window = max(ts.Window, rs.Window)
		ts.Protocol = cmp.Or(ts.Protocol, rs.Protocol)
		warm = warm && rs.Warmup
		verdicts = append(verdicts, replicaVerdict{rep.Name, rs.Failing})
		if ts.Classes == nil {
			ts.Classes, ts.Refit, process = rs.Classes, rs.Refit, rs.Process
		}
		if rs.Saturated {
			ts.Saturated = true
			reasons = append(reasons, rep.Name+": "+rs.SaturationReason)
			for _, sr := range rs.SaturationReasons {
				if !slices.Contains(ts.SaturationReasons, sr) {
					ts.SaturationReasons = append(ts.SaturationReasons, sr)
				}
			}
		}
		if rs.Overloaded {
			ts.Overloaded = true
			ts.OverloadReason = cmp.Or(ts.OverloadReason, rep.Name+": "+rs.OverloadReason)
		}
	}
	for _, lr := range s.live {
		add(lr.rep, lr.r, lr.since, time.Time{})
	}
	for _, rr := range s.retired {
		add(rr.rep, rr.r, rr.since, rr.gone)
	}
	ts.Warmup = warm
	ts.Failing = mergeFailing(verdicts)
	if ts.Diagnosis = s.targetReader.diagnosis(); ts.Server == nil {
		ts.Diagnosis = poolDiagnosis(ts.Replicas)
	}
	if ts.Diagnosis == nil {
		ts.DiagnosisWhy = noViewWhy(&ts)
	}
	ts.SaturationReason = strings.Join(reasons, "; ")
	ts.Process = fmt.Sprintf("%d replicas × %s", len(s.live), cmp.Or(process, "(none yet)"))
	return ts
}

// poolSnapshot is what poolStatus reads of a pool, copied under e.mu.
type poolSnapshot struct {
	template runnerSpec
	status   DiscoveryStatus
	since    time.Time
	identity *identityTracker
	bank     *regressionBank
	live     []*liveReplica
	retired  []*retiredReplica
	// targetReader and readers are the server-view readers (serverview.go).
	targetReader *serverReader
	readers      map[string]*serverReader
}

// snapshot copies what poolStatus needs, live replicas then retired ones,
// each sorted by name. e.mu is held.
func (p *pool) snapshot() poolSnapshot {
	s := poolSnapshot{template: p.template, status: p.status, since: p.since, identity: p.identity, bank: p.bank,
		targetReader: p.targetReader, readers: make(map[string]*serverReader, len(p.readers))}
	for name, sr := range p.readers {
		s.readers[name] = sr
	}
	for _, lr := range p.live {
		c := *lr
		s.live = append(s.live, &c)
	}
	for _, rr := range p.retired {
		c := *rr
		s.retired = append(s.retired, &c)
	}
	slices.SortFunc(s.live, func(a, b *liveReplica) int { return strings.Compare(a.rep.Name, b.rep.Name) })
	slices.SortFunc(s.retired, func(a, b *retiredReplica) int { return strings.Compare(a.rep.Name, b.rep.Name) })
	return s
}

// redactor is the target's secret scrubber, for discovery's errors.
func (s runnerSpec) redactor() *wire.Redactor { return wire.NewRedactor(s.Target.HTTPClientConfig) }
