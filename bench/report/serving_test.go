// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package report_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/common/model"

	"github.com/llmprobe/llmprobe/bench/report"
	"github.com/llmprobe/llmprobe/slo"
)

// vllmExpected is what testdata/vllm/vllm_metrics.py wrote: vllm bench
// serve's figures of each stage and target of records.jsonl.
type vllmExpected struct {
	Percentiles []float64          `json:"percentiles"`
	Goodput     map[string]float64 `json:"goodput"` // ms
	Stages      []struct {
		Stage   int                 `json:"stage"`
		Target  string              `json:"target"`
		Metrics map[string]*float64 `json:"metrics"`
	} `json:"stages"`
}

// exactKeys are the counts, which must agree exactly.
var exactKeys = []string{"completed", "failed", "total_input_tokens", "total_output_tokens", "max_concurrent_requests"}

// TestServingMatchesVLLMScript: the figures bench reports (Requests.Figures,
// written as a stage's JSON) of real runs' request lines (records.jsonl:
// `llmprobe bench --sim` with testdata/vllm's configurations, README.md)
// are those a separate implementation of vLLM's calculate_metrics
// computes from the same lines (vllm_metrics.py, Python, run once: its
// output is expected.json): the counts exactly, the rates, the duration
// and every latency figure within 0.1% (the ITL's percentiles come from
// a histogram of that resolution; the rest is exact but for float32
// rounding), the peak output throughput within the chunks of the
// milliseconds at its bucket's edges. The records hold a stage at a rate
// the simulator absorbs, one past it with failed requests and requests
// cancelled at the grace's end, and a target of single-token answers.
func TestServingMatchesVLLMScript(t *testing.T) {
	dir := filepath.Join("testdata", "vllm")
	var exp vllmExpected
	data, err := os.ReadFile(filepath.Join(dir, "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &exp); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(dir, "records.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var recs []report.RequestRecord
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r report.RequestRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
	}
	ms := func(k string) model.Duration {
		return model.Duration(time.Duration(exp.Goodput[k] * float64(time.Millisecond)))
	}
	obj := &slo.Objective{TTFT: ms("ttft"), TPOT: ms("tpot"), E2E: ms("e2el")}
	// The keys of a stage without figures, which are not vLLM's.
	b, err := json.Marshal(&report.StageReport{})
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]any
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	base := map[string]bool{}
	for k := range raw {
		base[k] = true
	}
	cancelled, single := 0, false
	worst, worstKey := 0.0, ""
	for _, st := range exp.Stages {
		var mine []report.RequestRecord
		for _, r := range recs {
			if r.Stage == st.Stage && r.Target == st.Target {
				mine = append(mine, r)
			}
		}
		// The origin: the stage's first send (a live stage's is its start,
		// before it).
		origin := slices.MinFunc(mine, func(a, b report.RequestRecord) int { return a.Sent.Compare(b.Sent) }).Sent
		rs := report.NewRequests(len(mine))
		for _, r := range mine {
			tm := r.Timing(origin)
			if tm.Cancelled {
				cancelled++
			}
			if tm.Success && !tm.Warmup {
				var tpot time.Duration
				if tm.OutputTokens >= 2 {
					tpot = (tm.E2E - tm.TTFT) / time.Duration(tm.OutputTokens-1)
				}
				tm.Good = obj.Judge(slo.Request{Succeeded: true, TTFT: tm.TTFT, TPOT: tpot, OutputTokens: tm.OutputTokens, E2E: tm.E2E}).Good
			}
			rs.Add(tm)
		}
		fig := rs.Figures(exp.Percentiles, true)
		b, err := json.Marshal(&report.StageReport{Stage: st.Stage, Target: st.Target, Serving: fig})
		if err != nil {
			t.Fatal(err)
		}
		var got map[string]any
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		if fig.TotalOutputTokens == fig.Completed {
			single = true
		}
		for k, want := range st.Metrics {
			g, ok := got[k].(float64)
			switch {
			case !ok || want == nil:
				t.Errorf("stage %d %s: %s is %v, want %v", st.Stage, st.Target, k, got[k], want)
			case slices.Contains(exactKeys, k):
				if g != *want {
					t.Errorf("stage %d %s: %s %v, want %v", st.Stage, st.Target, k, g, *want)
				}
			case k == "max_output_tokens_per_s":
				t.Logf("stage %d %s: %s %v, vLLM's %v", st.Stage, st.Target, k, g, *want)
				if math.Abs(g-*want) > math.Max(2, 0.01**want) {
					t.Errorf("stage %d %s: %s %v, want %v", st.Stage, st.Target, k, g, *want)
				}
			default:
				if d := math.Abs(g - *want); *want != 0 && d/math.Abs(*want) > worst {
					worst, worstKey = d/math.Abs(*want), fmt.Sprintf("stage %d %s %s", st.Stage, st.Target, k)
				}
				if math.Abs(g-*want) > 1e-3*math.Abs(*want)+1e-9 {
					t.Errorf("stage %d %s: %s %.9g, want %.9g (%+.4f%%)", st.Stage, st.Target, k, g, *want, 100*(g / *want - 1))
				}
			}
		}
		for k := range got {
			if _, ok := st.Metrics[k]; !ok && !base[k] {
				t.Errorf("stage %d %s: %s is not one of the script's keys", st.Stage, st.Target, k)
			}
		}
	}
	t.Logf("the largest difference of a rate, time or latency: %.4f%% (%s)", 100*worst, worstKey)
	if len(exp.Stages) < 4 || cancelled == 0 || !single {
		t.Errorf("the records hold %d stages and targets, %d requests cancelled at the grace, single-token answers %v", len(exp.Stages), cancelled, single)
	}
}
