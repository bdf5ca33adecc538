// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package bench_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
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

// The searches run against the simulator in a child process (the test
// binary re-executed as in capacity_test.go, serving sim.Listen with the
// configuration below, as `llmprobe sim --sim.config.file` does), with a
// small batch and a fixed timing, so its capacity is known.
const (
	findPrompt = 20 // prompt tokens per request
	findOutput = 10 // output tokens per request (ignore_eos, no early stop)
)

const findSimConfig = `
max_num_seqs: 8
prefill_base: 0s
prefill_per_token: 100us
decode_base: 4ms
decode_per_seq: 1ms
enable_prefix_caching: false
eos_probability: 0
seed: 1
`

// modelCapacity derives the simulator's capacity from its timing model.
// Saturated, the batch always holds max_num_seqs sequences; each takes
// findOutput steps (the step that completes its prefill also yields its
// first token), every step costs DecodeBase + DecodePerSeq × 8, and each
// request's prefill adds PrefillPerToken × prompt tokens to the step it
// falls in (PrefillBase is 0, so it does not matter how prefills share
// steps). So 8 requests complete every findOutput decode steps plus 8
// prefills: requests/s = 8 / (output × step(8) + 8 × prefill).
func modelCapacity(t *testing.T) (reqPerSec, tokPerSec float64) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "sim.yml")
	if err := os.WriteFile(f, []byte(findSimConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := sim.LoadConfigFile(f)
	if err != nil {
		t.Fatal(err)
	}
	n := float64(cfg.MaxNumSeqs)
	step := cfg.DecodeBase + time.Duration(cfg.MaxNumSeqs)*cfg.DecodePerSeq
	prefill := cfg.PrefillBase + findPrompt*cfg.PrefillPerToken
	per8 := time.Duration(findOutput)*step + time.Duration(cfg.MaxNumSeqs)*prefill
	reqPerSec = n / per8.Seconds()
	return reqPerSec, reqPerSec * findOutput
}

// startFindSim runs the simulator of findSimConfig in a child process,
// with its request log, and returns its base URL and the log's path.
func startFindSim(t *testing.T) (base, requestLog string) {
	t.Helper()
	requestLog = filepath.Join(t.TempDir(), "sim-requests.jsonl")
	return startSimProcess(t, findSimConfig+"request_log: "+requestLog+"\n").base, requestLog
}

// A search on a machine too busy for the verdict to trust its stages is
// run again, at most findAttempts times while under findBudget: a search
// takes 40–60 s when its stages are trusted, and a test takes at most 2
// minutes.
const (
	findAttempts = 3
	findBudget   = 50 * time.Second
)

// untrustedStop is a context that is cancelled, and a logger that
// cancels it, when bench logs a stage its verdict does not trust: the
// search that stage is evidence for is then not judged, and need not run
// its remaining stages. (Only a shortcut: without the log line the
// search runs on and is not judged all the same.)
func untrustedStop() (context.Context, *slog.Logger, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	return ctx, slog.New(&cancelOnUntrusted{cancel: cancel}), cancel
}

type cancelOnUntrusted struct{ cancel context.CancelFunc }

func (h *cancelOnUntrusted) Enabled(context.Context, slog.Level) bool { return true }
func (h *cancelOnUntrusted) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *cancelOnUntrusted) WithGroup(string) slog.Handler            { return h }

func (h *cancelOnUntrusted) Handle(_ context.Context, r slog.Record) error {
	if r.Message == "bench stage done" {
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "trusted" && !a.Value.Bool() {
				h.cancel()
			}
			return true
		})
	}
	return nil
}

// untrustedReasons is why the search's untrusted stages were not
// trusted, "" when all were.
func untrustedReasons(rep *report.Report) string {
	var why []string
	for _, n := range rep.Find.Untrusted {
		if n >= 1 && n <= len(rep.Stages) {
			why = append(why, fmt.Sprintf("stage %d: %s", n, strings.Join(rep.Stages[n-1].Reasons, "; ")))
		}
	}
	return strings.Join(why, "; ")
}

// findConfig is the searches' configuration. The verdict is asked for
// the precision the searches need: a stage is judged on requests/s sent
// and served over seconds and on medians of TTFTs of 10 ms and more,
// which sends late by up to 200 ms (max_lag) and timestamps late by up to
// 50 ms (max_inflation) on 1% of them do not move. (The defaults, 50 ms
// and 10 ms, flagged stages beside two CPU hogs whose figures were
// right.)
func findConfig(t *testing.T, base string) *config.Config {
	t.Helper()
	cfg, err := config.Load(fmt.Appendf(nil, `
global: {warmup: 1s, request_timeout: 60s, seed: 1, saturation: {max_lag: 200ms, max_inflation: 50ms}}
workloads:
  w:
    classes:
      - {name: c, prompt_tokens: %d, output_tokens: %d, sampling: {temperature: 0.7}}
targets:
  - name: sim
    url: %s/v1
    model: sim-model
    workload: w
    arrival: {process: constant, rate: 1}
    max_inflight: 4096
    extra_body: {ignore_eos: true}
`, findPrompt, findOutput, base), "find.yml")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func logReport(t *testing.T, rep *report.Report) string {
	t.Helper()
	var sb strings.Builder
	if err := rep.WriteText(&sb); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", sb.String())
	return sb.String()
}

// TestFindCapacity: the ramp lands within 15% of the capacity the
// simulator had by its own request log, in requests/s and output
// tokens/s, on a trusted stage; the levels run at their fractions of it.
//
// Saturated, the simulator's batch holds max_num_seqs sequences and each
// takes findOutput steps, so it completes max_num_seqs / findOutput
// requests per step; a request's TPOT in the log is the mean of the steps
// it decoded in. Over the ramp's last stage (past the plateau, the batch
// full) the capacity is so max_num_seqs / findOutput / median TPOT: the
// timing model's on an idle machine (modelCapacity), lower where a busy
// machine stretched the steps. (Against the model alone the test failed
// there although the search was right.) A ramp that stopped short of
// saturation would see shorter steps there, a higher capacity than it
// found, and fail.
func TestFindCapacity(t *testing.T) {
	if testing.Short() {
		t.Skip("a ramp of stages against a simulator")
	}
	modelReq, _ := modelCapacity(t)
	base, simLog := startFindSim(t)
	cfg := findConfig(t, base)
	type found struct {
		rep      *report.Report
		requests []byte
	}
	got := simtest.RetryFor(t, findAttempts, findBudget, func(int) (found, string) {
		ctx, logger, cancel := untrustedStop()
		defer cancel()
		var buf bytes.Buffer
		log := report.NewRequestLog(&buf)
		rep, err := bench.Find(ctx, bench.Options{Config: cfg, Warmup: time.Second, Grace: 20 * time.Second, Logger: logger, Requests: log},
			bench.FindOptions{Mode: bench.FindCapacity, StartRate: 15, Factor: 1.5, MinRequests: 60,
				MinWindow: 3 * time.Second, MaxWindow: 10 * time.Second, MaxStages: 8, Levels: []float64{0.5, 0.9}})
		if err != nil {
			t.Fatal(err)
		}
		if err := log.Flush(); err != nil {
			t.Fatal(err)
		}
		return found{rep, buf.Bytes()}, untrustedReasons(rep)
	})
	rep := got.rep
	text := logReport(t, rep)
	f := rep.Find
	if f == nil || f.Capacity == nil {
		t.Fatal("no capacity in the report")
	}
	c := f.Capacity
	if !c.Found {
		t.Fatalf("capacity not found: %s", c.StopReason)
	}
	if len(f.Ramp) < 2 {
		t.Fatalf("the ramp ran %d stages, want at least 2", len(f.Ramp))
	}
	last := f.Ramp[len(f.Ramp)-1].Stage
	from, to := stageSpan(t, got.requests, last)
	tpot := medianTPOT(t, simtest.ReadLog(t, simLog), from, to)
	wantReq := float64(8) / findOutput / tpot.Seconds() // max_num_seqs: 8
	wantTok := wantReq * findOutput
	t.Logf("capacity found %.2f req/s, %.1f output tok/s (stage %d); the simulator's at stage %d: median TPOT %v, %.2f req/s, %.1f tok/s (model %.2f req/s)",
		c.RequestsPerSecond, c.OutputTokensPerSecond, c.Stage, last, tpot, wantReq, wantTok, modelReq)
	if r := c.RequestsPerSecond / wantReq; r < 0.85 || r > 1.15 {
		t.Errorf("capacity %.2f req/s is %.0f%% of the simulator's %.2f", c.RequestsPerSecond, 100*r, wantReq)
	}
	if r := c.OutputTokensPerSecond / wantTok; r < 0.85 || r > 1.15 {
		t.Errorf("capacity %.1f output tok/s is %.0f%% of the simulator's %.1f", c.OutputTokensPerSecond, 100*r, wantTok)
	}
	if c.Stage < 1 || c.Stage > len(rep.Stages) || !rep.Stages[c.Stage-1].Trusted {
		t.Errorf("capacity stage %d is not a trusted stage of the report", c.Stage)
	}
	// Levels: one stage each, at its fraction of the capacity found.
	if len(f.Levels) != 2 {
		t.Fatalf("levels: %+v, want 2", f.Levels)
	}
	for _, l := range f.Levels {
		s := rep.Stages[l.Stage-1]
		if want := l.Fraction * c.RequestsPerSecond; s.RequestedRate < want*0.999 || s.RequestedRate > want*1.001 {
			t.Errorf("level %g: stage %d requested %.2f req/s, want %.2f", l.Fraction, l.Stage, s.RequestedRate, want)
		}
	}
	if l := f.Levels[0]; rep.Stages[l.Stage-1].Served < 30 {
		t.Errorf("level 0.5 served %d requests, want the ~%.0f its window holds", rep.Stages[l.Stage-1].Served, 1.25*60)
	}
	for _, want := range []string{"find capacity:", "rule: capacity ramp", "capacity: ", "level 0.9 × capacity"} {
		if !strings.Contains(text, want) {
			t.Errorf("the text report lacks %q", want)
		}
	}
	var buf bytes.Buffer
	if err := rep.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	var back struct {
		Find struct {
			Capacity struct {
				RequestsPerSecond float64 `json:"requests_per_second"`
				Stage             int     `json:"stage"`
			} `json:"capacity"`
		} `json:"find"`
	}
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil || back.Find.Capacity.Stage != c.Stage || back.Find.Capacity.RequestsPerSecond != c.RequestsPerSecond {
		t.Errorf("JSON find.capacity = %+v (%v), want stage %d", back.Find.Capacity, err, c.Stage)
	}
}

// stageSpan is when stage's requests were sent, from bench's request
// log.
func stageSpan(t *testing.T, requests []byte, stage int) (from, to time.Time) {
	t.Helper()
	sc := bufio.NewScanner(bytes.NewReader(requests))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r report.RequestRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		if r.Stage != stage {
			continue
		}
		if from.IsZero() || r.Sent.Before(from) {
			from = r.Sent
		}
		if r.Sent.After(to) {
			to = r.Sent
		}
	}
	if from.IsZero() {
		t.Fatalf("no request of stage %d in the request log", stage)
	}
	return from, to
}

// medianTPOT is the median TPOT the simulator logged for the requests
// that arrived from from to to (and a second after: a request reaches it
// after it was sent).
func medianTPOT(t *testing.T, entries []sim.RequestLogEntry, from, to time.Time) time.Duration {
	t.Helper()
	var v []float64
	for _, e := range entries {
		at, err := time.Parse(time.RFC3339Nano, e.Arrival)
		if err != nil {
			t.Fatal(err)
		}
		if e.TPOTSeconds != nil && e.FinishReason != "" && !at.Before(from.Add(-time.Millisecond)) && !at.After(to.Add(time.Second)) {
			v = append(v, *e.TPOTSeconds)
		}
	}
	if len(v) < 20 {
		t.Fatalf("the simulator logged %d finished requests arriving %v–%v, want the stage's", len(v), from, to)
	}
	slices.Sort(v)
	return simtest.Seconds(v[len(v)/2])
}

// TestFindSLO: from the given capacity, the search returns a rate whose
// stage is trusted, holds at least 100 samples per quantile and meets the
// SLO, and the stage just above it does not meet it. TPOT grows with the
// running batch (decode_per_seq), so its bound is crossed below capacity.
func TestFindSLO(t *testing.T) {
	if testing.Short() {
		t.Skip("a search of stages against a simulator")
	}
	capacity, _ := modelCapacity(t)
	base, _ := startFindSim(t)
	cfg := findConfig(t, base)
	spec, err := slo.ParseSpec("tpot_p99=10ms,ttft_p99=1s")
	if err != nil {
		t.Fatal(err)
	}
	const precision = 0.1
	// The search is judged when its bracket rests on trusted stages: the
	// met one must be, and an untrusted one was taken as "not met" and
	// stepped down from.
	rep := simtest.RetryFor(t, findAttempts, findBudget, func(int) (*report.Report, string) {
		ctx, logger, cancel := untrustedStop()
		defer cancel()
		rep, err := bench.Find(ctx, bench.Options{Config: cfg, Warmup: time.Second, Grace: 20 * time.Second, SLO: spec, Logger: logger},
			bench.FindOptions{Mode: bench.FindSLO, Capacity: capacity, MinRequests: 100, MinWindow: 2 * time.Second,
				MaxWindow: 10 * time.Second, MaxStages: 10, Precision: precision})
		if err != nil {
			t.Fatal(err)
		}
		return rep, untrustedReasons(rep)
	})
	text := logReport(t, rep)
	r := rep.Find.SLO
	if r == nil || !r.Found || r.Met == nil || r.Above == nil {
		t.Fatalf("SLO search: %+v", r)
	}
	t.Logf("SLO met up to %.2f req/s achieved (stage %d), not at %.2f (stage %d); model capacity %.2f", r.Rate, r.Met.Stage, r.Above.AchievedRate, r.Above.Stage, capacity)
	if r.MinSamples != 100 {
		t.Errorf("min samples %d, want 100 for a p99", r.MinSamples)
	}
	met := rep.Stages[r.Met.Stage-1]
	if !met.Trusted || met.SLO == nil || !met.SLO.Met || met.RequestedRate != r.RequestedRate || met.AchievedRate != r.Rate {
		t.Errorf("stage %d at %.2f req/s: trusted %v, SLO %+v", met.Stage, met.RequestedRate, met.Trusted, met.SLO)
	}
	for _, q := range met.SLO.Quantiles {
		if q.Count < 100 {
			t.Errorf("stage %d: %s rests on %d samples, want ≥ 100", met.Stage, q.Bound, q.Count)
		}
	}
	above := rep.Stages[r.Above.Stage-1]
	if r.Above.Met || r.Above.Why == "" || (r.Above.Why == "SLO not met" && above.SLO.Met) {
		t.Errorf("stage %d above (%.2f req/s) is evidence the SLO holds: %+v", above.Stage, above.RequestedRate, r.Above)
	}
	if !above.Trusted || !r.Above.NotMet {
		t.Errorf("stage %d above is not evidence the SLO fails: trusted %v, %+v", above.Stage, above.Trusted, r.Above)
	}
	if !(r.Above.AchievedRate > r.Rate) || r.Above.AchievedRate/r.Rate-1 > precision+1e-9 {
		t.Errorf("bracket %.2f–%.2f req/s achieved is not within %.0f%%", r.Rate, r.Above.AchievedRate, 100*precision)
	}
	if r.Rate > 1.15*capacity {
		t.Errorf("SLO rate %.2f req/s is above the capacity %.2f", r.Rate, capacity)
	}
	if !strings.Contains(text, "SLO: met up to") {
		t.Error("the text report lacks the SLO outcome")
	}
}

// TestFindArguments: a search against other than one target, and levels
// without a capacity, are refused before any stage runs.
func TestFindArguments(t *testing.T) {
	cfg := findConfig(t, "http://127.0.0.1:1")
	two := *cfg
	t2 := *cfg.Targets[0]
	t2.Name = "other"
	two.Targets = append([]*config.Target{cfg.Targets[0]}, &t2)
	if _, err := bench.Find(context.Background(), bench.Options{Config: &two}, bench.FindOptions{Mode: bench.FindCapacity}); err != bench.ErrFindTargets {
		t.Errorf("two targets: %v, want ErrFindTargets", err)
	}
	if _, err := bench.Find(context.Background(), bench.Options{Config: cfg}, bench.FindOptions{Levels: []float64{0.5}}); err == nil {
		t.Error("levels without a capacity: no error")
	}
	if _, err := bench.Find(context.Background(), bench.Options{Config: cfg}, bench.FindOptions{Mode: "fastest"}); err == nil {
		t.Error("an unknown mode: no error")
	}
}
