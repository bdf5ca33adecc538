// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package examples_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmprobe/llmprobe/config"
	"github.com/llmprobe/llmprobe/examples"
	"github.com/llmprobe/llmprobe/internal/simtest"
	"github.com/llmprobe/llmprobe/probe"
	"github.com/llmprobe/llmprobe/probe/wire"
	"github.com/llmprobe/llmprobe/sim"
)

// collect is an Observer keeping results.
type collect struct {
	probe.Observers
	results chan *wire.Result
	n       atomic.Int64
}

func (c *collect) Observe(r *wire.Result) { c.results <- r; c.n.Add(1) }

// catalogResults is how many results a catalog workload must return
// before its run ends; a run ends after catalogWait at the latest.
const (
	catalogResults = 12
	catalogWait    = 20 * time.Second
)

// Every shipped configuration validates, and every catalog workload runs
// against the built-in simulator: its target (pointed at the simulator,
// rate raised so a short run sends some requests) gets successful answers
// whose prompt lengths are what the workload planned.
func TestCatalog(t *testing.T) {
	files, err := filepath.Glob("workloads/*.yml")
	if err != nil || len(files) < 4 {
		t.Fatalf("catalog: %v %v", files, err)
	}
	cfg := sim.DefaultConfig()
	cfg.ZeroLatency = true
	cfg.MaxModelLen = 1 << 17
	// An early stop may fall on the first token (as a model's EOS can), an
	// answer without text that llmprobe rightly counts as empty_completion;
	// at the default 0.0005 per token, one request in 2,000 would fail this
	// test of the workloads, not of the server.
	cfg.EOSProbability = 0
	_, base := simtest.Listen(t, cfg)

	// The shipped demo is a complete configuration as written (what
	// check-config sees), and it is what the binary embeds.
	demo, err := config.LoadFile("demo.yml")
	if err != nil {
		t.Fatalf("check-config demo.yml: %v", err)
	}
	if _, err := config.Load(examples.Demo, "demo.yml (embedded)"); err != nil {
		t.Fatalf("embedded demo: %v", err)
	}
	files = append(files, "demo.yml")

	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			c := demo
			if f != "demo.yml" {
				if c, err = config.LoadFile(f); err != nil {
					t.Fatalf("check-config: %v", err)
				}
			}
			data, _ := os.ReadFile(f)
			if f != "demo.yml" && !bytes.Contains(data, []byte("Where the numbers come from")) {
				t.Errorf("%s does not say where its numbers come from", f)
			}
			c.Global.Warmup = 0
			for _, tg := range c.Targets {
				tg.URL = base + "/v1"
				tg.Arrival.Rate = 20
				tg.MaxInflight = 1000
			}
			obs := &collect{results: make(chan *wire.Result, 10000)}
			e := probe.NewEngine(probe.Options{Observer: obs})
			if err := e.Apply(c); err != nil {
				t.Fatal(err)
			}
			// Run until enough requests have ended, not for a fixed time: on
			// a busy machine the first sends wait for /tokenize, and 700 ms
			// once gave 4 results.
			for deadline := time.Now().Add(catalogWait); obs.n.Load() < catalogResults && time.Now().Before(deadline); {
				time.Sleep(20 * time.Millisecond)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if err := e.Shutdown(ctx); err != nil {
				t.Fatal(err)
			}
			close(obs.results)
			n, off := 0, 0
			for r := range obs.results {
				n++
				if r.Outcome != wire.OutcomeSuccess {
					t.Fatalf("%s: outcome %s/%s: %s", r.Class, r.Outcome, r.ErrorType, r.Error)
				}
				// Requests sent before /tokenize answered may miss by the
				// chat template's few tokens.
				if d := r.PromptTokens - r.PlannedPromptTokens; d*50 > r.PlannedPromptTokens || -d*50 > r.PlannedPromptTokens {
					off++
					t.Logf("%s turn %d: prompt %d tokens, planned %d", r.Class, r.Turn, r.PromptTokens, r.PlannedPromptTokens)
				}
			}
			if n < catalogResults || off*10 > n {
				t.Errorf("%d requests, %d with a prompt length more than 2%% off the plan", n, off)
			}
		})
	}
}

// The replicas example validates as shipped, and runs: with its file_sd
// pointed at three simulators and its front door at the first, every
// replica and the front door get answers, each replica's under its pod's
// name.
func TestReplicasExample(t *testing.T) {
	c, err := config.LoadFile("replicas/llmprobe.yml")
	if err != nil {
		t.Fatalf("check-config: %v", err)
	}
	raw, err := os.ReadFile("replicas/llmprobe.yml")
	if err != nil {
		t.Fatal(err)
	}
	cfg := sim.DefaultConfig()
	cfg.ZeroLatency = true
	cfg.EOSProbability = 0
	var groups []string
	for i := range 3 {
		_, base := simtest.Listen(t, cfg)
		groups = append(groups, fmt.Sprintf(`{"targets": [%q], "labels": {"pod": "vllm-%d"}}`, strings.TrimPrefix(base, "http://"), i))
		if i == 0 {
			raw = bytes.ReplaceAll(raw, []byte("http://127.0.0.1:8001/v1"), []byte(base+"/v1"))
		}
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "replicas.json"), []byte("["+strings.Join(groups, ",")+"]"), 0o644); err != nil {
		t.Fatal(err)
	}
	if c, err = config.Load(raw, filepath.Join(dir, "llmprobe.yml")); err != nil {
		t.Fatal(err)
	}
	c.Global.Warmup = 0
	for _, tg := range c.Targets {
		tg.Arrival.Rate = 10
	}
	obs := &collect{results: make(chan *wire.Result, 10000)}
	e := probe.NewEngine(probe.Options{Observer: obs})
	if err := e.Apply(c); err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for deadline := time.Now().Add(catalogWait); len(seen) < 4 && time.Now().Before(deadline); {
		select {
		case r := <-obs.results:
			if r.Outcome != wire.OutcomeSuccess {
				t.Fatalf("%s %s: outcome %s/%s: %s", r.Target, r.Replica, r.Outcome, r.ErrorType, r.Error)
			}
			seen[r.Target+"/"+r.Replica]++
		case <-time.After(100 * time.Millisecond):
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := e.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"front-door/", "pool/vllm-0", "pool/vllm-1", "pool/vllm-2"} {
		if seen[want] == 0 {
			t.Errorf("no answer for %s (seen %v)", want, seen)
		}
	}
}
