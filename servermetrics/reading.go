// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package servermetrics

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// The daemon's server view: a Reading is one read of an engine's
// exposition reduced to the figures the diagnosis needs (per series, so
// that a counter reset of one engine core is told apart; no dto objects
// kept), and Delta the window of figures between two readings.

// Outcomes of a read (llmprobe_server_reads_total's outcome label).
const (
	OutcomeOK          = "ok"
	OutcomeError       = "error"
	OutcomeTimeout     = "timeout"
	OutcomeTooLarge    = "too_large"
	OutcomeNotAnEngine = "not_an_engine"
)

// Outcomes lists every outcome, for bounded label values.
var Outcomes = []string{OutcomeOK, OutcomeError, OutcomeTimeout, OutcomeTooLarge, OutcomeNotAnEngine}

// Figure names of a Reading and a Window (the keys of their Missing).
const (
	FigureTTFT          = "ttft"
	FigureITL           = "itl"
	FigureQueue         = "queue"
	FigurePrefill       = "prefill"
	FigureDecode        = "decode"
	FigurePromptLength  = "prompt_length"
	FigureRunning       = "running"
	FigureWaiting       = "waiting"
	FigureKVUsage       = "kv_usage"
	FigurePreemptions   = "preemptions"
	FigureFinished      = "finished"
	FigurePrefixHits    = "prefix_hits"
	FigurePrefixQueries = "prefix_queries"
)

// figureKind is how a figure is read.
type figureKind int

const (
	kindHistogram figureKind = iota
	kindCounter
	kindGaugeSum  // summed over the series (requests)
	kindGaugeMean // averaged over the series (ratios)
)

// readingFigures are the figures a Reading keeps, with the engine's names
// of each.
var readingFigures = []struct {
	name  string
	kind  figureKind
	names func(*Engine) []string
}{
	{FigureTTFT, kindHistogram, func(e *Engine) []string { return e.TTFT }},
	{FigureITL, kindHistogram, func(e *Engine) []string { return e.ITL }},
	{FigureQueue, kindHistogram, func(e *Engine) []string { return e.QueueTime }},
	{FigurePrefill, kindHistogram, func(e *Engine) []string { return e.PrefillTime }},
	{FigureDecode, kindHistogram, func(e *Engine) []string { return e.DecodeTime }},
	{FigurePromptLength, kindHistogram, func(e *Engine) []string { return e.PromptLength }},
	{FigureRunning, kindGaugeSum, func(e *Engine) []string { return e.Running }},
	{FigureWaiting, kindGaugeSum, func(e *Engine) []string { return e.Waiting }},
	{FigureKVUsage, kindGaugeMean, func(e *Engine) []string { return e.KVCacheUsage }},
	{FigurePreemptions, kindCounter, func(e *Engine) []string { return e.Preemptions }},
	{FigureFinished, kindCounter, func(e *Engine) []string { return e.RequestsFinished }},
	{FigurePrefixHits, kindCounter, func(e *Engine) []string { return e.PrefixCacheHits }},
	{FigurePrefixQueries, kindCounter, func(e *Engine) []string { return e.PrefixCacheQuery }},
}

// scalarSeries is one series of a counter or gauge.
type scalarSeries struct {
	key string
	v   float64
}

// histSeries is one series of a histogram: its finite upper bounds and
// their cumulative counts, its sum and count.
type histSeries struct {
	key        string
	bounds     []float64
	cum        []float64
	sum, count float64
}

// scalarSeriesOf are f's series (nil f: none) that keep accepts (nil:
// all), in the family's order.
func scalarSeriesOf(f *dto.MetricFamily, keep func(*dto.Metric) bool) []scalarSeries {
	if f == nil {
		return nil
	}
	out := make([]scalarSeries, 0, len(f.Metric))
	for _, m := range f.Metric {
		if keep == nil || keep(m) {
			out = append(out, scalarSeries{key: seriesKey(m), v: scalarValue(m)})
		}
	}
	return out
}

// histSeriesOf are f's histogram series that keep accepts (nil: all).
func histSeriesOf(f *dto.MetricFamily, keep func(*dto.Metric) bool) []histSeries {
	if f == nil {
		return nil
	}
	out := make([]histSeries, 0, len(f.Metric))
	for _, m := range f.Metric {
		h := m.Histogram
		if h == nil || keep != nil && !keep(m) {
			continue
		}
		s := histSeries{key: seriesKey(m), sum: h.GetSampleSum(), count: float64(h.GetSampleCount())}
		for _, bk := range h.Bucket {
			if ub := bk.GetUpperBound(); !math.IsInf(ub, 1) { // +Inf is the count
				s.bounds = append(s.bounds, ub)
				s.cum = append(s.cum, float64(bk.GetCumulativeCount()))
			}
		}
		out = append(out, s)
	}
	return out
}

// scalarDelta sums, over cur's series, cur − prev; a series new in cur,
// or whose value fell (a restarted engine), counts its whole value, as
// Prometheus' rate does.
func scalarDelta(prev, cur []scalarSeries) float64 {
	before := make(map[string]float64, len(prev))
	for _, s := range prev {
		before[s.key] = s.v
	}
	d := 0.0
	for _, s := range cur {
		v := s.v
		if b, ok := before[s.key]; ok && v >= b {
			v -= b
		}
		d += v
	}
	return d
}

// histSeriesDelta sums, over cur's series, the bucket deltas (cumulative,
// by upper bound, +Inf the count), the count's and the sum's; a series
// new in cur, or whose count fell, counts whole, bucket by bucket.
func histSeriesDelta(prev, cur []histSeries) (cum map[float64]float64, count, sum float64) {
	before := make(map[string]*histSeries, len(prev))
	for i := range prev {
		before[prev[i].key] = &prev[i]
	}
	cum = map[float64]float64{}
	for _, h := range cur {
		var p map[float64]float64
		pc, ps := 0.0, 0.0
		if b := before[h.key]; b != nil && h.count >= b.count {
			p = make(map[float64]float64, len(b.bounds))
			for i, ub := range b.bounds {
				p[ub] = b.cum[i]
			}
			pc, ps = b.count, b.sum
		}
		for i, ub := range h.bounds {
			cum[ub] += h.cum[i] - p[ub]
		}
		c := h.count - pc
		cum[math.Inf(1)] += c
		count += c
		sum += h.sum - ps
	}
	return cum, count, sum
}

// Reading is one read of an engine's exposition, reduced to the series of
// the figures a Window needs (those of the reading's model), or why there
// is none (Outcome not ok).
type Reading struct {
	At      time.Time
	Outcome string // one of Outcomes
	// Err says why the read gave no figures (Outcome not ok).
	Err string
	// Engine is the engine recognised (Engine.Name).
	Engine            string
	TTFTIncludesQueue bool

	scalars map[string][]scalarSeries
	hists   map[string][]histSeries
	gauges  map[string]float64
	// missing says why a figure is not in the reading.
	missing map[string]string
}

// Missing says why the reading has no figure name ("" when it has it).
func (r *Reading) Missing(name string) string { return r.missing[name] }

// Read reads u within timeout (at most 5 s when zero) with client and
// reduces it to model's series (Reduce).
func Read(ctx context.Context, client *http.Client, u, model string, timeout time.Duration) *Reading {
	return fetch(ctx, client, u, timeout).Reduce(model)
}

// Reduce turns a fetched scrape into a Reading of model's series: those
// whose model label (the engine's ModelLabel) is model, or that have no
// such label; every series of them summed (or, for ratios, averaged)
// over the engine's other labels (engine cores, ranks). An empty model
// keeps every series.
func (s Scrape) Reduce(model string) *Reading {
	r := &Reading{At: s.at, Outcome: s.outcome}
	if s.err != nil {
		r.Err = s.err.Error()
		if r.Outcome == "" || r.Outcome == OutcomeOK {
			r.Outcome = OutcomeError
		}
		return r
	}
	r.Outcome = OutcomeOK
	eng := detectEngine(s)
	if eng == nil {
		prefixes := make([]string, 0, len(Engines))
		for _, e := range Engines {
			prefixes = append(prefixes, e.Prefix)
		}
		r.Outcome = OutcomeNotAnEngine
		r.Err = fmt.Sprintf("no known engine's metrics (%s)", strings.Join(prefixes, ", "))
		return r
	}
	r.Engine, r.TTFTIncludesQueue = eng.Name, eng.TTFTIncludesQueue
	r.scalars, r.hists, r.gauges, r.missing = map[string][]scalarSeries{}, map[string][]histSeries{}, map[string]float64{}, map[string]string{}
	var keep func(*dto.Metric) bool
	if eng.ModelLabel != "" && model != "" {
		keep = func(m *dto.Metric) bool {
			for _, l := range m.Label {
				if l.GetName() == eng.ModelLabel {
					return l.GetValue() == model
				}
			}
			return true // unlabelled: the engine's only model
		}
	}
	for _, fig := range readingFigures {
		names := fig.names(eng)
		if len(names) == 0 {
			r.missing[fig.name] = "not exported by " + eng.Name
			if more := eng.Unexported[fig.name]; more != "" {
				r.missing[fig.name] += ": " + more
			}
			continue
		}
		f := family(s.families, names)
		if f == nil {
			r.missing[fig.name] = "not in the page: " + strings.Join(names, " or ")
			for _, n := range names {
				if why, ok := s.dropped[n]; ok {
					r.missing[fig.name] = fmt.Sprintf("%s left out: %s", n, why)
					break
				}
			}
			continue
		}
		if why := r.reduce(fig.name, fig.kind, f, keep); why != "" {
			r.missing[fig.name] = why
		}
	}
	if keep != nil && len(r.missing) == len(readingFigures) {
		// Every figure gone: say whether the model is the reason.
		if models := modelsOf(s.families, eng); len(models) > 0 && !slices.Contains(models, model) {
			r.Outcome = OutcomeNotAnEngine
			r.Err = fmt.Sprintf("no series of model %q (%s serves %s)", model, eng.Name, strings.Join(models, ", "))
		}
	}
	return r
}

// reduce keeps figure name of family f (model's series); it returns why
// not.
func (r *Reading) reduce(name string, kind figureKind, f *dto.MetricFamily, keep func(*dto.Metric) bool) string {
	fam := f.GetName()
	typ := f.GetType()
	nonFinite := func(v float64) string {
		return fmt.Sprintf("%s: the server sent %s", fam, NonFinite(v))
	}
	switch kind {
	case kindHistogram:
		if typ != dto.MetricType_HISTOGRAM {
			return fmt.Sprintf("%s is a %s, not a histogram", fam, strings.ToLower(typ.String()))
		}
		hs := histSeriesOf(f, keep)
		if len(hs) == 0 {
			return "no series of the model in " + fam
		}
		for _, h := range hs {
			for _, v := range append([]float64{h.sum, h.count}, h.cum...) {
				if NonFinite(v) != "" {
					return nonFinite(v)
				}
			}
		}
		r.hists[name] = hs
	case kindCounter:
		if typ != dto.MetricType_COUNTER && typ != dto.MetricType_UNTYPED {
			return fmt.Sprintf("%s is a %s, not a counter", fam, strings.ToLower(typ.String()))
		}
		ss := scalarSeriesOf(f, keep)
		if len(ss) == 0 {
			return "no series of the model in " + fam
		}
		for _, s := range ss {
			if NonFinite(s.v) != "" {
				return nonFinite(s.v)
			}
		}
		r.scalars[name] = ss
	default:
		if typ != dto.MetricType_GAUGE && typ != dto.MetricType_UNTYPED {
			return fmt.Sprintf("%s is a %s, not a gauge", fam, strings.ToLower(typ.String()))
		}
		ss := scalarSeriesOf(f, keep)
		if len(ss) == 0 {
			return "no series of the model in " + fam
		}
		v := 0.0
		for _, s := range ss {
			if NonFinite(s.v) != "" {
				return nonFinite(s.v)
			}
			v += s.v
		}
		if kind == kindGaugeMean {
			v /= float64(len(ss))
		}
		r.gauges[name] = v
	}
	return ""
}

// modelsOf are the values of the engine's model label in the page, at
// most 5.
func modelsOf(fams map[string]*dto.MetricFamily, eng *Engine) []string {
	var out []string
	for _, f := range fams {
		for _, m := range f.Metric {
			for _, l := range m.Label {
				if l.GetName() == eng.ModelLabel && !slices.Contains(out, l.GetValue()) && len(out) < 5 {
					out = append(out, l.GetValue())
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

// Quantile is a quantile estimated from bucket counts, and the bounds of
// the bucket that holds it: the true quantile lies between them (Upper
// is +Inf in the last bucket).
type Quantile struct {
	Value, Lower, Upper float64
}

// Error is half the width of the bucket holding the quantile (+Inf in
// the last bucket).
func (q Quantile) Error() float64 { return (q.Upper - q.Lower) / 2 }

// Histogram is a histogram's delta over a window, summed over its series.
type Histogram struct {
	// Bounds are the upper bounds, ascending, +Inf last; Cumulative the
	// cumulative count deltas at each.
	Bounds     []float64
	Cumulative []float64
	Count, Sum float64
}

// Quantile estimates the q-quantile as histogram_quantile does, with its
// bucket; zero with no observation.
func (h *Histogram) Quantile(q float64) Quantile { return quantileOf(q, h.Bounds, h.Cumulative) }

// Mean is Sum/Count; ok is false without observations.
func (h *Histogram) Mean() (v float64, ok bool) { return Mean{Sum: h.Sum, Count: h.Count}.Value() }

// Mean is a mean from a histogram's _sum and _count deltas.
type Mean struct{ Sum, Count float64 }

// Value is Sum/Count; ok is false when Count is 0.
func (m Mean) Value() (v float64, ok bool) {
	if m.Count <= 0 {
		return 0, false
	}
	return m.Sum / m.Count, true
}

// Window is what an engine's metrics say of the time between two
// readings: histogram and counter deltas, and the gauges at the later
// reading. A figure that is nil is in Missing with why.
type Window struct {
	Start, End        time.Time
	Engine            string
	TTFTIncludesQueue bool

	TTFT, ITL, PromptLength *Histogram
	// Queue, Prefill and Decode are means (vLLM's buckets for them start
	// at 0.3 s: their quantiles would say little).
	Queue, Prefill, Decode *Mean
	// Gauges at End: requests running and waiting (summed over the
	// engine's cores), KV-cache usage 0–1 (their mean).
	Running, Waiting, KVUsage *float64
	// Counter deltas: preemptions, finished requests, prefix-cache hits
	// and queries (tokens).
	Preemptions, Finished, PrefixHits, PrefixQueries *float64

	Missing map[string]string
}

// PreemptionsPerRequest is preemptions per finished request.
func (w *Window) PreemptionsPerRequest() (float64, bool) {
	if w.Preemptions == nil || w.Finished == nil || *w.Finished <= 0 {
		return 0, false
	}
	return *w.Preemptions / *w.Finished, true
}

// PrefixHitRatio is prefix-cache hits per query (tokens).
func (w *Window) PrefixHitRatio() (float64, bool) {
	if w.PrefixHits == nil || w.PrefixQueries == nil || *w.PrefixQueries <= 0 {
		return 0, false
	}
	return *w.PrefixHits / *w.PrefixQueries, true
}

// Delta is the window from prev to cur, two successful readings of one
// server; figures either lacks are missing, with why.
func Delta(prev, cur *Reading) *Window {
	w := &Window{Missing: map[string]string{}}
	all := func(why string) *Window {
		for _, f := range readingFigures {
			w.Missing[f.name] = why
		}
		return w
	}
	switch {
	case prev == nil || cur == nil:
		return all("two readings needed")
	case cur.Outcome != OutcomeOK:
		return all(cur.Err)
	case prev.Outcome != OutcomeOK:
		return all(prev.Err)
	}
	w.Start, w.End, w.Engine, w.TTFTIncludesQueue = prev.At, cur.At, cur.Engine, cur.TTFTIncludesQueue
	if prev.Engine != cur.Engine {
		return all(fmt.Sprintf("the engine changed from %s to %s", prev.Engine, cur.Engine))
	}
	why := func(name string) string {
		if m := cur.missing[name]; m != "" {
			return m
		}
		return prev.missing[name]
	}
	for _, fig := range readingFigures {
		if m := why(fig.name); m != "" {
			w.Missing[fig.name] = m
			continue
		}
		switch fig.kind {
		case kindHistogram:
			cum, count, sum := histSeriesDelta(prev.hists[fig.name], cur.hists[fig.name])
			h := &Histogram{Count: count, Sum: sum}
			h.Bounds, h.Cumulative = sortedBuckets(cum)
			switch fig.name {
			case FigureTTFT:
				w.TTFT = h
			case FigureITL:
				w.ITL = h
			case FigurePromptLength:
				w.PromptLength = h
			case FigureQueue:
				w.Queue = &Mean{Sum: sum, Count: count}
			case FigurePrefill:
				w.Prefill = &Mean{Sum: sum, Count: count}
			case FigureDecode:
				w.Decode = &Mean{Sum: sum, Count: count}
			}
		case kindCounter:
			d := scalarDelta(prev.scalars[fig.name], cur.scalars[fig.name])
			switch fig.name {
			case FigurePreemptions:
				w.Preemptions = &d
			case FigureFinished:
				w.Finished = &d
			case FigurePrefixHits:
				w.PrefixHits = &d
			case FigurePrefixQueries:
				w.PrefixQueries = &d
			}
		default:
			v := cur.gauges[fig.name]
			switch fig.name {
			case FigureRunning:
				w.Running = &v
			case FigureWaiting:
				w.Waiting = &v
			case FigureKVUsage:
				w.KVUsage = &v
			}
		}
	}
	return w
}
