// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package sim

// finishBackground records what vLLM records of a finished request for a
// background one, which no handler waits for: it ends as a stop (the
// model's end of turn at its drawn length), its e2e latency runs from
// its arrival at the engine to its last token.
func (e *engine) finishBackground(s *seq) {
	m := e.metrics
	m.successStop.Inc()
	m.e2e.Observe(s.lastTokenAt.Sub(s.queuedAt).Seconds())
	m.observeFinished(s)
	m.reqPrompt.Observe(float64(s.promptTokens))
	m.reqGeneration.Observe(float64(s.generated))
}
