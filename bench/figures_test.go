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
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/llmprobe/llmprobe/bench"
	"github.com/llmprobe/llmprobe/bench/report"
	"github.com/llmprobe/llmprobe/config"
	"github.com/llmprobe/llmprobe/internal/simtest"
	"github.com/llmprobe/llmprobe/sim"
	"github.com/llmprobe/llmprobe/slo"
)

// figuresRun is one real run against an in-process simulator, with its
// report written as JSON (decoded as a map: what another tool reads) and
// as text, and its per-request lines.
type figuresRun struct {
	rep     *report.Report
	stages  []map[string]any // the JSON report's stages
	text    string
	records []figureRecord
}

// figureRecord is what this file's own computation reads of a line of
// --requests (decoded here, not through report.RequestRecord).
type figureRecord struct {
	Stage      int       `json:"stage"`
	Target     string    `json:"target"`
	Warmup     bool      `json:"warmup"`
	Sent       time.Time `json:"sent"`
	SentOffset *float64  `json:"sent_offset_seconds"`
	ClientWait float64   `json:"client_wait_seconds"`
	TTFT       *float64  `json:"ttft_seconds"`
	ITLs       []float64 `json:"itl_seconds"`
	E2E        float64   `json:"e2e_seconds"`
	Prompt     int       `json:"prompt_tokens"`
	Output     int       `json:"output_tokens"`
	Outcome    string    `json:"outcome"`
	ErrorType  string    `json:"error_type"`
}

func runFigures(t *testing.T, cfg *config.Config, opts bench.Options) *figuresRun {
	t.Helper()
	var log bytes.Buffer
	opts.Config, opts.Requests = cfg, report.NewRequestLog(&log)
	rep, err := bench.Run(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := opts.Requests.Flush(); err != nil {
		t.Fatal(err)
	}
	var js bytes.Buffer
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Stages []map[string]any `json:"stages"`
	}
	if err := json.Unmarshal(js.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	run := &figuresRun{rep: rep, stages: doc.Stages, text: logReport(t, rep)}
	sc := bufio.NewScanner(&log)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var r figureRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		run.records = append(run.records, r)
	}
	return run
}

// vllmFigures are the figures of vllm bench serve's calculate_metrics
// (benchmarks/serve.py), computed here from the request lines by a second
// implementation, apart from bench's: the population is a stage's
// measured requests (planned after the warm-up) that ended by themselves
// (not cut at the grace's end); a request's start is its send (from the
// stage's start, on the run's clock) plus its client wait (llmprobe's
// "start", from which TTFT and E2E run); the duration runs from the first
// start to the last end.
type vllmFigures struct {
	completed, failed, input, output int
	duration                         float64
	ttft, tpot, itl, e2el            []float64 // seconds, sorted
	peakConcurrency                  int
	peakTokens                       float64
}

func vllmOf(recs []figureRecord, stage int, target string) vllmFigures {
	var f vllmFigures
	type span struct{ start, end float64 }
	var spans []span
	var t0 time.Time
	first, last := math.Inf(1), math.Inf(-1)
	var chunks [][]float64
	for _, r := range recs {
		if r.Stage != stage || r.Target != target || r.Warmup || r.Outcome == "cancelled_at_grace" {
			continue
		}
		if t0.IsZero() {
			t0 = r.Sent
		}
		start := r.Sent.Sub(t0).Seconds() + r.ClientWait
		if r.SentOffset != nil { // the run's own clock, not the wall clock's
			start = *r.SentOffset + r.ClientWait
		}
		end := start + r.E2E
		first, last = math.Min(first, start), math.Max(last, end)
		if r.Outcome != "success" {
			f.failed++
			continue
		}
		f.completed++
		f.input += r.Prompt
		f.output += r.Output
		spans = append(spans, span{start, end})
		f.e2el = append(f.e2el, r.E2E)
		if r.TTFT != nil {
			f.ttft = append(f.ttft, *r.TTFT)
			at := start + *r.TTFT
			times := []float64{at}
			for _, g := range r.ITLs {
				at += g
				times = append(times, at)
			}
			chunks = append(chunks, times)
			f.itl = append(f.itl, r.ITLs...)
			if r.Output > 1 {
				f.tpot = append(f.tpot, (r.E2E-*r.TTFT)/float64(r.Output-1))
			}
		}
	}
	if f.completed+f.failed > 0 {
		f.duration = last - first
	}
	for _, v := range [][]float64{f.ttft, f.tpot, f.itl, f.e2el} {
		slices.Sort(v)
	}
	if len(spans) > 0 {
		minStart := math.Inf(1)
		for _, s := range spans {
			minStart = math.Min(minStart, s.start)
		}
		buckets := map[int]float64{}
		for _, times := range chunks {
			for _, at := range times {
				buckets[int(at-minStart)]++
			}
		}
		for _, n := range buckets {
			f.peakTokens = math.Max(f.peakTokens, n)
		}
		type event struct {
			at    float64
			delta int
		}
		var ev []event
		for _, s := range spans {
			ev = append(ev, event{s.start, 1}, event{s.end, -1})
		}
		slices.SortFunc(ev, func(a, b event) int {
			if a.at != b.at {
				if a.at < b.at {
					return -1
				}
				return 1
			}
			return a.delta - b.delta
		})
		cur := 0
		for _, e := range ev {
			cur += e.delta
			f.peakConcurrency = max(f.peakConcurrency, cur)
		}
	}
	return f
}

// linear is numpy's default percentile (linear interpolation between
// order statistics) of sorted values, p in percent; 0 for none, as vLLM's
// np.percentile(x or 0).
func linear(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	h := p / 100 * float64(len(sorted)-1)
	lo := int(math.Floor(h))
	if lo >= len(sorted)-1 {
		return sorted[len(sorted)-1]
	}
	return sorted[lo] + (h-float64(lo))*(sorted[lo+1]-sorted[lo])
}

func meanStd(v []float64) (mean, std float64) {
	if len(v) == 0 {
		return 0, 0
	}
	for _, x := range v {
		mean += x
	}
	mean /= float64(len(v))
	for _, x := range v {
		std += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(std / float64(len(v)))
}

// expected is the JSON stage's vLLM keys as this file computes them, with
// the tolerance of each: counts exact, rates and times to 0.1% (and 1 µs
// for times near zero), the ITL's quantiles too (bench keeps them in a
// histogram of that resolution).
func (f vllmFigures) expected(ps []float64) map[string]float64 {
	want := map[string]float64{
		"completed": float64(f.completed), "failed": float64(f.failed),
		"total_input_tokens": float64(f.input), "total_output_tokens": float64(f.output),
		"duration": f.duration, "max_concurrent_requests": float64(f.peakConcurrency),
	}
	if f.duration > 0 {
		want["request_throughput"] = float64(f.completed) / f.duration
		want["output_throughput"] = float64(f.output) / f.duration
		want["total_token_throughput"] = float64(f.input+f.output) / f.duration
	}
	for name, v := range map[string][]float64{"ttft": f.ttft, "tpot": f.tpot, "itl": f.itl, "e2el": f.e2el} {
		mean, std := meanStd(v)
		want["mean_"+name+"_ms"] = 1000 * mean
		want["std_"+name+"_ms"] = 1000 * std
		want["median_"+name+"_ms"] = 1000 * linear(v, 50)
		for _, p := range ps {
			want["p"+strconv.FormatFloat(p, 'g', -1, 64)+"_"+name+"_ms"] = 1000 * linear(v, p)
		}
	}
	return want
}

// checkVLLMKeys compares a JSON stage's vLLM keys with want.
func checkVLLMKeys(t *testing.T, name string, stage map[string]any, want map[string]float64) {
	t.Helper()
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range want {
			if !yield(k) {
				return
			}
		}
	}) {
		w := want[k]
		raw, ok := stage[k]
		if !ok {
			t.Errorf("%s: no %q in the JSON (want %.6g)", name, k, w)
			continue
		}
		got, ok := raw.(float64)
		if !ok {
			t.Errorf("%s: %q is %v, want %.6g", name, k, raw, w)
			continue
		}
		switch k {
		case "completed", "failed", "total_input_tokens", "total_output_tokens", "max_concurrent_requests":
			if got != w {
				t.Errorf("%s: %s %v, want %v", name, k, got, w)
			}
		default:
			if math.Abs(got-w) > math.Max(1e-3*math.Abs(w), 1e-3) {
				t.Errorf("%s: %s %.6g, want %.6g (%+.3f%%)", name, k, got, w, 100*(got/w-1))
			}
		}
	}
}

// blocks are the text report's summary blocks: for each, the line that
// heads it (which stage and target) and its lines, in order.
type block struct {
	head  string
	lines []string
}

func textBlocks(text string) []block {
	lines := strings.Split(text, "\n")
	var out []block
	for i, l := range lines {
		if l != "============ Serving Benchmark Result ============" || i == 0 {
			continue
		}
		b := block{head: lines[i-1]}
		for _, m := range lines[i+1:] {
			if m == strings.Repeat("=", 50) {
				break
			}
			b.lines = append(b.lines, m)
		}
		out = append(out, b)
	}
	return out
}

// value is the number after label in a block ("" and false when the block
// has no such line).
func (b block) value(label string) (float64, bool) {
	for _, l := range b.lines {
		if rest, ok := strings.CutPrefix(l, label); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			return v, err == nil
		}
	}
	return 0, false
}

// TestFiguresAreVLLMs: every stage's figures are vllm bench serve's,
// computed over the stage's measured requests (planned after the warm-up)
// with the drain in the duration, checked against a second implementation
// of vLLM's calculate_metrics over the run's own request lines: counts
// exactly, rates and times to 0.1%; in the JSON under vLLM's keys, and in
// the text as vLLM's summary block, one per stage and target in stage
// order, each headed by its stage and target and with exactly one line
// "Output token throughput (tok/s):", which no other figure of the report
// shares (the load table has no tok/s column). The stages: one at a fixed
// rate the server absorbs, with a warm-up, and one far past what it
// absorbs (max_inflight drops most arrivals, the drain is long), with
// failed requests (the simulator fails 5% with HTTP 500 and resets 5% of
// streams). Each stage's wall time (its duration and its drain) is in the
// text.
func TestFiguresAreVLLMs(t *testing.T) {
	if testing.Short() {
		t.Skip("two stages against a simulator")
	}
	scfg := sim.DefaultConfig()
	scfg.Seed = 1
	scfg.Faults.HTTP500.Probability = 0.05
	scfg.Faults.Reset = sim.FaultSpec{Probability: 0.05, AfterTokens: 3}
	_, base := simtest.Listen(t, scfg)
	cfg, err := config.Load([]byte(fmt.Sprintf(`
global: {warmup: 1s, request_timeout: 20s, seed: 7}
workloads:
  w: {classes: [{name: c, prompt_tokens: {dist: uniform, min: 16, max: 96}, output_tokens: {dist: uniform, min: 1, max: 48}}]}
targets:
  - {name: sim, url: %s/v1, model: sim-model, workload: w, arrival: {process: poisson, rate: 1}, tokenize: "off", max_inflight: 24, extra_body: {ignore_eos: true}}
`, base)), "figures.yml")
	if err != nil {
		t.Fatal(err)
	}
	run := runFigures(t, cfg, bench.Options{
		Stages: []bench.Stage{{Rate: 10, Duration: 4 * time.Second}, {Rate: 150, Duration: 3 * time.Second}},
		Warmup: -1, Grace: 20 * time.Second,
	})
	if len(run.stages) != 2 || len(run.rep.Stages) != 2 {
		t.Fatalf("%d stages in the JSON", len(run.stages))
	}
	ps := []float64{90, 99} // the default
	for i, js := range run.stages {
		s := run.rep.Stages[i]
		f := vllmOf(run.records, s.Stage, s.Target)
		name := fmt.Sprintf("stage %d", s.Stage)
		t.Logf("%s: the report's old figure output_tokens_per_second %v; vLLM's definition over its requests: %.1f tok/s (%d tokens over %.3fs)",
			name, js["output_tokens_per_second"], float64(f.output)/f.duration, f.output, f.duration)
		if f.completed == 0 || i == 1 && f.failed == 0 {
			t.Fatalf("%s: %d completed, %d failed: the run shows too little", name, f.completed, f.failed)
		}
		checkVLLMKeys(t, name, js, f.expected(ps))
		if f.completed+f.failed+s.Warmup+s.CutAtGrace != s.Sent || s.Scheduled != s.Sent+dropped(s) {
			t.Errorf("%s: sent %d = completed %d + failed %d + warm-up %d + cancelled %d? scheduled %d = sent + dropped %v?",
				name, s.Sent, f.completed, f.failed, s.Warmup, s.CutAtGrace, s.Scheduled, s.Dropped)
		}
		if v, ok := js["request_goodput"]; !ok || v != nil {
			t.Errorf("%s: request_goodput %v, want null without an SLO", name, v)
		}
		// The peak: vLLM's 1-second buckets, whose edges bench places to
		// the millisecond (docs/bench.md).
		if got, ok := js["max_output_tokens_per_s"].(float64); !ok || math.Abs(got-f.peakTokens) > math.Max(2, 0.01*f.peakTokens) {
			t.Errorf("%s: max_output_tokens_per_s %v, want %v", name, js["max_output_tokens_per_s"], f.peakTokens)
		}
	}

	blocks := textBlocks(run.text)
	if len(blocks) != len(run.rep.Stages) {
		t.Fatalf("%d summary blocks in the text, want one per stage and target (%d)", len(blocks), len(run.rep.Stages))
	}
	for i, b := range blocks {
		s := run.rep.Stages[i]
		if want := fmt.Sprintf("stage %d %s", s.Stage, s.Target); !strings.HasPrefix(b.head, want) {
			t.Errorf("block %d is headed %q, want it to begin %q", i+1, b.head, want)
		}
		if wall := (s.Duration + s.Drain).Round(time.Millisecond); s.Drain <= 0 || !strings.Contains(b.head, "wall "+wall.String()) {
			t.Errorf("block %d is headed %q: no wall time %s (duration %s, drain %s)", i+1, b.head, wall, s.Duration, s.Drain)
		}
		n := 0
		for _, l := range b.lines {
			if strings.HasPrefix(l, "Output token throughput (tok/s):") {
				n++
			}
		}
		got, ok := b.value("Output token throughput (tok/s):")
		want, _ := run.stages[i]["output_throughput"].(float64)
		if n != 1 || !ok || math.Abs(got-want) > 0.005 {
			t.Errorf("block %d: %d lines of output token throughput, %v (the JSON: %.2f)", i+1, n, got, want)
		}
		if got, ok := b.value("Successful requests:"); !ok || got != run.stages[i]["completed"] {
			t.Errorf("block %d: %v successful requests, the JSON %v", i+1, got, run.stages[i]["completed"])
		}
	}
	if strings.Count(run.text, "Output token throughput (tok/s):") != len(blocks) || strings.Contains(strings.SplitN(run.text, "\n", 2)[0], "tok/s") {
		t.Errorf("output tokens per second is given other than in the blocks")
	}
}

// TestCancelledAtGrace: requests still running when the grace after a
// stage runs out are cancelled by bench, not failed by the server: they
// are their own outcome, cancelled_at_grace (in the report, the JSON and
// the request lines), outside vLLM's completed and failed, and the counts
// reconcile: sent = completed + failed + cancelled, scheduled = sent +
// dropped.
func TestCancelledAtGrace(t *testing.T) {
	if testing.Short() {
		t.Skip("a stage against a simulator")
	}
	scfg := sim.DefaultConfig()
	scfg.Seed = 1
	_, base := simtest.Listen(t, scfg)
	cfg, err := config.Load([]byte(fmt.Sprintf(`
global: {warmup: 0s, request_timeout: 30s, seed: 3}
workloads:
  w:
    classes:
      - {name: quick, weight: 0.5, prompt_tokens: 16, output_tokens: 2}
      - {name: slow, weight: 0.5, prompt_tokens: 16, output_tokens: 2000}
targets:
  - {name: sim, url: %s/v1, model: sim-model, workload: w, arrival: {process: constant, rate: 1}, tokenize: "off", max_inflight: 64, extra_body: {ignore_eos: true}}
`, base)), "grace.yml")
	if err != nil {
		t.Fatal(err)
	}
	run := runFigures(t, cfg, bench.Options{Stages: []bench.Stage{{Rate: 8, Duration: 2 * time.Second}}, Warmup: 0, Grace: 500 * time.Millisecond})
	s, js := run.rep.Stages[0], run.stages[0]
	cancelled := s.Outcomes["cancelled_at_grace"]
	if cancelled == 0 || cancelled != s.CutAtGrace || s.Outcomes["timeout"] != 0 {
		t.Fatalf("outcomes %v, cut at grace %d: want the cut ones as cancelled_at_grace, none as timeout", s.Outcomes, s.CutAtGrace)
	}
	completed, _ := js["completed"].(float64)
	failed, _ := js["failed"].(float64)
	if int(completed)+int(failed)+cancelled+s.Warmup != s.Sent || completed == 0 || s.Scheduled != s.Sent+dropped(s) {
		t.Errorf("sent %d: completed %v + failed %v + cancelled %d + warm-up %d; scheduled %d, dropped %v", s.Sent, completed, failed, cancelled, s.Warmup, s.Scheduled, s.Dropped)
	}
	if errs, _, _ := s.ErrorShare(); errs != int(failed) {
		t.Errorf("the error share counts %d failures, vLLM's failed %v", errs, failed)
	}
	lines := 0
	for _, r := range run.records {
		if r.Outcome == "cancelled_at_grace" {
			lines++
		}
	}
	if lines != cancelled {
		t.Errorf("%d request lines cancelled_at_grace, the report %d", lines, cancelled)
	}
	if strings.Contains(run.text, "timeout") {
		t.Errorf("the text calls the cancelled requests timeouts")
	}
}

// TestStageInsideWarmup: a stage no longer than its warm-up measures
// nothing, and says so: a warning in the text and the JSON, and its SLO
// "not judged" (nothing was), never "NOT MET: 0 of 0 good".
func TestStageInsideWarmup(t *testing.T) {
	if testing.Short() {
		t.Skip("a stage against a simulator")
	}
	cfg := serverConfig(t, fmt.Sprintf(`  - {name: sim, url: %s, model: sim-model, workload: w, arrival: {process: poisson, rate: 1}, max_inflight: 64, tokenize: "off", extra_body: {ignore_eos: true}}
`, listenSim(t)))
	spec, err := slo.ParseSpec("ttft=1s")
	if err != nil {
		t.Fatal(err)
	}
	run := runFigures(t, cfg, bench.Options{Stages: []bench.Stage{{Rate: 10, Duration: time.Second}}, Warmup: 2 * time.Second, Grace: 10 * time.Second, SLO: spec})
	s, js := run.rep.Stages[0], run.stages[0]
	if s.Sent == 0 || s.Warmup != s.Sent {
		t.Fatalf("sent %d, of which %d in the warm-up", s.Sent, s.Warmup)
	}
	if strings.Contains(run.text, "NOT MET") || !strings.Contains(run.text, "stage 1 sim SLO not judged: no request was judged") {
		t.Errorf("the SLO of a stage inside its warm-up is not said to be not judged")
	}
	w, _ := js["warnings"].([]any)
	if len(w) == 0 || !strings.Contains(fmt.Sprint(w...), "warm-up") {
		t.Errorf("JSON warnings %v", js["warnings"])
	}
	if !strings.Contains(run.text, "stage 1 sim WARNING: ") {
		t.Errorf("no warning in the text")
	}
}
