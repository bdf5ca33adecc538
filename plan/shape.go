// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package plan

import (
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/llmprobe/llmprobe/config"
	"github.com/llmprobe/llmprobe/probe/workload"
	"github.com/llmprobe/llmprobe/regression"
)

// Shapes: where a class's simulated latencies come from.
const (
	ShapeAssumed  = "assumed"
	ShapeObserved = "observed"
)

// The reference model's TPOT (docs/design.md, "Planning the rate"): 12 ms
// (a decode step at a small batch, the simulator's) plus 1 µs per prompt
// token (attention over the context), times the TTFT's log-normal jitter.
// The TTFT is regression.ReferenceTTFT, the figures' own.
const (
	ReferenceTPOTBase     = 0.012 // seconds
	ReferenceTPOTPerToken = 1e-6  // seconds per prompt token
)

// referenceTPOT is the reference model's TPOT of a request of
// promptTokens, z its jitter's standard normal score.
func referenceTPOT(promptTokens, z float64) float64 {
	return (ReferenceTPOTBase + ReferenceTPOTPerToken*promptTokens) * math.Exp(regression.ReferenceJitterSigma*z)
}

// Samples are one class's recent requests as the daemon saw them (its
// recent-requests ring, served at /api/v1/recent): the latencies of its
// successes, in seconds.
type Samples struct {
	TTFT, TPOT, E2E []float64
	// Requests and Errors count the class's ended requests and failures.
	Requests, Errors int
}

// MinObserved is the fewest samples of a metric an observed shape is
// built from; with fewer, the class's shape is assumed.
const MinObserved = 20

// sampler draws one value of a metric; each trial has its own (a
// conversation's state, for the assumed shape, lives in it).
type sampler func(r *rand.Rand) float64

// shape makes samplers of a class's metrics.
type shape interface {
	// sampler returns a fresh sampler of metric (ttft, tpot, e2e), nil
	// when the class has none of it.
	sampler(metric string) sampler
}

// ConversationsInFlight is how many conversations a multi-turn class's
// simulated requests interleave: the turns of one conversation come
// minutes apart, so the requests a detector sees next to each other are
// mostly of different conversations (one conversation's growing prompt,
// turn after turn, would be a ramp the detector reads as a trend).
const ConversationsInFlight = 32

// lengths yields the prompt and output tokens of a class's requests:
// single requests, or the turns of ConversationsInFlight conversations
// interleaved at random, each later turn's prompt carrying the history
// (as workload.Builder builds it), or a trace's records (its sessions
// likewise).
type lengths struct {
	c    *workload.Class
	api  string
	pool []*conversation
}

// conversation is one simulated conversation's state.
type conversation struct {
	pending [][2]int // a trace session's later records
	turns   int      // later turns left (drawn ones)
	p, o    int      // the previous turn's prompt and output
}

func (l *lengths) next(r *rand.Rand) (prompt, output int) {
	c := l.c
	if c.Turns == nil && (c.Trace == nil || !c.Trace.Sessions) {
		return l.start(&conversation{}, r)
	}
	if l.pool == nil {
		// Each conversation joins at a random turn of its own, so that
		// the first requests are not all first turns.
		l.pool = make([]*conversation, ConversationsInFlight)
		for i := range l.pool {
			cv := &conversation{}
			l.start(cv, r)
			for skip := r.IntN(cv.turns + len(cv.pending) + 1); skip > 0; skip-- {
				l.turn(cv, r)
			}
			l.pool[i] = cv
		}
	}
	cv := l.pool[r.IntN(len(l.pool))]
	if cv.turns == 0 && len(cv.pending) == 0 {
		return l.start(cv, r)
	}
	return l.turn(cv, r)
}

// start begins conversation cv (or a single request) and returns its
// first request.
func (l *lengths) start(cv *conversation, r *rand.Rand) (prompt, output int) {
	c := l.c
	pl := c.Plan(r)
	*cv = conversation{}
	if c.Trace != nil {
		for _, rec := range pl.Records[1:] {
			cv.pending = append(cv.pending, [2]int{max(rec.PromptTokens, 1), max(rec.OutputTokens, 1)})
		}
		return pl.PromptTokens, pl.OutputTokens
	}
	cv.p = max(pl.PromptTokens, int(firstTurnFloor(l.api, pl.PrefixTokens)))
	cv.o = pl.OutputTokens
	if c.Turns != nil {
		cv.turns = c.Turns.Draw(r) - 1
	}
	return cv.p, cv.o
}

// turn returns cv's next request (it has one).
func (l *lengths) turn(cv *conversation, r *rand.Rand) (prompt, output int) {
	if len(cv.pending) > 0 {
		x := cv.pending[0]
		cv.pending = cv.pending[1:]
		return x[0], x[1]
	}
	cv.turns--
	u, m := l.c.NextTurnLengths(r)
	cv.p = cv.p + cv.o + u + int(laterTurnTemplate(l.api))
	cv.o = m
	return cv.p, cv.o
}

// assumed is the reference model over a class's lengths.
type assumed struct {
	c   *workload.Class
	api string
}

func (a assumed) sampler(metric string) sampler {
	l := &lengths{c: a.c, api: a.api}
	streamed := a.api != config.APIEmbeddings
	switch metric {
	case MetricTTFT:
		if !streamed {
			return nil
		}
		return func(r *rand.Rand) float64 {
			p, _ := l.next(r)
			return regression.ReferenceTTFT(float64(p), r.NormFloat64())
		}
	case MetricTPOT:
		if !streamed {
			return nil
		}
		return func(r *rand.Rand) float64 {
			// Only requests of 2 or more output tokens have a TPOT; the
			// caller checked that some have (and thinned the rate).
			for range 1 << 16 {
				if p, o := l.next(r); o >= 2 {
					return referenceTPOT(float64(p), r.NormFloat64())
				}
			}
			return referenceTPOT(1, 0)
		}
	case MetricE2E:
		return func(r *rand.Rand) float64 {
			p, o := l.next(r)
			if !streamed {
				return regression.ReferenceTTFT(float64(p), r.NormFloat64())
			}
			z := r.NormFloat64()
			return regression.ReferenceTTFT(float64(p), z) + float64(max(o-1, 0))*referenceTPOT(float64(p), z)
		}
	}
	return nil
}

// mixed is an observed shape whose metrics observed too rarely are
// assumed.
type mixed struct {
	obs *observed
	ref assumed
}

func (m mixed) sampler(metric string) sampler {
	if m.obs.has(metric) {
		return m.obs.sampler(metric)
	}
	return m.ref.sampler(metric)
}

// observed resamples the daemon's recent values, smoothed: a value drawn
// at random times a log-normal kernel of Silverman's bandwidth in log
// space, so that a few hundred samples give a continuous shape (ties
// would distort the rank tests).
type observed struct {
	vals [3][]float64 // ttft, tpot, e2e: positive values
	bw   [3]float64
}

func newObserved(s *Samples) (*observed, bool) {
	o := &observed{}
	ok := false
	for i, vs := range [][]float64{s.TTFT, s.TPOT, s.E2E} {
		var pos []float64
		for _, v := range vs {
			if v > 0 && !math.IsInf(v, 0) {
				pos = append(pos, v)
			}
		}
		if len(pos) < MinObserved {
			continue
		}
		o.vals[i], o.bw[i] = pos, logBandwidth(pos)
		ok = true
	}
	return o, ok
}

// logBandwidth is Silverman's rule of thumb for the logs of vs:
// 0.9 min(σ, IQR/1.34) n^(−1/5).
func logBandwidth(vs []float64) float64 {
	logs := make([]float64, len(vs))
	var mean float64
	for i, v := range vs {
		logs[i] = math.Log(v)
		mean += logs[i]
	}
	mean /= float64(len(logs))
	var ss float64
	for _, x := range logs {
		ss += (x - mean) * (x - mean)
	}
	sd := math.Sqrt(ss / float64(max(len(logs)-1, 1)))
	slices.Sort(logs)
	iqr := logs[len(logs)*3/4] - logs[len(logs)/4]
	spread := sd
	if iqr > 0 {
		spread = min(sd, iqr/1.34)
	}
	if !(spread > 0) {
		spread = 0.01 // all equal: a narrow server
	}
	return 0.9 * spread * math.Pow(float64(len(logs)), -0.2)
}

// has reports whether metric was observed often enough.
func (o *observed) has(metric string) bool {
	i := slices.Index(latencyMetrics[:], metric)
	return i >= 0 && o.vals[i] != nil
}

func (o *observed) sampler(metric string) sampler {
	if !o.has(metric) {
		return nil
	}
	i := slices.Index(latencyMetrics[:], metric)
	vs, h := o.vals[i], o.bw[i]
	return func(r *rand.Rand) float64 {
		return vs[r.IntN(len(vs))] * math.Exp(h*r.NormFloat64())
	}
}

// quantiles90and99 are the p90 and p99 of a metric's shape, from a large
// fixed-seed draw: the tail change stretches the values above the p90 so
// that the p99 moves by the effect.
func quantiles90and99(s shape, metric string) (p90, p99 float64) {
	smp := s.sampler(metric)
	r := rand.New(rand.NewPCG(9, 10))
	v := make([]float64, 1<<16)
	for i := range v {
		v[i] = smp(r)
	}
	slices.Sort(v)
	return v[int(0.90*float64(len(v)))], v[int(0.99*float64(len(v)))]
}

// series is one trial's regression.Series: Poisson arrivals at rate, the
// metric's values (changed by change after the step), or 0/1 outcomes
// whose error ratio goes from errBefore to errAfter.
type series struct {
	r         *rand.Rand
	rate      float64
	draw      sampler
	change    func(float64) float64
	errBefore float64
	errAfter  float64
	ratio     bool
}

func (s *series) Gap() time.Duration {
	return time.Duration(s.r.ExpFloat64() / s.rate * 1e9)
}

func (s *series) Value(changed bool) float64 {
	if s.ratio {
		p := s.errBefore
		if changed {
			p = s.errAfter
		}
		if s.r.Float64() < p {
			return 1
		}
		return 0
	}
	v := s.draw(s.r)
	if changed && s.change != nil {
		v = s.change(v)
	}
	return v
}
