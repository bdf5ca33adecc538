// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package diagnosis

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// The windows (docs/design.md, "Diagnosis").
const (
	// RecentWindow is what a verdict judges: the last 2 minutes, 120
	// probe requests at 1 req/s and 8 reads at 15 s.
	RecentWindow = 2 * time.Minute
	// StateWindow is the queueing rule's window for "requests waited":
	// the last 60 s, 4 reads at 15 s.
	StateWindow = 60 * time.Second
	// MinHistory is the history the growth rules need (the 60 s).
	MinHistory = 60 * time.Second
	// DeployWindow is how long after an identity change the deploy rule
	// compares with the state before it.
	DeployWindow = 10 * time.Minute
	// HistoryHalfLife is the history's decay: "since the daemon started
	// or the identity last changed", weighted so that a read 6 hours old
	// counts half. Sums since start would make a daemon that ran for a
	// month blind to any change that persisted for days; with the decay
	// a step that persists stops being named growth after about 10
	// hours (a doubling falls under GrowthDelta after 1.6 half-lives),
	// while the state rules keep saying what holds.
	HistoryHalfLife = 6 * time.Hour
	// MaxRecent bounds the recent ring: at the 1 s minimum read interval
	// 2 minutes are 120 reads.
	MaxRecent = 256
)

// The thresholds (docs/design.md, "Diagnosis", says why each).
const (
	// MinProbeRequests is the fewest probe requests with a TTFT the
	// recent window (and the history, and the state before a deploy) must
	// hold: a quarter of what 1 req/s gives in 2 minutes; the mean of 30
	// log-normal TTFTs of σ 0.5 is within ±10% at 1σ.
	MinProbeRequests = 30
	// MinServerCount is the fewest observations of an engine histogram
	// (sum/count delta) on each side before its mean is compared.
	MinServerCount = 20
	// MinFinished is the fewest finished requests on each side before
	// preemptions per request are compared.
	MinFinished = 50
	// ViewShare: unknown when the server view is missing in at least this
	// share of the recent reads.
	ViewShare = 0.5
	// HarnessShare: harness when the harness was saturated in at least
	// this share of the recent reads. A saturated read's figures are the
	// harness' and are left out of every window (the recent one, the
	// state window, the history), so a second of CPU starvation on a
	// busy host costs its own read, not two minutes of verdicts; the
	// reads left are judged by the other rules, unknown when too few.
	HarnessShare = 0.5
	// MinStateReads is the fewest reads of the last StateWindow with a
	// waiting figure before "requests waited" is judged.
	MinStateReads = 3

	// WaitingShare: queueing needs waiting > 0 in at least this share of
	// the reads of the last StateWindow (the 80%).
	WaitingShare = 0.8
	// QueueShare: queueing needs the mean queue time to be at least this
	// share of the engine's mean TTFT (the half).
	QueueShare = 0.5
	// QueueFloor: and at least this long, so that a queue of tens of
	// milliseconds in front of a fast TTFT is not named.
	QueueFloor = 0.05
	// BatchFlat: the batch is at its limit when every read of the last
	// StateWindow had at least this share of the highest running seen.
	BatchFlat = 0.95
	// KVFull is the KV usage at which the cache is full (queueing kind
	// kv; decode needs less).
	KVFull = 0.90
	// GPUFull is the GPU utilization of capacity (queueing kind gpu).
	GPUFull = 0.95
	// GPULow is the GPU utilization under which added prefill time is
	// the length distribution or prefill skew, not capacity.
	GPULow = 0.60

	// GrowthDelta (δ): a figure grew when its recent mean exceeds the
	// history's by at least this share of the probe's history mean, and
	// by the absolute floor below. 25%: the recent mean of 120 requests
	// of a log-normal σ 0.5 TTFT moves ±5% at 1σ, and minute-scale load
	// swings of ±10% move the engine's means as much again.
	GrowthDelta = 0.25
	// TPOTDelta is δ for the TPOT side (the probe's TPOT, the engine's
	// ITL, the deploy rule's TPOT): decode slows with the running batch,
	// which a load swing moves through Little's law with a feedback (a
	// larger batch decodes slower, so requests stay longer): over 20
	// steady days a ±7% load swing moved the probe's TPOT by up to +27%
	// (TestGoalSteady), against +19% for TTFT.
	TPOTDelta = 0.40
	// TTFTFloor is the least added TTFT (and prefill time) called growth.
	TTFTFloor = 0.020
	// TPOTFloor is the least added TPOT (and ITL) called growth.
	TPOTFloor = 0.002
	// PathFloor is the least gap called path, by share or by growth: a
	// loopback or same-zone gap of a few milliseconds is not a cause.
	PathFloor = 0.020
	// RunningFloor is the least growth of the mean running batch (besides
	// GrowthDelta of its history) for decode.
	RunningFloor = 2
	// PreemptFloor is the least preemptions per finished request called
	// pressure, and PreemptFactor how many times the history's it must be.
	PreemptFloor  = 0.05
	PreemptFactor = 2
	// HitMargin: the probe's hit ratio is below the intended one when it
	// is short of it by more than this, and was at it when within it.
	HitMargin = 0.10
	// MixLimit: the probe's and the engine's mean prompt lengths may
	// differ by this factor at most before the gap is not judged (the
	// probe no longer mirrors the production mix).
	MixLimit = 1.5
)

// Verdict is a judge's answer for the recent window.
type Verdict struct {
	Cause Cause
	// Kind is the queueing kind (KindKV, KindBatch, KindGPU or "").
	Kind string
	// Evidence are the figures that decided it, in order.
	Evidence []Evidence
	// Sentence states it; every figure in it is one of Evidence.
	Sentence string
	// Since is when this cause was first named, verdict after verdict.
	Since time.Time
	// Also are other growth causes that held, by their share of the
	// added time, largest first (the verdict's Cause had the largest).
	Also []Cause
}

// Judge keeps one target's (or replica's) intervals and judges them.
// Not safe for concurrent use.
type Judge struct {
	recent []record // by end, within RecentWindow of the newest (at most MaxRecent)
	last   time.Time

	hist     sums      // decayed, to histEnd
	histFrom time.Time // start, or the last identity change
	histEnd  time.Time // the newest interval folded in

	before   *sums // the state before the last identity change
	changeAt time.Time

	identity   string
	runningMax float64

	cause Cause
	since time.Time
}

// NewJudge returns an empty judge.
func NewJudge() *Judge { return &Judge{} }

// Add records one interval. An interval that does not end after the
// last one added (or has no End) is refused with an error; a figure that
// is not one (NaN, ±Inf, a negative delta, a ratio above 1) is taken as
// absent.
func (j *Judge) Add(in Interval) error {
	if in.End.IsZero() {
		return errors.New("diagnosis: interval without an end: dropped")
	}
	if !in.End.After(j.last) {
		return fmt.Errorf("diagnosis: interval ending %s is not after the last one (%s): dropped",
			in.End.UTC().Format(time.RFC3339Nano), j.last.UTC().Format(time.RFC3339Nano))
	}
	if j.last.IsZero() {
		j.histFrom = in.End
	}
	j.last = in.End
	if in.Identity != "" {
		if j.identity != "" && in.Identity != j.identity {
			j.cut(in.End)
		}
		j.identity = in.Identity
	}
	r := newRecord(in)
	if finite(r.running) && !r.saturated {
		j.runningMax = max(j.runningMax, r.running)
	}
	j.recent = append(j.recent, r)
	j.advance(in.End)
	return nil
}

// cut starts a new history at an identity change, keeping what came
// before it for the deploy rule.
func (j *Judge) cut(at time.Time) {
	b := j.hist
	if !j.histEnd.IsZero() {
		b.scale(decay(at.Sub(j.histEnd)))
	}
	for i := range j.recent {
		if !j.recent[i].saturated {
			b.add(&j.recent[i])
		}
	}
	j.before, j.changeAt = &b, at
	j.hist, j.histFrom, j.histEnd = sums{}, at, time.Time{}
	j.recent = j.recent[:0]
	j.runningMax = 0
}

// decay is the history's weight after d.
func decay(d time.Duration) float64 {
	return math.Exp2(-d.Seconds() / HistoryHalfLife.Seconds())
}

// advance folds the intervals that left the recent window into the
// history (a saturated one is left out: its figures are the harness').
func (j *Judge) advance(now time.Time) {
	n := 0
	for n < len(j.recent) && (!j.recent[n].end.After(now.Add(-RecentWindow)) || len(j.recent)-n > MaxRecent) {
		r := &j.recent[n]
		if !r.saturated {
			if !j.histEnd.IsZero() {
				j.hist.scale(decay(r.end.Sub(j.histEnd)))
			}
			j.hist.add(r)
			j.histEnd = r.end
		}
		n++
	}
	if n > 0 {
		j.recent = slices.Delete(j.recent, 0, n)
	}
	if j.before != nil && now.Sub(j.changeAt) > DeployWindow {
		j.before = nil
	}
}

// Verdict judges the recent window ending at now (once a minute). A now
// before the last interval's end is taken as that end.
func (j *Judge) Verdict(now time.Time) Verdict {
	if now.Before(j.last) {
		now = j.last
	}
	j.advance(now)
	w := j.window(now)
	v := w.judge()
	if v.Cause != j.cause || j.since.IsZero() {
		j.cause, j.since = v.Cause, now
	}
	v.Since = j.since
	return v
}

// window is what one verdict looks at.
type window struct {
	j   *Judge
	now time.Time
	r   sums // the recent window's reads with the harness not saturated
	// reads and saturated count every read of the recent window, and
	// those with the harness saturated (in none of the sums).
	reads, saturated float64
	s                sums      // its last StateWindow
	state            []*record // the reads of the last StateWindow
	lastRd           *record   // the newest read
	why              string    // the newest reason for no server view
	sample           []float64
	b                builder
}

func (j *Judge) window(now time.Time) *window {
	w := &window{j: j, now: now}
	from, state := now.Add(-RecentWindow), now.Add(-StateWindow)
	for i := range j.recent {
		r := &j.recent[i]
		if !r.end.After(from) || r.end.After(now) {
			continue
		}
		w.reads++
		if r.saturated {
			w.saturated++
			continue
		}
		w.r.add(r)
		w.sample = append(w.sample, r.sample...)
		if !r.view && r.why != "" {
			w.why = r.why
		}
		if r.end.After(state) {
			w.s.add(r)
			w.state = append(w.state, r)
		}
		w.lastRd = r
	}
	return w
}

// judge applies the rules in their order.
func (w *window) judge() Verdict {
	b := &w.b
	var head string
	if len(w.sample) > 0 {
		b.add(EvProbeTTFTP99, quantile(w.sample, 0.99))
		head = "p99 TTFT " + b.f(EvProbeTTFTP99) + ": "
	}
	v := w.rules()
	v.Evidence = b.ev
	v.Sentence = head + v.Sentence
	return v
}

func (w *window) rules() Verdict {
	b, r, h := &w.b, &w.r, &w.j.hist
	// 1. harness.
	if w.saturated > 0 && w.saturated >= HarnessShare*w.reads {
		b.add(EvSaturatedReads, w.saturated)
		b.add(EvReads, w.reads)
		return Verdict{Cause: Harness, Sentence: fmt.Sprintf("harness: saturated in %s of %s reads: the probe's own figures cannot be judged",
			b.f(EvSaturatedReads), b.f(EvReads))}
	}
	// 2. unknown.
	if r.reads == 0 {
		return Verdict{Cause: Unknown, Sentence: "unknown: no reads in the last 2 minutes"}
	}
	b.add(EvReads, r.reads)
	b.add(EvServerViewShare, r.views/r.reads)
	if r.reads-r.views >= ViewShare*r.reads {
		why := ""
		if w.why != "" {
			why = " (" + w.why + ")"
		}
		return Verdict{Cause: Unknown, Sentence: fmt.Sprintf("unknown: a server view in %s of %s reads%s",
			b.f(EvServerViewShare), b.f(EvReads), why)}
	}
	b.add(EvProbeRequests, r.ttft.Count)
	if r.ttft.Count < MinProbeRequests {
		return Verdict{Cause: Unknown, Sentence: fmt.Sprintf("unknown: %s probe requests with a first token, %d needed",
			b.f(EvProbeRequests), MinProbeRequests)}
	}
	b.add(EvProbeTTFTMean, r.ttft.Value())
	// 3. deploy.
	if v, ok := w.deploy(); ok {
		return v
	}
	// 4. state rules.
	if v, ok := w.queueing(); ok {
		return v
	}
	mixOK := w.mix()
	if mixOK {
		if v, ok := w.pathShare(); ok {
			return v
		}
	}
	// 5. growth rules.
	span := w.j.histEnd.Sub(w.j.histFrom)
	if w.j.histEnd.IsZero() {
		span = 0
	}
	b.add(EvHistorySeconds, span.Seconds())
	if span < MinHistory || h.ttft.Count < MinProbeRequests || h.views == 0 {
		return Verdict{Cause: Unknown, Sentence: fmt.Sprintf("unknown: no state rule holds and the history is %s of the %.0f s the growth rules need",
			b.f(EvHistorySeconds), MinHistory.Seconds())}
	}
	if v, ok := w.growth(mixOK); ok {
		return v
	}
	// 6. none.
	return w.none()
}

// grew is the growth test: added at least δ of base and the floor.
func grew(added, base, floor float64) bool {
	return finite(added) && added >= floor && added >= GrowthDelta*base
}

// grewTPOT is grew for the TPOT side (TPOTDelta).
func grewTPOT(added, base float64) bool {
	return finite(added) && added >= TPOTFloor && added >= TPOTDelta*base
}

// enough reports whether both means have at least n observations.
func enough(a, b Mean, n float64) bool { return a.Count >= n && b.Count >= n }

func (w *window) deploy() (Verdict, bool) {
	j, b, r := w.j, &w.b, &w.r
	if j.before == nil {
		return Verdict{}, false
	}
	p := j.before
	b.add(EvIdentityAge, w.now.Sub(j.changeAt).Seconds())
	ttft := enough(r.ttft, p.ttft, MinProbeRequests) && grew(r.ttft.Value()-p.ttft.Value(), p.ttft.Value(), TTFTFloor)
	tpot := enough(r.tpot, p.tpot, MinProbeRequests) && grewTPOT(r.tpot.Value()-p.tpot.Value(), p.tpot.Value())
	if !ttft && !tpot {
		return Verdict{}, false
	}
	var parts []string
	if ttft {
		b.add(EvProbeTTFTMeanHistory, p.ttft.Value())
		parts = append(parts, fmt.Sprintf("TTFT %s vs %s before", b.f(EvProbeTTFTMean), b.f(EvProbeTTFTMeanHistory)))
	}
	if tpot {
		b.add(EvProbeTPOTMean, r.tpot.Value())
		b.add(EvProbeTPOTMeanHistory, p.tpot.Value())
		parts = append(parts, fmt.Sprintf("TPOT %s vs %s before", b.f(EvProbeTPOTMean), b.f(EvProbeTPOTMeanHistory)))
	}
	return Verdict{Cause: Deploy, Sentence: fmt.Sprintf("deploy: the identity changed %s ago, %s",
		b.f(EvIdentityAge), strings.Join(parts, ", "))}, true
}

func (w *window) queueing() (Verdict, bool) {
	b, r, s := &w.b, &w.r, &w.s
	var n, pos float64
	for _, rd := range w.state {
		if finite(rd.waiting) {
			n++
			if rd.waiting > 0 {
				pos++
			}
		}
	}
	if n < MinStateReads || pos < WaitingShare*n {
		return Verdict{}, false
	}
	q, t := r.queue.Value(), r.srvTTFT.Value()
	if r.queue.Count < MinServerCount || r.srvTTFT.Count < MinServerCount || !(q >= QueueShare*t) || !(q >= QueueFloor) {
		return Verdict{}, false
	}
	if w.lastRd != nil {
		b.add(EvWaiting, w.lastRd.waiting)
	}
	b.add(EvWaitingShare, pos/n)
	b.add(EvQueueMean, q)
	b.add(EvServerTTFTMean, t)
	b.add(EvQueueShare, q/t)
	b.add(EvRunning, s.running.Value())
	kv, gpu := s.kv.Value(), s.gpu.Value()
	b.add(EvKVUsage, kv)
	b.add(EvGPUUtil, gpu)
	flat := w.j.runningMax >= 1
	for _, rd := range w.state {
		if !finite(rd.running) || rd.running < BatchFlat*w.j.runningMax {
			flat = false
		}
	}
	kind, limit := "", "at no known limit"
	var limits []string
	if kv >= KVFull {
		limits = append(limits, "KV "+b.f(EvKVUsage))
		kind, limit = KindKV, "at its KV cache's limit"
	}
	if flat {
		b.add(EvRunningMax, w.j.runningMax)
		limits = append(limits, b.f(EvRunning)+" running, flat at the most seen ("+b.f(EvRunningMax)+")")
		if kind == "" {
			kind, limit = KindBatch, "at its batch limit"
		}
	}
	if gpu >= GPUFull {
		limits = append(limits, "GPU "+b.f(EvGPUUtil))
		if kind == "" {
			kind, limit = KindGPU, "at its GPUs' limit"
		}
	}
	waiting := b.f(EvWaitingShare) + " of reads waiting"
	if b.has(EvWaiting) {
		waiting = b.f(EvWaiting) + " waiting"
	}
	desc := strings.Join(append([]string{waiting}, limits...), ", ")
	return Verdict{Cause: Queueing, Kind: kind, Sentence: fmt.Sprintf("queueing %s: %s, queue time %s of %s TTFT",
		limit, desc, b.f(EvQueueMean), b.f(EvServerTTFTMean))}, true
}

// mix reports whether the probe's requests may be compared with the
// engine's whole traffic: their mean prompt lengths within MixLimit of
// each other (or either unknown).
func (w *window) mix() bool {
	b, r := &w.b, &w.r
	pl, sl := r.probePromptLen(), r.promptLen.Value()
	if !(pl > 0) || !(sl > 0) || r.promptLen.Count < MinServerCount {
		return true
	}
	if max(pl/sl, sl/pl) <= MixLimit {
		return true
	}
	b.add(EvProbePromptLenMean, pl)
	b.add(EvPromptLenMean, sl)
	return false
}

func (w *window) pathShare() (Verdict, bool) {
	b, r := &w.b, &w.r
	if r.ttftViewed.Count < MinProbeRequests || r.srvTTFT.Count < MinServerCount {
		return Verdict{}, false
	}
	g, t := r.gap(), r.srvTTFT.Value()
	q := 0.0
	if r.queue.Count >= MinServerCount {
		q = r.queue.Value()
	}
	if !(g >= PathFloor) || !(g > q) || !(g > t-q) {
		return Verdict{}, false
	}
	b.add(EvGapMean, g)
	b.add(EvProbeTTFTMean, r.ttftViewed.Value())
	b.add(EvServerTTFTMean, t)
	return Verdict{Cause: Path, Sentence: fmt.Sprintf("path: gap %s of %s TTFT, the engine's %s",
		b.f(EvGapMean), b.f(EvProbeTTFTMean), b.f(EvServerTTFTMean))}, true
}

// candidate is a growth cause that held, with its share of the added
// time.
type candidate struct {
	cause Cause
	share float64
	rank  int // among equal shares: lower first
	say   func() string
}

func (w *window) growth(mixOK bool) (Verdict, bool) {
	b, r, h := &w.b, &w.r, &w.j.hist
	var cands []candidate

	// The TTFT side: the probe's added TTFT over the intervals with a
	// server view, split into gap, queue, prefill and the rest.
	var addT, dGap, dQueue, dPrefill float64
	grewT := false
	if enough(r.ttftViewed, h.ttftViewed, MinProbeRequests) && enough(r.srvTTFT, h.srvTTFT, MinServerCount) {
		base := h.ttftViewed.Value()
		addT = r.ttftViewed.Value() - base
		grewT = grew(addT, base, TTFTFloor)
		dGap = r.gap() - h.gap()
		if enough(r.queue, h.queue, MinServerCount) {
			dQueue = r.queue.Value() - h.queue.Value()
		}
		if enough(r.prefill, h.prefill, MinServerCount) {
			dPrefill = r.prefill.Value() - h.prefill.Value()
		}
		if grewT {
			b.add(EvProbeTTFTMean, r.ttftViewed.Value())
			b.add(EvProbeTTFTMeanHistory, base)
			b.add(EvTTFTAdded, addT)
		}
	}
	// The TPOT side.
	var addD, dITL float64
	grewD, itlKnown := false, false
	if enough(r.tpot, h.tpot, MinProbeRequests) {
		base := h.tpot.Value()
		addD = r.tpot.Value() - base
		grewD = grewTPOT(addD, base)
		if enough(r.itl, h.itl, MinServerCount) {
			itlKnown = true
			dITL = r.itl.Value() - h.itl.Value()
		}
	}
	shareT := func(d float64) float64 {
		if !grewT || !(addT > 0) {
			return 0
		}
		return d / addT
	}
	shareD := func(d float64) float64 {
		if !grewD || !(addD > 0) {
			return 0
		}
		return d / addD
	}
	addTPOT := func() {
		b.add(EvProbeTPOTMean, r.tpot.Value())
		b.add(EvProbeTPOTMeanHistory, h.tpot.Value())
		b.add(EvTPOTAdded, addD)
	}

	// path: the gap grew (the server's own TTFT growing more gives its
	// cause the larger share).
	if mixOK && grewT && grew(dGap, h.ttftViewed.Value(), PathFloor) {
		cands = append(cands, candidate{Path, shareT(dGap), 0, func() string {
			b.add(EvGapMean, r.gap())
			b.add(EvGapMeanHistory, h.gap())
			b.add(EvServerTTFTMean, r.srvTTFT.Value())
			b.add(EvServerTTFTMeanHistory, h.srvTTFT.Value())
			return fmt.Sprintf("path: the gap grew to %s from %s, the engine's TTFT %s vs %s",
				b.f(EvGapMean), b.f(EvGapMeanHistory), b.f(EvServerTTFTMean), b.f(EvServerTTFTMeanHistory))
		}})
	}
	// prefix_cache: the probe's observed hit ratio fell below the intended
	// one, where it was at it; the prefill time it adds is its share.
	intent := 0.0
	if w.lastRd != nil {
		intent = w.lastRd.reuse
	}
	hr, hh := r.hitRatio(), h.hitRatio()
	prefixLost := intent > 0 && hr < intent-HitMargin && hh >= intent-HitMargin
	if prefixLost {
		cands = append(cands, candidate{PrefixCache, max(shareT(dPrefill), 0), 1, func() string {
			b.add(EvProbeHitRatio, hr)
			b.add(EvProbeHitRatioHistory, hh)
			b.add(EvIntendedHitRatio, intent)
			b.add(EvServerHitRatio, r.serverHitRatio())
			b.add(EvServerHitRatioHistory, h.serverHitRatio())
			s := fmt.Sprintf("prefix_cache: the probe's hit ratio %s, intended %s (it was %s)",
				b.f(EvProbeHitRatio), b.f(EvIntendedHitRatio), b.f(EvProbeHitRatioHistory))
			if b.has(EvServerHitRatio) && b.has(EvServerHitRatioHistory) {
				s += fmt.Sprintf(", the engine's %s (was %s)", b.f(EvServerHitRatio), b.f(EvServerHitRatioHistory))
			}
			return s
		}})
	}
	// kv_pressure: preemptions per finished request rose.
	pr, ph := r.perRequest(), h.perRequest()
	if r.finished >= MinFinished && h.finished >= MinFinished && pr >= PreemptFloor && pr >= PreemptFactor*ph {
		share := max(shareT(dQueue+dPrefill), 0)
		if itlKnown {
			share = max(share, shareD(dITL))
		}
		cands = append(cands, candidate{KVPressure, share, 2, func() string {
			b.add(EvPreemptionsPerRequest, pr)
			b.add(EvPreemptionsHistory, ph)
			b.add(EvKVUsage, w.s.kv.Value())
			s := fmt.Sprintf("kv_pressure: %s preemptions per finished request (was %s)",
				b.f(EvPreemptionsPerRequest), b.f(EvPreemptionsHistory))
			if b.has(EvKVUsage) {
				s += ", KV " + b.f(EvKVUsage)
			}
			return s
		}})
	}
	// prefill: the prefill time grew, the GPUs not busy.
	gpu := r.gpu.Value()
	if !prefixLost && grewT && grew(dPrefill, h.ttftViewed.Value(), TTFTFloor) && !(gpu >= GPULow) {
		cands = append(cands, candidate{Prefill, shareT(dPrefill), 3, func() string {
			b.add(EvPrefillMean, r.prefill.Value())
			b.add(EvPrefillMeanHistory, h.prefill.Value())
			b.add(EvGPUUtil, gpu)
			s := fmt.Sprintf("prefill: prefill time %s vs %s", b.f(EvPrefillMean), b.f(EvPrefillMeanHistory))
			if r.promptLen.Count >= MinServerCount && h.promptLen.Count >= MinServerCount {
				b.add(EvPromptLenMean, r.promptLen.Value())
				b.add(EvPromptLenMeanHistory, h.promptLen.Value())
				s += fmt.Sprintf(", prompts %s vs %s", b.f(EvPromptLenMean), b.f(EvPromptLenMeanHistory))
			}
			if b.has(EvGPUUtil) {
				return s + ", GPU " + b.f(EvGPUUtil)
			}
			return s + ", GPU unknown"
		}})
	}
	// decode: TPOT (and the engine's ITL) grew with the running batch, the
	// KV cache not full.
	// KV is a gauge at the read: the last StateWindow's, not the recent
	// window's mean, which the minutes before a change would dilute.
	rr, rh, kv := r.running.Value(), h.running.Value(), w.s.kv.Value()
	runGrew := r.running.Count > 0 && h.running.Count > 0 && rr-rh >= RunningFloor && rr >= rh*(1+GrowthDelta)
	itlGrew := !itlKnown || grewTPOT(dITL, h.tpot.Value())
	if grewD && itlGrew && runGrew && !(kv >= KVFull) {
		share := 1.0
		if itlKnown {
			share = shareD(dITL)
		}
		cands = append(cands, candidate{Decode, share, 4, func() string {
			b.add(EvRunning, rr)
			b.add(EvRunningHistory, rh)
			b.add(EvKVUsage, kv)
			var s string
			if itlKnown {
				b.add(EvITLMean, r.itl.Value())
				b.add(EvITLMeanHistory, h.itl.Value())
				s = fmt.Sprintf("decode: ITL %s vs %s", b.f(EvITLMean), b.f(EvITLMeanHistory))
			} else {
				s = fmt.Sprintf("decode: TPOT %s vs %s", b.f(EvProbeTPOTMean), b.f(EvProbeTPOTMeanHistory))
			}
			s += fmt.Sprintf(", running %s vs %s", b.f(EvRunning), b.f(EvRunningHistory))
			if b.has(EvKVUsage) {
				s += ", KV " + b.f(EvKVUsage)
			}
			return s
		}})
	}
	if len(cands) == 0 {
		return Verdict{}, false
	}
	if grewD {
		addTPOT()
	}
	slices.SortStableFunc(cands, func(x, y candidate) int {
		switch {
		case x.share > y.share:
			return -1
		case x.share < y.share:
			return 1
		}
		return x.rank - y.rank
	})
	c := cands[0]
	s := c.say()
	if c.share > 0 {
		b.add(EvShare, c.share)
		s += fmt.Sprintf(": %s of the added %s", b.f(EvShare), sideOf(c.cause, grewT, b))
	}
	v := Verdict{Cause: c.cause, Sentence: s}
	for _, o := range cands[1:] {
		v.Also = append(v.Also, o.cause)
	}
	if len(v.Also) > 0 {
		var names []string
		for _, a := range v.Also {
			names = append(names, string(a))
		}
		v.Sentence += "; also " + strings.Join(names, ", ")
	}
	return v, true
}

// sideOf names the added time a cause's share is of.
func sideOf(c Cause, grewT bool, b *builder) string {
	if c == Decode || (c == KVPressure && !(grewT && b.has(EvTTFTAdded)) && b.has(EvTPOTAdded)) {
		return b.f(EvTPOTAdded) + " TPOT"
	}
	return b.f(EvTTFTAdded) + " TTFT"
}

func (w *window) none() Verdict {
	b, r := &w.b, &w.r
	var parts []string
	if b.has(EvProbeTTFTMean) {
		parts = append(parts, "TTFT "+b.f(EvProbeTTFTMean))
	}
	b.add(EvServerTTFTMean, r.srvTTFT.Value())
	b.add(EvGapMean, r.gap())
	if b.has(EvServerTTFTMean) {
		parts = append(parts, "the engine's "+b.f(EvServerTTFTMean))
	}
	switch {
	case b.has(EvGapMean) && b.has(EvProbePromptLenMean):
		parts = append(parts, fmt.Sprintf("gap %s not judged (probe prompts %s, the engine's %s)",
			b.f(EvGapMean), b.f(EvProbePromptLenMean), b.f(EvPromptLenMean)))
	case b.has(EvGapMean):
		parts = append(parts, "gap "+b.f(EvGapMean))
	}
	if w.lastRd != nil && finite(w.lastRd.waiting) {
		b.add(EvWaiting, w.lastRd.waiting)
		parts = append(parts, b.f(EvWaiting)+" waiting")
	}
	if kv := r.kv.Value(); finite(kv) {
		b.add(EvKVUsage, kv)
		parts = append(parts, "KV "+b.f(EvKVUsage))
	}
	return Verdict{Cause: None, Sentence: "none: " + strings.Join(parts, ", ")}
}

// quantile is the q-quantile of vs (sorted in place), by the nearest
// rank.
func quantile(vs []float64, q float64) float64 {
	slices.Sort(vs)
	i := int(math.Ceil(q*float64(len(vs)))) - 1
	return vs[min(max(i, 0), len(vs)-1)]
}
