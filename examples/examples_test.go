// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package examples_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
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
