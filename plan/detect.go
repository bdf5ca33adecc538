// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package plan

import (
	"context"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/llmprobe/llmprobe/regression"
)

// Metrics of a detection (the `metric` label of llmprobe_regression).
const (
	MetricTTFT   = "ttft"
	MetricTPOT   = "tpot"
	MetricE2E    = "e2e"
	MetricErrors = "errors"
)

var latencyMetrics = [...]string{MetricTTFT, MetricTPOT, MetricE2E}

// Effect is a regression a detection figure is for: the metric's
// Quantile (0.5: the median, 0.99: the p99; 0 for errors) multiplied by
// Effect (1.25 for +25%; for errors, the error ratio's factor from the
// baseline's 1%: 5 for 1% → 5%).
type Effect struct {
	Metric   string
	Quantile float64
	Effect   float64
}

// DefaultEffects are the regressions on-call cares about, planned for
// every class: median TTFT +25% and +50%, TTFT p99 ×2 (the median
// unchanged), median TPOT and E2E +25%, errors 1% → 5%.
var DefaultEffects = []Effect{
	{MetricTTFT, 0.5, 1.25},
	{MetricTTFT, 0.5, 1.5},
	{MetricTTFT, 0.99, 2},
	{MetricTPOT, 0.5, 1.25},
	{MetricE2E, 0.5, 1.25},
	{MetricErrors, 0, 5},
}

// BaselineErrorRatio is the error ratio before an errors step.
const BaselineErrorRatio = 0.01

// What a detection figure simulates (docs/design.md, "Planning the
// rate"). A median step follows MedianHistorySamples of history (the
// figures' "little history": a detector a few minutes to hours old);
// a tail or errors step the longer of LongHistoryMin and
// LongHistorySamples (the figures' rows at 0.5 and 5 req/s): the tail
// test needs a tail baseline. A step not caught within the horizon, the
// longer of HorizonMin and HorizonSamples requests (the detector's whole
// current window), counts as never. Histories and horizons are at most
// MaxSimulated.
const (
	MedianHistorySamples = 900
	LongHistorySamples   = 10800
	LongHistoryMin       = time.Hour
	HorizonSamples       = regression.CurrentCapacity
	HorizonMin           = time.Hour
	MaxSimulated         = 7 * 24 * time.Hour
)

// DefaultTrials is how many steps each figure simulates.
const DefaultTrials = 100

// Search bounds of the lowest rate meeting a goal (requests per second
// of the class): above 64 req/s the detector's window of 4096 samples
// spans less than its 1m MinSpan (docs/design.md, "Limits").
const (
	MinGoalRate = 1e-4
	MaxGoalRate = 64
	// GoalShare is the share of steps a goal must catch within its
	// deadline (its p90 delay within it).
	GoalShare = 0.9
)

// cell is one figure to simulate: a detector of a metric of a class at a
// rate, and the change.
type cell struct {
	kind                       regression.Kind
	opts                       regression.Options
	every                      time.Duration
	rate                       float64 // of the metric's series, requests per second
	history, horizon, deadline time.Duration
	newSampler                 func() sampler
	change                     func(float64) float64
	errAfter                   float64
	seed                       uint64
}

func (c *cell) trial(i int) regression.Trial {
	r := rand.New(rand.NewPCG(c.seed, uint64(i)))
	s := &series{r: r, rate: c.rate, change: c.change}
	if c.kind == regression.Ratio {
		s.ratio, s.errBefore, s.errAfter = true, BaselineErrorRatio, c.errAfter
	} else {
		s.draw = c.newSampler()
	}
	return regression.Step{
		Kind: c.kind, Options: c.opts, Series: s,
		History: c.history, Horizon: c.horizon,
		Every: c.every, Phase: time.Duration(r.Int64N(int64(c.every))),
	}.Run()
}

// durationOf is how long n requests take at rate, within [lo, MaxSimulated].
func durationOf(n, rate float64, lo time.Duration) time.Duration {
	d := n / rate * float64(time.Second)
	if !(d < float64(MaxSimulated)) {
		return MaxSimulated
	}
	return min(max(time.Duration(d), lo), MaxSimulated)
}

// historyFor is the history a step of e simulates at rate.
func historyFor(e Effect, rate float64) time.Duration {
	if e.Metric == MetricErrors || e.Quantile > 0.5 {
		return durationOf(LongHistorySamples, rate, LongHistoryMin)
	}
	return durationOf(MedianHistorySamples, rate, 0)
}

// horizonFor is how long after a step a trial waits for the alarm.
func horizonFor(rate float64) time.Duration {
	return durationOf(HorizonSamples, rate, HorizonMin)
}

// seedOf mixes the plan's seed with what the figure is of (the class's
// name and the effect), so that each figure has its own steps, the same
// at every rate (a goal's search compares rates on the same steps) and
// for a class of that name on every target.
func seedOf(seed uint64, parts ...string) uint64 {
	h := fnv.New64a()
	var b [8]byte
	for i := range b {
		b[i] = byte(seed >> (8 * i))
	}
	h.Write(b[:])
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return h.Sum64()
}

func (e Effect) key() []string {
	return []string{e.Metric, strconv.FormatFloat(e.Quantile, 'g', -1, 64), strconv.FormatFloat(e.Effect, 'g', -1, 64)}
}

// pool runs trials on a fixed number of goroutines, none once ctx is
// done.
type pool struct {
	ctx     context.Context
	workers int
}

func newPool(ctx context.Context, workers int) pool {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	return pool{ctx: ctx, workers: workers}
}

// job is n trials of a cell; out holds them.
type job struct {
	c   *cell
	n   int
	out []regression.Trial
}

// run runs every job's trials.
func (p pool) run(jobs []*job) {
	type item struct{ j, i int }
	items := make(chan item)
	var wg sync.WaitGroup
	for range p.workers {
		wg.Go(func() {
			for it := range items {
				if p.ctx.Err() != nil {
					continue // drain: the plan is abandoned
				}
				j := jobs[it.j]
				j.out[it.i] = j.c.trial(it.i)
			}
		})
	}
	for ji, j := range jobs {
		j.out = make([]regression.Trial, j.n)
		for i := range j.n {
			items <- item{ji, i}
		}
	}
	close(items)
	wg.Wait()
}

// meets reports whether at least GoalShare of n trials of c are caught
// within c.deadline; it stops early once too many are not.
func (p pool) meets(c *cell, n int) bool {
	allowed := int64(math.Floor(float64(n) * (1 - GoalShare)))
	var missed atomic.Int64
	next := atomic.Int64{}
	var wg sync.WaitGroup
	for range min(p.workers, n) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n || missed.Load() > allowed || p.ctx.Err() != nil {
					return
				}
				tr := c.trial(i)
				if tr.Early || !tr.Detected || tr.Delay > c.deadline {
					missed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	return missed.Load() <= allowed
}

// lowestRate is the lowest class rate (requests per second) at which
// mk's cell meets its deadline, from start (the class's own rate) by
// doubling or halving to a bracket, then six bisections in log space
// (the answer within 1.1%); ok false when MaxGoalRate does not meet it.
func (p pool) lowestRate(mk func(rate float64) *cell, n int, start float64) (rate float64, ok bool) {
	if !(start > 0) {
		start = 1
	}
	start = min(max(start, MinGoalRate), MaxGoalRate)
	var lo, hi float64
	if p.meets(mk(start), n) {
		hi = start
		for lo = hi / 2; lo >= MinGoalRate && p.meets(mk(lo), n); lo /= 2 {
			hi = lo
		}
		if lo < MinGoalRate {
			return hi, true
		}
	} else {
		lo = start
		for hi = lo * 2; ; hi *= 2 {
			if hi > MaxGoalRate {
				if lo >= MaxGoalRate || !p.meets(mk(MaxGoalRate), n) {
					return 0, false
				}
				hi = MaxGoalRate
				break
			}
			if p.meets(mk(hi), n) {
				break
			}
			lo = hi
		}
	}
	for range 6 {
		m := math.Sqrt(lo * hi)
		if p.meets(mk(m), n) {
			hi = m
		} else {
			lo = m
		}
	}
	return hi, true
}
