// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package exporter

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/llmprobe/llmprobe/config"
	"github.com/llmprobe/llmprobe/internal/scrub"
	"github.com/llmprobe/llmprobe/probe"
	"github.com/llmprobe/llmprobe/probe/wire"
)

// maxErrorLen bounds an error message kept for the status page: messages
// come from remote servers.
const maxErrorLen = 512

// Entry is one ended request as the status page shows it. It holds no
// prompt or completion text and no secret.
type Entry struct {
	Time       time.Time // when the request was handed to the HTTP client
	Class      string
	Warmup     bool
	Outcome    wire.Outcome
	ErrorType  string // low-cardinality reason, e.g. http_429
	Error      string // sanitised and truncated message
	StatusCode int    // 0 when no response

	FirstToken  bool
	TTFT        time.Duration
	E2E         time.Duration
	TPOT        time.Duration
	ScheduleLag time.Duration

	PromptTokens   int
	OutputTokens   int
	CachedTokens   int
	UsageEstimated bool // the server reported no usage: token counts are estimates
	CachedReported bool // CachedTokens came from the server

	FinishReason   string
	ConversationID string // empty for single requests
	Turn           int
	TraceID        string // empty when the request was not traced
}

// Failed reports whether the request did not succeed.
func (e Entry) Failed() bool { return e.Outcome != wire.OutcomeSuccess }

// Recent is the probe.Observer that keeps, per target, the last requests
// and, in a separate ring, the last failures (so that failures stay
// visible long after a burst of successes). Failures are also logged at
// debug level. Create it with NewRecent and give it every configuration
// with SetConfig.
//
// It also keeps each target's recent window (see window.go): TTFT, TPOT
// and E2E quantiles per class over the last 5 minutes and a timeline of
// the requested and achieved rates, for the status page; Track samples the
// requested rate into it.
type Recent struct {
	logger *slog.Logger
	now    func() time.Time
	mu     sync.Mutex // serialises SetConfig
	rings  atomic.Pointer[map[string]*targetRings]
}

type targetRings struct {
	mu       sync.Mutex
	recent   ring
	failures ring
	window   *targetWindow
	classes  []string // in configuration order
}

// ring is a fixed-capacity circular buffer of entries.
type ring struct {
	buf  []Entry
	next int // index the next entry is written at
	full bool
}

func newRing(n int) ring { return ring{buf: make([]Entry, n)} }

func (r *ring) add(e *Entry) {
	if len(r.buf) == 0 {
		return
	}
	r.buf[r.next] = *e
	r.next++
	if r.next == len(r.buf) {
		r.next, r.full = 0, true
	}
}

// newestFirst returns a copy of the entries, newest first.
func (r *ring) newestFirst() []Entry {
	n := r.next
	if r.full {
		n = len(r.buf)
	}
	out := make([]Entry, 0, n)
	for i := 1; i <= n; i++ {
		out = append(out, r.buf[(r.next-i+len(r.buf))%len(r.buf)])
	}
	return out
}

// resized returns a ring of capacity n holding the newest entries of r.
func (r *ring) resized(n int) ring {
	out := newRing(n)
	es := r.newestFirst()
	if len(es) > n {
		es = es[:n]
	}
	for i := len(es) - 1; i >= 0; i-- {
		out.add(&es[i])
	}
	return out
}

// NewRecent returns an empty recent-requests log; failures are logged to
// logger at debug level (nil discards them). Until SetConfig is called
// every result is ignored.
func NewRecent(logger *slog.Logger) *Recent {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	r := &Recent{logger: logger, now: time.Now}
	r.rings.Store(&map[string]*targetRings{})
	return r
}

// SetConfig sizes every target's rings to cfg.Global.RecentRequests
// (keeping the newest entries) and drops the targets cfg no longer has.
func (r *Recent) SetConfig(cfg *config.Config) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := max(cfg.Global.RecentRequests, 0)
	old := *r.rings.Load()
	next := make(map[string]*targetRings, len(cfg.Targets))
	for _, t := range cfg.Targets {
		if t == nil {
			continue
		}
		var classes []string
		if w := cfg.Workload(t); w != nil {
			for _, c := range w.Classes {
				if c != nil {
					classes = append(classes, c.Name)
				}
			}
		}
		if tr := old[t.Name]; tr != nil {
			tr.mu.Lock()
			if len(tr.recent.buf) != n {
				tr.recent = tr.recent.resized(n)
				tr.failures = tr.failures.resized(n)
			}
			tr.window.setClasses(classes)
			tr.classes = classes
			tr.mu.Unlock()
			next[t.Name] = tr
			continue
		}
		next[t.Name] = &targetRings{recent: newRing(n), failures: newRing(n), window: newTargetWindow(r.now(), classes), classes: classes}
	}
	r.rings.Store(&next)
}

// Scheduled implements probe.Observer: it counts the arrival in the
// target's timeline.
func (r *Recent) Scheduled(target, replica, class string) { r.count(target, (*targetWindow).scheduled) }

// Dropped implements probe.Observer; it does nothing (drops are counted in
// metrics and shown from the engine's status).
func (r *Recent) Dropped(target, replica, class string, reason probe.DropReason) {}

// Sent implements probe.Observer: it counts the send in the target's
// timeline (the achieved rate).
func (r *Recent) Sent(target, replica, class string) { r.count(target, (*targetWindow).sent) }

// count records an event (scheduled, sent) in target's timeline, now.
func (r *Recent) count(target string, event func(*targetWindow, time.Time)) {
	if tr := (*r.rings.Load())[target]; tr != nil {
		now := r.now()
		tr.mu.Lock()
		event(tr.window, now)
		tr.mu.Unlock()
	}
}

// Track samples every target's requested rate from status (typically
// (*probe.Engine).Status) into its timeline every second, until ctx is
// done. Without it the timeline has no requested rate.
func (r *Recent) Track(ctx context.Context, status func() []probe.TargetStatus) {
	if status == nil {
		return
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		r.SampleStatus(status())
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// SampleStatus records the targets' requested rates in their timelines
// (Track calls it every second).
func (r *Recent) SampleStatus(statuses []probe.TargetStatus) {
	rings := *r.rings.Load()
	now := r.now()
	for _, s := range statuses {
		if tr := rings[s.Name]; tr != nil {
			tr.mu.Lock()
			tr.window.requested(now, s.RequestedRate)
			tr.mu.Unlock()
		}
	}
}

// Window returns a target's recent window: latency quantiles over the
// last 5 minutes (the target, then each class) and the per-10s timeline;
// ok is false for an unknown target.
func (r *Recent) Window(target string) (snap WindowSnapshot, ok bool) {
	tr := (*r.rings.Load())[target]
	if tr == nil {
		return WindowSnapshot{}, false
	}
	now := r.now()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.window.snapshot(now, tr.classes), true
}

// ConversationEnded implements probe.Observer; the turns themselves are
// in the log.
func (r *Recent) ConversationEnded(string, string, string, probe.ConversationOutcome) {}

// Observe implements probe.Observer: it records the result, and logs it at
// debug level when it failed.
func (r *Recent) Observe(res *wire.Result) {
	if res == nil {
		return
	}
	failed := res.Outcome != wire.OutcomeSuccess
	if failed && r.logger.Enabled(context.Background(), slog.LevelDebug) {
		r.logger.LogAttrs(context.Background(), slog.LevelDebug, "request failed",
			slog.String("target", res.Target),
			slog.String("class", res.Class),
			slog.String("outcome", string(res.Outcome)),
			slog.String("error_type", res.ErrorType),
			slog.Int("status_code", res.StatusCode),
			slog.String("err", sanitize(res.Error)),
			slog.String("trace_id", res.TraceID),
		)
	}
	tr := (*r.rings.Load())[res.Target]
	if tr == nil {
		return
	}
	e := Entry{
		Time:           res.Dispatched,
		Class:          res.Class,
		Warmup:         res.Warmup,
		Outcome:        res.Outcome,
		ErrorType:      res.ErrorType,
		StatusCode:     res.StatusCode,
		FirstToken:     res.FirstToken,
		TTFT:           res.TTFT,
		E2E:            res.E2E,
		TPOT:           res.TPOT,
		ScheduleLag:    res.ScheduleLag,
		PromptTokens:   res.PromptTokens,
		OutputTokens:   res.OutputTokens,
		CachedTokens:   res.CachedTokens,
		UsageEstimated: !res.UsageReported,
		CachedReported: res.CachedTokensReported,
		FinishReason:   res.FinishReason,
		ConversationID: res.ConversationID,
		Turn:           res.Turn,
		TraceID:        res.TraceID,
	}
	if e.Time.IsZero() {
		e.Time = res.Planned
	}
	if failed {
		e.Error = sanitize(res.Error)
	}
	now := r.now()
	tr.mu.Lock()
	tr.recent.add(&e)
	if failed {
		tr.failures.add(&e)
	}
	tr.window.observe(now, res)
	tr.mu.Unlock()
}

// Snapshot returns copies of a target's last requests and last failures,
// in the order they were sent, newest first (both nil for an unknown
// target). The rings keep the last requests to end; a long request ends
// after shorter ones sent later, so they are sorted by send time.
func (r *Recent) Snapshot(target string) (recent, failures []Entry) {
	tr := (*r.rings.Load())[target]
	if tr == nil {
		return nil, nil
	}
	tr.mu.Lock()
	recent, failures = tr.recent.newestFirst(), tr.failures.newestFirst()
	tr.mu.Unlock()
	bySendTime := func(a, b Entry) int { return b.Time.Compare(a.Time) }
	slices.SortStableFunc(recent, bySendTime)
	slices.SortStableFunc(failures, bySendTime)
	return recent, failures
}

// sanitize makes a remote error message safe to keep and show: no
// control, line-separating or bidirectional formatting character, valid
// UTF-8 (scrub.Chars), at most maxErrorLen bytes. HTML escaping is the
// page's job.
func sanitize(s string) string {
	s = scrub.Chars(s)
	if len(s) <= maxErrorLen {
		return s
	}
	s = s[:maxErrorLen-len("…")]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1] // a rune the cut split
	}
	return s + "…"
}
