// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package report

import (
	"cmp"
	"math"
	"slices"
	"time"

	"github.com/llmprobe/llmprobe/dist"
	"github.com/llmprobe/llmprobe/probe/wire"
)

// Serving is a stage's figures for one target as `vllm bench serve`
// defines them (calculate_metrics in vllm/benchmarks/serve.py), over the
// stage's measured requests: those planned after its warm-up that ended
// by themselves (a request bench cancelled at the grace's end is in no
// figure). Failed requests count in Failed and in the duration, nowhere
// else. Latencies are in milliseconds, as vLLM's.
type Serving struct {
	// Duration runs from the first measured request's start to the last
	// one's end (success or failure), seconds: the drain is in it.
	Duration                            float64
	Completed, Failed                   int
	TotalInputTokens, TotalOutputTokens int // of the completed requests
	// RequestThroughput, OutputThroughput and TotalTokenThroughput are
	// the completed requests, their output tokens and their prompt and
	// output tokens per second of Duration.
	RequestThroughput float64
	// RequestGoodput is the good requests (every per-request bound of the
	// SLO met) per second of Duration; nil without an SLO.
	RequestGoodput       *float64
	OutputThroughput     float64
	TotalTokenThroughput float64
	// MaxOutputTokensPerS is the most token-bearing events of completed
	// requests in one second, counted in 1-second buckets from the first
	// completed request's start (their edges placed to the millisecond);
	// MaxConcurrentRequests the most completed requests running at once.
	MaxOutputTokensPerS   float64
	MaxConcurrentRequests int
	// TTFT, TPOT (requests of two output tokens or more), ITL (every gap
	// of every completed request, pooled) and E2EL of the completed
	// requests.
	TTFT, TPOT, ITL, E2EL Latency
}

// Latency is vLLM's summary of one latency over a stage, in ms: the mean,
// the population standard deviation, the median and the percentiles asked
// for (numpy's linear interpolation); all 0 without a value, as vLLM's.
type Latency struct {
	Mean, Std, Median float64
	Percentiles       []Percentile
}

// Percentile is one percentile (P, in percent) of a latency and its value.
type Percentile struct {
	P, Value float64
}

// DefaultPercentiles are the percentiles reported when none are asked for
// (beside the mean and the median): those guidellm and AIPerf show.
var DefaultPercentiles = []float64{90, 99}

// Timing is what the figures take of one ended request: its start from
// the stage's origin (handed to the HTTP client, plus its wait for a
// connection: design.md "start", from which TTFT and E2E run) and what
// was measured of it. NewTiming reads it from a result, RequestRecord's
// Timing from a line of --requests.
type Timing struct {
	Start      time.Duration
	FirstToken bool
	TTFT, E2E  time.Duration
	// ITLs are the gaps between the request's token-bearing events
	// (design.md "ITL").
	ITLs                       []time.Duration
	PromptTokens, OutputTokens int
	Success                    bool
	// Warmup: planned in the warm-up (kept for the served figures, in no
	// figure of Serving); Cancelled: cut at the grace's end (in none);
	// Good: a success within every per-request bound of the SLO.
	Warmup, Cancelled, Good bool
}

// NewTiming is r's Timing, its start taken from origin (the stage's).
func NewTiming(r *wire.Result, origin time.Time) Timing {
	return Timing{
		Start:      r.Dispatched.Sub(origin) + r.ClientWait,
		FirstToken: r.FirstToken, TTFT: r.TTFT, E2E: r.E2E, ITLs: r.ITLs,
		PromptTokens: r.PromptTokens, OutputTokens: r.OutputTokens,
		Success: r.Outcome == wire.OutcomeSuccess, Warmup: r.Warmup,
		Cancelled: r.ErrorType == wire.ErrorTypeCancelled,
	}
}

// Request is what a stage keeps of one ended request (40 bytes; its ITLs
// go to the stage's histogram): its start and end from the stage's
// origin, its TTFT, TPOT and E2E in seconds (float32: 7 significant
// digits) and its tokens.
type Request struct {
	Start, End                 time.Duration
	TTFT, TPOT, E2E            float32
	PromptTokens, OutputTokens int32
	flags                      uint8
}

const (
	reqSuccess = 1 << iota
	reqFirstToken
	reqWarmup
	reqGood
)

// Success, Warmup and Good are the request's Timing's.
func (r Request) Success() bool { return r.flags&reqSuccess != 0 }
func (r Request) Warmup() bool  { return r.flags&reqWarmup != 0 }
func (r Request) Good() bool    { return r.flags&reqGood != 0 }

// measuredSuccess: a completed request of the figures.
func (r Request) measuredSuccess() bool { return r.flags&(reqSuccess|reqWarmup) == reqSuccess }

// Requests are a stage's ended requests for one target, as its figures
// need them: 40 bytes per request, a histogram of the completed measured
// requests' ITLs (fixed size, durationHistogram) and their token-bearing
// events per millisecond of the stage (4 bytes per millisecond from the
// origin to the last event), for the peak output throughput. Not safe for
// concurrent use.
type Requests struct {
	reqs   []Request
	itl    durationHistogram
	chunks []uint32
}

// NewRequests makes room for about expected requests.
func NewRequests(expected int) *Requests {
	return &Requests{reqs: make([]Request, 0, expected)}
}

// Add keeps t (a request cut at the grace's end is in no figure: it is
// not kept).
func (rs *Requests) Add(t Timing) {
	if t.Cancelled {
		return
	}
	r := Request{
		Start: t.Start, End: t.Start + t.E2E, E2E: float32(t.E2E.Seconds()),
		PromptTokens: int32(min(t.PromptTokens, math.MaxInt32)), OutputTokens: int32(min(t.OutputTokens, math.MaxInt32)),
	}
	if t.Success {
		r.flags |= reqSuccess
	}
	if t.Warmup {
		r.flags |= reqWarmup
	}
	if t.Good && t.Success {
		r.flags |= reqGood
	}
	if t.FirstToken {
		r.flags |= reqFirstToken
		r.TTFT = float32(t.TTFT.Seconds())
		if t.OutputTokens >= 2 {
			r.TPOT = float32((t.E2E - t.TTFT).Seconds() / float64(t.OutputTokens-1))
		}
	}
	rs.reqs = append(rs.reqs, r)
	if !r.measuredSuccess() || !t.FirstToken {
		return
	}
	at := t.Start + t.TTFT
	rs.chunk(at)
	for _, g := range t.ITLs {
		rs.itl.add(g)
		at += g
		rs.chunk(at)
	}
}

// chunk counts a token-bearing event at `at` from the origin.
func (rs *Requests) chunk(at time.Duration) {
	i := max(int(at/time.Millisecond), 0)
	if i >= len(rs.chunks) {
		rs.chunks = slices.Grow(rs.chunks, i+1-len(rs.chunks))[:i+1]
	}
	rs.chunks[i]++
}

// All are the requests kept, in the order they were added.
func (rs *Requests) All() []Request { return rs.reqs }

// Len is the number of requests kept.
func (rs *Requests) Len() int { return len(rs.reqs) }

// Values are the TTFT, TPOT and E2E of the completed measured requests,
// in seconds, in the order they were added (TPOT: those of two output
// tokens or more).
func (rs *Requests) Values() (ttft, tpot, e2e []float64) {
	for _, r := range rs.reqs {
		if !r.measuredSuccess() {
			continue
		}
		e2e = append(e2e, float64(r.E2E))
		if r.flags&reqFirstToken != 0 {
			ttft = append(ttft, float64(r.TTFT))
			if r.OutputTokens >= 2 {
				tpot = append(tpot, float64(r.TPOT))
			}
		}
	}
	return ttft, tpot, e2e
}

// LatestTTFT appends the TTFT of the latest n completed measured requests
// to dst.
func (rs *Requests) LatestTTFT(dst []float64, n int) []float64 {
	from := len(dst)
	for i := len(rs.reqs) - 1; i >= 0 && len(dst)-from < n; i-- {
		if r := rs.reqs[i]; r.measuredSuccess() && r.flags&reqFirstToken != 0 {
			dst = append(dst, float64(r.TTFT))
		}
	}
	return dst
}

// Quantiles are the summaries of TTFT, TPOT, ITL and E2E the tables show
// (seconds; the same population as Serving's), with the percentiles ps.
func (rs *Requests) Quantiles(ps []float64) (ttft, tpot, itl, e2e Quantiles) {
	t, p, e := rs.Values()
	summarize := func(v []float64) Quantiles {
		q := Summarize(v)
		AddPercentiles(&q, v, ps)
		return q
	}
	return summarize(t), summarize(p), rs.itl.quantiles(ps), summarize(e)
}

// Quantile is the q-quantile (0–1) of metric ("ttft", "tpot", "itl" or
// "e2e", seconds) and the number of values it rests on.
func (rs *Requests) Quantile(metric string, q float64) (float64, int) {
	if metric == "itl" {
		if rs.itl.n == 0 {
			return 0, 0
		}
		return rs.itl.percentile(100*q) / 1e9, int(rs.itl.n)
	}
	ttft, tpot, e2e := rs.Values()
	v := map[string][]float64{"ttft": ttft, "tpot": tpot, "e2e": e2e}[metric]
	if len(v) == 0 {
		return 0, 0
	}
	slices.Sort(v)
	return dist.Quantile(v, q), len(v)
}

// Figures are the stage's Serving figures with the percentiles ps
// (DefaultPercentiles when none); goodput says whether an SLO judged the
// requests (RequestGoodput is nil otherwise). It is nil when no measured
// request ended by itself.
func (rs *Requests) Figures(ps []float64, goodput bool) *Serving {
	if len(ps) == 0 {
		ps = DefaultPercentiles
	}
	s := &Serving{}
	first, last := time.Duration(math.MaxInt64), time.Duration(math.MinInt64)
	firstDone := time.Duration(math.MaxInt64)
	good := 0
	for _, r := range rs.reqs {
		if r.Warmup() {
			continue
		}
		first, last = min(first, r.Start), max(last, r.End)
		if !r.Success() {
			s.Failed++
			continue
		}
		s.Completed++
		s.TotalInputTokens += int(r.PromptTokens)
		s.TotalOutputTokens += int(r.OutputTokens)
		firstDone = min(firstDone, r.Start)
		if r.Good() {
			good++
		}
	}
	if s.Completed+s.Failed == 0 {
		return nil
	}
	s.Duration = (last - first).Seconds()
	if s.Duration > 0 {
		s.RequestThroughput = float64(s.Completed) / s.Duration
		s.OutputThroughput = float64(s.TotalOutputTokens) / s.Duration
		s.TotalTokenThroughput = float64(s.TotalInputTokens+s.TotalOutputTokens) / s.Duration
	}
	if goodput {
		g := 0.0
		if s.Duration > 0 {
			g = float64(good) / s.Duration
		}
		s.RequestGoodput = &g
	}
	ttft, tpot, e2e := rs.Values()
	s.TTFT, s.TPOT, s.E2EL = latency(ttft, ps), latency(tpot, ps), latency(e2e, ps)
	s.ITL = rs.itl.latency(ps)
	if s.Completed > 0 {
		s.MaxOutputTokensPerS = float64(rs.peakChunks(firstDone))
		s.MaxConcurrentRequests = rs.peakConcurrency()
	}
	return s
}

// latency is vLLM's summary of v (seconds) in ms.
func latency(v []float64, ps []float64) Latency {
	var l Latency
	if len(v) > 0 {
		slices.Sort(v)
		sum := 0.0
		for _, x := range v {
			sum += x
		}
		mean := sum / float64(len(v))
		ss := 0.0
		for _, x := range v {
			ss += (x - mean) * (x - mean)
		}
		l.Mean, l.Std, l.Median = 1000*mean, 1000*math.Sqrt(ss/float64(len(v))), 1000*dist.Quantile(v, 0.5)
	}
	for _, p := range ps {
		pv := Percentile{P: p}
		if len(v) > 0 {
			pv.Value = 1000 * dist.Quantile(v, p/100)
		}
		l.Percentiles = append(l.Percentiles, pv)
	}
	return l
}

// peakChunks is vLLM's max_output_tokens_per_s: the most token-bearing
// events in a 1-second bucket counted from from (the first completed
// request's start). The events are counted per millisecond of the stage,
// so each millisecond falls in the bucket its middle falls in: a bucket's
// edges are within half a millisecond of vLLM's.
func (rs *Requests) peakChunks(from time.Duration) uint64 {
	var best, cur uint64
	bucket := int64(0)
	for i := max(int(from/time.Millisecond), 0); i < len(rs.chunks); i++ {
		mid := time.Duration(i)*time.Millisecond + time.Millisecond/2
		b := max(int64((mid-from)/time.Second), 0)
		if b != bucket {
			best, cur, bucket = max(best, cur), 0, b
		}
		cur += uint64(rs.chunks[i])
	}
	return max(best, cur)
}

// peakConcurrency is the most completed measured requests running at
// once, over the half-open spans [start, end): at equal instants an end
// comes before a start, as vLLM's sweep.
func (rs *Requests) peakConcurrency() int {
	type event struct {
		at    time.Duration
		delta int
	}
	var ev []event
	for _, r := range rs.reqs {
		if r.measuredSuccess() {
			ev = append(ev, event{r.Start, 1}, event{r.End, -1})
		}
	}
	slices.SortFunc(ev, func(a, b event) int { return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.delta, b.delta)) })
	cur, peak := 0, 0
	for _, e := range ev {
		cur += e.delta
		peak = max(peak, cur)
	}
	return peak
}
