// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package bench

import (
	"testing"
	"time"

	"github.com/llmprobe/llmprobe/config"
)

// A bench stage offers its own rate: a target whose daemon arrival follows
// a trace's rate curve (trace_shape) gets a Poisson process at the stage's
// rate, or the stage would offer the curve's value at the hour it runs.
func TestStageConfigDropsTraceShape(t *testing.T) {
	base := &config.Config{Targets: []*config.Target{{Name: "t", Arrival: config.Arrival{Process: config.ProcessTraceShape, Rate: 1, Burstiness: 1, Trace: &config.TraceShape{File: "day.jsonl"}}}}}
	cfg := stageConfig(base, base.Targets, 40, time.Second, 0)
	if a := cfg.Targets[0].Arrival; a.Process != config.ProcessPoisson || a.Trace != nil || a.Rate != 40 {
		t.Errorf("stage arrival %+v, want poisson at 40/s", a)
	}
	if base.Targets[0].Arrival.Process != config.ProcessTraceShape {
		t.Error("the base configuration was changed")
	}
}
