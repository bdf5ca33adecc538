// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package bench_test

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/common/model"

	"github.com/llmprobe/llmprobe/bench"
	"github.com/llmprobe/llmprobe/config"
	"github.com/llmprobe/llmprobe/probe"
	"github.com/llmprobe/llmprobe/sim"
)

// The benchmarks here drive the real engine against the simulator running
// in a separate process (the test binary re-executed), so the two share
// the machine's cores as they would in production, and each process' CPU
// is measured on its own.

const (
	simChildEnv  = "LLMPROBE_BENCH_SIM_CHILD"
	simConfigEnv = "LLMPROBE_BENCH_SIM_CONFIG"
)

func TestMain(m *testing.M) {
	if os.Getenv(simChildEnv) != "" {
		os.Exit(simChild())
	}
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(probe.GCPercent) // as the llmprobe binary runs
	}
	os.Exit(m.Run())
}

// simChild serves a simulator until stdin closes or SIGTERM: the one in
// the file simConfigEnv names, else a zero-latency one sized so it never
// queues.
func simChild() int {
	cfg := sim.DefaultConfig()
	cfg.ZeroLatency = true
	cfg.MaxNumSeqs = 4096
	cfg.MaxNumBatchedTokens = 1 << 20
	cfg.NumKVBlocks = 1 << 20
	if f := os.Getenv(simConfigEnv); f != "" {
		var err error
		if cfg, err = sim.LoadConfigFile(f); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	srv, base, err := sim.Listen("127.0.0.1:0", cfg, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(base)
	done := make(chan struct{})
	go func() {
		_, _ = bufio.NewReader(os.Stdin).ReadString('\n') // EOF when the parent exits
		close(done)
	}()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	select {
	case <-done:
	case <-sig:
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = srv.Shutdown(ctx)
	return 0
}

type simProcess struct {
	cmd  *exec.Cmd
	base string
}

// startSimProcess runs the simulator in a child process; simConfig, when
// not empty, is the YAML of its configuration.
func startSimProcess(b testing.TB, simConfig ...string) *simProcess {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$", "-test.bench=^$")
	cmd.Env = append(os.Environ(), simChildEnv+"=1")
	if len(simConfig) > 0 {
		f := filepath.Join(b.TempDir(), "sim.yml")
		if err := os.WriteFile(f, []byte(simConfig[0]), 0o600); err != nil {
			b.Fatal(err)
		}
		cmd.Env = append(cmd.Env, simConfigEnv+"="+f)
	}
	if g := os.Getenv("LLMPROBE_BENCH_SIM_GOMAXPROCS"); g != "" {
		cmd.Env = append(cmd.Env, "GOMAXPROCS="+g)
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		stdin.Close()
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		b.Fatalf("simulator child: %v", err)
	}
	return &simProcess{cmd: cmd, base: strings.TrimSpace(line)}
}

// cpu returns the child's user+system CPU time from /proc/PID/stat.
func (p *simProcess) cpu() time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	s := string(data)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	utime, _ := strconv.ParseFloat(fields[11], 64)
	stime, _ := strconv.ParseFloat(fields[12], 64)
	const clkTck = 100 // USER_HZ on Linux
	return time.Duration((utime + stime) / clkTck * float64(time.Second))
}

var capacityDuration = flag.Duration("capacity.duration", 30*time.Second, "how long BenchmarkHarnessCapacity holds the 3,000 req/s stage")

// figures prints a benchmark's figures to standard output: b.Log keeps
// only the first ten lines of a benchmark's output, and a table is longer.
func figures(b *testing.B, format string, args ...any) {
	b.Helper()
	fmt.Printf("--- %s figures:\n%s\n", b.Name(), strings.TrimRight(fmt.Sprintf(format, args...), "\n"))
}

func benchConfig(b *testing.B, base string, prompt, output int) *config.Config {
	b.Helper()
	cfg, err := config.Load([]byte(fmt.Sprintf(`
global: {warmup: 2s, request_timeout: 10s, seed: 1}
workloads:
  w:
    classes:
      - {name: c, prompt_tokens: %d, output_tokens: %d, sampling: {temperature: 0.7}}
targets:
  - name: sim
    url: %s/v1
    model: sim-model
    workload: w
    arrival: {process: poisson, rate: 1}
    max_inflight: 2048
    extra_body: {ignore_eos: true}
`, prompt, output, base)), "bench.yml")
	if err != nil {
		b.Fatal(err)
	}
	return cfg
}

// BenchmarkHarnessCapacity measures how much open-loop load one process
// delivers against a zero-latency simulator streaming 16 tokens, both on
// this machine: achieved rate, schedule lag, client CPU per 1,000
// requests, and the highest rate held with achieved/requested ≥ 99% and
// lag p99 ≤ 2 ms.
func BenchmarkHarnessCapacity(b *testing.B) {
	if testing.Short() {
		b.Skip("minutes-long load run")
	}
	p := startSimProcess(b)
	cfg := benchConfig(b, p.base, 16, 16)
	cfg.Global.Saturation.MaxLag = model.Duration(2 * time.Millisecond) // the goal this benchmark checks
	cfg.Global.Saturation.MaxShortfall = 0.01
	stages := []bench.Stage{
		{Rate: 1000, Duration: 10 * time.Second},
		{Rate: 2000, Duration: 10 * time.Second},
		{Rate: 3000, Duration: *capacityDuration},
		{Rate: 4000, Duration: 10 * time.Second},
		{Rate: 5000, Duration: 10 * time.Second},
		{Rate: 6000, Duration: 10 * time.Second},
	}
	for range b.N {
		cpu0 := p.cpu()
		rep, err := bench.Run(context.Background(), bench.Options{
			Config: cfg, Stages: stages, Warmup: -1, Grace: 10 * time.Second,
			Logger: slog.New(slog.DiscardHandler), StopWhenSaturated: true,
		})
		if err != nil {
			b.Fatal(err)
		}
		simCPU := p.cpu() - cpu0
		var sb strings.Builder
		_ = rep.WriteText(&sb)
		figures(b, "GOMAXPROCS=%d NumCPU=%d\n%s", runtime.GOMAXPROCS(0), runtime.NumCPU(), sb.String())
		held, sent := 0.0, 0
		for _, s := range rep.Stages {
			sent += s.Sent
			ok := s.Trusted && s.Shortfall() == "" && s.Lag.P99 <= 0.002
			figures(b, "stage %d: requested %.0f/s achieved %.1f/s (%.2f%%) lag p50 %.3fms p99 %.3fms client CPU %.3fs/1k requests ok=%v",
				s.Stage, s.RequestedRate, s.AchievedRate, 100*s.AchievedRate/s.RequestedRate, s.Lag.P50*1e3, s.Lag.P99*1e3, s.ClientCPUPer1000, ok)
			if ok && s.RequestedRate > held {
				held = s.RequestedRate
			}
		}
		figures(b, "highest rate held: %.0f req/s; simulator CPU %.3fs/1k requests", held, simCPU.Seconds()/float64(sent)*1000)
		b.ReportMetric(held, "held_req/s")
	}
}
