// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package probe

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/llmprobe/llmprobe/config"
	"github.com/llmprobe/llmprobe/fit"
	"github.com/llmprobe/llmprobe/internal/promtest"
	"github.com/llmprobe/llmprobe/probe/workload"
)

func promClassic(les []string, cum []float64) string {
	var ss []string
	for i, le := range les {
		ss = append(ss, fmt.Sprintf(`{"metric":{"model_name":"m","le":%q},"value":[1700000000,"%v"]}`, le, cum[i]))
	}
	return `{"status":"success","data":{"resultType":"vector","result":[` + strings.Join(ss, ",") + `]}}`
}

func promScalarVector(v string) string {
	return `{"status":"success","data":{"resultType":"vector","result":[{"metric":{"model_name":"m"},"value":[1700000000,"` + v + `"]}]}}`
}

const promEmpty = `{"status":"success","data":{"resultType":"vector","result":[]}}`

// refitSeeds are the answers to a refit's six queries (native, classic
// buckets and sum, for prompt then output).
func refitSeeds() [][]byte {
	les := []string{"1", "2", "5", "10", "20", "50", "100", "200", "500", "1000", "2000", "5000", "+Inf"}
	prompt := []float64{0, 0, 1, 3, 10, 40, 90, 160, 260, 290, 298, 300, 300}
	output := []float64{0, 2, 8, 20, 60, 150, 240, 290, 299, 300, 300, 300, 300}
	huge := []string{"1e3", "1e6", "1e9", "1e12", "+Inf"}
	seeds := []string{
		strings.Join([]string{promEmpty, promClassic(les, prompt), promScalarVector("54321"), promEmpty, promClassic(les, output), promScalarVector("12345")}, "\x00"),
		// Lengths in the +Inf bucket: no upper clamp from the fit.
		strings.Join([]string{promEmpty, promClassic(les[10:], []float64{10, 100, 300}), promScalarVector("NaN"), promEmpty, promClassic(les[10:], []float64{100, 200, 300}), promEmpty}, "\x00"),
		// A server whose buckets go to a trillion tokens.
		strings.Join([]string{promEmpty, promClassic(huge, []float64{0, 10, 100, 300, 300}), promEmpty, promEmpty, promClassic(huge, []float64{0, 0, 0, 300, 300}), promEmpty}, "\x00"),
		// Native histograms.
		`{"status":"success","data":{"resultType":"vector","result":[{"metric":{"model_name":"m"},"histogram":[1700000000,{"count":"300","sum":"45000","buckets":[[0,"1","1.1","3"],[0,"50","55","100"],[0,"100","110","150"],[0,"1000","1100","47"]]}]}]}}`,
		`{"status":"error","errorType":"bad_data","error":"parse error"}`,
		`{"status":"success"}`, // no data: a nil result that crashed the fit, and the daemon with it
		``,
	}
	out := make([][]byte, len(seeds))
	for i, s := range seeds {
		out[i] = []byte(s)
	}
	return out
}

const refitWorkloadYAML = `
global: {warmup: 0s, seed: 3}
workloads:
  w:
    classes:
      - name: chat
        weight: 0.7
        prompt_tokens: 100
        output_tokens: 20
        prefix: {groups: 2, tokens: 32, probability: 0.5}
      - name: agent
        weight: 0.3
        prompt_tokens: 200
        output_tokens: 30
        turns: {count: {dist: uniform, min: 2, max: 3}, think_time: 1s}
targets:
  - {name: t, url: "http://127.0.0.1:1/v1", model: m, workload: w, arrival: {process: constant, rate: 1}}
`

// FuzzRefitResponse drives a workload_from refit with arbitrary
// Prometheus answers: no panic; a failed refit keeps the workload; a
// refit that succeeds keeps the classes, weights, prefixes and turns and
// plans lengths that are whole tokens between 1 and workload.MaxRefitTokens.
func FuzzRefitResponse(f *testing.F) {
	for _, s := range refitSeeds() {
		f.Add(s)
	}
	cfg, err := config.Load([]byte(refitWorkloadYAML), "refit.yml")
	if err != nil {
		f.Fatal(err)
	}
	base := workload.NewWorkload(cfg.Workloads["w"])
	opts := fit.PromOptions{URL: "http://prometheus.test:9090", Selector: `job="vllm"`, Range: time.Hour, Time: time.Unix(1700000000, 0)}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 64<<10 {
			t.Skip("large inputs only slow the fuzzer down")
		}
		r := &runner{name: "t", logger: slog.New(slog.DiscardHandler)}
		r.workload.Store(base)
		start := time.Now()
		r.refit(context.Background(), opts, &http.Client{Transport: promtest.NewReplay(data, false)})
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("refit took %v", d)
		}
		st := r.refits.snapshot()
		w := r.workload.Load()
		if st.Successes+st.Failures != 1 {
			t.Fatalf("status %+v after one refit", st)
		}
		if st.Failures == 1 {
			if w != base || st.Error == "" {
				t.Fatalf("failed refit (%q) changed the workload", st.Error)
			}
			return
		}
		if !(st.Requests > 0) || math.IsInf(st.Requests, 0) {
			t.Fatalf("requests %v", st.Requests)
		}
		for i := range RefitQuantiles {
			for _, v := range []float64{st.Prompt[i], st.Output[i]} {
				if !(v >= 1 && v <= workload.MaxRefitTokens) {
					t.Fatalf("status quantiles prompt %v output %v", st.Prompt, st.Output)
				}
			}
		}
		if len(w.Classes) != len(base.Classes) {
			t.Fatalf("%d classes, want %d", len(w.Classes), len(base.Classes))
		}
		rng := rand.New(rand.NewPCG(1, 2))
		for i, c := range w.Classes {
			b := base.Classes[i]
			if c.Name != b.Name || c.Weight != b.Weight || c.Prefix != b.Prefix || (c.Turns == nil) != (b.Turns == nil) {
				t.Fatalf("class %d changed beyond its lengths: %+v, was %+v", i, c, b)
			}
			if !(c.ReuseIntent >= 0 && c.ReuseIntent <= 1) {
				t.Fatalf("class %s reuse intent %v", c.Name, c.ReuseIntent)
			}
			for range 64 {
				p := c.Plan(rng)
				if p.PromptTokens < 1 || p.PromptTokens > workload.MaxRefitTokens || p.OutputTokens < 1 || p.OutputTokens > workload.MaxRefitTokens {
					t.Fatalf("class %s planned %d prompt and %d output tokens", c.Name, p.PromptTokens, p.OutputTokens)
				}
			}
			if c.Turns != nil {
				for range 16 {
					if u, _ := c.NextTurnLengths(rng); u > workload.MaxRefitTokens {
						t.Fatalf("class %s: a later turn's user message of %d tokens", c.Name, u)
					}
				}
			}
		}
	})
}
