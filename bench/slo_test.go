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
	"github.com/llmprobe/llmprobe/probe"
	"github.com/llmprobe/llmprobe/sim"
	"github.com/llmprobe/llmprobe/slo"
)

// listenSim starts an in-process simulator whose prefill costs 200 µs per
// token: a 16-token prompt's first token comes in ~11 ms plus a decode
// step, a 600-token one's in no less than 128 ms.
func listenSim(t *testing.T) string {
	t.Helper()
	cfg := sim.DefaultConfig()
	cfg.Seed = 1
	cfg.PrefillPerToken = 200 * time.Microsecond
	srv, base, err := sim.Listen("127.0.0.1:0", cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	return base + "/v1"
}

// TestStageGoodput: a stage's requests are judged against the SLO of the
// configuration, or of --slo, which also bounds the stage's quantiles.
// Each target has its own simulator, so that its TTFT is what its prompt
// length makes it: every short request is good, every long one breaks
// TTFT ≤ 100ms.
func TestStageGoodput(t *testing.T) {
	if testing.Short() {
		t.Skip("two 4 s stages against simulators")
	}
	cfg, err := config.Load([]byte(fmt.Sprintf(`
global: {warmup: 0s, request_timeout: 10s}
workloads:
  short: {classes: [{name: s, prompt_tokens: 16, output_tokens: 8}]}
  long: {classes: [{name: l, prompt_tokens: 600, output_tokens: 8}]}
targets:
  - {name: short, url: %s, model: sim-model, workload: short, arrival: {process: constant, rate: 1}, tokenize: "off", extra_body: {ignore_eos: true}, slo: {objective: 0.9, ttft: 100ms}}
  - {name: long, url: %s, model: sim-model, workload: long, arrival: {process: constant, rate: 1}, tokenize: "off", extra_body: {ignore_eos: true}, slo: {objective: 0.9, ttft: 100ms}}
`, listenSim(t), listenSim(t))), "goodput.yml")
	if err != nil {
		t.Fatal(err)
	}
	run := func(spec *slo.Spec) map[string]*bench.StageReport {
		rep, err := bench.Run(context.Background(), bench.Options{
			Config: cfg, Stages: []bench.Stage{{Rate: 4, Duration: 4 * time.Second}}, Warmup: 0,
			Grace: 5 * time.Second, SLO: spec,
		})
		if err != nil {
			t.Fatal(err)
		}
		var sb strings.Builder
		_ = rep.WriteText(&sb)
		t.Logf("\n%s", sb.String())
		out := map[string]*bench.StageReport{}
		for _, s := range rep.Stages {
			out[s.Target] = s
			if !strings.Contains(sb.String(), fmt.Sprintf("stage 1 %s SLO ", s.Target)) {
				t.Errorf("the text report has no SLO line for %s", s.Target)
			}
		}
		return out
	}

	// The configuration's SLO, request by request.
	st := run(nil)
	short, long := st["short"], st["long"]
	ok := func(s *bench.StageReport) int { return s.Outcomes[probe.OutcomeSuccess] }
	if ok(short) < 12 || ok(long) < 12 {
		t.Fatalf("too few successes to judge: short %v, long %v", short.Outcomes, long.Outcomes)
	}
	if r := short.SLO; r == nil || r.Good != ok(short) || r.Bad != 0 || !r.Met || r.GoodShare != 1 || r.RequiredShare != 0.9 {
		t.Errorf("short: %+v, want all %d good and met", r, ok(short))
	}
	if r := long.SLO; r == nil || r.Good != 0 || r.Bad != ok(long) || r.Violations[slo.BoundTTFT] != ok(long) || r.Met {
		t.Errorf("long: %+v, want all %d bad on ttft, not met", r, ok(long))
	}
	if r := short.SLO; r != nil && (r.Goodput < 0.8*float64(ok(short))/4 || r.Objectives["s"] != "90% of requests with TTFT ≤ 100ms") {
		t.Errorf("short: goodput %.2f/s for %d good in 3 s, objectives %v", r.Goodput, r.Good, r.Objectives)
	}

	// --slo replaces the per-request bounds and adds a quantile bound.
	spec, err := slo.ParseSpec("ttft=1s,ttft_p99=120ms")
	if err != nil {
		t.Fatal(err)
	}
	st = run(spec)
	short, long = st["short"], st["long"]
	for _, s := range []*bench.StageReport{short, long} {
		if s.SLO == nil || s.SLO.Bad != 0 || s.SLO.Good != ok(s) || len(s.SLO.Quantiles) != 1 {
			t.Fatalf("%s under --slo: %+v", s.Target, s.SLO)
		}
	}
	if q := short.SLO.Quantiles[0]; !q.Met || !short.SLO.Met || q.Count != short.TTFT.Count || q.Bound != "TTFT p99 ≤ 120ms" {
		t.Errorf("short: %+v, want TTFT p99 ≤ 120ms held", q)
	}
	if q := long.SLO.Quantiles[0]; q.Met || long.SLO.Met || q.Value < 0.12 {
		t.Errorf("long: %+v, want TTFT p99 ≤ 120ms not held", q)
	}
}
