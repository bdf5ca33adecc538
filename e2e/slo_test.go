// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSLOCountersMatchServerTruth runs the daemon against a simulator that
// becomes 15× slower at a known instant and answers 15% of the requests
// with a 500, and checks the daemon's SLO counters against the simulator's
// own per-request timing (its request log): as many good requests as the
// server saw meet TTFT ≤ 120ms and TPOT ≤ 100ms, as many bad ones as broke
// each bound or failed. Before the step a first token takes ~20 ms, after
// it ~300 ms, so no request sits near a bound but the few that straddle
// the step; the counts may differ by the requests that ended within a
// millisecond of the scrape.
func TestSLOCountersMatchServerTruth(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a simulator and the daemon for 14 s")
	}
	dir := t.TempDir()
	logFile := filepath.Join(dir, "requests.jsonl")
	simCfg := filepath.Join(dir, "sim.yml")
	writeFileAtomic(t, simCfg, fmt.Sprintf(`
request_log: %s
timing_steps: [{after: 7s, factor: 15}]
faults: {http_500: {probability: 0.15}}
`, logFile))
	_, simURL := startSim(t, "--sim.config.file="+simCfg)
	cfg := filepath.Join(dir, "llmprobe.yml")
	const ttftBound, tpotBound = 0.120, 0.100
	writeFileAtomic(t, cfg, fmt.Sprintf(`
global: {warmup: 0s, request_timeout: 20s}
workloads:
  w: {classes: [{name: c, prompt_tokens: 64, output_tokens: 6}]}
targets:
  - name: t
    url: %s/v1
    model: %s
    workload: w
    tokenize: "off"
    arrival: {process: constant, rate: 5}
    extra_body: {ignore_eos: true}
    slo: {objective: 0.99, ttft: 120ms, tpot: 100ms}
`, simURL, simModel))
	_, base := startDaemon(t, cfg)

	time.Sleep(12 * time.Second) // the step comes ~6 s into the daemon's run
	e, _ := scrape(t, base)
	scraped := time.Now()
	time.Sleep(300 * time.Millisecond) // the request log flushes every 100 ms

	// The server's truth: requests it had ended before the scrape.
	var truth struct{ good, bad, ttft, tpot, e2e, errors, slow int }
	f, err := os.Open(logFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var l struct {
			Arrival          time.Time `json:"arrival"`
			TTFT             *float64  `json:"ttft_seconds"`
			TPOT             *float64  `json:"tpot_seconds"`
			E2E              float64   `json:"e2e_seconds"`
			CompletionTokens int       `json:"completion_tokens"`
			FinishReason     string    `json:"finish_reason"`
			Status           int       `json:"status"`
		}
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("request log line %q: %v", sc.Text(), err)
		}
		if l.Arrival.Add(time.Duration(l.E2E * float64(time.Second))).After(scraped) {
			continue
		}
		if l.Status != 200 || l.FinishReason == "" || l.TTFT == nil {
			truth.bad++
			truth.errors++
			continue
		}
		brokeTTFT := *l.TTFT > ttftBound
		brokeTPOT := l.CompletionTokens >= 2 && l.TPOT != nil && *l.TPOT > tpotBound
		if *l.TTFT > 0.2 {
			truth.slow++
		}
		switch {
		case brokeTTFT || brokeTPOT:
			truth.bad++
			if brokeTTFT {
				truth.ttft++
			}
			if brokeTPOT {
				truth.tpot++
			}
		default:
			truth.good++
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	t.Logf("server truth before the scrape: %+v", truth)
	if truth.good < 15 || truth.slow < 5 || truth.errors < 1 {
		t.Fatalf("the run did not show both sides of the step and a failure: %+v", truth)
	}

	got := func(name, label, v string) int {
		n, found := e.sum(name, map[string]string{"target": "t", "class": "c", label: v})
		if !found {
			t.Fatalf("%s{%s=%q} missing", name, label, v)
		}
		return int(n)
	}
	for _, c := range []struct {
		what      string
		got, want int
	}{
		{"good", got("llmprobe_slo_requests_total", "result", "good"), truth.good},
		{"bad", got("llmprobe_slo_requests_total", "result", "bad"), truth.bad},
		{"ttft violations", got("llmprobe_slo_violations_total", "bound", "ttft"), truth.ttft},
		{"tpot violations", got("llmprobe_slo_violations_total", "bound", "tpot"), truth.tpot},
		{"error violations", got("llmprobe_slo_violations_total", "bound", "error"), truth.errors},
		{"e2e violations (no e2e bound)", got("llmprobe_slo_violations_total", "bound", "e2e"), 0},
	} {
		if d := c.got - c.want; d < -1 || d > 1 {
			t.Errorf("%s: the daemon counted %d, the server's timing says %d", c.what, c.got, c.want)
		}
	}
	if obj, _ := e.sum("llmprobe_slo_objective_ratio", map[string]string{"target": "t", "class": "c"}); obj != 0.99 {
		t.Errorf("llmprobe_slo_objective_ratio = %v, want 0.99", obj)
	}
	if page := get(t, base+"/"); !strings.Contains(page, "99% of requests with TTFT ≤ 120ms, TPOT ≤ 100ms") {
		t.Errorf("the status page does not show the SLO")
	}
}
