// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package probe

import (
	"cmp"
	"context"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/llmprobe/llmprobe/probe/wire"
)

// Failing targets (docs/design.md "Failing targets"): a target whose
// requests mostly fail is said out loud, in the log and on the status
// page, from one verdict.
//
// The verdict. Each runner counts, per second of the last FailingWindow
// (15 s), its requests that ended by outcome, and keeps the outcomes of
// its last FailingMin (3) to end. Once a second, beside the harness'
// verdict, it judges the requests that ended in the window or, when fewer
// than FailingMin did (a target probed below 0.2 req/s), its last
// FailingMin to end, however old. It is failing when at least FailingMin
// were judged and half or more of them failed ("every request fails" when
// all did): one 500 in a thousand is not failing, and neither are two
// requests. Warm-up requests are judged (a target that fails from its
// start is said to fail during its warm-up); a request llmprobe cancelled
// itself (shutdown, a target removed) is not. A discovery target is
// failing when any of its replicas is; its figures are then its failing
// replicas' sums.
//
// The log. A target's runners (its replicas') tell their verdicts to the
// target's failLog, kept across reloads like its identity. One second
// after the target is first found failing (every replica's judge has
// spoken by then) it writes a WARN line: target, the failing replicas,
// the most frequent outcome, the error type and message of an example
// failure (the newest of that outcome; the message is Result.Error, which
// the client has scrubbed of the target's secrets and of control
// characters), and the counts ("... to replicas of the target ..." while
// some replicas do not fail). Then one line every logEvery (a minute)
// while it fails, and one INFO line when it no longer does. A WARN line is
// never written within logEvery of the last, so a target that flaps writes
// at most one WARN and one INFO line a minute, and 64 failing replicas one
// line a minute between them.

// The failing verdict's bounds.
const (
	// FailingMin is the fewest requests a failing verdict judges.
	FailingMin = 3
	// FailingWindow is the span of ended requests a runner judges.
	FailingWindow = 15 * time.Second
	// defaultLogEvery is how often a repeated log line (a failing
	// target, a flapping identity) may be written.
	defaultLogEvery = time.Minute
	// failingSettle is how long a target is found failing before its
	// first line: one round of every replica's judge.
	failingSettle = time.Second
	// maxLoggedReplicas is how many failing replicas a line names.
	maxLoggedReplicas = 8
)

// FailingStatus says that half or more of the requests a target (or a
// replica) ended lately failed: Failed of the Judged requests that ended
// Over the last span (FailingWindow, or longer at low rates: see above).
type FailingStatus struct {
	Failed, Judged int
	Over           time.Duration
	// All is set when every request judged failed.
	All bool
	// Outcomes are the failed requests by outcome, most frequent first.
	Outcomes []OutcomeCount
	// Example is the newest failure of the most frequent outcome.
	Example FailureExample
	// Replicas names the failing replicas of a discovery target, sorted
	// (nil for a target without discovery and for a replica's own); the
	// figures above are then theirs.
	Replicas []string
}

// OutcomeCount is how many of the requests judged ended with Outcome.
type OutcomeCount struct {
	Outcome wire.Outcome
	Count   int
}

// FailureExample is one failed request, as the client reported it: no
// secret, no prompt text, no control character (wire.Result.Error).
type FailureExample struct {
	At         time.Time // when it ended
	Outcome    wire.Outcome
	ErrorType  string
	Error      string
	StatusCode int    // 0 without a response
	Replica    string // the discovered replica it went to, if any
}

// outcomeIndex is o's index in wire.Outcomes, or -1.
func outcomeIndex(o wire.Outcome) int {
	for i, w := range wire.Outcomes {
		if w == o {
			return i
		}
	}
	return -1
}

var successIndex = outcomeIndex(wire.OutcomeSuccess)

// failSlot is one second of a runner's ended requests, by outcome.
type failSlot struct {
	sec int64 // unix second this slot holds; other values mean stale
	n   [len(wire.Outcomes)]uint32
}

// ended is one of the last requests to end: when, and its outcome's index
// (-1: none yet).
type ended struct {
	at      time.Time
	outcome int
}

// failWindow is what a runner's failing verdict judges: fixed memory, one
// slot per second of the window, the last FailingMin outcomes and the
// newest failure of each outcome.
type failWindow struct {
	mu       sync.Mutex
	span     time.Duration
	slots    []failSlot
	last     [FailingMin]ended // a ring; next is the oldest
	next     int
	examples [len(wire.Outcomes)]FailureExample
}

func newFailWindow(span time.Duration) *failWindow {
	span = cmp.Or(span, FailingWindow)
	w := &failWindow{span: span, slots: make([]failSlot, max(int(span/time.Second), 1))}
	for i := range w.last {
		w.last[i].outcome = -1
	}
	return w
}

// observe counts a request that ended now with the outcome of index i.
func (w *failWindow) observe(i int, res *wire.Result, now time.Time) {
	if i < 0 || res.ErrorType == wire.ErrorTypeCancelled {
		return
	}
	sec := now.Unix()
	w.mu.Lock()
	s := &w.slots[int(sec%int64(len(w.slots)))]
	if s.sec != sec {
		*s = failSlot{sec: sec}
	}
	s.n[i]++
	w.last[w.next] = ended{at: now, outcome: i}
	w.next = (w.next + 1) % len(w.last)
	if i != successIndex {
		w.examples[i] = FailureExample{At: now, Outcome: res.Outcome, ErrorType: res.ErrorType, Error: res.Error,
			StatusCode: res.StatusCode, Replica: res.Replica}
	}
	w.mu.Unlock()
}

// judge returns the verdict at now (nil: not failing) and whether there
// was evidence to judge: at least FailingMin requests ended.
func (w *failWindow) judge(now time.Time) (*FailingStatus, bool) {
	var n [len(wire.Outcomes)]int
	judged, over := 0, w.span
	w.mu.Lock()
	cur := now.Unix()
	oldest := cur - int64(len(w.slots)) + 1
	for i := range w.slots {
		if s := &w.slots[i]; s.sec >= oldest && s.sec <= cur {
			for o, c := range s.n {
				n[o] += int(c)
				judged += int(c)
			}
		}
	}
	if judged < FailingMin {
		n, judged = [len(wire.Outcomes)]int{}, 0
		for _, e := range w.last {
			if e.outcome >= 0 {
				n[e.outcome]++
				judged++
				over = max(over, now.Sub(e.at).Round(time.Second))
			}
		}
	}
	examples := w.examples
	w.mu.Unlock()
	if judged < FailingMin {
		return nil, false
	}
	return failingVerdict(&n, judged, over, &examples), true
}

// failingVerdict is the rule: of judged requests, counted by outcome (in
// wire.Outcomes order) over the span over, half or more failed, and at
// least FailingMin were judged. examples holds the newest failure of each
// outcome.
func failingVerdict(n *[len(wire.Outcomes)]int, judged int, over time.Duration, examples *[len(wire.Outcomes)]FailureExample) *FailingStatus {
	failed := judged - n[successIndex]
	if judged < FailingMin || 2*failed < judged {
		return nil
	}
	f := &FailingStatus{Failed: failed, Judged: judged, Over: over, All: failed == judged}
	for i, o := range wire.Outcomes {
		if i != successIndex && n[i] > 0 {
			f.Outcomes = append(f.Outcomes, OutcomeCount{o, n[i]})
		}
	}
	sortOutcomes(f.Outcomes)
	f.Example = examples[outcomeIndex(f.Outcomes[0].Outcome)]
	return f
}

// sortOutcomes puts the most frequent first (ties in wire.Outcomes order).
func sortOutcomes(os []OutcomeCount) {
	slices.SortStableFunc(os, func(a, b OutcomeCount) int { return cmp.Compare(b.Count, a.Count) })
}

// replicaVerdict is a replica's verdict (nil: not failing) by its name.
type replicaVerdict struct {
	name string
	v    *FailingStatus
}

// mergeFailing is a discovery target's verdict from its replicas' (a
// target without discovery has one, unnamed): nil when none fails; else
// the failing replicas' sums, named ("every request fails" when each of
// them fails every request: healthy replicas may still answer), and as
// example the newest of the most frequent outcome (else the newest).
func mergeFailing(vs []replicaVerdict) *FailingStatus {
	var out *FailingStatus
	var counts [len(wire.Outcomes)]int
	var examples []FailureExample
	for _, rv := range vs {
		if rv.v == nil {
			continue
		}
		if out == nil {
			out = &FailingStatus{}
		}
		out.Failed += rv.v.Failed
		out.Judged += rv.v.Judged
		out.Over = max(out.Over, rv.v.Over)
		for _, oc := range rv.v.Outcomes {
			counts[outcomeIndex(oc.Outcome)] += oc.Count
		}
		if rv.name != "" {
			out.Replicas = append(out.Replicas, rv.name)
		}
		examples = append(examples, rv.v.Example)
	}
	if out == nil {
		return nil
	}
	out.All = out.Failed == out.Judged
	slices.Sort(out.Replicas)
	for i, o := range wire.Outcomes {
		if counts[i] > 0 {
			out.Outcomes = append(out.Outcomes, OutcomeCount{o, counts[i]})
		}
	}
	sortOutcomes(out.Outcomes)
	newest := func(a, b FailureExample) int { return a.At.Compare(b.At) }
	out.Example = slices.MaxFunc(examples, newest)
	if len(out.Outcomes) > 0 {
		top := out.Outcomes[0].Outcome
		var ofTop []FailureExample
		for _, ex := range examples {
			if ex.Outcome == top {
				ofTop = append(ofTop, ex)
			}
		}
		if len(ofTop) > 0 {
			out.Example = slices.MaxFunc(ofTop, newest)
		}
	}
	return out
}

// failLog writes a target's failing lines (see above). Its runners report
// their verdicts; it is kept across reloads (Engine.failLogFor).
type failLog struct {
	target string
	logger *slog.Logger
	every  time.Duration

	mu       sync.Mutex
	verdicts map[*runner]*FailingStatus // runners with evidence; nil: not failing
	pending  time.Time                  // when first found failing, before the first line
	warned   time.Time                  // the last WARN line
	spell    time.Time                  // when the target was found failing, once its WARN line is written; zero while not failing
}

func newFailLog(target string, logger *slog.Logger, every time.Duration) *failLog {
	return &failLog{target: target, logger: logger, every: cmp.Or(every, defaultLogEvery), verdicts: map[*runner]*FailingStatus{}}
}

// report takes r's verdict at now, and writes what it calls for.
func (l *failLog) report(r *runner, v *FailingStatus, now time.Time) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.verdicts[r] = v
	failing := false
	for _, v := range l.verdicts {
		failing = failing || v != nil
	}
	if !failing {
		l.pending = time.Time{}
		if !l.spell.IsZero() {
			l.logger.Info("requests to the target succeed again", "target", l.target, "failing_for", now.Sub(l.spell).Round(time.Second))
			l.spell = time.Time{}
		}
		return
	}
	if l.pending.IsZero() {
		l.pending = now
	}
	if now.Sub(l.pending) < failingSettle || (!l.warned.IsZero() && now.Sub(l.warned) < l.every) {
		return
	}
	vs := make([]replicaVerdict, 0, len(l.verdicts))
	for rr, v := range l.verdicts {
		vs = append(vs, replicaVerdict{rr.replica, v})
	}
	f := mergeFailing(vs)
	first := l.spell.IsZero()
	if first {
		l.spell = l.pending
	}
	l.warned = now
	l.warn(f, len(vs), now, first)
}

// warn writes the WARN line of f, judged over judged runners; after the
// first line of a spell it says for how long the target has failed.
func (l *failLog) warn(f *FailingStatus, judged int, now time.Time, first bool) {
	msg := "most requests to the target fail"
	if f.All {
		msg = "every request to the target fails"
	}
	if n := len(f.Replicas); n > 0 && n < judged {
		msg = "most requests to replicas of the target fail"
		if f.All {
			msg = "every request to replicas of the target fails"
		}
	}
	attrs := make([]slog.Attr, 0, 12)
	attrs = append(attrs, slog.String("target", l.target))
	if n := len(f.Replicas); n > 0 {
		names := strings.Join(f.Replicas[:min(n, maxLoggedReplicas)], ",")
		if n > maxLoggedReplicas {
			names += ",… (" + strconv.Itoa(n-maxLoggedReplicas) + " more)"
		}
		attrs = append(attrs, slog.String("replicas", names), slog.Int("replicas_failing", n), slog.Int("replicas_judged", judged))
	}
	ex := f.Example
	attrs = append(attrs, slog.String("outcome", string(f.Outcomes[0].Outcome)), slog.String("error_type", ex.ErrorType))
	if ex.StatusCode != 0 {
		attrs = append(attrs, slog.Int("status_code", ex.StatusCode))
	}
	attrs = append(attrs, slog.String("error", ex.Error), slog.Int("failed", f.Failed), slog.Int("of", f.Judged), slog.Duration("over", f.Over))
	if !first {
		attrs = append(attrs, slog.Duration("failing_for", now.Sub(l.spell).Round(time.Second)))
	}
	l.logger.LogAttrs(context.Background(), slog.LevelWarn, msg, attrs...)
}

// forget drops a runner that stopped (replaced by a reload, a replica
// retired), without a line: its successor, or the other replicas, speak
// for the target from their next verdict.
func (l *failLog) forget(r *runner) {
	if l == nil {
		return
	}
	l.mu.Lock()
	delete(l.verdicts, r)
	l.mu.Unlock()
}

// failLogFor returns the failing log of the target named name, kept from
// an earlier Apply or new. e.mu is held.
func (e *Engine) failLogFor(name string) *failLog {
	if l := e.failLogs[name]; l != nil {
		return l
	}
	return newFailLog(name, e.opts.Logger, e.logEvery)
}
