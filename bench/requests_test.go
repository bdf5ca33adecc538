// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package bench_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmprobe/llmprobe/bench"
	"github.com/llmprobe/llmprobe/bench/report"
	"github.com/llmprobe/llmprobe/config"
	"github.com/llmprobe/llmprobe/probe/wire"
	"github.com/llmprobe/llmprobe/slo"
)

// sweep is one real two-stage run against an in-process simulator, shared
// by the tests of the report's outputs (the request log, Markdown, plot
// and compare), with its per-request export and progress reports.
type sweep struct {
	rep      *report.Report
	requests []byte
	lines    int
	progress []bench.Progress
}

var (
	sweepOnce   sync.Once
	sweepResult *sweep
	sweepErr    error
)

func runSweep(t *testing.T) *sweep {
	t.Helper()
	if testing.Short() {
		t.Skip("two 3 s stages against a simulator")
	}
	sweepOnce.Do(func() {
		base := listenSim(t)
		cfg, err := config.Load([]byte(fmt.Sprintf(`
global: {warmup: 500ms, request_timeout: 10s}
workloads:
  mix:
    classes:
      - {name: chat, weight: 0.7, prompt_tokens: {dist: uniform, min: 16, max: 64}, output_tokens: 8, prefix: {groups: 2, tokens: 32, probability: 0.9}}
      - {name: long, weight: 0.3, prompt_tokens: 200, output_tokens: 16}
targets:
  - {name: sim, url: %s, model: sim-model, workload: mix, arrival: {process: poisson, rate: 1}, tokenize: "off", extra_body: {ignore_eos: true}}
`, base)), "sweep.yml")
		if err != nil {
			sweepErr = err
			return
		}
		spec, err := slo.ParseSpec("ttft=500ms,tpot_p99=100ms")
		if err != nil {
			sweepErr = err
			return
		}
		var buf bytes.Buffer
		log := report.NewRequestLog(&buf)
		var mu sync.Mutex
		var progress []bench.Progress
		rep, err := bench.Run(context.Background(), bench.Options{
			Config: cfg, Stages: []bench.Stage{{Rate: 4, Duration: 3 * time.Second}, {Rate: 8, Duration: 3 * time.Second}},
			Warmup: -1, Grace: 5 * time.Second, SLO: spec, Requests: log,
			Progress: func(p bench.Progress) {
				mu.Lock()
				progress = append(progress, p)
				mu.Unlock()
			},
			ProgressInterval: 250 * time.Millisecond,
		})
		if err != nil {
			sweepErr = err
			return
		}
		if err := log.Flush(); err != nil {
			sweepErr = err
			return
		}
		sweepResult = &sweep{rep: rep, requests: buf.Bytes(), lines: log.Lines(), progress: progress}
	})
	if sweepErr != nil {
		t.Fatal(sweepErr)
	}
	return sweepResult
}

// TestRequestLog: the export has one JSON line per result of every stage
// (warm-up included, marked), each with its stage, class, planned and
// sent times, TTFT, ITLs, E2E, token counts and outcome, and nothing else:
// no prompt or completion text.
func TestRequestLog(t *testing.T) {
	sw := runSweep(t)
	want := 0
	for _, s := range sw.rep.Stages {
		for _, n := range s.Outcomes {
			want += n
		}
	}
	if want == 0 || sw.lines != want {
		t.Fatalf("%d lines written, the report counts %d results", sw.lines, want)
	}
	allowed := []string{"stage", "target", "class", "conversation", "turn", "warmup", "planned", "sent", "schedule_lag_seconds", "client_wait_seconds", "sent_offset_seconds",
		"ttft_seconds", "itl_seconds", "e2e_seconds", "prompt_tokens", "output_tokens", "cached_tokens", "usage_reported",
		"outcome", "error_type", "status_code"}
	perStage := map[int]int{}
	warmup, cached := 0, 0
	sc := bufio.NewScanner(bytes.NewReader(sw.requests))
	sc.Buffer(nil, 1<<20)
	n := 0
	for sc.Scan() {
		n++
		var raw map[string]any
		if err := json.Unmarshal(sc.Bytes(), &raw); err != nil {
			t.Fatalf("line %d: %v: %s", n, err, sc.Bytes())
		}
		for k := range raw {
			if !slices.Contains(allowed, k) {
				t.Errorf("line %d has the field %q: %s", n, k, sc.Bytes())
			}
		}
		var rec report.RequestRecord
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatal(err)
		}
		perStage[rec.Stage]++
		if rec.Warmup {
			warmup++
		}
		cached += rec.CachedTokens
		if rec.Target != "sim" || (rec.Class != "chat" && rec.Class != "long") {
			t.Errorf("line %d: target %q class %q", n, rec.Target, rec.Class)
		}
		if rec.Planned.IsZero() || rec.Sent.Before(rec.Planned) {
			t.Errorf("line %d: planned %v, sent %v", n, rec.Planned, rec.Sent)
		}
		if rec.Outcome != wire.OutcomeSuccess {
			t.Errorf("line %d: outcome %q (%s) against a healthy simulator", n, rec.Outcome, rec.ErrorType)
			continue
		}
		if rec.TTFT == nil || *rec.TTFT <= 0 || rec.E2E < *rec.TTFT {
			t.Errorf("line %d: TTFT %v, E2E %v", n, rec.TTFT, rec.E2E)
		}
		// The shortest prompt is planned at 16 tokens; with tokenize off
		// the server's count of it is a few tokens either side (it was
		// 14 once).
		if rec.PromptTokens < 12 || rec.OutputTokens < 8 || len(rec.ITLs) != rec.OutputTokens-1 {
			t.Errorf("line %d: %d prompt, %d output tokens, %d ITLs", n, rec.PromptTokens, rec.OutputTokens, len(rec.ITLs))
		}
	}
	if n != sw.lines {
		t.Errorf("%d lines read, %d written", n, sw.lines)
	}
	for _, s := range sw.rep.Stages {
		total := 0
		for _, k := range s.Outcomes {
			total += k
		}
		if perStage[s.Stage] != total {
			t.Errorf("stage %d: %d lines, %d results", s.Stage, perStage[s.Stage], total)
		}
	}
	if warmup == 0 {
		t.Error("no line is marked warm-up (each stage warms up for 500ms)")
	}
	if cached == 0 {
		t.Error("no line reports cached tokens (the workload shares prefixes)")
	}
	for _, word := range []string{"messages", "prompt\"", "content", "completion\""} {
		if strings.Contains(string(sw.requests), word) {
			t.Errorf("the export contains %q", word)
		}
	}
}

// TestProgress: during a stage the progress hook reports its figures so
// far, growing, and once at its end with Done.
func TestProgress(t *testing.T) {
	sw := runSweep(t)
	done := map[int]bench.Progress{}
	last := map[int]int{}
	for _, p := range sw.progress {
		if p.Stages != 2 || p.Stage < 1 || p.Stage > 2 || p.Duration != 3*time.Second {
			t.Fatalf("progress %+v", p)
		}
		if p.Sent < last[p.Stage] {
			t.Errorf("stage %d: sent went down from %d to %d", p.Stage, last[p.Stage], p.Sent)
		}
		last[p.Stage] = p.Sent
		if p.Done {
			if _, dup := done[p.Stage]; dup {
				t.Errorf("stage %d reported done twice", p.Stage)
			}
			done[p.Stage] = p
		}
	}
	for _, s := range sw.rep.Stages {
		p, ok := done[s.Stage]
		if !ok {
			t.Fatalf("stage %d never reported done", s.Stage)
		}
		if p.Sent != s.Sent || p.TTFTCount == 0 || !(p.TTFTP50 > 0 && p.TTFTP99 >= p.TTFTP50) || p.Rate <= 0 {
			t.Errorf("stage %d done: %+v; the report sent %d", s.Stage, p, s.Sent)
		}
	}
	if len(sw.progress) < 4 {
		t.Errorf("%d progress reports over two 3 s stages at 250ms", len(sw.progress))
	}
}

// TestStageOffset: a run that continues a search numbers its stage after
// the ones already run, in the report, the request log and the progress.
func TestStageOffset(t *testing.T) {
	if testing.Short() {
		t.Skip("a 1 s stage against a simulator")
	}
	cfg, err := config.Load([]byte(fmt.Sprintf(`
global: {warmup: 0s, request_timeout: 10s}
workloads:
  w: {classes: [{name: c, prompt_tokens: 16, output_tokens: 4}]}
targets:
  - {name: sim, url: %s, model: sim-model, workload: w, arrival: {process: constant, rate: 1}, tokenize: "off", extra_body: {ignore_eos: true}}
`, listenSim(t))), "offset.yml")
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	log := report.NewRequestLog(&buf)
	var last bench.Progress
	rep, err := bench.Run(context.Background(), bench.Options{
		Config: cfg, Stages: []bench.Stage{{Rate: 5, Duration: time.Second}}, Warmup: 0, Grace: 5 * time.Second,
		StageOffset: 4, Requests: log, Progress: func(p bench.Progress) { last = p },
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := log.Flush(); err != nil {
		t.Fatal(err)
	}
	if len(rep.Stages) != 1 || rep.Stages[0].Stage != 5 || last.Stage != 5 || last.Stages != 5 || !last.Done {
		t.Fatalf("stage %d, progress %+v", rep.Stages[0].Stage, last)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	for _, l := range lines {
		var rec report.RequestRecord
		if err := json.Unmarshal([]byte(l), &rec); err != nil || rec.Stage != 5 {
			t.Errorf("%v: %s", err, l)
		}
	}
	if len(lines) == 0 || log.Lines() != len(lines) {
		t.Errorf("%d lines, Lines() = %d", len(lines), log.Lines())
	}
}
