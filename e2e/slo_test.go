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

	"github.com/llmprobe/llmprobe/internal/simtest"
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

	lat := simtest.WatchLateness(t)
	time.Sleep(12 * time.Second) // the step comes ~6 s into the daemon's run
	scrapeStart := time.Now()
	e, _ := scrape(t, base)
	scraped := time.Now()
	time.Sleep(300 * time.Millisecond) // the request log flushes every 100 ms
	// A request the server ended before the scrape began reached the
	// daemon's counters at most this much later: a loopback hop and the
	// daemon's goroutine waking, each delayed by what delays this
	// process' goroutines (a margin of 250 ms and three times that).
	delay := 250*time.Millisecond + 3*lat.Max()

	// The server's truth: requests it had ended before the scrape (all
	// of which the daemon may have counted), and those it had ended
	// delay before it began (all of which the daemon must have counted).
	// A fixed instant compared with counts the daemon takes when each
	// response reaches it failed on a busy machine, by the requests that
	// ended in between.
	var truth, sure struct{ good, bad, ttft, tpot, e2e, errors, slow int }
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
		end := l.Arrival.Add(time.Duration(l.E2E * float64(time.Second)))
		if end.After(scraped) {
			continue
		}
		for _, tr := range []*struct{ good, bad, ttft, tpot, e2e, errors, slow int }{&truth, &sure} {
			if tr == &sure && end.After(scrapeStart.Add(-delay)) {
				continue
			}
			if l.Status != 200 || l.FinishReason == "" || l.TTFT == nil {
				tr.bad++
				tr.errors++
				continue
			}
			brokeTTFT := *l.TTFT > ttftBound
			brokeTPOT := l.CompletionTokens >= 2 && l.TPOT != nil && *l.TPOT > tpotBound
			if *l.TTFT > 0.2 {
				tr.slow++
			}
			switch {
			case brokeTTFT || brokeTPOT:
				tr.bad++
				if brokeTTFT {
					tr.ttft++
				}
				if brokeTPOT {
					tr.tpot++
				}
			default:
				tr.good++
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	t.Logf("server truth before the scrape: %+v; before it by %v: %+v", truth, delay, sure)
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
	// Within the two counts, give or take one request that straddles
	// the step near a bound.
	for _, c := range []struct {
		what             string
		got, least, most int
	}{
		{"good", got("llmprobe_slo_requests_total", "result", "good"), sure.good, truth.good},
		{"bad", got("llmprobe_slo_requests_total", "result", "bad"), sure.bad, truth.bad},
		{"ttft violations", got("llmprobe_slo_violations_total", "bound", "ttft"), sure.ttft, truth.ttft},
		{"tpot violations", got("llmprobe_slo_violations_total", "bound", "tpot"), sure.tpot, truth.tpot},
		{"error violations", got("llmprobe_slo_violations_total", "bound", "error"), sure.errors, truth.errors},
		{"e2e violations (no e2e bound)", got("llmprobe_slo_violations_total", "bound", "e2e"), 0, 0},
	} {
		if c.got < c.least-1 || c.got > c.most+1 {
			t.Errorf("%s: the daemon counted %d, the server's timing says %d to %d", c.what, c.got, c.least, c.most)
		}
	}
	if obj, _ := e.sum("llmprobe_slo_objective_ratio", map[string]string{"target": "t", "class": "c"}); obj != 0.99 {
		t.Errorf("llmprobe_slo_objective_ratio = %v, want 0.99", obj)
	}
	if page := get(t, base+"/"); !strings.Contains(page, "99% of requests with TTFT ≤ 120ms, TPOT ≤ 100ms") {
		t.Errorf("the status page does not show the SLO")
	}
}
