// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package plan

import (
	"testing"

	"github.com/llmprobe/llmprobe/config"
)

// BenchmarkPlanDemo plans the demo configuration (examples/demo.yml) as
// `llmprobe plan` does: the default effects and 100 steps each, on every
// CPU. The goal is under 10 s on two cores.
func BenchmarkPlanDemo(b *testing.B) {
	cfg, err := config.LoadFile("../examples/demo.yml")
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := Plan(cfg, Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPlanDemoGoal is BenchmarkPlanDemo with --detect=ttft:+25%:10m:
// each class's lowest rate meeting it.
func BenchmarkPlanDemoGoal(b *testing.B) {
	cfg, err := config.LoadFile("../examples/demo.yml")
	if err != nil {
		b.Fatal(err)
	}
	g, err := ParseGoal("ttft:+25%:10m")
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := Plan(cfg, Options{Goals: []Goal{g}}); err != nil {
			b.Fatal(err)
		}
	}
}
