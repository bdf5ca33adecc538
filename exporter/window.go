// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package exporter

import (
	"math"
	"time"

	"github.com/llmprobe/llmprobe/probe/wire"
)

// The status page's recent window: per target, a ring of windowSlots
// slots of windowSlot each (5 minutes), holding the requested rate (as
// sampled from the engine), the arrivals scheduled and sent, and per class
// TTFT, TPOT and E2E histograms. Memory is fixed per class (about 35 KiB)
// whatever the request rate; recording a request costs a logarithm and
// three increments under the target's lock.
const (
	windowSlot  = 10 * time.Second
	windowSlots = 30
	// Span is what the page says the window covers.
	windowSpan = windowSlot * windowSlots
)

// Latency histogram bins: log-spaced upper bounds 100µs × 1.2^i, up to
// about 19 minutes, so a quantile is within 10% of the truth (and exact
// for min and max, which are tracked).
const (
	latBins   = 90
	latBase   = 100 * time.Microsecond
	latGrowth = 1.2
)

var logLatGrowth = math.Log(latGrowth)

// latBin returns the bin of d: the first whose upper bound is ≥ d.
func latBin(d time.Duration) int {
	if d <= latBase {
		return 0
	}
	i := int(math.Ceil(math.Log(float64(d)/float64(latBase)) / logLatGrowth))
	return min(i, latBins-1)
}

// latBound returns the upper bound of bin i.
func latBound(i int) float64 { return float64(latBase) * math.Pow(latGrowth, float64(i)) }

// latHist is a fixed-size latency histogram.
type latHist struct {
	n        uint32
	min, max time.Duration
	bins     [latBins]uint32
}

func (h *latHist) add(d time.Duration) {
	d = max(d, 0)
	if h.n == 0 || d < h.min {
		h.min = d
	}
	if h.n == 0 || d > h.max {
		h.max = d
	}
	h.n++
	h.bins[latBin(d)]++
}

func (h *latHist) merge(o *latHist) {
	if o.n == 0 {
		return
	}
	if h.n == 0 || o.min < h.min {
		h.min = o.min
	}
	if h.n == 0 || o.max > h.max {
		h.max = o.max
	}
	h.n += o.n
	for i, c := range o.bins {
		h.bins[i] += c
	}
}

// quantile estimates the q-quantile, interpolating geometrically inside
// its bin and clamped to the observed min and max (0 when empty).
func (h *latHist) quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := q * float64(h.n)
	var cum float64
	for i, c := range h.bins {
		if c == 0 {
			continue
		}
		if cum+float64(c) >= rank {
			hi := latBound(i)
			lo := hi / latGrowth
			if i == 0 {
				lo = 0
			}
			frac := (rank - cum) / float64(c)
			v := lo + (hi-lo)*frac
			if lo > 0 {
				v = lo * math.Pow(hi/lo, frac)
			}
			return min(max(time.Duration(v), h.min), h.max)
		}
		cum += float64(c)
	}
	return h.max
}

// classSlot is one slot of one class: the latencies of the requests that
// ended in it.
type classSlot struct {
	ttft, tpot, e2e latHist
}

// targetSlot is one slot of a target's timeline.
type targetSlot struct {
	start     int64   // unix nanoseconds of the slot's start; another value means stale
	requested float64 // the requested rate last sampled in the slot; NaN when none
	scheduled uint32
	sent      uint32
}

// targetWindow is the recent window of one target; the owning
// targetRings' mutex guards it.
type targetWindow struct {
	created int64 // the start of the slot the window was created in
	slots   [windowSlots]targetSlot
	classes map[string]*[windowSlots]classSlot // slot i holds what slots[i].start says
}

func newTargetWindow(now time.Time, classes []string) *targetWindow {
	w := &targetWindow{created: slotStart(now), classes: make(map[string]*[windowSlots]classSlot, len(classes))}
	for i := range w.slots {
		w.slots[i].requested = math.NaN()
	}
	for _, c := range classes {
		w.classes[c] = new([windowSlots]classSlot)
	}
	return w
}

// setClasses keeps the classes still configured and adds new ones.
func (w *targetWindow) setClasses(classes []string) {
	next := make(map[string]*[windowSlots]classSlot, len(classes))
	for _, c := range classes {
		if s := w.classes[c]; s != nil {
			next[c] = s
		} else {
			next[c] = new([windowSlots]classSlot)
		}
	}
	w.classes = next
}

func slotStart(now time.Time) int64 {
	return now.UnixNano() - now.UnixNano()%int64(windowSlot)
}

// slot returns the index of now's slot, clearing it first when it held
// an older period.
func (w *targetWindow) slot(now time.Time) int {
	start := slotStart(now)
	i := int((start / int64(windowSlot)) % windowSlots)
	if w.slots[i].start != start {
		w.slots[i] = targetSlot{start: start, requested: math.NaN()}
		for _, cs := range w.classes {
			cs[i] = classSlot{}
		}
	}
	return i
}

func (w *targetWindow) scheduled(now time.Time) { w.slots[w.slot(now)].scheduled++ }
func (w *targetWindow) sent(now time.Time)      { w.slots[w.slot(now)].sent++ }
func (w *targetWindow) requested(now time.Time, rate float64) {
	w.slots[w.slot(now)].requested = rate
}

// observe records an ended request with the histograms' rules: warm-up
// requests are left out; TTFT when a first token came (whatever the
// outcome), TPOT for successes with at least 2 output tokens, E2E for
// successes.
func (w *targetWindow) observe(now time.Time, res *wire.Result) {
	if res.Warmup {
		return
	}
	cs := w.classes[res.Class]
	if cs == nil {
		return
	}
	s := &cs[w.slot(now)]
	if res.FirstToken {
		s.ttft.add(res.TTFT)
	}
	if res.Outcome == wire.OutcomeSuccess {
		if res.OutputTokens >= 2 {
			s.tpot.add(res.TPOT)
		}
		s.e2e.add(res.E2E)
	}
}

// live reports whether slot i belongs to the window ending at now.
func (w *targetWindow) live(i int, now time.Time) bool {
	st := w.slots[i].start
	cur := slotStart(now)
	return st > cur-int64(windowSpan) && st <= cur
}

// LatencySummary is TTFT, TPOT and E2E over the recent window, for a
// target (Class "") or one class.
type LatencySummary struct {
	Class           string
	TTFT, TPOT, E2E Quantiles
}

// Quantiles of one latency over the window; N is the number of requests
// measured (0: no data, the quantiles are 0).
type Quantiles struct {
	N        uint32
	P50, P99 time.Duration
}

func quantiles(h *latHist) Quantiles {
	return Quantiles{N: h.n, P50: h.quantile(0.5), P99: h.quantile(0.99)}
}

// TimelinePoint is one completed slot of a target's timeline.
type TimelinePoint struct {
	Start     time.Time
	Requested float64 // NaN when the engine was not sampled in the slot
	Achieved  float64 // sent per second; NaN before the target was configured
	Scheduled float64 // arrivals per second
	TTFT      Quantiles
}

// WindowSnapshot is a target's recent window.
type WindowSnapshot struct {
	Since, Until time.Time // the span the summaries cover
	Slot         time.Duration
	Summary      []LatencySummary // the target first (Class ""), then each class
	Timeline     []TimelinePoint  // completed slots, oldest first; absent ones have no traffic
}

// snapshot summarises the window ending at now; classes orders the
// per-class rows.
func (w *targetWindow) snapshot(now time.Time, classes []string) WindowSnapshot {
	cur := slotStart(now)
	snap := WindowSnapshot{
		Since: time.Unix(0, cur-int64(windowSpan)+int64(windowSlot)),
		Until: now,
		Slot:  windowSlot,
	}
	var total classSlot
	rows := make([]LatencySummary, 0, len(classes)+1)
	for _, c := range classes {
		cs := w.classes[c]
		if cs == nil {
			continue
		}
		var sum classSlot
		for i := range cs {
			if w.live(i, now) {
				sum.ttft.merge(&cs[i].ttft)
				sum.tpot.merge(&cs[i].tpot)
				sum.e2e.merge(&cs[i].e2e)
			}
		}
		total.ttft.merge(&sum.ttft)
		total.tpot.merge(&sum.tpot)
		total.e2e.merge(&sum.e2e)
		rows = append(rows, LatencySummary{Class: c, TTFT: quantiles(&sum.ttft), TPOT: quantiles(&sum.tpot), E2E: quantiles(&sum.e2e)})
	}
	snap.Summary = append([]LatencySummary{{TTFT: quantiles(&total.ttft), TPOT: quantiles(&total.tpot), E2E: quantiles(&total.e2e)}}, rows...)

	// The timeline: every completed slot of the window, oldest first.
	per := windowSlot.Seconds()
	for k := windowSlots - 1; k >= 1; k-- {
		start := cur - int64(k)*int64(windowSlot)
		p := TimelinePoint{Start: time.Unix(0, start), Requested: math.NaN()}
		if start < w.created {
			p.Achieved, p.Scheduled = math.NaN(), math.NaN()
			snap.Timeline = append(snap.Timeline, p)
			continue
		}
		i := int((start / int64(windowSlot)) % windowSlots)
		if w.slots[i].start == start {
			s := w.slots[i]
			p.Requested = s.requested
			p.Achieved = float64(s.sent) / per
			p.Scheduled = float64(s.scheduled) / per
			var h latHist
			for _, cs := range w.classes {
				h.merge(&cs[i].ttft)
			}
			p.TTFT = quantiles(&h)
		}
		snap.Timeline = append(snap.Timeline, p)
	}
	return snap
}
