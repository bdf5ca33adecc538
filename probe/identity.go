// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package probe

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/llmprobe/llmprobe/probe/wire"
)

// Target identity: what the target is, and when it changes.
//
// A target's identity is four values, each learned from what the target
// itself says (never from the configuration):
//
//	model        the model its successful responses name (response
//	             "model"), of requests for the target's own model (a class
//	             that asks for another model is left out)
//	fingerprint  their system_fingerprint (OpenAI, llama.cpp, TGI)
//	server       their HTTP Server header
//	version      what its version endpoint says (wire.VersionClient),
//	             asked every identity.poll_interval (5m; 0s: never)
//
// Values are cleaned and cut to wire.MaxIdentityValue bytes; a response
// that leaves a value out (no fingerprint, no Server header) changes
// nothing. Only successful responses count: an error page from a proxy in
// front of the server says nothing of the server.
//
// The first value of each part is learned, not a change. After that, a
// new value becomes current once IdentityConfirmations responses in a row
// carried it (VersionConfirmations polls in a row for the version): then
// it is a change. Behind a load balancer during a rollout, responses from
// the old and the new build interleave; the new build's value takes over
// only once it holds the traffic (or nearly: with a share p of the
// responses, 16 in a row happen about every 1/p¹⁶ responses, once an hour
// at 10 req/s for p = 1/2), so an interleaving does not count as many
// changes, and a round-robin over two builds counts none. A value that
// comes back to the current one resets the count.
//
// A change is an event: the log line "target identity changed" (target,
// what, from, to; see below), a span event llmprobe.target_identity_changed on the
// span of the request that revealed it (a version change comes from a
// poll, which has no span), IdentityChanged on the engine's observer
// (IdentityObserver), and TargetStatus.Identity (the counters, the last
// change's time and the recent changes, for the metrics and the status
// page). The identity of a target is kept across reloads, as its
// in-flight budget is, and forgotten when a reload removes the target.
//
// The log is bounded per part: a change is logged at once when the part's
// last line is a logEvery (a minute) old; a change sooner than that (a
// flapping identity: each change also cuts the regression baseline) is
// counted, and the count goes out at most once a logEvery as one WARN line
// "target identity flapping" (what, changes, over, from, to). Every
// change is still counted, cut, recorded and told to the observer.

// The parts of an identity: the values of the `what` label of
// llmprobe_target_changes_total.
const (
	IdentityModel       = "model"
	IdentityFingerprint = "fingerprint"
	IdentityServer      = "server"
	IdentityVersion     = "version"
)

// IdentityParts lists the parts, in a stable order.
var IdentityParts = [...]string{IdentityModel, IdentityFingerprint, IdentityServer, IdentityVersion}

// Debouncing and bounds.
const (
	// IdentityConfirmations is how many successful responses in a row
	// must carry a new model, fingerprint or Server value before it is
	// current.
	IdentityConfirmations = 16
	// VersionConfirmations is how many polls in a row must answer a new
	// version before it is current.
	VersionConfirmations = 2
	// MaxRecentIdentityChanges is how many changes TargetStatus keeps.
	MaxRecentIdentityChanges = 8
	// firstVersionPoll is how soon after a target starts its version
	// endpoint is first asked (the interval when that is shorter).
	firstVersionPoll = time.Second
)

// IdentityChangedEvent is the name of the span event of a change.
const IdentityChangedEvent = "llmprobe.target_identity_changed"

// Attributes of the span event.
const (
	attrIdentityWhat = attribute.Key("llmprobe.identity.what")
	attrIdentityFrom = attribute.Key("llmprobe.identity.from")
	attrIdentityTo   = attribute.Key("llmprobe.identity.to")
)

// TargetIdentity is what a target is: each value as the target last
// said it (current, debounced), empty while unknown.
type TargetIdentity struct {
	Model       string
	Fingerprint string
	Server      string
	Version     string
}

// Get returns the part named what (one of IdentityParts).
func (id TargetIdentity) Get(what string) string {
	switch what {
	case IdentityModel:
		return id.Model
	case IdentityFingerprint:
		return id.Fingerprint
	case IdentityServer:
		return id.Server
	case IdentityVersion:
		return id.Version
	}
	return ""
}

func (id *TargetIdentity) set(i int, v string) {
	switch IdentityParts[i] {
	case IdentityModel:
		id.Model = v
	case IdentityFingerprint:
		id.Fingerprint = v
	case IdentityServer:
		id.Server = v
	case IdentityVersion:
		id.Version = v
	}
}

// IdentityChange is one change of a target's identity.
type IdentityChange struct {
	Target string
	At     time.Time
	What   string // one of IdentityParts
	From   string // the value before
	To     string // the value now current
}

// IdentityObserver is told of every change of a target's identity: an
// engine's Observer that implements it gets IdentityChanged (Observers
// forwards it to those of its observers that do). It must not block.
type IdentityObserver interface {
	IdentityChanged(ch IdentityChange)
}

// IdentityStatus is a target's identity and its changes since the engine
// first ran it.
type IdentityStatus struct {
	Current TargetIdentity
	// Changes counts the changes by part (IdentityParts), 0 for each
	// before any.
	Changes map[string]uint64
	// LastChange is the instant of the last change (zero before any).
	LastChange time.Time
	// Recent are the last changes, newest first (at most
	// MaxRecentIdentityChanges).
	Recent []IdentityChange
	// VersionEndpoint is the version endpoint that answered last ("" when
	// none has); VersionError the last poll's problem ("" after an
	// answer, or when the target has none of the endpoints).
	VersionEndpoint string
	VersionError    string
}

// identityPart is one part's current value and the new value that may
// replace it.
type identityPart struct {
	current   string
	candidate string
	run       int       // responses (polls) in a row that carried candidate
	since     time.Time // when the first of them came: the change's instant
}

// identityLog is the state of one part's log lines.
type identityLog struct {
	last time.Time // when the last line about the part was written
	held int       // changes since then not logged one by one
	from string    // the value before the first of them
}

// identityTracker follows one target's identity; it outlives the runners
// a reload replaces.
type identityTracker struct {
	target    string
	logger    *slog.Logger
	obs       IdentityObserver // nil: none
	userAgent string
	// bank is the target's regression detectors, cut at every change
	// (set by Engine.Apply).
	bank atomic.Pointer[regressionBank]
	// pollers is how many runners poll a version endpoint into this
	// tracker: the replicas of a discovery target (pool.go), else 0. A
	// new version then needs as many polls in a row, about one round of
	// all of them, so that a rolling deploy, whose polls interleave the
	// builds, changes the target's version once, when it is done.
	pollers atomic.Int32

	// settled is set while no part has a candidate and cur holds the
	// current values: a response that repeats them needs no lock.
	settled atomic.Bool
	cur     atomic.Pointer[TargetIdentity]
	model   atomic.Pointer[[2]string] // the last response model, raw and cleaned

	// logEvery bounds the log lines of each part (see above).
	logEvery time.Duration

	mu       sync.Mutex
	parts    [len(IdentityParts)]identityPart
	logs     [len(IdentityParts)]identityLog
	changes  [len(IdentityParts)]uint64
	last     time.Time
	recent   []IdentityChange // newest first
	endpoint string           // the version endpoint that answered last
	pollErr  string
	// The diagnosis' identity key (diagnose.go): the changes it last
	// saw, its number, and when it last changed.
	keyChanges, keySeq uint64
	keyAt              time.Time
}

func newIdentityTracker(target string, logger *slog.Logger, obs IdentityObserver, userAgent string) *identityTracker {
	t := &identityTracker{target: target, logger: logger, obs: obs, userAgent: userAgent, logEvery: defaultLogEvery}
	t.cur.Store(&TargetIdentity{})
	t.settled.Store(true)
	return t
}

// inspect returns the wire client's Inspect hook for a runner whose
// target asks for model.
func (t *identityTracker) inspect(model string) func(trace.Span, *wire.Result) {
	return func(span trace.Span, res *wire.Result) {
		if res.Outcome != wire.OutcomeSuccess {
			return
		}
		var m string
		if res.Model == model {
			m = t.cleanModel(res.ResponseModel)
		}
		t.observe(span, m, res.SystemFingerprint, res.Server)
	}
}

// cleanModel cuts a response model (scrubbed of secrets by the client)
// to an identity value, remembering the last one.
func (t *identityTracker) cleanModel(raw string) string {
	if raw == "" {
		return ""
	}
	if m := t.model.Load(); m != nil && m[0] == raw {
		return m[1]
	}
	clean := wire.CleanIdentity(raw, nil)
	t.model.Store(&[2]string{raw, clean})
	return clean
}

// observe takes the values of one successful response ("" for those it
// did not carry).
func (t *identityTracker) observe(span trace.Span, model, fingerprint, server string) {
	if t.settled.Load() {
		cur := t.cur.Load()
		if (model == "" || model == cur.Model) && (fingerprint == "" || fingerprint == cur.Fingerprint) && (server == "" || server == cur.Server) {
			return
		}
	}
	now := time.Now()
	var out [3]IdentityChange
	n := 0
	t.mu.Lock()
	for i, v := range [3]string{model, fingerprint, server} {
		if ch, ok := t.step(i, v, IdentityConfirmations, now); ok {
			out[n] = ch
			n++
		}
	}
	t.publish()
	t.mu.Unlock()
	for _, ch := range out[:n] {
		t.announce(span, ch, now)
	}
}

// observeVersion takes what a version endpoint answered.
func (t *identityTracker) observeVersion(info wire.VersionInfo) {
	t.mu.Lock()
	t.endpoint, t.pollErr = info.Endpoint, ""
	now := time.Now()
	ch, ok := t.step(3, info.Version, max(VersionConfirmations, int(t.pollers.Load())), now)
	t.publish()
	t.mu.Unlock()
	if ok {
		t.announce(nil, ch, now)
	}
}

// versionFailed records a poll that got no version; it reports whether
// the problem is new (worth a log line).
func (t *identityTracker) versionFailed(err error) (string, bool) {
	msg := ""
	if !errors.Is(err, wire.ErrNoVersionEndpoint) {
		msg = err.Error()
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if errors.Is(err, wire.ErrNoVersionEndpoint) {
		t.endpoint = ""
	}
	changed := msg != t.pollErr
	t.pollErr = msg
	return msg, changed && msg != ""
}

// step applies one observation v of part i that needs need in a row; ok
// is set when it made a change. t.mu is held.
func (t *identityTracker) step(i int, v string, need int, now time.Time) (IdentityChange, bool) {
	p := &t.parts[i]
	switch {
	case v == "":
		return IdentityChange{}, false
	case p.current == "":
		p.current, p.candidate, p.run = v, "", 0 // learned, not a change
		t.logger.Debug("target identity learned", "target", t.target, "what", IdentityParts[i], "value", v)
		return IdentityChange{}, false
	case v == p.current:
		p.candidate, p.run = "", 0
		return IdentityChange{}, false
	case v == p.candidate:
		p.run++
	default:
		p.candidate, p.run, p.since = v, 1, now
	}
	if p.run < need {
		return IdentityChange{}, false
	}
	// The change happened with the first response that carried the new
	// value, not with the one that settled it: the regression detectors
	// cut their baseline there.
	ch := IdentityChange{Target: t.target, At: p.since, What: IdentityParts[i], From: p.current, To: v}
	p.current, p.candidate, p.run = v, "", 0
	t.changes[i]++
	t.last = p.since
	t.recent = append([]IdentityChange{ch}, t.recent[:min(len(t.recent), MaxRecentIdentityChanges-1)]...)
	return ch, true
}

// publish stores the current values for the lock-free path. t.mu is held.
func (t *identityTracker) publish() {
	var id TargetIdentity
	settled := true
	for i, p := range t.parts {
		id.set(i, p.current)
		if p.candidate != "" && i < 3 {
			settled = false
		}
	}
	if *t.cur.Load() != id {
		t.cur.Store(&id)
	}
	t.settled.Store(settled)
}

// announce tells the log (as logChange allows), the span and the
// observer of a change settled at now.
func (t *identityTracker) announce(span trace.Span, ch IdentityChange, now time.Time) {
	if t.logChange(ch, now) {
		t.logger.Info("target identity changed", "target", ch.Target, "what", ch.What, "from", ch.From, "to", ch.To)
	}
	if span != nil && span.IsRecording() {
		span.AddEvent(IdentityChangedEvent, trace.WithTimestamp(ch.At), trace.WithAttributes(
			attrIdentityWhat.String(ch.What), attrIdentityFrom.String(ch.From), attrIdentityTo.String(ch.To)))
	}
	if b := t.bank.Load(); b != nil {
		b.cut(ch.At)
	}
	if t.obs != nil {
		t.obs.IdentityChanged(ch)
	}
}

// logChange reports whether a change at now is logged on its own: not
// when its part's last line is younger than logEvery, then it is held for
// flushLog's summary.
func (t *identityTracker) logChange(ch IdentityChange, now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	l := &t.logs[partIndex(ch.What)]
	if l.held == 0 && (l.last.IsZero() || now.Sub(l.last) >= t.logEvery) {
		l.last = now
		return true
	}
	if l.held == 0 {
		l.from = ch.From
	}
	l.held++
	return false
}

// flushLog writes the summary of each part whose held changes are due
// (the runners' judge calls it once a second).
func (t *identityTracker) flushLog(now time.Time) {
	if t == nil {
		return
	}
	type summary struct {
		what, from, to string
		n              int
		over           time.Duration
	}
	var out []summary
	t.mu.Lock()
	for i := range t.logs {
		if l := &t.logs[i]; l.held > 0 && now.Sub(l.last) >= t.logEvery {
			out = append(out, summary{IdentityParts[i], l.from, t.parts[i].current, l.held, now.Sub(l.last).Round(time.Second)})
			l.last, l.held, l.from = now, 0, ""
		}
	}
	t.mu.Unlock()
	for _, s := range out {
		t.logger.Warn("target identity flapping", "target", t.target, "what", s.what, "changes", s.n, "over", s.over,
			"from", s.from, "to", s.to, "note", "each change cuts the regression baseline")
	}
}

// partIndex is the index of the part named what in IdentityParts.
func partIndex(what string) int {
	for i, p := range IdentityParts {
		if p == what {
			return i
		}
	}
	return 0
}

// status returns the identity and its changes.
func (t *identityTracker) status() IdentityStatus {
	if t == nil {
		return IdentityStatus{}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	s := IdentityStatus{
		Changes:         make(map[string]uint64, len(IdentityParts)),
		LastChange:      t.last,
		Recent:          append([]IdentityChange(nil), t.recent...),
		VersionEndpoint: t.endpoint,
		VersionError:    t.pollErr,
	}
	for i, p := range t.parts {
		s.Current.set(i, p.current)
		s.Changes[IdentityParts[i]] = t.changes[i]
	}
	return s
}

// identityFor returns the tracker of the target named name, kept from an
// earlier Apply or new. e.mu is held.
func (e *Engine) identityFor(name string) *identityTracker {
	if t := e.identities[name]; t != nil {
		return t
	}
	obs, _ := e.opts.Observer.(IdentityObserver)
	t := newIdentityTracker(name, e.opts.Logger, obs, e.opts.UserAgent)
	t.logEvery = cmp.Or(e.logEvery, defaultLogEvery)
	return t
}

// keepIdentities keeps the trackers of the targets now running and
// forgets the others. e.mu is held.
func (e *Engine) keepIdentities(running map[string]*runner) {
	ids := make(map[string]*identityTracker, len(running))
	for name, r := range running {
		ids[name] = r.identity
	}
	e.identities = ids
}

// versionLoop asks the target's version endpoint soon after the start,
// then every interval, until ctx is done.
func (r *runner) versionLoop(ctx context.Context, interval time.Duration) {
	vc, err := wire.NewVersionClient(r.spec.Target.URL, r.httpClient, r.identity.userAgent, r.redactor)
	if err != nil {
		r.logger.Info("the target's version endpoint cannot be asked", "target", r.name, "reason", err.Error())
		return
	}
	tm := time.NewTimer(min(interval, firstVersionPoll))
	defer tm.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tm.C:
		}
		r.pollVersion(ctx, vc)
		tm.Reset(interval)
	}
}

// pollVersion asks the version endpoints once.
func (r *runner) pollVersion(ctx context.Context, vc *wire.VersionClient) {
	t := r.identity
	t.mu.Lock()
	prefer := t.endpoint
	t.mu.Unlock()
	info, err := vc.Fetch(ctx, prefer)
	switch {
	case ctx.Err() != nil:
	case err == nil:
		t.observeVersion(info)
	default:
		if msg, fresh := t.versionFailed(err); fresh {
			r.logger.Info("the target's version endpoint gave no version", "target", r.name, "reason", msg)
		} else if msg == "" {
			r.logger.Debug("the target has no version endpoint", "target", r.name)
		}
	}
}

// IdentityChanged implements IdentityObserver: it tells those of the
// observers that implement it, in order.
func (os Observers) IdentityChanged(ch IdentityChange) {
	for _, o := range os {
		if io, ok := o.(IdentityObserver); ok {
			io.IdentityChanged(ch)
		}
	}
}
