// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package bench_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/llmprobe/llmprobe/bench"
	"github.com/llmprobe/llmprobe/config"
	"github.com/llmprobe/llmprobe/sim"
)

// TestCompareTellsASlowerServer runs the same configuration three times
// against the simulator with its default timing, the third time with its
// decode steps 30% slower: compare finds no real change between the first
// two runs, and the third's TPOT and E2E medians worse by about 30%.
func TestCompareTellsASlowerServer(t *testing.T) {
	if testing.Short() {
		t.Skip("three 4 s runs against a simulator")
	}
	run := func(decodeFactor float64) *bench.Report {
		t.Helper()
		scfg := sim.DefaultConfig()
		scfg.Seed = 1
		scfg.EOSProbability = 0
		scfg.DecodeBase = time.Duration(float64(scfg.DecodeBase) * decodeFactor)
		scfg.DecodePerSeq = time.Duration(float64(scfg.DecodePerSeq) * decodeFactor)
		srv, base, err := sim.Listen("127.0.0.1:0", scfg, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = srv.Shutdown(ctx)
		}()
		cfg, err := config.Load([]byte(fmt.Sprintf(`
global: {warmup: 0s, request_timeout: 10s, seed: 7}
workloads:
  w:
    classes:
      - {name: chat, prompt_tokens: 64, output_tokens: 16}
targets:
  - {name: sim, url: %s/v1, model: sim-model, workload: w, arrival: {process: poisson, rate: 1}, tokenize: "off", extra_body: {ignore_eos: true}}
`, base)), "compare.yml")
		if err != nil {
			t.Fatal(err)
		}
		rep, err := bench.Run(context.Background(), bench.Options{
			Config: cfg, Stages: []bench.Stage{{Rate: 5, Duration: 4 * time.Second}},
			Warmup: -1, Grace: 5 * time.Second,
		})
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	a, b, slow := run(1), run(1), run(1.3)

	verdicts := func(old, new *bench.Report) map[string]bench.Comparison {
		cs, unmatched := bench.Compare(old, new)
		if len(unmatched) > 0 {
			t.Fatalf("unmatched stages %v", unmatched)
		}
		out := map[string]bench.Comparison{}
		for _, c := range cs {
			out[c.Metric] = c
		}
		return out
	}
	for metric, c := range verdicts(a, b) {
		if strings.HasSuffix(metric, "p50") && c.Verdict != bench.VerdictNoChange {
			t.Errorf("same configuration, %s: %s (%.3g → %.3g, p %.3g)", metric, c.Verdict, c.Old, c.New, c.P)
		}
	}
	got := verdicts(a, slow)
	for _, metric := range []string{"TPOT p50", "E2E p50"} {
		c, ok := got[metric]
		if !ok {
			t.Fatalf("no %s comparison in %v", metric, got)
		}
		if c.Verdict != bench.VerdictWorse || c.Delta < 0.2 || c.Delta > 0.4 {
			t.Errorf("decode 30%% slower, %s: %s, Δ %+.1f%% (%.4g → %.4g s, p %.3g)", metric, c.Verdict, 100*c.Delta, c.Old, c.New, c.P)
		}
	}
	t.Logf("TPOT p50 %+.1f%%, E2E p50 %+.1f%% with decode 1.3×", 100*got["TPOT p50"].Delta, 100*got["E2E p50"].Delta)
}
