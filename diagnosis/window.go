// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package diagnosis

import (
	"math"
	"time"
)

// record is one interval as the judge keeps it: its figures cleaned (a
// figure that is not one is absent), the sample copied and bounded.
type record struct {
	end       time.Time
	saturated bool
	view      bool // a usable server view: a server TTFT from arrival
	why       string
	reuse     float64

	probeReq, probeFailed float64
	ttft, tpot            Mean
	prompt, cached        float64 // the probe's usage, both present
	sample                []float64

	srvTTFT                     Mean // from arrival (queue added where the engine's TTFT leaves it out)
	queue, prefill, decode, itl Mean
	promptLen                   Mean
	running, waiting, kv        float64 // NaN: absent
	preemptions, finished       float64 // NaN: absent (both or neither)
	hits, queries               float64 // NaN: absent (both or neither)
	gpu                         float64 // NaN: unknown
	queueLeftOut                bool
}

// newRecord cleans an interval: NaN, ±Inf and negative figures are
// absent, a ratio above 1 is absent, the sample keeps its first
// MaxProbeSample finite non-negative values.
func newRecord(in Interval) record {
	r := record{
		end:       in.End,
		saturated: in.Saturated,
		why:       in.Why,
		reuse:     ratio(in.ReuseIntent),
		ttft:      in.Probe.TTFT.clean(),
		tpot:      in.Probe.TPOT.clean(),
		gpu:       math.NaN(),
	}
	if math.IsNaN(r.reuse) {
		r.reuse = 0
	}
	req := min(max(in.Probe.Requests, 0), maxFigure)
	r.probeReq = float64(req)
	r.probeFailed = float64(min(max(in.Probe.Failed, 0), req))
	if p, c := gauge(in.Probe.PromptTokens), gauge(in.Probe.CachedTokens); finite(p) && finite(c) && c <= p {
		r.prompt, r.cached = p, c
	}
	for _, v := range in.Probe.TTFTSample {
		if len(r.sample) == MaxProbeSample {
			break
		}
		if finite(gauge(v)) {
			r.sample = append(r.sample, v)
		}
	}
	if in.GPUUtil != nil {
		r.gpu = ratio(*in.GPUUtil)
	}
	s := in.Server
	if s == nil {
		return r
	}
	r.queue, r.prefill, r.decode, r.itl = s.Queue.clean(), s.Prefill.clean(), s.Decode.clean(), s.ITL.clean()
	r.promptLen = s.PromptLen.clean()
	r.running, r.waiting, r.kv = gauge(s.Running), gauge(s.Waiting), ratio(s.KVUsage)
	r.preemptions, r.finished = math.NaN(), math.NaN()
	if p, f := gauge(s.Preemptions), gauge(s.Finished); finite(p) && finite(f) {
		r.preemptions, r.finished = p, f
	}
	r.hits, r.queries = math.NaN(), math.NaN()
	if h, q := gauge(s.PrefixHits), gauge(s.PrefixQueries); finite(h) && finite(q) && h <= q {
		r.hits, r.queries = h, q
	}
	t := s.TTFT.clean()
	r.queueLeftOut = !s.TTFTIncludesQueue
	if r.queueLeftOut {
		// The engine's TTFT starts after the queue: add its mean queue
		// time so the server's TTFT runs from arrival, as the probe's
		// does. Without a queue figure there is no comparable TTFT.
		if r.queue.Count > 0 {
			t.Sum += r.queue.Value() * t.Count
		} else {
			t = Mean{}
		}
	}
	if t.Count > 0 && finite(t.Sum) {
		r.srvTTFT = t
		r.view = true
	}
	return r
}

// sums are a window's figures, merged by adding; the history's decay
// scales them all.
type sums struct {
	reads, views, saturated float64

	probeReq, probeFailed float64
	ttft, tpot            Mean
	ttftViewed            Mean // the probe's TTFT in intervals with a server view: the gap's
	prompt, cached        float64

	srvTTFT, queue, prefill, decode, itl, promptLen Mean
	running, waiting, kv, gpu                       Mean // gauges: their mean over the reads
	preemptions, finished                           float64
	hits, queries                                   float64
}

// add merges one record.
func (s *sums) add(r *record) {
	s.reads++
	if r.saturated {
		s.saturated++
	}
	s.probeReq += r.probeReq
	s.probeFailed += r.probeFailed
	s.ttft = s.ttft.Plus(r.ttft)
	s.tpot = s.tpot.Plus(r.tpot)
	s.prompt += r.prompt
	s.cached += r.cached
	addGauge(&s.gpu, r.gpu)
	if !r.view {
		return
	}
	s.views++
	s.ttftViewed = s.ttftViewed.Plus(r.ttft)
	s.srvTTFT = s.srvTTFT.Plus(r.srvTTFT)
	s.queue = s.queue.Plus(r.queue)
	s.prefill = s.prefill.Plus(r.prefill)
	s.decode = s.decode.Plus(r.decode)
	s.itl = s.itl.Plus(r.itl)
	s.promptLen = s.promptLen.Plus(r.promptLen)
	addGauge(&s.running, r.running)
	addGauge(&s.waiting, r.waiting)
	addGauge(&s.kv, r.kv)
	if finite(r.preemptions) {
		s.preemptions += r.preemptions
		s.finished += r.finished
	}
	if finite(r.hits) {
		s.hits += r.hits
		s.queries += r.queries
	}
}

func addGauge(m *Mean, v float64) {
	if finite(v) {
		m.Sum += v
		m.Count++
	}
}

// scale multiplies every figure by f (the history's decay).
func (s *sums) scale(f float64) {
	for _, v := range []*float64{&s.reads, &s.views, &s.saturated, &s.probeReq, &s.probeFailed,
		&s.prompt, &s.cached, &s.preemptions, &s.finished, &s.hits, &s.queries} {
		*v *= f
	}
	for _, m := range []*Mean{&s.ttft, &s.tpot, &s.ttftViewed, &s.srvTTFT, &s.queue, &s.prefill,
		&s.decode, &s.itl, &s.promptLen, &s.running, &s.waiting, &s.kv, &s.gpu} {
		m.Sum *= f
		m.Count *= f
	}
}

// gap is the window's mean path gap: the probe's mean TTFT minus the
// server's (from arrival), over the intervals with a server view; NaN
// without both.
func (s *sums) gap() float64 { return s.ttftViewed.Value() - s.srvTTFT.Value() }

// perRequest is the preemptions per finished request; NaN without
// finished requests.
func (s *sums) perRequest() float64 {
	if !(s.finished > 0) {
		return math.NaN()
	}
	return s.preemptions / s.finished
}

// hitRatio is the probe's observed prefix hit ratio (cached/prompt
// tokens); NaN without prompt tokens.
func (s *sums) hitRatio() float64 {
	if !(s.prompt > 0) {
		return math.NaN()
	}
	return s.cached / s.prompt
}

// serverHitRatio is the engine's own prefix hit ratio (hits/queries,
// tokens); NaN without queries.
func (s *sums) serverHitRatio() float64 {
	if !(s.queries > 0) {
		return math.NaN()
	}
	return s.hits / s.queries
}

// probePromptLen is the probe's mean prompt length, tokens; NaN when its
// usage said none.
func (s *sums) probePromptLen() float64 {
	ok := s.probeReq - s.probeFailed
	if !(s.prompt > 0) || !(ok > 0) {
		return math.NaN()
	}
	return s.prompt / ok
}
