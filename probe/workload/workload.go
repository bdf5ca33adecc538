// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package workload

import (
	"math"
	"math/rand/v2"
	"time"

	"github.com/llmprobe/llmprobe/config"
	"github.com/llmprobe/llmprobe/dist"
	"github.com/llmprobe/llmprobe/probe/wire"
	"github.com/llmprobe/llmprobe/tracefile"
)

// Class is a compiled workload class: what the engine samples on its hot
// path.
type Class struct {
	Name     string
	Weight   float64
	Prompt   dist.Sampler
	Output   dist.Sampler
	Prefix   *config.Prefix // nil: no shared prefix
	Sampling wire.Sampling
	Turns    *Turns // nil: single requests
	// Trace, for a from_trace class, is the trace sample its requests
	// are drawn from (whole records, or sessions); nil otherwise.
	Trace *TraceSource

	// ReuseIntent is the configured fraction of prompt tokens meant to be
	// served from a prefix cache (llmprobe_prefix_reuse_target_ratio); for
	// a from_trace class, the trace's own reuse (config.TraceSample.Reuse).
	ReuseIntent float64

	// Batch is the number of inputs of an embeddings request (1 or more).
	Batch int
	// Model is the model or adapter the class's requests name; empty:
	// the target's.
	Model string
	// Images attaches synthetic images to each request (nil: none).
	Images *imageSpec
	// tools and toolChoice are the class's tools in the OpenAI chat
	// format of the configuration; ForTarget writes them into Body in
	// the format of the target's API.
	tools      []map[string]any
	toolChoice any

	// Body holds the members merged into this class's request bodies:
	// the class's own (reasoning_effort, tools, tool_choice, extra_body)
	// from NewWorkload, over the target's once ForTarget ran.
	Body map[string]any
}

// Workload is a compiled weighted mix of classes.
type Workload struct {
	Classes []*Class
	cum     []float64 // cumulative normalised weights
}

// NewWorkload compiles a validated config workload.
func NewWorkload(w *config.Workload) *Workload {
	out := &Workload{}
	total := 0.0
	for _, c := range w.Classes {
		total += c.Weight
	}
	acc := 0.0
	for _, c := range w.Classes {
		cl := &Class{
			Name:   c.Name,
			Weight: c.Weight,
			Prompt: c.PromptTokens.Sampler(),
			Output: c.OutputTokens.Sampler(),
			Prefix: c.Prefix,
			Sampling: wire.Sampling{
				Temperature: c.Sampling.Temperature,
				TopP:        c.Sampling.TopP,
				TopK:        c.Sampling.TopK,
				Seed:        c.Sampling.Seed,
			},
			Body:       c.BodyFields(),
			Batch:      max(c.BatchSize, 1),
			Model:      c.Model,
			Images:     newImageSpec(c.Images),
			tools:      c.Tools,
			toolChoice: c.ToolChoice,
		}
		if c.Turns != nil {
			cl.Turns = newTurns(c.Turns, cl.Prompt)
		}
		if ft := c.FromTrace; ft != nil && ft.Sample() != nil {
			cl.Trace = newTraceSource(ft.Sample())
			cl.Prompt, cl.Output = cl.Trace.marginals()
		}
		cl.ReuseIntent = reuseIntent(cl)
		acc += c.Weight / total
		out.Classes = append(out.Classes, cl)
		out.cum = append(out.cum, acc)
	}
	out.cum[len(out.cum)-1] = 1 // guard against rounding
	return out
}

// continuousUsage is stream_options asking for usage in every chunk.
var continuousUsage = map[string]any{"include_usage": true, "continuous_usage_stats": true}

// ForTarget merges the request-body members of target t under each
// class's own: t's extra_body, and stream_options with continuous usage
// when t asks for it (unless its extra_body sets stream_options). A class
// that adds nothing shares the target's map; the maps are built once, not
// per request.
func (w *Workload) ForTarget(t *config.Target) *Workload {
	base := t.ExtraBody
	if _, set := base["stream_options"]; t.ContinuousUsageStats && !set {
		base = mergeBody(base, map[string]any{"stream_options": continuousUsage})
	}
	for _, c := range w.Classes {
		c.Body = mergeBody(base, c.Body)
		if c.tools != nil || c.toolChoice != nil {
			c.Body["tools"], c.Body["tool_choice"] = wire.ToolsFor(wire.API(t.API), c.tools, c.toolChoice)
			if c.tools == nil {
				delete(c.Body, "tools")
			}
			if c.toolChoice == nil {
				delete(c.Body, "tool_choice")
			}
		}
	}
	return w
}

// mergeBody returns base with over's members replacing or added; base
// itself when over is empty.
func mergeBody(base, over map[string]any) map[string]any {
	if len(over) == 0 {
		return base
	}
	out := make(map[string]any, len(base)+len(over))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range over {
		out[k] = v
	}
	return out
}

// Pick draws a class by weight.
func (w *Workload) Pick(r *rand.Rand) *Class {
	if len(w.Classes) == 1 {
		return w.Classes[0]
	}
	u := r.Float64()
	for i, c := range w.cum {
		if u < c {
			return w.Classes[i]
		}
	}
	return w.Classes[len(w.Classes)-1]
}

// Plan is what one request will look like, drawn from its class.
type Plan struct {
	Class        *Class
	PromptTokens int // total planned prompt tokens (prefix + nonce + body)
	OutputTokens int // max_tokens
	PrefixGroup  int // -1: no shared prefix
	PrefixTokens int
	// Records, for a from_trace class, is the drawn unit: one record, or
	// a session's records in turn order (PromptTokens and OutputTokens
	// are its first record's).
	Records []tracefile.Record
}

// Plan draws lengths and the shared-prefix choice for one request. A
// request that uses a shared prefix is at least as long as the prefix plus
// the nonce plus one token of its own.
func (c *Class) Plan(r *rand.Rand) Plan {
	if c.Trace != nil {
		u := c.Trace.Draw(r)
		return Plan{Class: c, PromptTokens: max(u[0].PromptTokens, 1), OutputTokens: max(u[0].OutputTokens, 1), PrefixGroup: -1, Records: u}
	}
	p := Plan{
		Class:        c,
		PromptTokens: tokens(c.Prompt.Sample(r)),
		OutputTokens: tokens(c.Output.Sample(r)),
		PrefixGroup:  -1,
	}
	if c.Prefix != nil && c.Prefix.Probability > 0 && r.Float64() < c.Prefix.Probability {
		p.PrefixGroup = r.IntN(c.Prefix.Groups)
		p.PrefixTokens = c.Prefix.Tokens
		p.PromptTokens = max(p.PromptTokens, p.PrefixTokens+NonceTokens+1)
	}
	return p
}

// tokens rounds a drawn length to a whole number of tokens, at least 1.
func tokens(x float64) int {
	if math.IsNaN(x) || x < 1 {
		return 1
	}
	if x > math.MaxInt32 {
		return math.MaxInt32
	}
	return int(math.Round(x))
}

// reuseIntent computes the expected fraction of prompt tokens that come
// from a shared prefix: P(prefix) × prefix tokens / E[prompt tokens],
// where the expectation follows Plan's own rule (a prefixed prompt is at
// least prefix + nonce + 1). It is evaluated by a fixed-seed Monte Carlo
// over the class's real samplers, so it stays exact for any distribution.
func reuseIntent(c *Class) float64 {
	if c.Trace != nil {
		return c.Trace.reuse
	}
	if c.Prefix == nil || c.Prefix.Probability == 0 {
		return 0
	}
	r := rand.New(rand.NewPCG(1, 2))
	const n = 20000
	var prefixed, total float64
	for range n {
		p := c.Plan(r)
		total += float64(p.PromptTokens)
		if p.PrefixGroup >= 0 {
			prefixed += float64(p.PrefixTokens)
		}
	}
	if total == 0 {
		return 0
	}
	return prefixed / total
}

// Turns is a compiled multi-turn setting.
type Turns struct {
	Count      dist.Sampler
	ThinkTime  dist.Sampler // seconds
	UserTokens dist.Sampler
	// countFloor: Count is uniform over [min, max+1) and floored, so
	// every whole number of turns in [min, max] is equally likely
	// (rounding would give the ends half weight).
	countFloor bool
}

func newTurns(t *config.Turns, prompt dist.Sampler) *Turns {
	out := &Turns{Count: t.Count.Sampler(), ThinkTime: t.ThinkTime.Sampler(), UserTokens: t.UserTokens.Sampler()}
	if out.UserTokens == nil {
		out.UserTokens = prompt
	}
	if d := t.Count; d.Kind == config.DistUniform && d.Min != nil && d.Max != nil && *d.Min == math.Trunc(*d.Min) && *d.Max == math.Trunc(*d.Max) {
		if s, err := dist.Uniform(*d.Min, *d.Max+1); err == nil {
			out.Count, out.countFloor = s, true
		}
	}
	return out
}

// Draw draws the number of turns of a conversation (at least 1).
func (t *Turns) Draw(r *rand.Rand) int {
	x := t.Count.Sample(r)
	if t.countFloor {
		x = math.Floor(x)
	}
	return tokens(x)
}

// Think draws a think time.
func (t *Turns) Think(r *rand.Rand) time.Duration {
	s := t.ThinkTime.Sample(r)
	if !(s > 0) {
		return 0
	}
	return time.Duration(s * float64(time.Second))
}

// NextTurnLengths draws the lengths of a conversation's next turn: the
// new user message's server tokens and its max_tokens.
func (c *Class) NextTurnLengths(r *rand.Rand) (userTokens, maxTokens int) {
	userTokens = tokens(c.Turns.UserTokens.Sample(r))
	maxTokens = tokens(c.Output.Sample(r))
	return userTokens, maxTokens
}

// MeanTurns is the expected number of requests per arrival of the class.
func (c *Class) MeanTurns() float64 {
	if c.Trace != nil {
		if c.Trace.Sessions {
			return c.Trace.turns
		}
		return 1
	}
	if c.Turns == nil {
		return 1
	}
	r := rand.New(rand.NewPCG(3, 4))
	const n = 20000
	total := 0
	for range n {
		total += c.Turns.Draw(r)
	}
	return float64(total) / n
}

// RequestsPerArrival is the expected number of requests an arrival brings
// (more than 1 with multi-turn classes).
func (w *Workload) RequestsPerArrival() float64 {
	total, weights := 0.0, 0.0
	for _, c := range w.Classes {
		total += c.Weight * c.MeanTurns()
		weights += c.Weight
	}
	return total / weights
}
