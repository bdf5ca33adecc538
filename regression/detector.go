// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package regression

import (
	"math"
	"slices"
	"sync"
	"time"
	"unsafe"
)

// Result is one evaluation of a [Detector].
type Result struct {
	// Regressed is true while a regression holds: raised by a test at
	// Threshold with the full effect gate, held while the samples since
	// ChangePoint stay below ExitLevel with half the gate.
	Regressed bool
	// Onset is the evaluation that raised the alarm (zero when not
	// regressed).
	Onset time.Time
	// ChangePoint is the estimated instant the distribution changed: the
	// split of the current samples that best separates them from the
	// baseline, or the Cut the current window began at (zero when not
	// regressed).
	ChangePoint time.Time
	// Test is the test that decided ("median", "tail" or "errors"); when
	// not regressed, the one closest to deciding ("" when none ran).
	Test string
	// MedianRatio is the current median over the baseline median and
	// P99Ratio the same for the p99 (Latency; NaN when either side is
	// too small to test: the p99 needs TailMinSamples current samples).
	MedianRatio, P99Ratio float64
	// Shift is the Hodges–Lehmann estimate of the current/baseline ratio
	// the median test's gate judges (the median of the ratios of every
	// current value to every baseline value; for a change of scale, the
	// ratio of the medians, with less noise). Latency, while regressed;
	// NaN otherwise.
	Shift float64
	// BaselineRatio and CurrentRatio are the error ratios (Ratio kind;
	// NaN for Latency or when too small to test).
	BaselineRatio, CurrentRatio float64
	// BaselineN and CurrentN count the samples compared: the baseline, and
	// the current window the ratios describe (while regressed, the samples
	// since ChangePoint that hold it; else every current sample).
	BaselineN, CurrentN int
	// P is the p-value of the deciding test (while regressed, of its hold
	// test), else of the test closest to deciding (the smallest p over its
	// level); 1 when no test ran. TestN is the window that p-value is of.
	P     float64
	TestN int
	// Threshold is the per-test level in force for Test:
	// Options.MedianLevel, TailLevel or ErrorLevel, or
	// ExitLevel while a regression holds.
	Threshold float64
	// Accepted is true on the evaluation that accepted a regression held
	// for Options.AcceptAfter as the new baseline (worth a log line);
	// Recovered on the one that ended a regression.
	Accepted, Recovered bool
}

// Test names.
const (
	TestMedian = "median"
	TestTail   = "tail"
	TestErrors = "errors"
)

const (
	// exceedBit marks a current sample above the baseline's tail
	// threshold (Latency) or an error (Ratio); the low 15 bits hold its
	// placement against the baseline, doubled (ties count half).
	exceedBit = 1 << 15
	placeMask = exceedBit - 1
	// firstRing is the current window's first capacity; it doubles up to
	// CurrentCapacity.
	firstRing = 64
	// firstPromotion: a growing baseline takes current samples once there
	// are twice this many, and leaves at least this many.
	firstPromotion = 64
	// slack is how far before the first sample a detector's time base
	// lies, so that samples somewhat out of order keep their times.
	slack = int64(time.Hour)
	// holdMin is the least window a held regression is judged on.
	holdMin = 256
	// promotionGap is the least time between two promotions of a full
	// window into a full baseline: above 2.3 req/s the window would fill
	// faster, and the baseline would follow the series within minutes
	// (a slow rise would never differ from it).
	promotionGap = int64(15 * time.Minute)
)

// Detector decides whether one series (a target, class and metric) got
// worse than its baseline, from its samples and their times alone: no
// goroutines, clocks or I/O, so the same input always gives the same
// answers. Add feeds it every request's value, Cut tells it the target
// changed, Evaluate (about once a minute) judges. It is not safe for
// concurrent use.
//
// The baseline is a frozen sorted set of at most BaselineCapacity values;
// each current sample is placed against it once, on arrival. The current
// window is a ring of at most CurrentCapacity samples with their times
// and placements. Evaluate tests the last n current samples for n =
// MinSamples, 2×, 4×, … and all of them, each against the baseline: the
// median test is the one-sided Mann–Whitney U (the sum of placements),
// the tail test counts exceedances of the p99 of a larger tail baseline
// (exact), the errors test compares error counts (Fisher's exact test).
// A test alarms below its level (Options.MedianLevel, TailLevel,
// ErrorLevel) when its effect passes the gate. Current samples move into
// the baseline as it grows and then, the older half, whenever the window
// is full; never while an alarm holds or a test is suspicious.
type Detector struct {
	kind Kind
	o    Options

	// The baseline: ref (Latency) sorted ascending; refN values, refK of
	// them above the tail threshold ref[tailJ] (Latency) or errors
	// (Ratio); its median.
	ref        []float32
	refN, refK int
	tailJ      int
	refMed     float64
	// The tail test's baseline (Latency), and its threshold: thetaK of
	// the thetaM samples it stands for exceed theta (from tb, else from
	// the baseline: ref[tailJ], refK, refN).
	tb             tailBaseline
	theta          float32
	thetaK, thetaM int

	// The current window, a ring of n samples from head: values (Latency),
	// times (ms since base) and placements.
	val     []float32
	at      []uint32
	plc     []uint16
	head, n int
	base    int64 // unix ns
	started bool

	// lastPromotion is when the last promotion happened (unix ns).
	lastPromotion int64

	// The last Cut; fromCut: the current window began at it.
	cutNs   int64
	hasCut  bool
	fromCut bool

	rng uint64
	// inflate is the median test's variance inflation for serial
	// correlation (serialInflation), set at each evaluation from sdiff
	// and sweight.
	inflate float64
	sdiff   [serialLags + 1]float64
	sweight float64

	// The alarm.
	on      bool
	test    string
	fireN   int
	onsetNs int64
	cpNs    int64
}

// NewDetector returns a detector of kind with options o.WithDefaults(),
// which must be valid (o.WithDefaults().Validate() == nil): it panics
// otherwise, as a programming error.
func NewDetector(kind Kind, o Options) *Detector {
	o = o.WithDefaults()
	if err := o.Validate(); err != nil {
		panic(err)
	}
	if kind != Latency && kind != Ratio {
		panic("regression: unknown kind " + kind.String())
	}
	d := &Detector{kind: kind, o: o, rng: 0x6c6c6d70726f6265, inflate: 1}
	d.tb.reset()
	return d
}

// MemoryBytes is what the detector holds: at most about 61 KiB for
// Latency (the baseline's 4096 values, the tail baseline's 1024, the
// current window's 4096 values, times and placements) and 25 KiB for
// Ratio.
func (d *Detector) MemoryBytes() int {
	return int(unsafe.Sizeof(*d)) + 4*cap(d.ref) + 4*cap(d.tb.top) + 4*cap(d.val) + 4*cap(d.at) + 2*cap(d.plc)
}

// Add records one request's value at t: seconds (Latency; negative
// values are ignored) or 0/1 (Ratio; a value of 0.5 or more is an
// error). NaN and infinities are ignored, and so are samples timed before
// the last Cut (they belong to the target as it was). Times are kept to
// the millisecond; they need not be in order.
func (d *Detector) Add(t time.Time, v float64) {
	if math.IsNaN(v) || math.IsInf(v, 0) || (d.kind == Latency && v < 0) {
		return
	}
	ns := t.UnixNano()
	if d.hasCut && ns < d.cutNs {
		return
	}
	off := d.offset(ns)
	if d.n == CurrentCapacity {
		d.drop(1)
	}
	if d.n == len(d.at) {
		d.grow()
	}
	i := d.idx(d.n)
	d.at[i] = off
	if d.kind == Latency {
		f := float32(v)
		d.val[i] = f
		d.plc[i] = d.place(f)
		d.serialAdd()
	} else {
		d.plc[i] = 0
		if v >= 0.5 {
			d.plc[i] = exceedBit
		}
	}
	d.n++
}

// Cut says the target changed at t (a new model build or server
// version): the current samples before t join the baseline, and the
// current window starts afresh with what comes after. While a regression
// holds, the baseline stays as it is (the regressed samples are not a
// baseline), the samples before t are dropped and the alarm is judged
// on what comes after.
func (d *Detector) Cut(t time.Time) {
	ns := t.UnixNano()
	defer func() { d.hasCut, d.cutNs, d.fromCut = true, ns, true }()
	if d.n == 0 {
		return
	}
	cut := d.offsetOf(ns)
	before := func(i int) bool { return d.at[d.idx(i)] < cut }
	if d.on {
		d.remove(before, nil)
		return
	}
	d.moveToBaseline(before)
}

// Evaluate judges the series at now; call it about once a minute.
func (d *Detector) Evaluate(now time.Time) Result { return d.evaluate(now, true) }

// evaluate is Evaluate; with describe false, a Result that raises no
// alarm does not describe the current window (its ratios stay NaN, its
// CurrentN is every current sample): offline runs that need only the
// decisions (Step) skip that pass over the window, most of an
// evaluation's cost. It changes no decision and no state.
func (d *Detector) evaluate(now time.Time, describe bool) Result {
	if d.on {
		return d.hold(now.UnixNano())
	}
	var res Result
	if describe {
		res = d.result()
	} else {
		res = d.describe(window{c: d.n}, nil)
	}
	if d.refN < d.o.MinBaseline || d.n < d.o.MinSamples {
		d.maybePromote(now.UnixNano(), 0)
		return res
	}
	s := d.scratch()
	defer scratchPool.Put(s)
	d.inflate = d.serialInflation()
	var (
		best verdict
		fire verdict
		// held is how many of the newest samples stay out of the
		// baseline (maybePromote): all of them while a window that may
		// alarm is suspicious; for one too short in time to alarm on,
		// its own samples and those after the change point its test
		// estimates (suspects).
		held     int
		suspects [2]string
	)
	best.p = 1
	fire.p = 1
	d.windows(func(w window, short bool) {
		for _, v := range d.tests(w, s) {
			if v.p < ExitLevel && v.gate >= 0.5 {
				switch {
				case !short:
					held = d.n
				case suspects[0] == "" || suspects[0] == v.test:
					held, suspects[0] = max(held, w.c), v.test
				default:
					held, suspects[1] = max(held, w.c), v.test
				}
			}
			if short {
				continue
			}
			if v.p/d.level(v.test) < best.p/d.level(best.test) {
				best = v
			}
			if v.p < d.level(v.test) && v.gate >= 1 && v.p/d.level(v.test) < fire.p/d.level(fire.test) {
				fire = v
			}
		}
	})
	if fire.test != "" {
		d.on, d.test, d.fireN, d.onsetNs = true, fire.test, fire.w.c, now.UnixNano()
		d.cpNs = d.changePoint(fire.test)
		res = d.describe(fire.w, s)
		d.describeShift(&res, fire.w, s)
		res.Regressed, res.Test, res.P, res.TestN, res.Threshold = true, fire.test, fire.p, fire.w.c, d.level(fire.test)
		res.Onset, res.ChangePoint = now, time.Unix(0, d.cpNs)
		return res
	}
	if best.test != "" {
		res.Test, res.P, res.TestN, res.Threshold = best.test, best.p, best.w.c, d.level(best.test)
	}
	for _, test := range suspects {
		if test != "" && held < d.n {
			k, _ := d.split(test)
			held = max(held, d.n-k)
		}
	}
	d.maybePromote(now.UnixNano(), held)
	return res
}

// result describes every current sample against the baseline.
func (d *Detector) result() Result {
	var w window
	for i := d.n - 1; i >= 0; i-- {
		w.add(d.plc[d.idx(i)], false)
	}
	s := d.scratch()
	defer scratchPool.Put(s)
	return d.describe(w, s)
}

// level is test's per-test level.
func (d *Detector) level(test string) float64 {
	switch test {
	case TestMedian:
		return d.o.MedianLevel
	case TestErrors:
		return d.o.ErrorLevel
	}
	return d.o.TailLevel
}

// firstTest is the test every window of the kind runs.
func (d *Detector) firstTest() string {
	if d.kind == Ratio {
		return TestErrors
	}
	return TestMedian
}

// describe fills a Result's ratios and counts for window w (s nil: the
// counts only).
func (d *Detector) describe(w window, s *[]float32) Result {
	res := Result{
		MedianRatio: math.NaN(), P99Ratio: math.NaN(), Shift: math.NaN(), BaselineRatio: math.NaN(), CurrentRatio: math.NaN(),
		BaselineN: d.refN, CurrentN: w.c, P: 1, Threshold: d.level(d.firstTest()),
	}
	if d.refN < d.o.MinBaseline || w.c < d.o.MinSamples || s == nil {
		return res
	}
	if d.kind == Ratio {
		res.BaselineRatio = float64(d.refK) / float64(d.refN)
		res.CurrentRatio = float64(w.se) / float64(w.c)
		return res
	}
	med, p99 := d.quantiles(w, s)
	res.MedianRatio = med / d.refMed
	if w.c >= TailMinSamples {
		res.P99Ratio = p99 / float64(d.theta)
	}
	return res
}

// describeShift sets res.Shift for window w (Latency, when testable).
func (d *Detector) describeShift(res *Result, w window, s *[]float32) {
	if d.kind == Latency && d.refN >= d.o.MinBaseline && w.c >= d.o.MinSamples {
		res.Shift = d.shift(w, s)
	}
}

// window is the last c current samples: their placements summed (sp,
// doubled) and their exceedances (se); last is c at the last exceedance
// added.
type window struct{ c, sp, se, last int }

// tailRun declusters the tail test's exceedances: one within tailRun
// samples of a newer one is the same cluster and counts once. Under
// independence that only lowers the count (the exact test stays valid,
// a little conservative: about 2% of exceedances at a 1% rate); a server
// that queues sends its slow requests in bursts, and counting a burst
// once keeps the test near its level (runs declustering, as for the
// extremal index).
const tailRun = 1

// add extends w by one older sample with placement p.
func (w *window) add(p uint16, decluster bool) {
	w.c++
	w.sp += int(p & placeMask)
	if p&exceedBit != 0 {
		if !decluster || w.last == 0 || w.c-w.last > tailRun {
			w.se++
		}
		w.last = w.c
	}
}

// windows calls f for the last n current samples, n = MinSamples, 2×, 4×,
// …, and for all of them. A short window spans less than MinSpan: too
// short in time to raise an alarm on (Options.MinSpan), it is still
// judged for suspicion, which only holds samples back from the baseline
// (its own, and those after the change point its test estimates): else,
// after a step, the longer windows that mix it with the samples before
// it may all be unsuspicious while the step's first seconds are old
// enough to be promoted (a growing baseline takes all but the newest
// quarter at each evaluation).
func (d *Detector) windows(f func(w window, short bool)) {
	var w window
	next := d.o.MinSamples
	decluster := d.kind == Latency
	newest := int64(0)
	if d.n > 0 {
		newest = d.timeOf(d.n - 1)
	}
	span := d.o.MinSpan.Nanoseconds()
	for i := d.n - 1; i >= 0; i-- {
		w.add(d.plc[d.idx(i)], decluster)
		if w.c == next || i == 0 {
			f(w, newest-d.timeOf(i) < span)
			for next <= w.c {
				next *= 2
			}
		}
	}
}

// verdict is one test of one window: its p-value and its effect over the
// gate (≥ 1: the full gate passes, ≥ 0.5: half of it).
type verdict struct {
	test string
	w    window
	p    float64
	gate float64
}

// tests runs the kind's tests on w; the effects are measured only for a
// p-value below ExitLevel (the quantiles cost a pass over the window).
func (d *Detector) tests(w window, s *[]float32) []verdict {
	var out [2]verdict
	k := 0
	if d.kind == Ratio {
		v := verdict{test: TestErrors, w: w, p: FisherGreater(w.se, w.c, d.refK, d.refN)}
		if v.p < ExitLevel {
			v.gate = d.errorGate(w)
		}
		out[0] = v
		return out[:1]
	}
	med := verdict{test: TestMedian, w: w, p: RankSumGreater(float64(w.sp)/2, w.c, d.refN, d.inflate)}
	var tail verdict
	if w.c >= TailMinSamples {
		tail = verdict{test: TestTail, w: w, p: ExceedanceGreater(w.se, w.c, d.thetaK+1, d.thetaM)}
	}
	if med.p < ExitLevel {
		med.gate = (d.shift(w, s) - 1) / d.o.MedianEffect
	}
	if tail.test != "" && tail.p < ExitLevel {
		_, p99 := d.quantiles(w, s)
		tail.gate = (p99/float64(d.theta) - 1) / d.o.TailEffect
	}
	out[k] = med
	k++
	if tail.test != "" {
		out[k] = tail
		k++
	}
	return out[:k]
}

// Serial correlation: the median test's null variance is multiplied by
// 1 + 2 Σ ρ(k) over lags 1..serialLags, ρ(k) = 1 − D(k)/D(serialFar),
// where D(k) is the mean squared difference of placements k requests
// apart (exponentially weighted over about serialMemory samples). D(k) =
// 2σ²(1 − ρ(k)) for a stationary series, and a step in level adds only
// the k pairs that straddle it, so a regression does not inflate it the
// way a plain autocorrelation of the current window would.
const (
	serialLags   = 4
	serialFar    = 32
	serialMemory = 8192
)

// serialAdd accounts the sample just placed at logical index d.n.
func (d *Detector) serialAdd() {
	if d.refN < d.o.MinBaseline || d.n < serialFar {
		return
	}
	scale := 1 / float64(2*d.refN)
	u := func(i int) float64 { return float64(d.plc[d.idx(i)]&placeMask) * scale }
	x := u(d.n)
	const keep = 1 - 1.0/serialMemory
	for k := 1; k <= serialLags; k++ {
		v := x - u(d.n-k)
		d.sdiff[k-1] = d.sdiff[k-1]*keep + v*v
	}
	v := x - u(d.n-serialFar)
	d.sdiff[serialLags] = d.sdiff[serialLags]*keep + v*v
	d.sweight = d.sweight*keep + 1
}

// serialInflation is the variance factor, between 1 and 10 (1 until 256
// samples have been seen).
func (d *Detector) serialInflation() float64 {
	far := d.sdiff[serialLags]
	if d.sweight < 256 || !(far > 0) {
		return 1
	}
	f := 1.0
	for k := range serialLags {
		f += 2 * (1 - d.sdiff[k]/far)
	}
	return min(max(f, 1), 10)
}

// errorGate is the errors test's effect over its gate: the rise of the
// ratio over ErrorEffect, and the ratio over the baseline's over 2,
// whichever is less (each scaled so that half the gate is 0.5).
func (d *Detector) errorGate(w window) float64 {
	cur := float64(w.se) / float64(w.c)
	base := float64(d.refK) / float64(d.refN)
	abs := (cur - base) / d.o.ErrorEffect
	rel := math.Inf(1)
	if base > 0 {
		rel = cur/base - 1 // 2× is 1, 1.5× is 0.5
	}
	return min(abs, rel)
}

// shift is the Hodges–Lehmann estimate of how much larger window w's
// values are than the baseline's, as a ratio: the median of the ratios of
// every current value to every baseline value. For a change of scale it
// is the ratio of the medians, estimated with less noise (here 27% less
// than the medians' ratio: the rank estimate uses every pair).
func (d *Detector) shift(w window, s *[]float32) float64 {
	y := (*s)[:w.c]
	for i := range w.c {
		y[i] = d.val[d.idx(d.n-w.c+i)]
	}
	slices.Sort(y)
	half := float64(w.c) * float64(d.refN) / 2
	// above(r) counts the pairs with y > r·x.
	above := func(r float64) float64 {
		var c, j int
		for _, v := range y {
			t := float64(v) / r
			for j < d.refN && float64(d.ref[j]) < t {
				j++
			}
			c += j
		}
		return float64(c)
	}
	lo, hi := math.Log(1.0/1024), math.Log(1024.0)
	for range 40 {
		mid := (lo + hi) / 2
		if above(math.Exp(mid)) > half {
			lo = mid
		} else {
			hi = mid
		}
		if hi-lo < 1e-4 {
			break
		}
	}
	return math.Exp((lo + hi) / 2)
}

// quantiles are the median and p99 (type 7) of window w's values.
func (d *Detector) quantiles(w window, s *[]float32) (med, p99 float64) {
	v := (*s)[:w.c]
	for i := range w.c {
		v[i] = d.val[d.idx(d.n-w.c+i)]
	}
	hm, h99 := 0.5*float64(w.c-1), 0.99*float64(w.c-1)
	med = quantileAt(v, hm)
	// quantileAt left the values above the median's lower index after it.
	if i := int(hm) + 1; h99 >= float64(i) {
		return med, quantileAt(v[i:], h99-float64(i))
	}
	return med, quantileAt(v, h99)
}

// hold judges a held regression at now: the samples since the change
// point (at most 4× the window that raised it, at least holdMin) must
// stay below ExitLevel with half the effect gate in some test, or it ends
// and they are dropped; held for AcceptAfter, it becomes the baseline.
func (d *Detector) hold(now int64) Result {
	since := d.sinceChange()
	w := window{}
	limit := min(max(4*d.fireN, holdMin), CurrentCapacity)
	for i := d.n - 1; i >= d.n-since && w.c < limit; i-- {
		w.add(d.plc[d.idx(i)], d.kind == Latency)
	}
	s := d.scratch()
	defer scratchPool.Put(s)
	res := d.describe(w, s)
	d.describeShift(&res, w, s)
	res.Regressed, res.Test, res.Threshold = true, d.test, ExitLevel
	res.Onset, res.ChangePoint = time.Unix(0, d.onsetNs), time.Unix(0, d.cpNs)
	res.TestN = w.c
	if now-d.onsetNs >= int64(d.o.AcceptAfter) {
		d.accept(since)
		res.Regressed, res.Accepted = false, true
		return res
	}
	need := d.o.MinSamples
	if d.test == TestTail {
		need = TailMinSamples
	}
	if w.c < need {
		return res
	}
	held := false
	for _, v := range d.tests(w, s) {
		if v.test == d.test {
			res.P = v.p
		}
		if v.p < ExitLevel && v.gate >= 0.5 {
			held = true
		}
	}
	if !held {
		d.on = false
		d.drop(d.n)
		res.Regressed, res.Recovered = false, true
	}
	return res
}

// sinceChange counts the current samples from the newest back to the
// first one before the change point.
func (d *Detector) sinceChange() int {
	cp := d.offsetOf(d.cpNs)
	c := 0
	for i := d.n - 1; i >= 0 && d.at[d.idx(i)] >= cp; i-- {
		c++
	}
	return c
}

// accept makes the last since current samples (those of the regression)
// the baseline, and empties the current window.
func (d *Detector) accept(since int) {
	d.on = false
	if since < d.o.MinBaseline {
		since = d.n
	}
	d.ref = d.ref[:0]
	d.refN, d.refK = 0, 0
	d.tb.reset()
	first := d.n - since
	d.moveToBaseline(func(i int) bool { return i >= first })
	d.drop(d.n)
}

// changePoint estimates when the distribution changed, for test: the
// split of the current samples that maximises the log-likelihood ratio
// of "the samples after it differ from the baseline", the baseline being
// the known "before" (Hinkley's maximum-likelihood change point), with at
// least MinSamples samples after it. For the median test the placements
// after the split are Gaussian with a mean above the baseline's 1/2 and
// a variance of their own, against the baseline's 1/12: a large step
// puts them all near 1 with little spread, and a sample before it that
// only ranks high (against a narrow baseline, a drift of 1% does) fits
// that far worse than it fits the baseline. With the variance held at
// 1/12, every stretch before the step whose placements averaged over
// halfway to the step's was taken in, whatever its effect, and a
// doubling of a server whose TTFT barely varies was dated seconds to
// minutes early. The variance is not taken below 1/(12·refN²): a
// placement locates a value only to within a gap of the baseline. For
// the tail and errors tests, a Bernoulli ratio above the baseline's. The
// baseline is the null, so the split may be the first current sample;
// when the window began at a Cut and splitting there is nearly as likely
// as the best split (within cutLikelihood), the change point is the Cut.
func (d *Detector) changePoint(test string) int64 {
	if k, atCut := d.split(test); !atCut {
		return d.timeOf(k)
	}
	return d.cutNs
}

// split is changePoint's split: the logical index of the first current
// sample after it, and whether the change point is the Cut instead.
func (d *Detector) split(test string) (k int, atCut bool) {
	mu := 0.5
	switch test {
	case TestTail:
		mu = float64(d.thetaK+1) / float64(d.thetaM+1)
	case TestErrors:
		mu = max(float64(d.refK), 0.5) / float64(d.refN)
	}
	scale := 1 / float64(2*d.refN)
	floor := 1 / (12 * float64(d.refN) * float64(d.refN))
	bestK, best, atFirst := 0, -1.0, 0.0
	var sum, sq float64
	for i := d.n - 1; i >= 0; i-- {
		p := d.plc[d.idx(i)]
		if test == TestMedian {
			u := float64(p&placeMask)*scale - mu
			sum += u
			sq += u * u
		} else if p&exceedBit != 0 {
			sum++
		}
		m := d.n - i
		if m < d.o.MinSamples {
			continue
		}
		fm := float64(m)
		var llr float64
		if test == TestMedian {
			if sum > 0 {
				v := max(sq/fm-(sum/fm)*(sum/fm), floor)
				llr = fm/2*math.Log(1/(12*v)) - fm/2 + 6*sq
			}
		} else if r := sum / fm; r > mu {
			llr = fm * klBernoulli(r, mu)
		}
		if llr > best {
			bestK, best = i, llr
		}
		if i == 0 {
			atFirst = llr
		}
	}
	if d.fromCut && atFirst >= best-cutLikelihood {
		return 0, true
	}
	return bestK, false
}

// cutLikelihood is how much less likely (in log-likelihood) than the best
// split a change at the Cut may be and still be reported as the change
// point: a likelihood ratio of e³ ≈ 20, a loose interval, since a deploy
// is the likely cause of a change that begins with it.
const cutLikelihood = 3

// klBernoulli is the Kullback–Leibler divergence of Bernoulli(q) from
// Bernoulli(p), 0 < p < 1.
func klBernoulli(q, p float64) float64 {
	kl := q * math.Log(q/p)
	if q < 1 {
		kl += (1 - q) * math.Log((1-q)/(1-p))
	}
	return kl
}

// maybePromote moves current samples into the baseline, never the
// newest held of them (those a suspicious test holds back): while the
// baseline is below BaselineCapacity, all but the newest quarter (at
// least firstPromotion) of them once there are twice firstPromotion, so
// that a fresh detector soon has a baseline worth testing against; then,
// or when the current window began at a Cut with a testable baseline
// before it (the new target is judged against the old one on a full
// window), the older half whenever the window is full, at most once per
// promotionGap.
func (d *Detector) maybePromote(now int64, held int) {
	growing := d.refN < BaselineCapacity && !(d.fromCut && d.refN >= d.o.MinBaseline)
	var h int
	switch {
	case growing && d.n >= 2*firstPromotion:
		h = d.n - max(firstPromotion, d.n/4)
	case d.n >= CurrentCapacity && now-d.lastPromotion >= promotionGap:
		h = d.n / 2
	default:
		return
	}
	if h = min(h, d.n-held); h <= 0 {
		return
	}
	d.moveToBaseline(func(i int) bool { return i < h })
	d.fromCut = false
	d.lastPromotion = now
}

// moveToBaseline moves the current samples whose logical index satisfies
// move into the baseline; when it would outgrow BaselineCapacity, the
// room is made by dropping baseline values at random (so its ages decay
// geometrically), and when more move than it holds, the newest of them
// are kept. The rest of the current samples are placed anew.
func (d *Detector) moveToBaseline(move func(int) bool) {
	s := d.scratch()
	defer scratchPool.Put(s)
	moved := (*s)[:0]
	errs := 0
	d.remove(move, func(i int) {
		if d.kind == Latency {
			moved = append(moved, d.val[i])
		} else if d.plc[i]&exceedBit != 0 {
			errs++
			moved = append(moved, 1)
		} else {
			moved = append(moved, 0)
		}
	})
	if len(moved) > BaselineCapacity {
		moved = moved[len(moved)-BaselineCapacity:]
		if d.kind == Ratio {
			errs = 0
			for _, v := range moved {
				if v != 0 {
					errs++
				}
			}
		}
	}
	if len(moved) == 0 {
		return
	}
	evict := d.refN + len(moved) - BaselineCapacity
	if d.kind == Ratio {
		for ; evict > 0; evict-- {
			if d.randN(d.refN) < d.refK {
				d.refK--
			}
			d.refN--
		}
		d.refN += len(moved)
		d.refK += errs
		return
	}
	if evict > 0 {
		// Selection sampling (Knuth's algorithm S) keeps refN−evict of
		// the sorted values, in order.
		keep, kept := d.refN-evict, 0
		for i := 0; i < d.refN && kept < keep; i++ {
			if d.randN(d.refN-i) < keep-kept {
				d.ref[kept] = d.ref[i]
				kept++
			}
		}
		d.ref = d.ref[:kept]
	}
	if cap(d.ref) < len(d.ref)+len(moved) {
		grown := make([]float32, len(d.ref), min(BaselineCapacity, max(2*(len(d.ref)+len(moved)), 256)))
		copy(grown, d.ref)
		d.ref = grown
	}
	slices.Sort(moved)
	merge := d.scratch()
	defer scratchPool.Put(merge)
	d.tb.add(moved, (*merge)[:0:cap(*merge)], d.randN)
	// Merge the sorted moved values in from the back.
	i, j := len(d.ref)-1, len(moved)-1
	d.ref = d.ref[:len(d.ref)+len(moved)]
	for k := len(d.ref) - 1; j >= 0; k-- {
		if i >= 0 && d.ref[i] > moved[j] {
			d.ref[k] = d.ref[i]
			i--
		} else {
			d.ref[k] = moved[j]
			j--
		}
	}
	d.refN = len(d.ref)
	d.tailJ = min(int(0.99*float64(d.refN)), d.refN-1)
	d.refK = d.refN - upperBound(d.ref, d.ref[d.tailJ])
	d.refMed = sortedQuantile(d.ref, 0.5)
	var ok bool
	if d.theta, d.thetaK, d.thetaM, ok = d.tb.threshold(); !ok {
		d.theta, d.thetaK, d.thetaM = d.ref[d.tailJ], d.refK, d.refN
	}
	for i := range d.n {
		j := d.idx(i)
		d.plc[j] = d.place(d.val[j])
	}
}

// place is a value's placement against the baseline (doubled: below
// counts 2, a tie 1) and whether it exceeds the tail threshold.
func (d *Detector) place(v float32) uint16 {
	if d.refN == 0 {
		return 0
	}
	lo := lowerBound(d.ref, v)
	hi := lo
	for hi < d.refN && d.ref[hi] == v {
		hi++
	}
	p := uint16(lo + hi)
	if v > d.theta {
		p |= exceedBit
	}
	return p
}

// remove deletes the current samples whose logical index satisfies del,
// calling f (when not nil) with the ring index of each, in order.
func (d *Detector) remove(del func(int) bool, f func(int)) {
	w := 0
	for i := range d.n {
		j := d.idx(i)
		if del(i) {
			if f != nil {
				f(j)
			}
			continue
		}
		k := d.idx(w)
		if k != j {
			d.at[k], d.plc[k] = d.at[j], d.plc[j]
			if d.val != nil {
				d.val[k] = d.val[j]
			}
		}
		w++
	}
	d.n = w
}

// drop forgets the k oldest current samples.
func (d *Detector) drop(k int) {
	if k <= 0 {
		return
	}
	d.head = d.idx(k)
	d.n -= k
	d.fromCut = false
	if d.n == 0 {
		d.head = 0
	}
}

func (d *Detector) idx(i int) int { return (d.head + i) & (len(d.at) - 1) }

// grow doubles the ring (up to CurrentCapacity), in order from index 0.
func (d *Detector) grow() {
	c := max(firstRing, 2*len(d.at))
	at, plc := make([]uint32, c), make([]uint16, c)
	var val []float32
	if d.kind == Latency {
		val = make([]float32, c)
	}
	for i := range d.n {
		j := d.idx(i)
		at[i], plc[i] = d.at[j], d.plc[j]
		if val != nil {
			val[i] = d.val[j]
		}
	}
	d.at, d.plc, d.val, d.head = at, plc, val, 0
}

// offset is ns as milliseconds since the time base (set by the first
// sample; moved forward when a sample would not fit in 32 bits).
func (d *Detector) offset(ns int64) uint32 {
	if !d.started {
		d.started = true
		d.base = ns - slack
	}
	ms := (ns - d.base) / 1e6
	if ms > math.MaxUint32 {
		shift := ms - 1<<31
		d.base += shift * 1e6
		for i := range d.n {
			j := d.idx(i)
			d.at[j] = uint32(max(0, int64(d.at[j])-shift))
		}
		ms -= shift
	}
	return uint32(max(0, ms))
}

// offsetOf is ns as an offset, clamped to the range offsets take.
func (d *Detector) offsetOf(ns int64) uint32 {
	ms := (ns - d.base) / 1e6
	return uint32(min(max(0, ms), math.MaxUint32))
}

// timeOf is the time (unix ns) of the current sample at logical index i.
func (d *Detector) timeOf(i int) int64 { return d.base + int64(d.at[d.idx(i)])*1e6 }

// randN is uniform on 0..n-1 (splitmix64; n > 0).
func (d *Detector) randN(n int) int {
	d.rng += 0x9e3779b97f4a7c15
	z := d.rng
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	z ^= z >> 31
	return int((z >> 1) % uint64(n))
}

// scratchPool lends the buffer the quantiles and promotions work in, so
// that a detector does not hold it.
var scratchPool = sync.Pool{New: func() any {
	s := make([]float32, max(BaselineCapacity, CurrentCapacity)+tailKeep)
	return &s
}}

func (d *Detector) scratch() *[]float32 { return scratchPool.Get().(*[]float32) }

// lowerBound is the number of values of sorted s below v, and
// upperBound the number at most v: binary searches without branches on
// the data (a conditional move each step), which run at about twice the
// speed of sort.Search here.
func lowerBound(s []float32, v float32) int {
	if len(s) == 0 {
		return 0
	}
	base := 0
	for n := len(s); n > 1; {
		half := n / 2
		base += half & -b2i(s[base+half-1] < v)
		n -= half
	}
	if s[base] < v {
		base++
	}
	return base
}

// b2i is 1 for true: the compiler makes it a SETcc, not a branch.
func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func upperBound(s []float32, v float32) int {
	if len(s) == 0 {
		return 0
	}
	base := 0
	for n := len(s); n > 1; {
		half := n / 2
		base += half & -b2i(s[base+half-1] <= v)
		n -= half
	}
	if s[base] <= v {
		base++
	}
	return base
}

// sortedQuantile is the type-7 q-quantile of sorted values.
func sortedQuantile(s []float32, q float64) float64 {
	h := q * float64(len(s)-1)
	i := int(h)
	if i+1 >= len(s) {
		return float64(s[len(s)-1])
	}
	return float64(s[i]) + (h-float64(i))*(float64(s[i+1])-float64(s[i]))
}

// quantileAt is the value at fractional index h (0 ≤ h ≤ len(v)−1) of v
// sorted, interpolated linearly (a type-7 quantile for h = q(len−1)). It
// reorders v so that the values before the lower index are no larger than
// the value there and those after no smaller.
func quantileAt(v []float32, h float64) float64 {
	i := int(h)
	selectK(v, i)
	lo := float64(v[i])
	if i+1 >= len(v) || h == float64(i) {
		return lo
	}
	hi := v[i+1]
	for _, x := range v[i+2:] {
		hi = min(hi, x)
	}
	return lo + (h-float64(i))*(float64(hi)-lo)
}

// selectK reorders a so that a[k] is its k-th smallest value, the values
// before it no larger and those after no smaller (Hoare's FIND, as Wirth
// writes it).
func selectK(a []float32, k int) {
	l, r := 0, len(a)-1
	for l < r {
		x := median3(a[l], a[int(uint(l+r)>>1)], a[r])
		i, j := l, r
		for i <= j {
			for a[i] < x {
				i++
			}
			for x < a[j] {
				j--
			}
			if i <= j {
				a[i], a[j] = a[j], a[i]
				i++
				j--
			}
		}
		if j < k {
			l = i
		}
		if k < i {
			r = j
		}
	}
}

func median3(a, b, c float32) float32 {
	if a > b {
		a, b = b, a
	}
	if b > c {
		b = c
	}
	return max(a, b)
}
