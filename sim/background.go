// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"context"
	"fmt"
	"math"
	mrand "math/rand/v2"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.yaml.in/yaml/v3"
)

// Background traffic: the server's own "production" load, beside which a
// probe is a small share, as it is in production. Requests arrive as a
// Poisson process at a rate, with prompt and output lengths drawn from
// distributions and a share of prompts starting with one of a few shared
// prefixes, all changeable at known instants:
//
//	background:
//	  - after: 0s
//	    rate: 12                                           # requests per second
//	    prompt_tokens: {dist: lognormal, median: 600, p99: 3000}
//	    output_tokens: {dist: uniform, min: 50, max: 150}
//	    prefix: {share: 0.8, count: 4, tokens: 512}
//	    max_in_flight: 64                                  # the clients' concurrency limit
//	  - after: 2m
//	    prompt_tokens: {dist: lognormal, median: 2400, p99: 6000}  # longer prompts from 2 minutes on
//
// Each request is handed straight to the engine (no HTTP), as the model
// name's own traffic: it counts in every vllm: family as the server's
// other requests do (queue, TTFT, ITL, e2e, success, tokens, prefix
// cache, KV), and not in the request log, which is the HTTP server's
// record of what its clients were answered. It generates exactly its
// drawn output length (no early stop) and ends as a stop (the model's end
// of turn), so vllm:request_success_total counts it as finished_reason
// "stop". Arrivals are drawn from Config.Seed, so a seeded server
// repeats its traffic.

// BackgroundStep is one entry of Config.Background. From After on (an
// offset from the server's start, multiplied by schedule_scale), the
// fields it sets are in force; those it leaves out keep the previous
// step's value. The first step must set Rate, PromptTokens and
// OutputTokens; before it there is no background traffic.
type BackgroundStep struct {
	After time.Duration `yaml:"after"`
	// Rate is the mean arrival rate in requests per second (Poisson
	// arrivals); 0 stops the traffic until a later step.
	Rate *float64 `yaml:"rate"`
	// PromptTokens and OutputTokens are the distributions of the
	// prompt's and the output's length in tokens.
	PromptTokens *LengthDist `yaml:"prompt_tokens"`
	OutputTokens *LengthDist `yaml:"output_tokens"`
	// Prefix is the prefix mix (none before a step sets it).
	Prefix *PrefixMix `yaml:"prefix"`
	// MaxInFlight is the most background requests waiting or running in
	// the engine at once (the clients' or their gateway's concurrency
	// limit); an arrival beyond it is dropped, turned away. A rate past
	// the engine's capacity then makes a queue of bounded size, as in
	// production, rather than one that grows for ever. Default (and
	// most) 10,000.
	MaxInFlight *int `yaml:"max_in_flight"`
}

// LengthDist is a distribution of lengths in tokens. In YAML it is a bare
// integer (a fixed length) or a mapping: {dist: fixed, value: N},
// {dist: uniform, min: A, max: B} (every integer in [A, B] alike) or
// {dist: lognormal, median: M, p99: Q} (log-normal with that median and
// 99th percentile, rounded to an integer and cut to the lengths a request
// can have).
type LengthDist struct {
	Dist   string `yaml:"dist"`
	Value  int    `yaml:"value"`
	Min    int    `yaml:"min"`
	Max    int    `yaml:"max"`
	Median int    `yaml:"median"`
	P99    int    `yaml:"p99"`
}

// The distributions of LengthDist.
const (
	DistFixed     = "fixed"
	DistUniform   = "uniform"
	DistLognormal = "lognormal"
)

// lengthParams lists the parameters each distribution takes.
var lengthParams = map[string][]string{
	DistFixed:     {"value"},
	DistUniform:   {"min", "max"},
	DistLognormal: {"median", "p99"},
}

// UnmarshalYAML reads a bare integer (a fixed length) or a mapping of
// dist and its parameters; unknown keys are errors.
func (d *LengthDist) UnmarshalYAML(node *yaml.Node) error {
	switch node.Kind {
	case yaml.ScalarNode:
		n, err := strconv.Atoi(node.Value)
		if err != nil {
			return fmt.Errorf("line %d: a length is an integer or a mapping {dist: fixed|uniform|lognormal, ...}, got %q", node.Line, truncate(node.Value, maxHeaderEcho))
		}
		*d = LengthDist{Dist: DistFixed, Value: n}
		return nil
	case yaml.MappingNode:
		*d = LengthDist{}
		for i := 0; i+1 < len(node.Content); i += 2 {
			k, v := node.Content[i], node.Content[i+1]
			var dst *int
			switch k.Value {
			case "dist":
				if v.Kind != yaml.ScalarNode {
					return fmt.Errorf("line %d: dist: expected fixed, uniform or lognormal", v.Line)
				}
				d.Dist = v.Value
				continue
			case "value":
				dst = &d.Value
			case "min":
				dst = &d.Min
			case "max":
				dst = &d.Max
			case "median":
				dst = &d.Median
			case "p99":
				dst = &d.P99
			default:
				return fmt.Errorf("line %d: unknown key %q in a length distribution (valid: dist, value, min, max, median, p99)", k.Line, truncate(k.Value, maxHeaderEcho))
			}
			n, err := strconv.Atoi(v.Value)
			if v.Kind != yaml.ScalarNode || err != nil {
				return fmt.Errorf("line %d: %s: expected an integer number of tokens, got %q", v.Line, k.Value, truncate(v.Value, maxHeaderEcho))
			}
			*dst = n
		}
		return nil
	}
	return fmt.Errorf("line %d: a length is an integer or a mapping {dist: fixed|uniform|lognormal, ...}", node.Line)
}

// PrefixMix is the share of background prompts that start with a shared
// prefix: each such prompt begins with one of Count prefixes of Tokens
// tokens (chosen alike), the rest of it being its own. Prefix k is the
// same tokens in every step (a step that changes Count or Tokens keeps
// the prefixes the two have in common).
type PrefixMix struct {
	Share  float64 `yaml:"share"`
	Count  int     `yaml:"count"`
	Tokens int     `yaml:"tokens"`
}

// Bounds of the background traffic.
const (
	maxBackgroundSteps = 64
	maxBackgroundRate  = 1000      // requests per second
	maxPrefixCount     = 1_000_000 // distinct shared prefixes
	// maxBackgroundInFlight bounds the background requests waiting and
	// running in the engine (max_in_flight's default and most); arrivals
	// beyond it are dropped (and counted in
	// llmprobe_sim_background_dropped_total), so that a rate the engine
	// cannot serve does not grow memory without bound.
	maxBackgroundInFlight = 10_000
)

func (c *Config) validateBackground() []error {
	var errs []error
	bad := func(path, format string, args ...any) {
		errs = append(errs, &fieldError{path: path, msg: fmt.Sprintf(format, args...)})
	}
	if len(c.Background) > maxBackgroundSteps {
		bad("background", "at most %d steps, got %d", maxBackgroundSteps, len(c.Background))
		return errs
	}
	for i, st := range c.Background {
		p := fmt.Sprintf("background[%d]", i)
		switch {
		case st.After < 0:
			bad(p+".after", "must not be negative, got %s", st.After)
		case i > 0 && st.After <= c.Background[i-1].After:
			bad(p+".after", "must be later than background[%d].after (%s), got %s", i-1, c.Background[i-1].After, st.After)
		}
		if st.Rate == nil && st.PromptTokens == nil && st.OutputTokens == nil && st.Prefix == nil && st.MaxInFlight == nil {
			bad(p, "changes nothing: set rate, prompt_tokens, output_tokens, prefix or max_in_flight")
		}
		if n := st.MaxInFlight; n != nil && (*n < 1 || *n > maxBackgroundInFlight) {
			bad(p+".max_in_flight", "must be between 1 and %d, got %d", maxBackgroundInFlight, *n)
		}
		if i == 0 {
			for _, f := range []struct {
				key string
				set bool
			}{{"rate", st.Rate != nil}, {"prompt_tokens", st.PromptTokens != nil}, {"output_tokens", st.OutputTokens != nil}} {
				if !f.set {
					bad(p+"."+f.key, "the first step must set it")
				}
			}
		}
		if st.Rate != nil && !(*st.Rate >= 0 && *st.Rate <= maxBackgroundRate) {
			bad(p+".rate", "must be between 0 and %d requests per second, got %v", maxBackgroundRate, *st.Rate)
		}
		// A prompt leaves room for one output token.
		if st.PromptTokens != nil {
			errs = append(errs, st.PromptTokens.validate(p+".prompt_tokens", c.MaxModelLen-1)...)
		}
		if st.OutputTokens != nil {
			errs = append(errs, st.OutputTokens.validate(p+".output_tokens", c.MaxModelLen-1)...)
		}
		if m := st.Prefix; m != nil {
			if !(m.Share >= 0 && m.Share <= 1) {
				bad(p+".prefix.share", "must be between 0 and 1, got %v", m.Share)
			}
			if m.Share > 0 || m.Count != 0 || m.Tokens != 0 {
				if m.Count < 1 || m.Count > maxPrefixCount {
					bad(p+".prefix.count", "must be between 1 and %d, got %d", maxPrefixCount, m.Count)
				}
				// A prefixed prompt has at least one token of its own
				// and leaves room for one output token.
				if m.Tokens < 1 || m.Tokens > c.MaxModelLen-2 {
					bad(p+".prefix.tokens", "must be between 1 and max_model_len − 2 (%d), got %d", c.MaxModelLen-2, m.Tokens)
				}
			}
		}
	}
	return errs
}

// validate checks a length distribution whose lengths must lie in
// [1, limit].
func (d *LengthDist) validate(path string, limit int) []error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, &fieldError{path: path + key, msg: fmt.Sprintf(format, args...)})
	}
	params, ok := lengthParams[d.Dist]
	if !ok {
		bad(".dist", "must be %s, %s or %s, got %q", DistFixed, DistUniform, DistLognormal, truncate(d.Dist, maxHeaderEcho))
		return errs
	}
	set := map[string]int{"value": d.Value, "min": d.Min, "max": d.Max, "median": d.Median, "p99": d.P99}
	for _, k := range []string{"value", "min", "max", "median", "p99"} {
		v := set[k]
		taken := false
		for _, p := range params {
			taken = taken || p == k
		}
		switch {
		case !taken && v != 0:
			bad("."+k, "is not a parameter of %s (it takes %s)", d.Dist, strings.Join(params, " and "))
		case taken && (v < 1 || v > limit):
			bad("."+k, "must be between 1 and %d tokens, got %d", limit, v)
		}
	}
	switch d.Dist {
	case DistUniform:
		if d.Min > d.Max {
			bad(".max", "must be at least min (%d), got %d", d.Min, d.Max)
		}
	case DistLognormal:
		if d.Median > d.P99 {
			bad(".p99", "must be at least median (%d), got %d", d.Median, d.P99)
		}
	}
	return errs
}

// z99 is the standard normal's 99th percentile.
const z99 = 2.3263478740408408

// sample draws a length, cut to [1, limit].
func (d *LengthDist) sample(rng *mrand.Rand, limit int) int {
	var n int
	switch d.Dist {
	case DistUniform:
		n = d.Min + rng.IntN(d.Max-d.Min+1)
	case DistLognormal:
		mu := math.Log(float64(d.Median))
		sigma := (math.Log(float64(d.P99)) - mu) / z99
		n = int(math.Round(math.Exp(mu + sigma*rng.NormFloat64())))
	default:
		n = d.Value
	}
	return max(1, min(n, limit))
}

// backgroundState is the traffic in force from one instant on: every
// field set (the steps merged).
type backgroundState struct {
	after       time.Duration
	rate        float64
	prompt      LengthDist
	output      LengthDist
	prefix      PrefixMix
	maxInFlight int64
}

// mergeBackground returns the states the (validated) steps put in force,
// their After multiplied by scale.
func mergeBackground(steps []BackgroundStep, scale float64) []backgroundState {
	var out []backgroundState
	cur := backgroundState{maxInFlight: maxBackgroundInFlight}
	for _, st := range steps {
		cur.after = scaleAfter(st.After, scale)
		if st.Rate != nil {
			cur.rate = *st.Rate
		}
		if st.PromptTokens != nil {
			cur.prompt = *st.PromptTokens
		}
		if st.OutputTokens != nil {
			cur.output = *st.OutputTokens
		}
		if st.Prefix != nil {
			cur.prefix = *st.Prefix
		}
		if st.MaxInFlight != nil {
			cur.maxInFlight = int64(*st.MaxInFlight)
		}
		out = append(out, cur)
	}
	return out
}

// background injects the background traffic into an engine.
type background struct {
	e           *engine
	cfg         *Config
	states      []backgroundState
	start       time.Time
	rng         *mrand.Rand // the injector goroutine's
	prefixSalt  uint64
	ctx         context.Context // ends with stop (a submission waiting for room gives up)
	stopCtx     context.CancelFunc
	quit        chan struct{}
	done        chan struct{}
	injected    atomic.Int64
	dropped     atomic.Int64
	currentRate atomic.Uint64 // math.Float64bits of the rate in force
}

func newBackground(e *engine, cfg *Config, start time.Time, seed uint64) *background {
	ctx, cancel := context.WithCancel(context.Background())
	return &background{
		ctx:        ctx,
		stopCtx:    cancel,
		e:          e,
		cfg:        cfg,
		states:     mergeBackground(cfg.Background, cfg.scheduleScale()),
		start:      start,
		rng:        mrand.New(mrand.NewPCG(seed, seed^0x6a09e667f3bcc909)),
		prefixSalt: splitmix64(seed ^ 0xbb67ae8584caa73b),
		quit:       make(chan struct{}),
		done:       make(chan struct{}),
	}
}

// stop ends the injection and waits for the goroutine.
func (b *background) stop() {
	select {
	case <-b.quit:
	default:
		close(b.quit)
		b.stopCtx()
	}
	<-b.done
}

// rate is the arrival rate in force (for llmprobe_sim_background_rate).
func (b *background) rate() float64 {
	return math.Float64frombits(b.currentRate.Load())
}

// run generates the arrivals on the schedule's clock and submits each
// when its instant comes. The instants are drawn, not measured: a late
// goroutine submits the arrivals it owes at once, so the number of
// arrivals in a period depends only on the seed and the schedule.
func (b *background) run() {
	defer close(b.done)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	b.generate(func(st *backgroundState, at time.Duration) bool {
		if !b.sleepUntil(timer, at) {
			return false
		}
		b.currentRate.Store(math.Float64bits(st.rate))
		return true
	}, func(st *backgroundState, at time.Duration) bool {
		if !b.sleepUntil(timer, at) {
			return false
		}
		b.submit(st, b.draw(st))
		return true
	})
}

// generate walks the schedule: state is called as each state comes into
// force, arrival at each arrival (a Poisson process at the state's rate),
// with its offset from the start, in order, until either returns false
// or the last state's rate is 0. The arrival callback must draw the
// request (draw), so that the sequence of draws is the same however the
// arrivals are handled.
func (b *background) generate(state, arrival func(st *backgroundState, at time.Duration) bool) {
	at := time.Duration(0) // the offset of the last arrival or state change
	for i := range b.states {
		st := &b.states[i]
		at = max(at, st.after)
		end := time.Duration(math.MaxInt64)
		if i+1 < len(b.states) {
			end = b.states[i+1].after
		}
		if !state(st, at) {
			return
		}
		if st.rate <= 0 {
			continue
		}
		for {
			// Exponential gaps: a Poisson process at rate (memoryless, so
			// a change of rate simply starts drawing at the new one).
			gap := time.Duration(b.rng.ExpFloat64() / st.rate * float64(time.Second))
			if gap > end-at {
				at = end
				break
			}
			at += gap
			if !arrival(st, at) {
				return
			}
		}
	}
}

// sleepUntil waits until the offset off from the start; false when the
// injection stops first.
func (b *background) sleepUntil(timer *time.Timer, off time.Duration) bool {
	if off == math.MaxInt64 {
		<-b.quit
		return false
	}
	wait := time.Until(b.start.Add(off))
	if wait <= 0 {
		select {
		case <-b.quit:
			return false
		default:
			return true
		}
	}
	timer.Reset(wait)
	select {
	case <-timer.C:
		return true
	case <-b.quit:
		timer.Stop()
		return false
	}
}

// draw draws one request of st: its prompt (the shared prefix, if it
// has one, and tokens of its own), its output length and its seed.
func (b *background) draw(st *backgroundState) *seq {
	rng := b.rng
	limit := b.cfg.MaxModelLen
	prompt := st.prompt.sample(rng, limit-1)
	s := &seq{background: true, engineITL: true, ignoreEOS: true, seed: rng.Uint64()}
	s.hasher = newBlockHasher(b.cfg.BlockSize, make([]uint64, 0, prompt/b.cfg.BlockSize+1))
	if m := st.prefix; m.Share > 0 && rng.Float64() < m.Share {
		k := uint64(rng.IntN(m.Count))
		prompt = max(prompt, m.Tokens+1)
		for i := 0; i < m.Tokens; i++ {
			s.hasher.add(int(splitmix64(b.prefixSalt^k<<24^uint64(i)) % VocabSize))
		}
	}
	for i := s.hasher.n + len(s.hasher.hashes)*b.cfg.BlockSize; i < prompt; i++ {
		s.hasher.add(rng.IntN(VocabSize))
	}
	s.promptTokens = prompt
	s.maxTokens = st.output.sample(rng, limit-prompt)
	return s
}

// submit hands a drawn request to the engine, or drops it when the
// engine already holds st.maxInFlight of them.
func (b *background) submit(st *backgroundState, s *seq) {
	e := b.e
	if e.bgInFlight.Load() >= st.maxInFlight {
		b.dropped.Add(1)
		return
	}
	s.queuedAt = time.Now()
	e.bgInFlight.Add(1)
	if err := e.submit(b.ctx, s); err != nil {
		e.bgInFlight.Add(-1)
		return
	}
	b.injected.Add(1)
}

// backgroundSeed derives the background traffic's seed from the
// server's two seeds (its own stream: the server's generator is left as
// it was, so that seeded answers stay the same).
func backgroundSeed(seed1, seed2 uint64) uint64 {
	return splitmix64(seed1^0x3c6ef372fe94f82b) ^ splitmix64(seed2)
}

// finishBackground records what vLLM records of a finished request for a
// background one, which no handler waits for: it ends as a stop (the
// model's end of turn at its drawn length), its e2e latency runs from
// its arrival at the engine to its last token.
func (e *engine) finishBackground(s *seq) {
	e.bgInFlight.Add(-1)
	m := e.metrics
	m.successStop.Inc()
	m.e2e.Observe(s.lastTokenAt.Sub(s.queuedAt).Seconds())
	m.observeFinished(s)
	m.reqPrompt.Observe(float64(s.promptTokens))
	m.reqGeneration.Observe(float64(s.generated))
}

// register adds the simulator's own background families (never vLLM's:
// a reader of the engine's metrics must not rely on them).
func (b *background) register(reg *prometheus.Registry, labels prometheus.Labels) {
	reg.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "llmprobe_sim_background_requests_total", ConstLabels: labels,
			Help: "Background requests the simulator injected into its engine (background).",
		}, func() float64 { return float64(b.injected.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "llmprobe_sim_background_dropped_total", ConstLabels: labels,
			Help: "Background arrivals dropped because max_in_flight (at most 10000) background requests were already waiting or running.",
		}, func() float64 { return float64(b.dropped.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "llmprobe_sim_background_rate", ConstLabels: labels,
			Help: "Arrival rate of the background traffic in force, in requests per second.",
		}, b.rate),
	)
}
