// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// knownSim is a simulator whose capacity its timing model gives exactly:
// no prefill cost, so every step of a full batch of B = 8 sequences lasts
// decode_base + B × decode_per_seq = 4 + 8 × 1 = 12 ms, and a request of
// L = 10 output tokens (ignore_eos) holds its slot for L steps, the first
// of which prefills it and yields its first token; a finished sequence's
// slot is refilled at the next step's admission while requests wait. So
// it completes B requests every L steps: B / (L × 12 ms) = 66.7 req/s.
const knownSim = `
max_num_seqs: 8
prefill_base: 0s
prefill_per_token: 0s
decode_base: 4ms
decode_per_seq: 1ms
enable_prefix_caching: false
eos_probability: 0
seed: 1
`

// knownCapacity is knownSim's capacity in requests/s.
const knownCapacity = 8 / (10 * 0.012)

// knownConfig is the bench configuration against knownSim: 10 output
// tokens, everything else left to its default (max_inflight too).
const knownConfig = `
global: {request_timeout: 60s}
workloads:
  w: {classes: [{name: c, prompt_tokens: 16, output_tokens: 10}]}
targets:
  - {name: sim, url: "${SIM_URL}", model: sim-model, workload: w, arrival: {process: poisson, rate: 1}, extra_body: {ignore_eos: true}}
`

// goalSeeds is how many seeds a goal is measured over: all 10 with
// LLMPROBE_GOALS=1 (minutes), else the first.
func goalSeeds() int {
	if os.Getenv("LLMPROBE_GOALS") == "1" {
		return 10
	}
	return 1
}

// benchKnown runs the real binary's bench against knownSim with args,
// and returns its JSON report and the wall time.
func benchKnown(t *testing.T, seed int, args ...string) (map[string]any, time.Duration) {
	t.Helper()
	dir := t.TempDir()
	simFile, cfgFile, out := filepath.Join(dir, "sim.yml"), filepath.Join(dir, "bench.yml"), filepath.Join(dir, "report.json")
	if err := os.WriteFile(simFile, []byte(knownSim), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfgFile, []byte(knownConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	args = append([]string{"bench", "--sim", "--sim.config.file=" + simFile, "--config.file=" + cfgFile, "--target=sim",
		"--seed=" + strconv.Itoa(seed), "--output=" + out, "--log.level=error"}, args...)
	r := runBinary(t, binary(t), nil, args...)
	if r.code != 0 {
		t.Fatalf("seed %d: exit code %d\n%s\n%s", seed, r.code, r.stdout, r.stderr)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var rep map[string]any
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	return rep, r.wall
}

// TestGoalFindCapacityKnown: `bench --find=capacity` with its defaults
// finds knownSim's capacity, 66.7 req/s, within 10%, in at most 2
// minutes (issue 34's goal): for seed 1, and for seeds 1 to 10 with
// LLMPROBE_GOALS=1. A run whose stages the verdict did not trust (a busy
// machine) is reported and not judged.
func TestGoalFindCapacityKnown(t *testing.T) {
	if testing.Short() {
		t.Skip("a capacity search against a simulator, about a minute per seed")
	}
	judged := 0
	for seed := 1; seed <= goalSeeds(); seed++ {
		rep, wall := benchKnown(t, seed, "--find=capacity")
		find := rep["find"].(map[string]any)
		c := find["capacity"].(map[string]any)
		got := c["requests_per_second"].(float64)
		t.Logf("seed %d: capacity %.2f req/s (%.1f%% of %.1f), found %v, in %v", seed, got, 100*(got/knownCapacity-1), knownCapacity, c["found"], wall.Round(time.Second))
		if capped, ok := find["capped_by"].([]any); ok && len(capped) > 0 {
			t.Logf("seed %d: capped, not judged: %v", seed, capped)
			continue
		}
		judged++
		if c["found"] != true || math.Abs(got/knownCapacity-1) > 0.10 {
			t.Errorf("seed %d: capacity %.2f req/s (found %v), want within 10%% of %.1f", seed, got, c["found"], knownCapacity)
		}
		if wall > 2*time.Minute {
			t.Errorf("seed %d: the search took %v, want at most 2m", seed, wall.Round(time.Second))
		}
	}
	if judged == 0 {
		t.Skip("no run was trusted: not judged")
	}
}

// TestGoalLadderAchieved: a 5-level ladder at 0.2, 0.4, 0.6, 0.8 and 1.0
// of knownSim's capacity (--capacity, --levels) achieves its requested
// rates: over 10 seeds (LLMPROBE_GOALS=1) the mean of achieved/requested
// over the 50 stages is within 5% of 1 (issue 34's goal). Each stage sends
// a Poisson count of 200 to 1000 requests (5 s warm-up and a 10 s window),
// so the mean of 50 ratios has a standard deviation under 1%: 5% is five
// of them. Per seed and per level the means are logged, with the spread of
// a sweep's ratios: with one stream of draws for the whole sweep (the
// lean), a sweep's ratios moved together and that spread was near 0.
func TestGoalLadderAchieved(t *testing.T) {
	if os.Getenv("LLMPROBE_GOALS") != "1" {
		t.Skip("set LLMPROBE_GOALS=1 to measure the goals (minutes)")
	}
	levels := []float64{0.2, 0.4, 0.6, 0.8, 1.0}
	var all []float64
	perLevel := make([]float64, len(levels))
	for seed := 1; seed <= 10; seed++ {
		rep, _ := benchKnown(t, seed, fmt.Sprintf("--capacity=%g", knownCapacity), "--levels=0.2,0.4,0.6,0.8,1")
		stages := rep["stages"].([]any)
		var ratios []string
		sum := 0.0
		for i, s := range stages {
			st := s.(map[string]any)
			r := st["achieved_rate"].(float64) / st["requested_rate"].(float64)
			all = append(all, r)
			perLevel[i] += r / 10
			sum += r
			ratios = append(ratios, fmt.Sprintf("%.3f", r))
		}
		t.Logf("seed %d: achieved/requested %s (mean %.3f)", seed, strings.Join(ratios, " "), sum/float64(len(stages)))
	}
	mean := 0.0
	for _, r := range all {
		mean += r / float64(len(all))
	}
	for i, l := range levels {
		t.Logf("level %g: mean achieved/requested over 10 seeds %.3f", l, perLevel[i])
	}
	t.Logf("all %d stages: mean achieved/requested %.4f", len(all), mean)
	if len(all) != 50 || math.Abs(mean-1) > 0.05 {
		t.Errorf("%d stages, mean achieved/requested %.4f: want 50 within 5%% of 1", len(all), mean)
	}
}
