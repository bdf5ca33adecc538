// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package bench_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmprobe/llmprobe/bench"
	"github.com/llmprobe/llmprobe/bench/report"
	"github.com/llmprobe/llmprobe/config"
	"github.com/llmprobe/llmprobe/internal/simtest"
	"github.com/llmprobe/llmprobe/regression"
	"github.com/llmprobe/llmprobe/sim"
)

// TestCompareTellsASlowerServer runs one stage against three simulators
// at once, two with the default timing and one with its decode steps 30%
// slower, and compares what llmprobe measured of each with what the
// simulators' request logs say they did: between the two alike, compare
// finds a real change only where the servers' own records differ too;
// against the slower one, its TPOT and E2E medians are worse by what the
// slower server's own record shows, within 10 points.
//
// The three run side by side so that a busy machine slows them alike:
// run one after another, a change in the machine's load between the runs
// was a real change that compare rightly found (TTFT p50 "better" between
// two runs of one configuration), and the slowdown it measured was the
// slower server's 30% diluted by the load's share of every step.
func TestCompareTellsASlowerServer(t *testing.T) {
	if testing.Short() {
		t.Skip("a 4 s stage against three simulators")
	}
	// Decode steps of 40 ms, so that the slower server's 12 ms more per
	// step stands above what a busy machine adds to every step. When its
	// own record still shows no clear slowdown, the stage runs again.
	type run struct {
		client map[string]*report.Report
		server map[string]serverFigures
	}
	r := simtest.Retry(t, 3, func(int) (run, string) {
		r := run{client: map[string]*report.Report{}, server: map[string]serverFigures{}}
		servers := map[string]*simtest.Server{}
		for _, name := range []string{"a", "b", "slow"} {
			scfg := sim.DefaultConfig()
			scfg.Seed = 1
			scfg.EOSProbability = 0
			scfg.DecodeBase = 40 * time.Millisecond
			if name == "slow" {
				scfg.DecodeBase = scfg.DecodeBase * 13 / 10
				scfg.DecodePerSeq = scfg.DecodePerSeq * 13 / 10
			}
			servers[name] = simtest.Start(t, scfg)
		}
		target := func(name string) string {
			return fmt.Sprintf(`  - {name: %s, url: %s, model: sim-model, workload: w, arrival: {process: poisson, rate: 1}, tokenize: "off", extra_body: {ignore_eos: true}}`,
				name, servers[name].URL())
		}
		cfg, err := config.Load([]byte(fmt.Sprintf(`
global: {warmup: 0s, request_timeout: 30s, seed: 7, saturation: {max_inflation: 100ms}}
workloads:
  w:
    classes:
      - {name: chat, prompt_tokens: 64, output_tokens: 16}
targets:
%s
%s
%s
`, target("a"), target("b"), target("slow"))), "compare.yml")
		if err != nil {
			t.Fatal(err)
		}
		rep, err := bench.Run(context.Background(), bench.Options{
			Config: cfg, Stages: []bench.Stage{{Rate: 8, Duration: 4 * time.Second}},
			Warmup: -1, Grace: 10 * time.Second,
		})
		if err != nil {
			t.Fatal(err)
		}
		// One report per target, its stage renamed so that compare
		// matches them.
		for _, s := range rep.Stages {
			cp := *s
			cp.Target = "sim"
			r.client[s.Target] = &report.Report{Stages: []*report.StageReport{&cp}}
		}
		// The servers' own per-request figures.
		for name, srv := range servers {
			f := serverFigures{}
			for _, e := range simtest.ReadLog(t, srv.LogPath) {
				if e.FinishReason == "" || e.TTFTSeconds == nil || e.TPOTSeconds == nil {
					continue
				}
				f["TTFT p50"] = append(f["TTFT p50"], *e.TTFTSeconds)
				f["TPOT p50"] = append(f["TPOT p50"], *e.TPOTSeconds)
				f["E2E p50"] = append(f["E2E p50"], e.E2ESeconds)
			}
			if len(f["TTFT p50"]) < 20 {
				t.Fatalf("the simulator of %s logged %d finished requests, want the ~32 of the stage", name, len(f["TTFT p50"]))
			}
			r.server[name] = f
		}
		// compare gives no verdict on a stage the harness did not trust
		// (a busy machine woke it late): measure again. The harness may
		// be late by up to 100 ms (max_inflation, 10 ms by default): the
		// servers run side by side, so what a busy machine adds to one it
		// adds to the other.
		for name, rep := range r.client {
			if s := rep.Stages[0]; !s.Trusted {
				return r, fmt.Sprintf("the stage of %s was not trusted: %s", name, strings.Join(s.Reasons, "; "))
			}
		}
		for _, metric := range []string{"TPOT p50", "E2E p50"} {
			if sd, sp := r.server["a"].versus(r.server["slow"], metric); sp >= 0.001 || sd < 0.1 {
				return r, fmt.Sprintf("the slower simulator's own %s is %+.1f%% (p %.3g) of the other's: the machine hid its slowdown", metric, 100*sd, sp)
			}
		}
		return r, ""
	})

	compare := func(old, new string) map[string]report.Comparison {
		cs, unmatched := report.Compare(r.client[old], r.client[new])
		if len(unmatched) > 0 {
			t.Fatalf("unmatched stages %v", unmatched)
		}
		out := map[string]report.Comparison{}
		for _, c := range cs {
			out[c.Metric] = c
		}
		return out
	}
	for _, pair := range [][2]string{{"a", "b"}, {"a", "slow"}} {
		got := compare(pair[0], pair[1])
		for _, metric := range []string{"TTFT p50", "TPOT p50", "E2E p50"} {
			c, ok := got[metric]
			if !ok {
				t.Fatalf("no %s comparison in %v", metric, got)
			}
			sd, sp := r.server[pair[0]].versus(r.server[pair[1]], metric)
			t.Logf("%s → %s %s: client %s Δ %+.1f%% (p %.3g); server Δ %+.1f%% (p %.3g)", pair[0], pair[1], metric, c.Verdict, 100*c.Delta, c.P, 100*sd, sp)
			realChange := c.Verdict == report.VerdictWorse || c.Verdict == report.VerdictBetter
			switch {
			case realChange && sp > 0.05:
				t.Errorf("%s → %s %s: compare says %s (Δ %+.1f%%, p %.3g), the servers' own records show no change (p %.3g)", pair[0], pair[1], metric, c.Verdict, 100*c.Delta, c.P, sp)
			case sp < 0.001 && (!realChange || (c.Delta > 0) != (sd > 0)):
				t.Errorf("%s → %s %s: the servers' records differ by %+.1f%% (p %.3g), compare says %s (Δ %+.1f%%, p %.3g)", pair[0], pair[1], metric, 100*sd, sp, c.Verdict, 100*c.Delta, c.P)
			}
		}
	}
	// llmprobe measures the slowdown the slower server had.
	got := compare("a", "slow")
	for _, metric := range []string{"TPOT p50", "E2E p50"} {
		sd, _ := r.server["a"].versus(r.server["slow"], metric)
		if c := got[metric]; c.Verdict != report.VerdictWorse || c.Delta < sd-0.1 || c.Delta > sd+0.1 {
			t.Errorf("decode 30%% slower, %s: %s, Δ %+.1f%% (%.4g → %.4g s, p %.3g); the server's own Δ %+.1f%%", metric, c.Verdict, 100*c.Delta, c.Old, c.New, c.P, 100*sd)
		}
	}
}

// TestCompareTwoAlikeRuns runs three stages (10, 12 and 14 req/s, 4 s
// each) against two simulators alike at once, as two runs of one target
// with the same seed (so the same arrivals and requests: each stage draws
// its own, from the seed, the target's name and the stage's number), and
// compares what llmprobe measured of one with the other: 18 tests (TTFT,
// TPOT and E2E, p50 and p99, of three stages), none of which may say
// "better" or "worse". Two servers alike side by side, given the same
// load, differ by chance only (one after the other, a change in the
// machine's load would be a real change; given different draws, the
// loads differ by chance, by 25% at 50 requests, and a simulator's TPOT
// follows its load for real); Holm's correction keeps the chance of any
// verdict in such a comparison under CompareAlpha, where 18 tests at 1%
// each gave one in about every six comparisons, and the bootstrap
// interval of p99 that the p99 test once was wrong for 5% of pairs at
// these sizes on its own. A stage the harness did not trust gets no
// verdict, with the reason; when more than one was, the stages are
// measured again. The harness may be late by up to 100 ms
// (max_inflation): side by side, lateness hits both servers.
func TestCompareTwoAlikeRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("three 4 s stages against two simulators")
	}
	type run struct{ a, b *report.Report }
	r := simtest.RetryFor(t, 3, 40*time.Second, func(int) (run, string) {
		var mu sync.Mutex
		reps := map[string]*report.Report{}
		var wg sync.WaitGroup
		for _, name := range []string{"a", "b"} {
			scfg := sim.DefaultConfig()
			scfg.Seed = 1
			scfg.EOSProbability = 0
			scfg.DecodeBase = 40 * time.Millisecond
			srv := simtest.Start(t, scfg)
			cfg, err := config.Load([]byte(fmt.Sprintf(`
global: {warmup: 0s, request_timeout: 30s, seed: 11, saturation: {max_inflation: 100ms}}
workloads:
  w:
    classes:
      - {name: chat, prompt_tokens: 64, output_tokens: 16}
targets:
  - {name: sim, url: %s, model: sim-model, workload: w, arrival: {process: poisson, rate: 1}, tokenize: "off", extra_body: {ignore_eos: true}}
`, srv.URL())), "alike.yml")
			if err != nil {
				t.Fatal(err)
			}
			wg.Go(func() {
				rep, err := bench.Run(context.Background(), bench.Options{
					Config: cfg, Stages: []bench.Stage{{Rate: 10, Duration: 4 * time.Second}, {Rate: 12, Duration: 4 * time.Second}, {Rate: 14, Duration: 4 * time.Second}},
					Warmup: -1, Grace: 10 * time.Second,
				})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				reps[name] = rep
				mu.Unlock()
			})
		}
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
		r := run{reps["a"], reps["b"]}
		untrusted := map[int]string{}
		for name, rep := range reps {
			for _, s := range rep.Stages {
				if !s.Trusted {
					untrusted[s.Stage] = fmt.Sprintf("stage %d of %s was not trusted: %s", s.Stage, name, strings.Join(s.Reasons, "; "))
				}
			}
		}
		if len(untrusted) > 1 {
			return r, fmt.Sprintf("%d of the 3 stages not trusted: %v", len(untrusted), untrusted)
		}
		return r, ""
	})
	cs, unmatched := report.Compare(r.a, r.b)
	if len(cs) != 18 || len(unmatched) > 0 {
		t.Fatalf("%d comparisons, unmatched %v", len(cs), unmatched)
	}
	var sb strings.Builder
	if err := report.WriteCompare(&sb, cs, unmatched); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", sb.String())
	tested := 0
	for _, c := range cs {
		if c.OldN < 20 || c.NewN < 20 {
			t.Errorf("%s %s: %d and %d samples, want the ~40 to 56 of the stage", c.Stage, c.Metric, c.OldN, c.NewN)
		}
		if c.Verdict == report.VerdictUntrusted {
			if !strings.Contains(sb.String(), "stage "+c.Stage+": no verdict: ") || !strings.Contains(c.Untrusted, "NOT TRUSTED: harness saturated") {
				t.Errorf("%s %s: not trusted, said %q", c.Stage, c.Metric, c.Untrusted)
			}
			continue
		}
		tested++
		if c.Verdict != report.VerdictNoChange {
			t.Errorf("two simulators alike, %s %s: %s (Δ %+.1f%%, p %.3g, Holm %.3g)", c.Stage, c.Metric, c.Verdict, 100*c.Delta, c.P, c.PAdjusted)
		}
	}
	if tested < 12 {
		t.Errorf("%d tests of %d judged", tested, len(cs))
	}
}

// serverFigures are a simulator's per-request TTFT, TPOT and E2E from
// its request log, by compare's metric names.
type serverFigures map[string][]float64

// versus is new's median relative to f's, and the Mann–Whitney p-value
// of the two.
func (f serverFigures) versus(new serverFigures, metric string) (delta, p float64) {
	median := func(v []float64) float64 {
		s := slices.Clone(v)
		slices.Sort(s)
		return s[len(s)/2]
	}
	a, b := f[metric], new[metric]
	_, p = regression.MannWhitney(a, b)
	return median(b)/median(a) - 1, p
}
