// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package bench_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/llmprobe/llmprobe/bench"
	"github.com/llmprobe/llmprobe/bench/report"
	"github.com/llmprobe/llmprobe/config"
)

// stageGaps runs two 1.5 s stages, at 20 then 40 req/s, with global.seed
// 7, and returns each stage's inter-arrival gaps in planned order (from
// the request log's planned instants).
func stageGaps(t *testing.T, base string, common bool) [2][]time.Duration {
	t.Helper()
	cfg, err := config.Load([]byte(fmt.Sprintf(`
global: {warmup: 0s, request_timeout: 10s, seed: 7}
workloads:
  w: {classes: [{name: c, prompt_tokens: 8, output_tokens: 2}]}
targets:
  - {name: sim, url: %s, model: sim-model, workload: w, arrival: {process: poisson, rate: 1}, tokenize: "off", extra_body: {ignore_eos: true}}
`, base)), "draws.yml")
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	log := report.NewRequestLog(&buf)
	if _, err := bench.Run(context.Background(), bench.Options{
		Config: cfg, Warmup: -1, Grace: 5 * time.Second, Requests: log, CommonRandomNumbers: common,
		Stages: []bench.Stage{{Rate: 20, Duration: 1500 * time.Millisecond}, {Rate: 40, Duration: 1500 * time.Millisecond}},
	}); err != nil {
		t.Fatal(err)
	}
	if err := log.Flush(); err != nil {
		t.Fatal(err)
	}
	var planned [2][]time.Time
	sc := bufio.NewScanner(&buf)
	for sc.Scan() {
		var r struct {
			Stage   int       `json:"stage"`
			Planned time.Time `json:"planned"`
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		planned[r.Stage-1] = append(planned[r.Stage-1], r.Planned)
	}
	var gaps [2][]time.Duration
	for s, p := range planned {
		slices.SortFunc(p, func(a, b time.Time) int { return a.Compare(b) })
		for i := 1; i < len(p); i++ {
			gaps[s] = append(gaps[s], p[i].Sub(p[i-1]))
		}
		if len(gaps[s]) < 10 {
			t.Fatalf("stage %d planned %d arrivals, want at least 11", s+1, len(p))
		}
	}
	return gaps
}

// halved counts the first 10 gaps of the second stage that are the first
// stage's halved (within a microsecond): what a sweep whose stages reuse
// one stream of draws, rescaled to their rates, does.
func halved(g [2][]time.Duration) int {
	n := 0
	for i := range 10 {
		if math.Abs(float64(2*g[1][i]-g[0][i])) < float64(time.Microsecond) {
			n++
		}
	}
	return n
}

// TestStagesDrawIndependently: the stages of a sweep draw their arrivals
// from streams of their own, derived from the seed and the stage's number,
// so that one random factor does not move the whole sweep (issue 34: the
// second stage's planned gaps were exactly half the first's, and
// achieved/requested was 0.86–0.92 in all 7 stages of a search); the same
// seed still repeats them; with CommonRandomNumbers every stage reuses the
// first stage's draws, rescaled, as before. Gaps are continuous draws:
// two independent ones agree within a microsecond with probability about
// 1e-6 × rate, so even one halved gap of ten would fail the default.
func TestStagesDrawIndependently(t *testing.T) {
	if testing.Short() {
		t.Skip("three sweeps of two 1.5 s stages against a simulator")
	}
	base := listenSim(t)
	a, b := stageGaps(t, base, false), stageGaps(t, base, false)
	if n := halved(a); n > 0 {
		t.Errorf("independent draws: %d of stage 2's first 10 gaps are stage 1's halved: the stages lean together", n)
	}
	for s := range 2 {
		if !slices.Equal(a[s][:10], b[s][:10]) {
			t.Errorf("stage %d: the same seed drew other gaps: %v, then %v", s+1, a[s][:10], b[s][:10])
		}
	}
	if n := halved(stageGaps(t, base, true)); n != 10 {
		t.Errorf("common random numbers: %d of stage 2's first 10 gaps are stage 1's halved, want all", n)
	}
}

// TestSweepsDoNotLean (LLMPROBE_GOALS=1, about 4 minutes) measures the
// lean issue 34 saw: 10 sweeps (seeds 1–10) of 5 stages at 10, 20, 30,
// 40 and 50 req/s for 2 s each. A stage's sent count n over its duration
// d, as z = (n − rate·d) / √(rate·d), is N(0, 1) when the stages draw
// independently; then 5 × the variance of the 10 sweeps' mean z over the
// mean variance of z within a sweep is F(9, 40)-distributed, above 3.9
// with probability 0.0013 (the test's false failure rate; its 0.999
// quantile is 4.02). With one stream
// rescaled for every stage (--common-random-numbers, as before) a sweep's
// counts are those of one process at nested horizons, correlated by
// √(rate_i / rate_j): its stages move together, the F ratio is large, and
// the test logs it beside the independent one.
func TestSweepsDoNotLean(t *testing.T) {
	if os.Getenv("LLMPROBE_GOALS") != "1" {
		t.Skip("set LLMPROBE_GOALS=1 to measure the goals (minutes)")
	}
	base := startSimProcess(t, findSimConfig).base + "/v1"
	fratio := func(common bool) float64 {
		var means, within []float64
		for seed := 1; seed <= 10; seed++ {
			cfg, err := config.Load([]byte(fmt.Sprintf(`
global: {warmup: 0s, request_timeout: 10s, seed: %d}
workloads:
  w: {classes: [{name: c, prompt_tokens: 8, output_tokens: 2}]}
targets:
  - {name: sim, url: %s, model: sim-model, workload: w, arrival: {process: poisson, rate: 1}, tokenize: "off", extra_body: {ignore_eos: true}}
`, seed, base)), "lean.yml")
			if err != nil {
				t.Fatal(err)
			}
			var stages []bench.Stage
			for _, r := range []float64{10, 20, 30, 40, 50} {
				stages = append(stages, bench.Stage{Rate: r, Duration: 2 * time.Second})
			}
			rep, err := bench.Run(context.Background(), bench.Options{Config: cfg, Warmup: -1, Grace: 5 * time.Second, Stages: stages, CommonRandomNumbers: common})
			if err != nil {
				t.Fatal(err)
			}
			var zs []float64
			var ratios []string
			for _, s := range rep.Stages {
				exp := s.RequestedRate * s.Duration.Seconds()
				zs = append(zs, (float64(s.Sent)-exp)/math.Sqrt(exp))
				ratios = append(ratios, fmt.Sprintf("%.3f", s.AchievedRate/s.RequestedRate))
			}
			m, v := meanVar(zs)
			means, within = append(means, m), append(within, v)
			t.Logf("common %v, seed %d: achieved/requested %v, z mean %+.2f, within-sweep variance %.2f", common, seed, ratios, m, v)
		}
		_, between := meanVar(means)
		mw, _ := meanVar(within)
		f := 5 * between / mw
		t.Logf("common random numbers %v: F = 5 × %.3f / %.3f = %.2f", common, between, mw, f)
		return f
	}
	if f := fratio(false); f > 3.9 {
		t.Errorf("independent draws: F = %.2f > 3.9: the stages of a sweep move together", f)
	}
	fratio(true)
}

// meanVar is the mean and the sample variance of v.
func meanVar(v []float64) (mean, variance float64) {
	for _, x := range v {
		mean += x / float64(len(v))
	}
	for _, x := range v {
		variance += (x - mean) * (x - mean) / float64(len(v)-1)
	}
	return mean, variance
}
