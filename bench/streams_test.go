// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package bench_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/llmprobe/llmprobe/bench"
	"github.com/llmprobe/llmprobe/config"
	"github.com/llmprobe/llmprobe/probe"
)

// BenchmarkLongStreams holds N concurrent long streams against the
// simulator (in its own process, so only the client is measured) and
// prints, per HTTP version side by side: the client's RSS above the idle
// process, its live heap, stacks and goroutines, each per stream, and the
// ITL p50 against the simulator's decode step (and the simulator's own
// mean ITL over the same requests) with the stage's verdict (issue 25).
// Each run is a child process of its own. The streams arrive at a
// constant rate over a ramp and last longer than it, so at the sample
// (just after the ramp) all N are open and none has ended. The client runs
// at the daemon's GOGC (probe.GCPercent), so RSS is what the daemon would
// hold.
//
// Environment: LLMPROBE_STREAMS (default 1000), LLMPROBE_STREAM_STEP (the
// simulator's decode step, default 50ms), LLMPROBE_STREAMS_PROFILE (a
// directory: heap and goroutine profiles at the sample, per version),
// LLMPROBE_STREAMS_STARVE=1 (another run per version with CPU-burning
// goroutines in the client: its timestamps are inflated and the verdict
// must say so). Figures only.
func BenchmarkLongStreams(b *testing.B) {
	if testing.Short() {
		b.Skip("load run")
	}
	n := envInt(b, "LLMPROBE_STREAMS", 1000)
	step := 50 * time.Millisecond
	if s := os.Getenv("LLMPROBE_STREAM_STEP"); s != "" {
		var err error
		if step, err = time.ParseDuration(s); err != nil {
			b.Fatal(err)
		}
	}
	if os.Getenv("LLMPROBE_STREAMS_PROFILE") != "" {
		defer func(r int) { runtime.MemProfileRate = r }(runtime.MemProfileRate)
		runtime.MemProfileRate = 4096 // finer than the default 512 KiB: per-stream sites of a few hundred bytes show
	}
	raiseFileLimit(b, n+1024) // a socket per stream in each process; before the simulator starts: it inherits the limit
	if spec := os.Getenv(streamsChildEnv); spec != "" {
		var r streamRun
		if err := json.Unmarshal([]byte(spec), &r); err != nil {
			b.Fatal(err)
		}
		debug.SetGCPercent(probe.GCPercent)
		row, _ := json.Marshal(runLongStreams(b, r))
		fmt.Printf("streamrow: %s\n", row)
		return
	}
	// The ramp: at most 400 arrivals a second (the simulator's admission
	// is not free), at least 10 s.
	ramp := max(10*time.Second, time.Duration(float64(n)/400*float64(time.Second)))
	hold := 8 * time.Second
	tokens := int((ramp + hold) / step)
	p := startSimProcess(b, fmt.Sprintf(`
max_num_seqs: %d
max_num_batched_tokens: %d
num_kv_blocks: %d
max_model_len: %d
prefill_base: 1ms
prefill_per_token: 0s
decode_base: %v
decode_per_seq: 0s
enable_prefix_caching: false
`, min(2*n, 1<<16), 1<<20, 1<<24, tokens+1024, step))
	versions := []string{config.HTTPVersion11, config.HTTPVersion2}
	modes := []bool{false}
	if os.Getenv("LLMPROBE_STREAMS_STARVE") == "1" {
		modes = append(modes, true)
	}
	var rows []streamRow
	for range b.N {
		for _, starve := range modes {
			for _, v := range versions {
				rows = append(rows, runStreamsChild(b, streamRun{Base: p.base, Version: v, N: n, Tokens: tokens, Ramp: ramp, Step: step, Starve: starve}))
			}
		}
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "%d streams of %d tokens, decode step %v, ramp %v; GOMAXPROCS=%d NumCPU=%d; each run and the simulator in a process of its own\n",
		n, tokens, step, ramp, runtime.GOMAXPROCS(0), runtime.NumCPU())
	fmt.Fprintf(&sb, "%-10s %6s %6s %9s %10s %9s %9s %9s %9s %10s %10s %10s  %s\n", "http", "open", "conns", "idle RSS", "RSS", "RSS/str", "heap/str", "stack/str", "gor/str", "ITL p50", "vs step", "sim mean", "verdict")
	for _, r := range rows {
		name := r.Version
		if r.Starved {
			name += " starved"
		}
		verdict := "trusted"
		if !r.Trusted {
			verdict = "NOT TRUSTED: " + strings.Join(r.Reasons, "; ")
		}
		fmt.Fprintf(&sb, "%-10s %6d %6d %8.1fM %9.1fM %8.1fK %8.1fK %8.1fK %9.2f %8.2fms %+9.2f%% %8.2fms  %s\n",
			name, r.Open, r.Sockets-r.IdleSockets, mib(r.IdleRSS), mib(r.RSS), kib(r.RSS-r.IdleRSS)/float64(r.Open),
			kib(r.Heap-r.IdleHeap)/float64(r.Open), kib(r.Stacks-r.IdleStacks)/float64(r.Open),
			float64(r.Goroutines-r.IdleGoroutines)/float64(r.Open),
			r.ITLP50*1e3, 100*(r.ITLP50/step.Seconds()-1), r.SimITLMean*1e3, verdict)
	}
	for _, r := range rows {
		fmt.Fprintf(&sb, "idle before http %s: RSS %.1f MiB, live heap %.1f MiB, stacks %.0f KiB, %d goroutines, %d sockets\n",
			r.Version, mib(r.IdleRSS), mib(r.IdleHeap), kib(r.IdleStacks), r.IdleGoroutines, r.IdleSockets)
	}
	figures(b, "%s", sb.String())
	for _, r := range rows {
		if !r.Starved {
			b.ReportMetric(kib(r.RSS-r.IdleRSS)/float64(r.Open), "RSS_KiB/stream@http"+r.Version)
			b.ReportMetric(float64(r.Goroutines-r.IdleGoroutines)/float64(r.Open), "goroutines/stream@http"+r.Version)
		}
	}
}

// streamRow is one run of BenchmarkLongStreams.
type streamRow struct {
	Version                    string
	Starved                    bool
	Open                       int // streams open at the sample (the simulator's running requests)
	IdleRSS, RSS               uint64
	IdleHeap, Heap             uint64 // live heap objects (after a GC)
	IdleStacks, Stacks         uint64
	IdleGoroutines, Goroutines int
	IdleSockets, Sockets       int
	ITLP50                     float64
	SimITLMean                 float64 // the simulator's own mean ITL over the run's requests
	Trusted                    bool
	Reasons                    []string
}

// streamsChildEnv carries a streamRun to a child process that runs it
// alone: each run is measured in a fresh process, so that none starts
// with the pages an earlier one left resident.
const streamsChildEnv = "LLMPROBE_BENCH_STREAMS_CHILD"

type streamRun struct {
	Base, Version string
	N, Tokens     int
	Ramp, Step    time.Duration
	Starve        bool
}

// runStreamsChild runs r in a child process and returns its row.
func runStreamsChild(b *testing.B, r streamRun) streamRow {
	b.Helper()
	spec, _ := json.Marshal(r)
	cmd := exec.Command(os.Args[0], "-test.run=^$", "-test.bench=^BenchmarkLongStreams$", "-test.benchtime=1x")
	cmd.Env = append(os.Environ(), streamsChildEnv+"="+string(spec))
	cmd.Stderr = os.Stderr
	before := simHistogram(b, r.Base, "vllm:inter_token_latency_seconds")
	out, err := cmd.Output()
	after := simHistogram(b, r.Base, "vllm:inter_token_latency_seconds")
	if err != nil {
		b.Fatalf("streams child (http %s): %v\n%s", r.Version, err, out)
	}
	for line := range strings.Lines(string(out)) {
		if rest, ok := strings.CutPrefix(line, "streamrow: "); ok {
			var row streamRow
			if err := json.Unmarshal([]byte(rest), &row); err != nil {
				b.Fatal(err)
			}
			if n := after.count - before.count; n > 0 {
				row.SimITLMean = (after.sum - before.sum) / n
			}
			return row
		}
	}
	b.Fatalf("streams child (http %s) printed no row:\n%s", r.Version, out)
	return streamRow{}
}

func runLongStreams(b *testing.B, run streamRun) streamRow {
	b.Helper()
	version, n, tokens, ramp, step, starve := run.Version, run.N, run.Tokens, run.Ramp, run.Step, run.Starve
	cfg, err := config.Load([]byte(fmt.Sprintf(`
global: {warmup: 0s, request_timeout: 10m, seed: 1}
workloads:
  w:
    classes:
      - {name: c, prompt_tokens: 16, output_tokens: %d, sampling: {temperature: 0.7}}
targets:
  - name: sim
    url: %s/v1
    model: sim-model
    workload: w
    arrival: {process: constant, rate: 1}
    max_inflight: %d
    http_version: %q
    extra_body: {ignore_eos: true}
`, tokens, run.Base, 2*n, version)), "streams.yml")
	if err != nil {
		b.Fatal(err)
	}
	row := streamRow{Version: version, Starved: starve}
	runtime.GC()
	debug.FreeOSMemory()
	row.IdleRSS, row.IdleHeap, row.IdleStacks, row.IdleGoroutines = selfRSS(b), liveHeap(), stackBytes(), runtime.NumGoroutine()
	row.IdleSockets = sockets()

	stop := make(chan struct{})
	var wg sync.WaitGroup
	if starve {
		for range 2 * runtime.GOMAXPROCS(0) {
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
						for i := 0; i < 1e5; i++ {
							_ = i * i
						}
					}
				}
			})
		}
	}
	wg.Go(func() {
		select {
		case <-stop:
			return
		case <-time.After(ramp + 2*time.Second):
		}
		row.Open = int(simGauge(b, run.Base, "vllm:num_requests_running"))
		row.RSS, row.Goroutines = selfRSS(b), runtime.NumGoroutine()
		row.Sockets = sockets()
		row.Stacks = stackBytes()
		runtime.GC()
		row.Heap = liveHeap()
		if dir := os.Getenv("LLMPROBE_STREAMS_PROFILE"); dir != "" && !starve {
			writeProfile(b, filepath.Join(dir, "heap-http"+version+".pb.gz"), "heap")
			writeProfile(b, filepath.Join(dir, "goroutine-http"+version+".txt"), "goroutine")
		}
	})
	rep, err := bench.Run(context.Background(), bench.Options{
		Config: cfg, Stages: []bench.Stage{{Rate: float64(n) / ramp.Seconds(), Duration: ramp}}, Warmup: -1,
		Grace: time.Duration(tokens)*step + time.Minute, Logger: slog.New(slog.DiscardHandler),
	})
	close(stop)
	wg.Wait()
	if err != nil {
		b.Fatal(err)
	}
	if row.Open == 0 {
		b.Fatal("no stream was open at the sample")
	}
	s := rep.Stages[0]
	row.ITLP50, row.Trusted, row.Reasons = s.ITL.P50, s.Trusted, s.Reasons
	for o, c := range s.Outcomes {
		if o != "success" {
			row.Reasons = append(row.Reasons, fmt.Sprintf("%d %s", c, o))
			row.Trusted = false
		}
	}
	return row
}

func envInt(b *testing.B, name string, def int) int {
	b.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	v, err := strconv.Atoi(s)
	if err != nil || v <= 0 {
		b.Fatalf("%s=%q: want a positive integer", name, s)
	}
	return v
}

// raiseFileLimit raises RLIMIT_NOFILE's soft limit to at least want (up
// to the hard limit).
func raiseFileLimit(b *testing.B, want int) {
	b.Helper()
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		b.Fatal(err)
	}
	if rl.Cur >= uint64(want) {
		return
	}
	rl.Cur = min(max(uint64(want), rl.Cur), rl.Max)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		b.Fatal(err)
	}
	if rl.Cur < uint64(want) {
		b.Fatalf("RLIMIT_NOFILE is at most %d, %d streams need %d", rl.Max, want-1024, want)
	}
}

// selfRSS is VmRSS from /proc/self/status, in bytes.
func selfRSS(b *testing.B) uint64 {
	b.Helper()
	f, err := os.Open("/proc/self/status")
	if err != nil {
		b.Skip("no /proc/self/status:", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return kb << 10
		}
	}
	b.Fatal("no VmRSS in /proc/self/status")
	return 0
}

// sockets counts the process' open sockets (/proc/self/fd): the
// connections to the simulator, less those open when idle.
func sockets() int {
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 0
	}
	n := 0
	for _, fd := range fds {
		if l, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); err == nil && strings.HasPrefix(l, "socket:") {
			n++
		}
	}
	return n
}

func readMetric(name string) uint64 {
	s := []metrics.Sample{{Name: name}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

func liveHeap() uint64   { return readMetric("/memory/classes/heap/objects:bytes") }
func stackBytes() uint64 { return readMetric("/memory/classes/heap/stacks:bytes") }

// simHistogram reads the totals of one of the simulator's histograms.
func simHistogram(b *testing.B, base, name string) histTotals {
	b.Helper()
	mf := scrape(b, base+"/metrics")[name]
	if mf == nil {
		b.Fatalf("no %s", name)
	}
	var t histTotals
	for _, m := range mf.GetMetric() {
		t.sum += m.GetHistogram().GetSampleSum()
		t.count += float64(m.GetHistogram().GetSampleCount())
	}
	return t
}

func simGauge(b *testing.B, base, name string) float64 {
	b.Helper()
	mf := scrape(b, base+"/metrics")[name]
	if mf == nil {
		b.Fatalf("no %s", name)
	}
	v := 0.0
	for _, m := range mf.GetMetric() {
		v += m.GetGauge().GetValue()
	}
	return v
}

func writeProfile(b *testing.B, path, name string) {
	b.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		b.Fatal(err)
	}
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	debug := 0
	if name == "goroutine" {
		debug = 1
	}
	if err := pprof.Lookup(name).WriteTo(f, debug); err != nil {
		b.Fatal(err)
	}
}

func mib(v uint64) float64 { return float64(v) / (1 << 20) }

// kib is a difference in KiB (negative when the figure fell).
func kib(v uint64) float64 { return float64(int64(v)) / 1024 }
