// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package bench_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/llmprobe/llmprobe/bench"
	"github.com/llmprobe/llmprobe/bench/report"
	"github.com/llmprobe/llmprobe/config"
	"github.com/llmprobe/llmprobe/internal/simtest"
	"github.com/llmprobe/llmprobe/slo"
)

// oneInflightConfig is findConfig's target with max_inflight set to 1
// and constant arrivals: a request of findSimConfig lasts about 60 ms, so
// from about 17 req/s on, arrivals come while the one slot is taken and
// are dropped (the verdict: target overloaded), while below it none is.
func oneInflightConfig(t *testing.T, base string) *config.Config {
	t.Helper()
	cfg, err := config.Load(fmt.Appendf(nil, `
global: {warmup: 1s, request_timeout: 60s, seed: 1, saturation: {max_lag: 200ms, max_inflation: 50ms}}
workloads:
  w: {classes: [{name: c, prompt_tokens: %d, output_tokens: %d}]}
targets:
  - {name: sim, url: %s/v1, model: sim-model, workload: w, arrival: {process: constant, rate: 1}, max_inflight: 1, extra_body: {ignore_eos: true}}
`, findPrompt, findOutput, base), "one.yml")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestFindSLOUntrustedNeverBrackets: an SLO search whose higher stages
// are not trusted (drops over a max_inflight the user set) never takes
// one as the upper side of its bracket, nor claims a precision from it:
// it reports the highest rate met, says the limit was not bracketed, and
// names the bound that capped it (max_inflight) and what to change. The
// SLO (TTFT p50 ≤ 5 s, which 20 samples judge) holds at every rate the target absorbs, so every
// trusted stage meets it. Before, the search took the untrusted 22.5
// req/s stage as "not met" and claimed a bracket "within 10%".
func TestFindSLOUntrustedNeverBrackets(t *testing.T) {
	if testing.Short() {
		t.Skip("an SLO search against a simulator")
	}
	base, _ := startFindSim(t)
	cfg := oneInflightConfig(t, base)
	spec, err := slo.ParseSpec("ttft_p50=5s")
	if err != nil {
		t.Fatal(err)
	}
	rep, err := bench.Find(context.Background(), bench.Options{Config: cfg, Warmup: 500 * time.Millisecond, Grace: 10 * time.Second, SLO: spec},
		bench.FindOptions{Mode: bench.FindSLO, StartRate: 10, MinRequests: 20, MinWindow: 3 * time.Second, MaxWindow: 5 * time.Second,
			MaxStages: 8, Precision: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	text := logReport(t, rep)
	r := rep.Find.SLO
	if r == nil {
		t.Fatal("no SLO search in the report")
	}
	untrusted := 0
	for _, p := range r.Probes {
		if !p.Trusted {
			untrusted++
		}
	}
	if untrusted == 0 {
		t.Skip("no stage was untrusted: the case this test is about did not arise")
	}
	if r.Above != nil && !r.Above.Trusted {
		t.Errorf("stage %d, NOT TRUSTED, is the upper side of the bracket (precision %.1f%%)", r.Above.Stage, 100*r.Precision)
	}
	if r.Above == nil && r.Precision != 0 {
		t.Errorf("precision %.1f%% claimed without an upper side", 100*r.Precision)
	}
	if r.Met != nil && !r.Met.Trusted {
		t.Errorf("stage %d, NOT TRUSTED, met the SLO", r.Met.Stage)
	}
	if !strings.Contains(text, "capped by max_inflight") || !strings.Contains(text, "raise the target's max_inflight") {
		t.Errorf("the report does not say max_inflight capped the search and what to change")
	}
	if f := rep.Find; len(f.Capped) == 0 || f.Capped[0].By != report.CapMaxInflight {
		t.Errorf("find.capped = %+v, want max_inflight", f.Capped)
	}
}

// TestFindCapacityCappedByMaxInflight: a capacity ramp stopped by drops
// over a max_inflight the user set says the capacity was not found, that
// max_inflight capped it and to raise it; it does not raise what the
// user set; and the levels asked for then run at fractions of the lower
// bound, and say so (before, they ran without a word).
func TestFindCapacityCappedByMaxInflight(t *testing.T) {
	if testing.Short() {
		t.Skip("a capacity ramp against a simulator")
	}
	base, _ := startFindSim(t)
	cfg := oneInflightConfig(t, base)
	rep, err := bench.Find(context.Background(), bench.Options{Config: cfg, Warmup: 500 * time.Millisecond, Grace: 10 * time.Second},
		bench.FindOptions{Mode: bench.FindCapacity, StartRate: 10, MinRequests: 20, MinWindow: 3 * time.Second, MaxWindow: 5 * time.Second, MaxStages: 6,
			Levels: []float64{0.5}})
	if err != nil {
		t.Fatal(err)
	}
	text := logReport(t, rep)
	c := rep.Find.Capacity
	if c == nil || c.Found {
		t.Fatalf("capacity %+v: found behind max_inflight 1", c)
	}
	if rep.Find.MaxInflight != nil {
		t.Errorf("max_inflight set by the user was raised: %+v", rep.Find.MaxInflight)
	}
	if f := rep.Find; len(f.Capped) == 0 || f.Capped[0].By != report.CapMaxInflight {
		t.Errorf("find.capped = %+v, want max_inflight", f.Capped)
	}
	if !strings.Contains(text, "capped by max_inflight (1, set in the configuration)") || !strings.Contains(text, "raise the target's max_inflight") {
		t.Errorf("the report does not say max_inflight capped the ramp and what to change")
	}
	if l := rep.Find.Levels; len(l) != 1 || !l[0].OfLowerBound || l[0].AchievedRate == 0 ||
		!strings.Contains(text, "level 0.5 × the capacity's lower bound (the capacity was NOT FOUND) = ") {
		t.Errorf("levels %+v: not said to be of the capacity's lower bound", l)
	}
}

// TestFindRaisesMaxInflight: against a simulator whose batch of 64
// requests lasts 2 s each (20 output tokens, 100 ms steps: a capacity of
// 64 / (20 × 0.1 s) = 32 req/s), the default max_inflight of 64 is
// reached below capacity, and past it the drops left every stage that
// would show the plateau untrusted: the ramp ended "NOT FOUND". With
// max_inflight unset in the configuration, the search raises it for each
// stage to what Little's law says the stage needs, says so, and finds the
// capacity on trusted stages (within 10% of 32 req/s: the harness sends
// late rather than early, and a step overslept shortens the next).
func TestFindRaisesMaxInflight(t *testing.T) {
	if testing.Short() {
		t.Skip("a capacity ramp against a simulator")
	}
	const model = 64 / (20 * 0.1)
	sim := startSimProcess(t, `
max_num_seqs: 64
prefill_base: 0s
prefill_per_token: 0s
decode_base: 100ms
decode_per_seq: 0s
enable_prefix_caching: false
eos_probability: 0
seed: 1
`)
	cfg, err := config.Load(fmt.Appendf(nil, `
global: {warmup: 2s, request_timeout: 60s, seed: 1, saturation: {max_lag: 200ms, max_inflation: 50ms}}
workloads:
  w: {classes: [{name: c, prompt_tokens: 8, output_tokens: 20}]}
targets:
  - {name: sim, url: %s/v1, model: sim-model, workload: w, arrival: {process: poisson, rate: 1}, extra_body: {ignore_eos: true}}
`, sim.base), "raise.yml")
	if err != nil {
		t.Fatal(err)
	}
	rep := simtest.RetryFor(t, 2, time.Minute, func(int) (*report.Report, string) {
		rep, err := bench.Find(context.Background(), bench.Options{Config: cfg, Warmup: 2 * time.Second, Grace: 30 * time.Second},
			bench.FindOptions{Mode: bench.FindCapacity, StartRate: 12, MinRequests: 100, MinWindow: 4 * time.Second, MaxWindow: 10 * time.Second, MaxStages: 6})
		if err != nil {
			t.Fatal(err)
		}
		var harness []string
		for _, c := range rep.Find.Capped {
			if c.By == report.CapHarness {
				harness = append(harness, c.Reason)
			}
		}
		return rep, strings.Join(harness, "; ")
	})
	text := logReport(t, rep)
	c := rep.Find.Capacity
	if c == nil || !c.Found {
		t.Fatalf("capacity not found: %+v", c)
	}
	if r := c.RequestsPerSecond / model; r < 0.9 || r > 1.1 {
		t.Errorf("capacity %.2f req/s is %.0f%% of the model's %.0f", c.RequestsPerSecond, 100*r, model)
	}
	m := rep.Find.MaxInflight
	if m == nil || m.From != config.DefaultMaxInflight || m.To <= config.DefaultMaxInflight {
		t.Errorf("max_inflight raise %+v, want from %d to more", m, config.DefaultMaxInflight)
	}
	if !strings.Contains(text, "max_inflight raised from 64") || !strings.Contains(text, "rule: max_inflight: the configuration does not set it") {
		t.Error("the report does not say max_inflight was raised, and how")
	}
}
