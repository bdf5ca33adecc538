// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package probe

import (
	"crypto/sha256"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmprobe/llmprobe/config"
	"github.com/llmprobe/llmprobe/probe/wire"
	"github.com/llmprobe/llmprobe/probe/workload"
)

var updatePlans = flag.Bool("update-plans", false, "rewrite testdata/golden/plans.txt from the current code")

// planCount is the number of arrivals recorded per target.
const planCount = 200

// TestPlanGolden pins what the engine plans and sends from a fixed seed:
// for every shipped configuration (examples/) and one that uses every API
// and prompt feature (testdata/golden/apis.yml), the first arrivals of
// each target as the arrival loop draws them (gap, class, lengths, prefix
// group, turns), the request each first turn (and, for a conversation,
// its second turn after a fixed answer) becomes, and the body bytes the
// client would send. A change of this file is a change of behaviour: the
// same seed must give the same requests. Run with -update-plans only
// after an intended change.
func TestPlanGolden(t *testing.T) {
	files, err := filepath.Glob("../examples/workloads/*.yml")
	if err != nil || len(files) == 0 {
		t.Fatalf("examples: %v %v", files, err)
	}
	files = append(files, "../examples/demo.yml", "testdata/golden/apis.yml")
	var out strings.Builder
	for _, f := range files {
		cfg, err := config.LoadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Global.Seed == 0 {
			cfg.Global.Seed = 42
		}
		e := NewEngine(Options{})
		for _, tg := range cfg.Targets {
			spec := runnerSpec{Target: *tg, Workload: *cfg.Workload(tg), Global: newRunnerGlobal(cfg.Global), Timeout: tg.Timeout(cfg.Global), Replicas: 1}
			r, err := e.newRunner(spec, new(atomic.Int64), e.identityFor(tg.Name), nil, 1)
			if err != nil {
				t.Fatalf("%s: %s: %v", f, tg.Name, err)
			}
			fmt.Fprintf(&out, "== %s %s api=%s format=%d per_arrival=%.4f\n", filepath.Base(f), tg.Name, r.api, r.builder.Format(), r.perArrival)
			recordPlans(t, &out, r, planCount)
		}
	}
	const golden = "testdata/golden/plans.txt"
	if *updatePlans {
		if err := os.WriteFile(golden, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update-plans to create it)", err)
	}
	if got := out.String(); got != string(want) {
		gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
		for i := range min(len(gl), len(wl)) {
			if gl[i] != wl[i] {
				t.Fatalf("%s differs at line %d:\n got: %s\nwant: %s", golden, i+1, cut(gl[i], 400), cut(wl[i], 400))
			}
		}
		t.Fatalf("%s: %d lines, want %d", golden, len(gl), len(wl))
	}
}

// recordPlans writes the first n arrivals of r as its arrival loop and
// conversation driver draw them (runner.arrivalLoop, runner.converse).
func recordPlans(t *testing.T, out *strings.Builder, r *runner, n int) {
	rng := rand.New(rand.NewPCG(r.seed, r.seed^0x9e3779b97f4a7c15))
	wl := r.workload.Load()
	// A trace_shape process draws from the rate curve at the planned
	// instant: a fixed one keeps the golden file independent of the clock.
	timed, _ := r.arr().(TimedArrivals)
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range n {
		var gap time.Duration
		if timed != nil {
			gap = timed.NextAt(rng, at)
			at = at.Add(gap)
		} else {
			gap = r.arr().Next(rng)
		}
		class := wl.Pick(rng)
		plan := class.Plan(rng)
		seed := rng.Uint64()
		fmt.Fprintf(out, "%d gap=%d class=%s plan=%d/%d prefix=%d/%d", i, gap, class.Name, plan.PromptTokens, plan.OutputTokens, plan.PrefixGroup, plan.PrefixTokens)
		rq := rand.New(rand.NewPCG(seed, ^seed))
		if class.Turns == nil {
			fmt.Fprintf(out, "\n  %s\n", recordPrepared(t, r.builder.FirstTurn(&plan, rq, nil), i < 2))
			continue
		}
		conv := workload.NewConversation(rq)
		turns := class.Turns.Draw(rq)
		first := r.builder.FirstTurn(&plan, rq, conv)
		fmt.Fprintf(out, " turns=%d\n  %s\n", turns, recordPrepared(t, first, i < 2))
		// The second turn, after an answer of fixed text and counts.
		prev := first.Res
		prev.Completion = "a fixed answer of seven words here"
		prev.PromptTokens, prev.OutputTokens = prev.PlannedPromptTokens+3, 7
		think := class.Turns.Think(rq)
		userTokens, maxTokens := class.NextTurnLengths(rq)
		second := r.builder.NextTurn(class, conv, prev, userTokens, maxTokens, rq)
		fmt.Fprintf(out, "  think=%d user=%d max=%d history=%d\n  %s\n", think, userTokens, maxTokens, conv.Size(""), recordPrepared(t, second, i < 2))
	}
}

// recordPrepared describes one prepared request: what its result starts
// with, what the length model would learn, and its body (in full for the
// first few requests, else its length and hash).
func recordPrepared(t *testing.T, p *workload.Prepared, full bool) string {
	body, err := wire.EncodeBody(nil, p.Req)
	if err != nil {
		t.Fatal(err)
	}
	sha := sha256.Sum256(body)
	res := p.Res
	words, messages := p.Learns()
	s := fmt.Sprintf("target=%s model=%s class=%s planned=%d/%d max=%d prefix=%d/%d conv=%s turn=%d images=%d/%d words=%d messages=%d keep=%v body=%d sha=%x",
		res.Target, res.Model, res.Class, res.PlannedPromptTokens, res.PlannedOutputTokens, res.MaxTokens, res.PrefixGroup, res.PrefixTokens,
		res.ConversationID, res.Turn, res.Images, res.ImagePixels, words, messages, p.Req.KeepText, len(body), sha[:8])
	if full {
		s += "\n  body: " + cut(string(body), 1500)
	}
	return s
}

// cut is how the calibration's messages cut a server's text (and how this
// file was written): sanitised and cut to n bytes.
func cut(s string, n int) string { return wire.SanitizeCut(s[:min(len(s), 4*n)], n) }
