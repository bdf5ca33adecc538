// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package plan

import (
	"math"
	"math/rand/v2"

	"github.com/llmprobe/llmprobe/config"
	"github.com/llmprobe/llmprobe/dist"
	"github.com/llmprobe/llmprobe/probe/wire"
	"github.com/llmprobe/llmprobe/probe/workload"
	"github.com/llmprobe/llmprobe/servermetrics"
)

// Tokens are tokens a day: the prompt tokens (CachedPrompt of them those
// a prefix cache can serve: the shared prefix, and a conversation's
// history) and the output tokens.
type Tokens struct {
	Prompt       float64 `json:"prompt"`
	Output       float64 `json:"output"`
	CachedPrompt float64 `json:"cached_prompt"`
}

func (t Tokens) scaled(f float64) Tokens {
	return Tokens{Prompt: t.Prompt * f, Output: t.Output * f, CachedPrompt: t.CachedPrompt * f}
}

func (t Tokens) plus(u Tokens) Tokens {
	return Tokens{Prompt: t.Prompt + u.Prompt, Output: t.Output + u.Output, CachedPrompt: t.CachedPrompt + u.CachedPrompt}
}

// arrivalTokens is what one arrival of a class brings: its requests
// (more than one for a conversation) and their tokens.
type arrivalTokens struct {
	requests               float64
	prompt, output, cached float64
	// longOutput is the share of the class's requests with at least 2
	// output tokens (those with a TPOT).
	longOutput float64
}

// integrationPoints is the midpoint rule's resolution over quantiles.
const integrationPoints = 1 << 14

// meanAtLeast is E[max(X, c)] for X of s: its mean plus the expected
// shortfall below c, integrated over s's quantiles (the exact mean keeps
// the heavy upper tail exact; only the lower part is integrated).
func meanAtLeast(s dist.Sampler, c float64) float64 {
	m := s.Mean()
	var short float64
	for i := range integrationPoints {
		q := s.Quantile((float64(i) + 0.5) / integrationPoints)
		if q >= c {
			break // quantiles rise: no more shortfall
		}
		short += c - q
	}
	return m + short/integrationPoints
}

// shareAtLeast is P(X ≥ c) for X of s.
func shareAtLeast(s dist.Sampler, c float64) float64 {
	n := 0
	for i := range integrationPoints {
		if s.Quantile((float64(i)+0.5)/integrationPoints) >= c {
			n++
		}
	}
	return float64(n) / integrationPoints
}

// turnMoments are E[K] and E[K(K−1)/2] for the turns K of a conversation
// (Turns.Draw's own rule), and E[(K−1)(K−2)/2].
func turnMoments(t *workload.Turns) (k, pairs, laterPairs float64) {
	r := rand.New(rand.NewPCG(5, 6))
	const n = 1 << 18
	for range n {
		x := float64(t.Draw(r))
		k += x
		pairs += x * (x - 1) / 2
		laterPairs += (x - 1) * (x - 2) / 2
	}
	return k / n, pairs / n, laterPairs / n
}

// firstTurnFloor is the fewest server tokens a first turn's prompt can
// have: the shared prefix (if any), the nonce and the template's tokens
// of its messages (the length model's prior, workload.TemplateTokens).
// A shorter planned prompt is sent as that (workload.Builder.FirstTurn).
func firstTurnFloor(api string, prefixTokens int) float64 {
	k := 0
	if wire.API(api).MessageBased() {
		k = 1
		if prefixTokens > 0 {
			k = 2
		}
	}
	return float64(prefixTokens+workload.NonceTokens) + workload.TemplateTokens(k)
}

// laterTurnTemplate is the template's tokens a later turn adds: the
// answer's and the new user message's (message-based APIs).
func laterTurnTemplate(api string) float64 {
	if wire.API(api).MessageBased() {
		return 2 * (workload.TemplateTokens(1) - workload.TemplateTokens(0))
	}
	return 0
}

// classTokens computes what one arrival of class c of a target of api
// brings, exactly from its distributions (expectations, not draws), but
// for a from_trace class, whose units are drawn.
func classTokens(c *workload.Class, api string) arrivalTokens {
	if c.Trace != nil {
		return traceTokens(c)
	}
	var a arrivalTokens
	q, prefix := 0.0, 0
	if c.Prefix != nil && c.Prefix.Probability > 0 {
		q, prefix = c.Prefix.Probability, c.Prefix.Tokens
	}
	first := (1-q)*meanAtLeast(c.Prompt, firstTurnFloor(api, 0)) + q*meanAtLeast(c.Prompt, firstTurnFloor(api, prefix))
	if api == config.APIEmbeddings {
		// One request of Batch inputs, each of the drawn length; no output.
		a.requests = 1
		a.prompt = float64(c.Batch) * meanAtLeast(c.Prompt, 1)
		return a
	}
	out := meanAtLeast(c.Output, 1)
	long := shareAtLeast(c.Output, 1.5) // rounded to 2 or more
	if c.Turns == nil {
		a.requests, a.prompt, a.output, a.cached = 1, first, out, q*float64(prefix)
		a.longOutput = long
		return a
	}
	k, pairs, laterPairs := turnMoments(c.Turns)
	grow := out + meanAtLeast(c.Turns.UserTokens, 1) + laterTurnTemplate(api)
	a.requests = k
	// Turn j's prompt is the first's plus (j−1) rounds of answer, user
	// message and template (workload.Builder.NextTurn).
	a.prompt = k*first + pairs*grow
	a.output = k * out
	// A later turn's history (the previous prompt and answer) is what a
	// prefix cache serves; the first turn's, the shared prefix.
	a.cached = q*float64(prefix) + (k-1)*(first+out) + laterPairs*grow
	a.longOutput = long
	return a
}

// traceTokens draws a from_trace class's units (records, or sessions) and
// averages their tokens; the cached share is the trace's own reuse.
func traceTokens(c *workload.Class) arrivalTokens {
	r := rand.New(rand.NewPCG(7, 8))
	const n = 1 << 15
	var a arrivalTokens
	long := 0
	for range n {
		p := c.Plan(r)
		for _, rec := range p.Records {
			a.requests++
			a.prompt += float64(max(rec.PromptTokens, 1))
			a.output += float64(max(rec.OutputTokens, 1))
			if rec.OutputTokens >= 2 {
				long++
			}
		}
	}
	if a.requests > 0 {
		a.longOutput = float64(long) / a.requests
	}
	a.requests, a.prompt, a.output = a.requests/n, a.prompt/n, a.output/n
	a.cached = c.ReuseIntent * a.prompt
	return a
}

// Pricing notes.
const (
	noPricing = "no cost: the target has no pricing"
)

// costPerDay prices tokens a day with p: per million tokens (a hosted
// API, cached prompt tokens at the cached price), or the probe's share of
// the server's GPU-hours (servermetrics.StageCost's GPU cost per million
// generated tokens, as bench's --gpu.price-per-hour prices them, times
// the output tokens). nil without pricing.
func costPerDay(p *config.Pricing, t Tokens) *float64 {
	if p == nil {
		return nil
	}
	if p.PerToken() {
		in, out := 0.0, 0.0
		if p.InputPerMillion != nil {
			in = *p.InputPerMillion
		}
		if p.OutputPerMillion != nil {
			out = *p.OutputPerMillion
		}
		v := ((t.Prompt-t.CachedPrompt)*in + t.CachedPrompt*p.CachedInput() + t.Output*out) / 1e6
		return &v
	}
	tps := servermetrics.Float(p.GeneratedTokensPerSecond)
	c := servermetrics.StageCost([]servermetrics.CostTarget{{Server: &servermetrics.Stats{GenerationTokensPerSec: &tps}}}, nil,
		servermetrics.CostOptions{GPUPricePerHour: p.GPUPricePerHour, GPUCount: p.GPUs})
	if c == nil || c.CostPerMillion == nil {
		return nil
	}
	v := float64(*c.CostPerMillion) * t.Output / 1e6
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}
