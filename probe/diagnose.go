// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package probe

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/llmprobe/llmprobe/diagnosis"
	"github.com/llmprobe/llmprobe/probe/wire"
	"github.com/llmprobe/llmprobe/probe/workload"
	"github.com/llmprobe/llmprobe/servermetrics"
)

// The diagnosis (docs/design.md "Diagnosis", "How the daemon feeds the
// judge"): every server-view reader owns a diagnosis.Judge (its goroutine
// is the judge's one owner). Each read, successful or not, adds one
// diagnosis.Interval: the server's window when the read and the one
// before it succeeded (else Server is nil and Why says why), and the
// probe's own figures over the same interval, which the runners feeding
// the reader count into its probeAcc as their results end (warm-up
// excluded), with the harness verdict, the target's identity key and the
// workload's intended prefix reuse, which their judge loops set once a
// second. Once a minute (VerdictEvery) the reader asks for a verdict and
// keeps it for Engine.Status. The judge lives as long as its reader: a
// reload that leaves the target's server_metrics (and model, and
// global.diagnosis.prometheus) as they were keeps both; a retired
// replica's goes with its reader (dropRetired).

// VerdictEvery is how often a reader asks its judge for a verdict.
const VerdictEvery = time.Minute

// verdictEvery is VerdictEvery, or what tests set (SetVerdictEvery): read
// when a reader starts.
var verdictEvery atomic.Int64

func init() { verdictEvery.Store(int64(VerdictEvery)) }

// Diagnosis is a target's (or replica's) latest verdict.
type Diagnosis struct {
	diagnosis.Verdict
	// At is when it was judged.
	At time.Time
	// For a discovery target's own verdict drawn from its replicas'
	// (server_metrics: path): Named of the Judged replicas named Cause;
	// From is the replica whose evidence and sentence are shown (the
	// first by name of those). Zero for a verdict of the target's own
	// judge.
	Named, Judged int
	From          string
}

// diagAcc is the probe's figures of one read interval, for the judge
// (probeAcc.mu guards it).
type diagAcc struct {
	requests, failed int
	ttft, tpot       diagnosis.Mean
	sample           []float64
	// prompt: the prompt tokens of the successes whose usage was
	// reported (usage of them); promptCached and cached: of those whose
	// usage also reported cached tokens (cachedN of them).
	prompt, promptCached, cached float64
	usage, cachedN               int
	// Set by the runners' judge loops: saturated at any second of the
	// interval; the identity key and reuse intent as last set.
	saturated bool
	identity  string
	reuse     float64
}

// observe counts one result (not warm-up) into the interval.
func (d *diagAcc) observe(res *wire.Result) {
	d.requests++
	ok := res.Outcome == wire.OutcomeSuccess
	if !ok {
		d.failed++
	}
	if res.FirstToken && res.TTFT > 0 {
		v := res.TTFT.Seconds()
		d.ttft = d.ttft.Plus(diagnosis.Mean{Sum: v, Count: 1})
		if len(d.sample) < diagnosis.MaxProbeSample {
			d.sample = append(d.sample, v)
		}
	}
	if ok && res.TPOT > 0 {
		d.tpot = d.tpot.Plus(diagnosis.Mean{Sum: res.TPOT.Seconds(), Count: 1})
	}
	if ok && res.UsageReported && res.PromptTokens > 0 {
		d.usage++
		d.prompt += float64(res.PromptTokens)
		if res.CachedTokensReported && res.CachedTokens >= 0 {
			d.cachedN++
			d.promptCached += float64(res.PromptTokens)
			d.cached += float64(res.CachedTokens)
		}
	}
}

// take returns the interval's probe figures and starts the next. Prompt
// and cached tokens: of every success with usage when each reported its
// cached tokens; of those that did when only some did; cached NaN (no
// figure) when none did.
func (d *diagAcc) take() (p diagnosis.ProbeFigures, saturated bool, identity string, reuse float64) {
	p = diagnosis.ProbeFigures{Requests: d.requests, Failed: d.failed, TTFT: d.ttft, TPOT: d.tpot,
		TTFTSample: slices.Clone(d.sample), PromptTokens: d.prompt, CachedTokens: d.cached}
	switch {
	case d.cachedN == 0 && d.usage > 0:
		p.CachedTokens = math.NaN()
	case d.cachedN < d.usage:
		p.PromptTokens = d.promptCached
	}
	saturated, identity, reuse = d.saturated, d.identity, d.reuse
	*d = diagAcc{sample: d.sample[:0], identity: d.identity, reuse: d.reuse}
	return p, saturated, identity, reuse
}

// observeResult counts a result into the judge's interval.
func (a *probeAcc) observeResult(res *wire.Result) {
	a.mu.Lock()
	a.d.observe(res)
	a.mu.Unlock()
}

// setState records a runner's judge-loop state for the interval.
func (a *probeAcc) setState(saturated bool, identity string, reuse float64) {
	a.mu.Lock()
	a.d.saturated = a.d.saturated || saturated
	a.d.identity, a.d.reuse = identity, reuse
	a.mu.Unlock()
}

// takeInterval is diagAcc.take under the lock.
func (a *probeAcc) takeInterval() (diagnosis.ProbeFigures, bool, string, float64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.d.take()
}

// diagnosisState tells the server view's interval (if any) the runner's
// harness verdict, its target's identity key and its workload's intended
// prefix reuse (from the judge loop, once a second).
func (r *runner) diagnosisState(now time.Time) {
	if a := r.srv.Load(); a != nil {
		a.setState(r.saturated.Load(), r.identity.key(now), reuseIntent(r.workload.Load()))
	}
}

// reuseIntent is the workload's intended prefix reuse: its classes'
// ReuseIntent weighted by their weights (0 when none).
func reuseIntent(w *workload.Workload) float64 {
	if w == nil {
		return 0
	}
	sum, weight := 0.0, 0.0
	for _, c := range w.Classes {
		sum += c.ReuseIntent * c.Weight
		weight += c.Weight
	}
	if weight <= 0 {
		return 0
	}
	return sum / weight
}

// key is the identity's key for the judge at now: it changes when the
// tracker confirms a change of a part (a part learned the first time is
// no change), once per deploy: the changes confirmed within DeployBurst
// of the one that changed the key (a new build's fingerprint, Server
// header and version each confirmed on their own, seconds apart) leave
// it as it is, so that the judge cuts its history once, at the first.
func (t *identityTracker) key(now time.Time) string {
	if t == nil {
		return ""
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	n := uint64(0)
	for _, c := range t.changes {
		n += c
	}
	if n != t.keyChanges {
		if t.keyAt.IsZero() || now.Sub(t.keyAt) >= DeployBurst {
			t.keySeq++
			t.keyAt = now
		}
		t.keyChanges = n
	}
	return "build:" + strconv.FormatUint(t.keySeq, 10)
}

// DeployBurst is how long after a change of the identity's key further
// changes count as the same deploy.
const DeployBurst = time.Minute

// serverFigures copies a server window's figures to the judge's: a figure
// the engine lacks is NaN or an empty Mean, never zero.
func serverFigures(w *servermetrics.Window) *diagnosis.ServerFigures {
	hist := func(h *servermetrics.Histogram) diagnosis.Mean {
		if h == nil {
			return diagnosis.Mean{}
		}
		return diagnosis.Mean{Sum: h.Sum, Count: h.Count}
	}
	mean := func(m *servermetrics.Mean) diagnosis.Mean {
		if m == nil {
			return diagnosis.Mean{}
		}
		return diagnosis.Mean{Sum: m.Sum, Count: m.Count}
	}
	val := func(v *float64) float64 {
		if v == nil {
			return math.NaN()
		}
		return *v
	}
	return &diagnosis.ServerFigures{
		Engine:            w.Engine,
		TTFTIncludesQueue: w.TTFTIncludesQueue,
		TTFT:              hist(w.TTFT),
		Queue:             mean(w.Queue),
		Prefill:           mean(w.Prefill),
		Decode:            mean(w.Decode),
		ITL:               hist(w.ITL),
		PromptLen:         hist(w.PromptLength),
		Running:           val(w.Running),
		Waiting:           val(w.Waiting),
		KVUsage:           val(w.KVUsage),
		Preemptions:       val(w.Preemptions),
		Finished:          val(w.Finished),
		PrefixHits:        val(w.PrefixHits),
		PrefixQueries:     val(w.PrefixQueries),
	}
}

// addInterval gives the judge what the read ending at end saw: cur, and
// w when the read and the one before it succeeded. Called by the
// reader's goroutine only.
func (sr *serverReader) addInterval(end time.Time, cur *servermetrics.Reading, w *servermetrics.Window, first bool, gpu *float64) {
	p, sat, id, reuse := sr.acc.takeInterval()
	in := diagnosis.Interval{End: end, Probe: p, GPUUtil: gpu, Saturated: sat, Identity: id, ReuseIntent: reuse}
	switch {
	case cur.Outcome != servermetrics.OutcomeOK:
		in.Why = cur.Err
	case first:
		in.Why = "one successful read: the figures need two"
	case !sr.lastOK:
		in.Why = "the first read after a failed one: its window spans the failure"
	default:
		in.Server = serverFigures(w)
		if w.TTFT == nil {
			in.Why = "no server TTFT: " + w.Missing[servermetrics.FigureTTFT]
		}
	}
	sr.lastOK = cur.Outcome == servermetrics.OutcomeOK
	// An interval not after the last one (the wall clock stepped back)
	// is refused: it is dropped, the next one counts.
	_ = sr.judge.Add(in)
}

// decide asks the judge for a verdict at now. Called by the reader's
// goroutine only.
func (sr *serverReader) decide(now time.Time) {
	d := &Diagnosis{Verdict: sr.judge.Verdict(now), At: now}
	sr.mu.Lock()
	sr.diag = d
	sr.mu.Unlock()
}

// diagnosis is the reader's latest verdict (nil before the first, or for
// a nil reader).
func (sr *serverReader) diagnosis() *Diagnosis {
	if sr == nil {
		return nil
	}
	sr.mu.Lock()
	defer sr.mu.Unlock()
	return sr.diag
}

// poolDiagnosis is a discovery target's own verdict from its live
// replicas' (server_metrics: path): the most common cause other than none
// (ties go to the earlier cause of diagnosis.Causes), none when every
// replica's is none; the evidence and sentence of the first replica by
// name that named it, Since the earliest of theirs. nil before any
// replica was judged.
func poolDiagnosis(reps []ReplicaStatus) *Diagnosis {
	var judged []ReplicaStatus
	count := map[diagnosis.Cause]int{}
	for _, r := range reps {
		if r.Diagnosis != nil && r.Gone.IsZero() {
			judged = append(judged, r)
			count[r.Diagnosis.Cause]++
		}
	}
	if len(judged) == 0 {
		return nil
	}
	best, n := diagnosis.None, 0
	for _, c := range diagnosis.Causes {
		if c != diagnosis.None && count[c] > n {
			best, n = c, count[c]
		}
	}
	if n == 0 {
		n = count[diagnosis.None]
	}
	var d *Diagnosis
	for _, r := range judged {
		if r.Diagnosis.Cause != best {
			continue
		}
		if d == nil {
			c := *r.Diagnosis
			d = &c
			d.From = r.Name
			continue
		}
		if r.Diagnosis.Since.Before(d.Since) {
			d.Since = r.Diagnosis.Since
		}
		d.At = maxTime(d.At, r.Diagnosis.At)
	}
	d.Named, d.Judged = n, len(judged)
	d.Sentence = fmt.Sprintf("%s on %d of %d replicas; %s: %s", best, n, len(judged), d.From, d.Sentence)
	return d
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// noViewWhy says why a target has no verdict: the reason its (or its
// first replica's) server view gives, "" when it has no server_metrics.
func noViewWhy(ts *TargetStatus) string {
	if ts.Server != nil {
		return cmp.Or(ts.Server.Why, "not judged yet")
	}
	for _, r := range ts.Replicas {
		if r.Server != nil && r.Gone.IsZero() {
			return cmp.Or(r.Server.Why, "not judged yet")
		}
	}
	return ""
}
