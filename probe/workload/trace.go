// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package workload

import (
	"math/rand/v2"

	"github.com/llmprobe/llmprobe/config"
	"github.com/llmprobe/llmprobe/dist"
	"github.com/llmprobe/llmprobe/tracefile"
)

// TraceSource is what a from_trace class draws from: the units (single
// records, or whole sessions with their turns in order) the configuration
// sampled from the trace at load.
type TraceSource struct {
	// BlockSize is the trace's hash_ids block size, in tokens.
	BlockSize int
	// Sessions: the units are conversations, replayed turn by turn.
	Sessions bool
	units    [][]tracefile.Record
	reuse    float64
	turns    float64 // mean records per unit
}

func newTraceSource(s *config.TraceSample) *TraceSource {
	return &TraceSource{
		BlockSize: s.BlockSize,
		Sessions:  s.HasSessions,
		units:     s.Sessions,
		reuse:     s.Reuse,
		turns:     float64(s.Records) / float64(len(s.Sessions)),
	}
}

// Draw draws one unit uniformly: a record (its lengths joint, as in the
// trace), or a session's records in turn order. The caller must not
// modify it.
func (t *TraceSource) Draw(r *rand.Rand) []tracefile.Record {
	return t.units[r.IntN(len(t.units))]
}

// Units is the number of units sampled.
func (t *TraceSource) Units() int { return len(t.units) }

// marginals returns samplers of the sample's prompt and output lengths,
// for what reads a class's length distributions (the status, estimates).
func (t *TraceSource) marginals() (prompt, output dist.Sampler) {
	var p, o []float64
	for _, u := range t.units {
		for _, rec := range u {
			p = append(p, float64(max(rec.PromptTokens, 1)))
			o = append(o, float64(max(rec.OutputTokens, 1)))
		}
	}
	prompt, err := dist.FromSamples(p)
	if err != nil {
		prompt = dist.Fixed(1)
	}
	output, err = dist.FromSamples(o)
	if err != nil {
		output = dist.Fixed(1)
	}
	return prompt, output
}
