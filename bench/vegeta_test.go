// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package bench_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/common/model"

	"github.com/llmprobe/llmprobe/bench"
	"github.com/llmprobe/llmprobe/internal/promtest"
)

// BenchmarkHarnessVsVegeta drives the same zero-latency simulator (a child
// process) with the same request — a 64-token chat prompt, 16 streamed
// tokens — at the same rates, alternating llmprobe and vegeta
// (github.com/tsenart/vegeta, installed by `make tools`), and prints each
// tool's achieved rate, E2E p99 and CPU per request, llmprobe's schedule-lag
// p99 and the ratio of their CPU per request. vegeta only reads bytes;
// llmprobe parses and times every event, so the comparison is of what an
// honest measurement costs. Goals (issue 9): llmprobe holds at least the
// rate vegeta does; CPU per request ≤ 0.8× vegeta's; lag p99 ≤ 1 ms at
// 2,000 req/s. Figures only: nothing here asserts a time.
func BenchmarkHarnessVsVegeta(b *testing.B) {
	if testing.Short() {
		b.Skip("minutes-long load run")
	}
	vegeta := promtest.RequireTool(b, "vegeta")
	p := startSimProcess(b)
	cfg := benchConfig(b, p.base, 64, 16)
	cfg.Global.Saturation.MaxLag = model.Duration(time.Millisecond)

	dir := b.TempDir()
	body := filepath.Join(dir, "body.json")
	prompt := strings.TrimSpace(strings.Repeat("probe ", 60)) // the simulator counts a token per word, plus its template
	req, _ := json.Marshal(map[string]any{
		"model": "sim-model", "messages": []map[string]string{{"role": "user", "content": prompt}},
		"max_tokens": 16, "stream": true, "stream_options": map[string]bool{"include_usage": true},
		"temperature": 0.7, "ignore_eos": true,
	})
	if err := os.WriteFile(body, req, 0o600); err != nil {
		b.Fatal(err)
	}
	targets := filepath.Join(dir, "targets.txt")
	if err := os.WriteFile(targets, []byte(fmt.Sprintf("POST %s/v1/chat/completions\nContent-Type: application/json\nAccept: text/event-stream\n@%s\n", p.base, body)), 0o600); err != nil {
		b.Fatal(err)
	}

	const runFor = 10 * time.Second
	var rows []sideBySide
	for range b.N {
		for _, rate := range []float64{1000, 2000, 3000} {
			for round := range 2 {
				order := []string{"vegeta", "llmprobe"}
				if round == 1 {
					order = []string{"llmprobe", "vegeta"}
				}
				for _, tool := range order {
					var r sideBySide
					switch tool {
					case "vegeta":
						r = runVegeta(b, vegeta, dir, targets, rate, runFor)
					default:
						rep, err := bench.Run(context.Background(), bench.Options{
							Config: cfg, Stages: []bench.Stage{{Rate: rate, Duration: runFor}}, Warmup: -1,
							Grace: 10 * time.Second, Logger: slog.New(slog.DiscardHandler),
						})
						if err != nil {
							b.Fatal(err)
						}
						s := rep.Stages[0]
						errs := 0
						for o, n := range s.Outcomes {
							if o != "success" {
								errs += n
							}
						}
						r = sideBySide{tool: "llmprobe", achieved: s.AchievedRate, e2eP99: s.E2E.P99, cpuPerReq: s.ClientCPUPer1000 / 1000,
							lagP99: s.Lag.P99, errs: float64(errs)}
					}
					r.rate = rate
					rows = append(rows, r)
				}
			}
		}
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "%-8s %8s %10s %10s %12s %10s %6s\n", "tool", "rate/s", "achieved/s", "E2E p99", "CPU µs/req", "lag p99", "errors")
	for _, r := range rows {
		lag := "-"
		if r.tool == "llmprobe" {
			lag = fmt.Sprintf("%.2fms", r.lagP99*1e3)
		}
		fmt.Fprintf(&sb, "%-8s %8.0f %10.1f %9.2fms %12.1f %10s %6.0f\n", r.tool, r.rate, r.achieved, r.e2eP99*1e3, r.cpuPerReq*1e6, lag, r.errs)
	}
	// Ratios from the runs side by side: the mean of each tool's rounds.
	for _, rate := range []float64{1000, 2000, 3000} {
		var lp, vg float64
		for _, r := range rows {
			switch {
			case r.rate != rate:
			case r.tool == "llmprobe":
				lp += r.cpuPerReq
			default:
				vg += r.cpuPerReq
			}
		}
		if vg > 0 {
			fmt.Fprintf(&sb, "at %.0f req/s: llmprobe CPU per request = %.2f × vegeta's (goal ≤ 0.8)\n", rate, lp/vg)
		}
	}
	figures(b, "GOMAXPROCS=%d NumCPU=%d, %v per run, zero-latency simulator in its own process\n%s", runtime.GOMAXPROCS(0), runtime.NumCPU(), runFor, sb.String())
}

// sideBySide is one run of one tool.
type sideBySide struct {
	tool                    string
	rate, achieved, e2eP99  float64 // req/s, req/s, seconds
	cpuPerReq, lagP99, errs float64 // seconds, seconds, count
}

// runVegeta runs one `vegeta attack` and reads its report; CPU is the
// attack process' own (rusage).
func runVegeta(b *testing.B, vegeta, dir, targets string, rate float64, d time.Duration) (r sideBySide) {
	b.Helper()
	results := filepath.Join(dir, "results.bin")
	attack := exec.Command(vegeta, "attack", "-rate", fmt.Sprintf("%.0f/s", rate), "-duration", d.String(),
		"-targets", targets, "-timeout", "10s", "-keepalive", "-http2=false", "-output", results)
	attack.Stderr = os.Stderr
	if err := attack.Run(); err != nil {
		b.Fatalf("vegeta attack: %v", err)
	}
	var cpu time.Duration
	if ru, ok := attack.ProcessState.SysUsage().(*syscall.Rusage); ok {
		cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	out, err := exec.Command(vegeta, "report", "-type", "json", results).Output()
	if err != nil {
		b.Fatalf("vegeta report: %v", err)
	}
	var rep struct {
		Requests   float64 `json:"requests"`
		Rate       float64 `json:"rate"`
		Throughput float64 `json:"throughput"`
		Success    float64 `json:"success"`
		Latencies  struct {
			P99 float64 `json:"99th"`
		} `json:"latencies"`
	}
	if err := json.Unmarshal(out, &rep); err != nil {
		b.Fatalf("vegeta report: %v\n%s", err, out)
	}
	r.tool = "vegeta"
	r.achieved = rep.Rate
	r.e2eP99 = rep.Latencies.P99 / 1e9
	if rep.Requests > 0 {
		r.cpuPerReq = cpu.Seconds() / rep.Requests
	}
	r.errs = rep.Requests * (1 - rep.Success)
	return r
}
