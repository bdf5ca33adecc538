// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package bench_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/llmprobe/llmprobe/bench"
	"github.com/llmprobe/llmprobe/bench/report"
	"github.com/llmprobe/llmprobe/config"
	"github.com/llmprobe/llmprobe/internal/simtest"
	"github.com/llmprobe/llmprobe/probe/wire"
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
	_, base := simtest.Listen(t, cfg)
	return base + "/v1"
}

// TestStageGoodput: a stage's requests are judged against the SLO of the
// configuration, or of --slo, which also bounds the stage's quantiles.
// Each target has its own simulator, so that its TTFT is what its prompt
// length makes it: every long request breaks TTFT ≤ 100ms (its prefill
// alone takes 120 ms), and the short ones are good, request by request
// as llmprobe measured them (its per-request export): on an idle machine
// all of them. The stages are judged when the harness trusts them, as
// llmprobe's own verdict says; a busy machine can delay a short
// request's first token past the bound, and the harness says so. It is
// asked for the precision the bound needs: a short request's first token
// comes in ~25 ms, so timestamps late by up to 50 ms (max_inflation) on
// 1% of wake-ups leave it under 100 ms.
func TestStageGoodput(t *testing.T) {
	if testing.Short() {
		t.Skip("two 4 s stages against simulators")
	}
	cfg, err := config.Load([]byte(fmt.Sprintf(`
global: {warmup: 0s, request_timeout: 10s, saturation: {max_inflation: 50ms}}
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
	type stage struct {
		byTarget map[string]*report.StageReport
		good     map[string]int // requests that succeeded with TTFT ≤ 100ms, by the export
	}
	run := func(spec *slo.Spec) stage {
		return simtest.RetryFor(t, 3, 40*time.Second, func(int) (stage, string) {
			var buf bytes.Buffer
			log := report.NewRequestLog(&buf)
			rep, err := bench.Run(context.Background(), bench.Options{
				Config: cfg, Stages: []bench.Stage{{Rate: 4, Duration: 4 * time.Second}}, Warmup: 0,
				Grace: 5 * time.Second, SLO: spec, Requests: log,
			})
			if err != nil {
				t.Fatal(err)
			}
			if err := log.Flush(); err != nil {
				t.Fatal(err)
			}
			var sb strings.Builder
			_ = rep.WriteText(&sb)
			t.Logf("\n%s", sb.String())
			st := stage{byTarget: map[string]*report.StageReport{}, good: map[string]int{}}
			var why []string
			for _, s := range rep.Stages {
				st.byTarget[s.Target] = s
				if !strings.Contains(sb.String(), fmt.Sprintf("stage 1 %s SLO ", s.Target)) {
					t.Errorf("the text report has no SLO line for %s", s.Target)
				}
				if !s.Trusted {
					why = append(why, s.Target+": "+strings.Join(s.Reasons, "; "))
				}
			}
			sc := bufio.NewScanner(&buf)
			for sc.Scan() {
				var r report.RequestRecord
				if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
					t.Fatal(err)
				}
				if !r.Warmup && r.Outcome == wire.OutcomeSuccess && r.TTFT != nil && *r.TTFT <= 0.100 {
					st.good[r.Target]++
				}
			}
			return st, strings.Join(why, "; ")
		})
	}

	// The configuration's SLO, request by request.
	st := run(nil)
	short, long := st.byTarget["short"], st.byTarget["long"]
	ok := func(s *report.StageReport) int { return s.Outcomes[wire.OutcomeSuccess] }
	if ok(short) < 12 || ok(long) < 12 {
		t.Fatalf("too few successes to judge: short %v, long %v", short.Outcomes, long.Outcomes)
	}
	// Exactly the requests the export shows within the bound are good
	// (where "all of them" failed when a busy machine delayed one), and
	// on a trusted stage that is at least the 90% the objective asks.
	good := st.good["short"]
	if r := short.SLO; r == nil || r.Good != good || r.Bad != ok(short)-good || r.Met != (float64(good) >= 0.9*float64(ok(short))) || r.RequiredShare != 0.9 {
		t.Errorf("short: %+v, want %d good (of %d by the export)", r, good, ok(short))
	}
	if good < ok(short)*9/10 {
		t.Errorf("short: %d of %d requests had TTFT ≤ 100ms on a trusted stage", good, ok(short))
	}
	if r := long.SLO; r == nil || r.Good != 0 || r.Bad != ok(long) || r.Violations[slo.BoundTTFT] != ok(long) || r.Met || st.good["long"] != 0 {
		t.Errorf("long: %+v (%d good by the export), want all %d bad on ttft, not met", r, st.good["long"], ok(long))
	}
	if r := short.SLO; r != nil && (r.Goodput < 0.8*float64(r.Good)/4 || r.Objectives["s"] != "90% of requests with TTFT ≤ 100ms") {
		t.Errorf("short: goodput %.2f/s for %d good in 4 s, objectives %v", r.Goodput, r.Good, r.Objectives)
	}

	// --slo replaces the per-request bounds and adds a quantile bound.
	spec, err := slo.ParseSpec("ttft=1s,ttft_p99=120ms")
	if err != nil {
		t.Fatal(err)
	}
	st = run(spec)
	short, long = st.byTarget["short"], st.byTarget["long"]
	for _, s := range []*report.StageReport{short, long} {
		if s.SLO == nil || s.SLO.Bad != 0 || s.SLO.Good != ok(s) || len(s.SLO.Quantiles) != 1 {
			t.Fatalf("%s under --slo: %+v", s.Target, s.SLO)
		}
	}
	// The short target's p99 is its slowest request's (n < 100): held
	// when they all were within 120 ms, as the export says.
	if q := short.SLO.Quantiles[0]; q.Met != (q.Value <= 0.120) || short.SLO.Met != q.Met || q.Count != short.TTFT.Count || q.Bound != "TTFT p99 ≤ 120ms" {
		t.Errorf("short: %+v", q)
	}
	if q := short.SLO.Quantiles[0]; !q.Met {
		t.Errorf("short: TTFT p99 %.3fs on a trusted stage, want ≤ 120ms", q.Value)
	}
	if q := long.SLO.Quantiles[0]; q.Met || long.SLO.Met || q.Value < 0.12 {
		t.Errorf("long: %+v, want TTFT p99 ≤ 120ms not held", q)
	}
}
