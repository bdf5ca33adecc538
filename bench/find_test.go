// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package bench_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/llmprobe/llmprobe/bench"
	"github.com/llmprobe/llmprobe/config"
	"github.com/llmprobe/llmprobe/sim"
	"github.com/llmprobe/llmprobe/slo"
)

// The searches run against the simulator in a child process (the test
// binary re-executed as in capacity_test.go, serving sim.Listen with the
// configuration below, as `llmprobe sim --sim.config.file` does), with a
// small batch and a fixed timing, so its capacity is known.
const (
	findPrompt = 20 // prompt tokens per request
	findOutput = 10 // output tokens per request (ignore_eos, no early stop)
)

const findSimConfig = `
max_num_seqs: 8
prefill_base: 0s
prefill_per_token: 100us
decode_base: 4ms
decode_per_seq: 1ms
enable_prefix_caching: false
eos_probability: 0
seed: 1
`

// modelCapacity derives the simulator's capacity from its timing model.
// Saturated, the batch always holds max_num_seqs sequences; each takes
// findOutput steps (the step that completes its prefill also yields its
// first token), every step costs DecodeBase + DecodePerSeq × 8, and each
// request's prefill adds PrefillPerToken × prompt tokens to the step it
// falls in (PrefillBase is 0, so it does not matter how prefills share
// steps). So 8 requests complete every findOutput decode steps plus 8
// prefills: requests/s = 8 / (output × step(8) + 8 × prefill).
func modelCapacity(t *testing.T) (reqPerSec, tokPerSec float64) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "sim.yml")
	if err := os.WriteFile(f, []byte(findSimConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := sim.LoadConfigFile(f)
	if err != nil {
		t.Fatal(err)
	}
	n := float64(cfg.MaxNumSeqs)
	step := cfg.DecodeBase + time.Duration(cfg.MaxNumSeqs)*cfg.DecodePerSeq
	prefill := cfg.PrefillBase + findPrompt*cfg.PrefillPerToken
	per8 := time.Duration(findOutput)*step + time.Duration(cfg.MaxNumSeqs)*prefill
	reqPerSec = n / per8.Seconds()
	return reqPerSec, reqPerSec * findOutput
}

// startFindSim runs the simulator of findSimConfig in a child process and
// returns its base URL.
func startFindSim(t *testing.T) string {
	t.Helper()
	return startSimProcess(t, findSimConfig).base
}

func findConfig(t *testing.T, base string) *config.Config {
	t.Helper()
	cfg, err := config.Load(fmt.Appendf(nil, `
global: {warmup: 1s, request_timeout: 60s, seed: 1}
workloads:
  w:
    classes:
      - {name: c, prompt_tokens: %d, output_tokens: %d, sampling: {temperature: 0.7}}
targets:
  - name: sim
    url: %s/v1
    model: sim-model
    workload: w
    arrival: {process: constant, rate: 1}
    max_inflight: 4096
    extra_body: {ignore_eos: true}
`, findPrompt, findOutput, base), "find.yml")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func logReport(t *testing.T, rep *bench.Report) string {
	t.Helper()
	var sb strings.Builder
	if err := rep.WriteText(&sb); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", sb.String())
	return sb.String()
}

// TestFindCapacity: the ramp lands within 15% of the capacity the
// simulator's timing model gives, in requests/s and output tokens/s, on a
// trusted stage; the levels run at their fractions of it.
func TestFindCapacity(t *testing.T) {
	if testing.Short() {
		t.Skip("a ramp of stages against a simulator")
	}
	wantReq, wantTok := modelCapacity(t)
	cfg := findConfig(t, startFindSim(t))
	rep, err := bench.Find(context.Background(), bench.Options{Config: cfg, Warmup: time.Second, Grace: 20 * time.Second},
		bench.FindOptions{Mode: bench.FindCapacity, StartRate: 15, Factor: 1.5, MinRequests: 60,
			MinWindow: 3 * time.Second, Levels: []float64{0.5, 0.9}})
	if err != nil {
		t.Fatal(err)
	}
	text := logReport(t, rep)
	f := rep.Find
	if f == nil || f.Capacity == nil {
		t.Fatal("no capacity in the report")
	}
	c := f.Capacity
	t.Logf("capacity found %.2f req/s, %.1f output tok/s (stage %d); model %.2f req/s, %.1f tok/s", c.RequestsPerSecond, c.OutputTokensPerSecond, c.Stage, wantReq, wantTok)
	if !c.Found {
		t.Errorf("capacity not found: %s", c.StopReason)
	}
	if r := c.RequestsPerSecond / wantReq; r < 0.85 || r > 1.15 {
		t.Errorf("capacity %.2f req/s is %.0f%% of the model's %.2f", c.RequestsPerSecond, 100*r, wantReq)
	}
	if r := c.OutputTokensPerSecond / wantTok; r < 0.85 || r > 1.15 {
		t.Errorf("capacity %.1f output tok/s is %.0f%% of the model's %.1f", c.OutputTokensPerSecond, 100*r, wantTok)
	}
	if c.Stage < 1 || c.Stage > len(rep.Stages) || !rep.Stages[c.Stage-1].Trusted {
		t.Errorf("capacity stage %d is not a trusted stage of the report", c.Stage)
	}
	if len(f.Ramp) < 2 {
		t.Errorf("the ramp ran %d stages, want at least 2", len(f.Ramp))
	}
	// Levels: one stage each, at its fraction of the capacity found.
	if len(f.Levels) != 2 {
		t.Fatalf("levels: %+v, want 2", f.Levels)
	}
	for _, l := range f.Levels {
		s := rep.Stages[l.Stage-1]
		if want := l.Fraction * c.RequestsPerSecond; s.RequestedRate < want*0.999 || s.RequestedRate > want*1.001 {
			t.Errorf("level %g: stage %d requested %.2f req/s, want %.2f", l.Fraction, l.Stage, s.RequestedRate, want)
		}
	}
	if l := f.Levels[0]; rep.Stages[l.Stage-1].Served < 30 {
		t.Errorf("level 0.5 served %d requests, want the ~%.0f its window holds", rep.Stages[l.Stage-1].Served, 1.25*60)
	}
	for _, want := range []string{"find capacity:", "rule: capacity ramp", "capacity: ", "level 0.9 × capacity"} {
		if !strings.Contains(text, want) {
			t.Errorf("the text report lacks %q", want)
		}
	}
	var buf bytes.Buffer
	if err := rep.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	var back struct {
		Find struct {
			Capacity struct {
				RequestsPerSecond float64 `json:"requests_per_second"`
				Stage             int     `json:"stage"`
			} `json:"capacity"`
		} `json:"find"`
	}
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil || back.Find.Capacity.Stage != c.Stage || back.Find.Capacity.RequestsPerSecond != c.RequestsPerSecond {
		t.Errorf("JSON find.capacity = %+v (%v), want stage %d", back.Find.Capacity, err, c.Stage)
	}
}

// TestFindSLO: from the given capacity, the search returns a rate whose
// stage is trusted, holds at least 100 samples per quantile and meets the
// SLO, and the stage just above it does not meet it. TPOT grows with the
// running batch (decode_per_seq), so its bound is crossed below capacity.
func TestFindSLO(t *testing.T) {
	if testing.Short() {
		t.Skip("a search of stages against a simulator")
	}
	capacity, _ := modelCapacity(t)
	cfg := findConfig(t, startFindSim(t))
	spec, err := slo.ParseSpec("tpot_p99=10ms,ttft_p99=1s")
	if err != nil {
		t.Fatal(err)
	}
	const precision = 0.1
	rep, err := bench.Find(context.Background(), bench.Options{Config: cfg, Warmup: time.Second, Grace: 20 * time.Second, SLO: spec},
		bench.FindOptions{Mode: bench.FindSLO, Capacity: capacity, MinRequests: 100, MinWindow: 2 * time.Second, Precision: precision})
	if err != nil {
		t.Fatal(err)
	}
	text := logReport(t, rep)
	r := rep.Find.SLO
	if r == nil || !r.Found || r.Met == nil || r.Above == nil {
		t.Fatalf("SLO search: %+v", r)
	}
	t.Logf("SLO met up to %.2f req/s (stage %d), not at %.2f (stage %d); model capacity %.2f", r.Rate, r.Met.Stage, r.Above.Rate, r.Above.Stage, capacity)
	if r.MinSamples != 100 {
		t.Errorf("min samples %d, want 100 for a p99", r.MinSamples)
	}
	met := rep.Stages[r.Met.Stage-1]
	if !met.Trusted || met.SLO == nil || !met.SLO.Met || met.RequestedRate != r.Rate {
		t.Errorf("stage %d at %.2f req/s: trusted %v, SLO %+v", met.Stage, met.RequestedRate, met.Trusted, met.SLO)
	}
	for _, q := range met.SLO.Quantiles {
		if q.Count < 100 {
			t.Errorf("stage %d: %s rests on %d samples, want ≥ 100", met.Stage, q.Bound, q.Count)
		}
	}
	above := rep.Stages[r.Above.Stage-1]
	if r.Above.Met || r.Above.Why == "" || (r.Above.Why == "SLO not met" && above.SLO.Met) {
		t.Errorf("stage %d above (%.2f req/s) is evidence the SLO holds: %+v", above.Stage, above.RequestedRate, r.Above)
	}
	if !(r.Above.Rate > r.Rate) || r.Above.Rate/r.Rate-1 > precision+1e-9 {
		t.Errorf("bracket %.2f–%.2f req/s is not within %.0f%%", r.Rate, r.Above.Rate, 100*precision)
	}
	if r.Rate > 1.15*capacity {
		t.Errorf("SLO rate %.2f req/s is above the capacity %.2f", r.Rate, capacity)
	}
	if !strings.Contains(text, "SLO: met up to") {
		t.Error("the text report lacks the SLO outcome")
	}
}

// TestFindArguments: a search against other than one target, and levels
// without a capacity, are refused before any stage runs.
func TestFindArguments(t *testing.T) {
	cfg := findConfig(t, "http://127.0.0.1:1")
	two := *cfg
	t2 := *cfg.Targets[0]
	t2.Name = "other"
	two.Targets = append([]*config.Target{cfg.Targets[0]}, &t2)
	if _, err := bench.Find(context.Background(), bench.Options{Config: &two}, bench.FindOptions{Mode: bench.FindCapacity}); err != bench.ErrFindTargets {
		t.Errorf("two targets: %v, want ErrFindTargets", err)
	}
	if _, err := bench.Find(context.Background(), bench.Options{Config: cfg}, bench.FindOptions{Levels: []float64{0.5}}); err == nil {
		t.Error("levels without a capacity: no error")
	}
	if _, err := bench.Find(context.Background(), bench.Options{Config: cfg}, bench.FindOptions{Mode: "fastest"}); err == nil {
		t.Error("an unknown mode: no error")
	}
}
