// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package workload

import (
	"fmt"

	"github.com/llmprobe/llmprobe/dist"
	"github.com/llmprobe/llmprobe/fit"
)

// Refitted lengths: a workload that follows production (workload_from)
// draws its prompt and output lengths from what the served model's
// histograms say (the engine's refit loop fetches and fits them).

// MaxRefitTokens bounds the lengths a refit plans. The histograms come
// from a server (through Prometheus) and are only as sane as it is: a
// fit whose table goes beyond this is refused, and the tail a table
// extrapolates (unbounded when lengths lie in the +Inf bucket) is cut
// here, so that a bad answer cannot make the probe build prompts of
// billions of tokens. It is twice the largest context windows commonly
// served (1M tokens).
const MaxRefitTokens = 1 << 21

// RefitSamplers turns a fit of the served model's histograms into the
// prompt and output length samplers of a refitted workload.
func RefitSamplers(res *fit.Result) (prompt, output dist.Sampler, err error) {
	build := func(what string, l *fit.Lengths) (dist.Sampler, error) {
		if l == nil {
			return nil, fmt.Errorf("%s lengths: none fitted", what)
		}
		s, err := l.Sampler()
		if err != nil {
			return nil, fmt.Errorf("%s lengths: %w", what, err)
		}
		if top := l.Table[len(l.Table)-1]; top.V > MaxRefitTokens {
			return nil, fmt.Errorf("%s lengths: the fitted p%g is %.0f tokens, beyond the %d a refit accepts", what, 100*top.P, top.V, MaxRefitTokens)
		}
		return dist.Clamp(s, 1, MaxRefitTokens), nil
	}
	if prompt, err = build("prompt", res.Prompt); err != nil {
		return nil, nil, err
	}
	if output, err = build("output", res.Output); err != nil {
		return nil, nil, err
	}
	return prompt, output, nil
}

// WithLengths returns a copy of w whose classes draw prompt and output
// lengths from the given samplers (weights, prefixes, sampling and turns
// stay).
func (w *Workload) WithLengths(prompt, output dist.Sampler) *Workload {
	out := &Workload{cum: w.cum}
	for _, c := range w.Classes {
		nc := *c
		nc.Prompt, nc.Output = prompt, output
		if nc.Turns != nil {
			t := *nc.Turns
			if t.UserTokens == c.Prompt {
				t.UserTokens = prompt
			}
			nc.Turns = &t
		}
		nc.ReuseIntent = reuseIntent(&nc)
		out.Classes = append(out.Classes, &nc)
	}
	return out
}
