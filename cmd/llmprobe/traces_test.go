// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/llmprobe/llmprobe/config"
	"github.com/llmprobe/llmprobe/internal/proctest"
	"github.com/llmprobe/llmprobe/sim"
	"github.com/llmprobe/llmprobe/tracefile"
)

// maxRefusalRSS bounds the peak RSS of a command that refuses a hostile
// trace: the goal is 64 MiB; the bound leaves room for a loaded
// machine (the figures are logged), far below what the traces took
// before (1 GB, or a crash allocating 17 GB).
const maxRefusalRSS = 128 << 20

// writeHostile writes a trace of the lines lines writes, gzipped when
// name ends in .gz, and returns its path.
func writeHostile(t *testing.T, dir, name string, lines func(w io.Writer)) string {
	t.Helper()
	path := filepath.Join(dir, name)
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	var w io.Writer = f
	var zw *gzip.Writer
	if strings.HasSuffix(name, ".gz") {
		zw = gzip.NewWriter(f)
		w = zw
	}
	lines(w)
	if zw != nil {
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// mooncakeLines writes n Mooncake records of input tokens, output tokens,
// ids hash ids (all 1, the shortest) and session (a JSON value, "": none)
// after a first ordinary record.
func mooncakeLines(n, input, output, ids int, session string) func(io.Writer) {
	return func(w io.Writer) {
		fmt.Fprintln(w, `{"timestamp": 0, "input_length": 10, "output_length": 2, "hash_ids": [1]}`)
		list := ""
		if ids > 0 {
			list = `, "hash_ids": [` + strings.Repeat("1,", ids-1) + "1]"
		}
		if session != "" {
			session = `, "session_id": ` + session
		}
		for i := range n {
			fmt.Fprintf(w, `{"timestamp": %d, "input_length": %d, "output_length": %d%s%s}`+"\n", i+1, input, output, session, list)
		}
	}
}

// countingSim is the simulator behind a handler that counts every request
// (/v1/models and /tokenize too).
func countingSim(t *testing.T) (url string, requests *atomic.Int64) {
	t.Helper()
	cfg := sim.DefaultConfig()
	cfg.ZeroLatency = true
	s, err := sim.New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	requests = new(atomic.Int64)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		s.Handler().ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
	})
	return srv.URL, requests
}

// traceConfig writes a daemon configuration whose one class mirrors trace
// (from_trace with block_size), or, with shape, whose arrivals follow it
// (trace_shape), against url.
func traceConfig(t *testing.T, dir, url, trace string, blockSize int, shape bool) string {
	t.Helper()
	class := fmt.Sprintf("{name: c, from_trace: {file: %s, block_size: %d}}", trace, blockSize)
	arrival := "{rate: 1}"
	if shape {
		class = "{name: c, prompt_tokens: 8, output_tokens: 2}"
		arrival = fmt.Sprintf("{process: trace_shape, rate: 1, trace: {file: %s, period: 1m}}", trace)
	}
	path := filepath.Join(dir, fmt.Sprintf("llmprobe-%s-%d-%v.yml", filepath.Base(trace), blockSize, shape))
	text := fmt.Sprintf(`global: {warmup: 0s, shutdown_grace_period: 2s}
workloads:
  w: {classes: [%s]}
targets:
  - name: t
    url: %s/v1
    model: sim-model
    workload: w
    arrival: %s
    request_timeout: 5s
`, class, url, arrival)
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestHostileTraces: a trace beyond the bounds of a record (tracefile:
// MaxTokens, MaxHashIDs, MaxNameBytes) or of a from_trace sample (config:
// MaxTraceHashIDs, a session's synthesised blocks) is refused by every
// command that reads it, before any request, with the trace's
// file:line: field, within maxRefusalRSS: check-config (from_trace and
// trace_shape), the daemon's start, bench --replay (a usage error, as
// every bad trace line is) and fit --trace. Each once killed the process
// (allocating 8 bytes per word of a 2^31-token prompt or per
// synthesised block) or took a GB (hash ids kept 8 bytes each).
func TestHostileTraces(t *testing.T) {
	bin := binary(t)
	dir := t.TempDir()
	url, requests := countingSim(t)
	tooLong := fmt.Sprintf("tokens is more than the %d a record may ask for", tracefile.MaxTokens)
	type trace struct {
		name  string
		lines func(io.Writer)
		block int    // from_trace's block_size
		where string // the message's start after the path: "LINE: field: "
		want  string // and what it says
		only  string // "config": only the daemon's from_trace keeps what is bounded
	}
	traces := []trace{
		{"input.jsonl", mooncakeLines(1, 1<<31-1, 10, 1, ""), 512, ":2: input_length: ", "2147483647 " + tooLong, ""},
		{"input.jsonl.gz", mooncakeLines(1, 1<<31-1, 10, 1, ""), 512, ":2: input_length: ", "2147483647 " + tooLong, ""},
		{"output.jsonl", mooncakeLines(1, 10, 1<<31-1, 1, ""), 512, ":2: output_length: ", "2147483647 " + tooLong, ""},
		// The issue's: 100 lines of 520,000 ids, 106 KB gzipped.
		{"ids.jsonl.gz", mooncakeLines(100, 1000, 10, 520_000, ""), 512, ":2: hash_ids: ",
			fmt.Sprintf("520000 ids, more than the %d a record may have", tracefile.MaxHashIDs), ""},
		{"session.jsonl", mooncakeLines(1, 10, 10, 0, `"`+strings.Repeat("s", 1000)+`"`), 512, ":2: session_id: ",
			fmt.Sprintf("1000 bytes, longer than the %d a name may have", tracefile.MaxNameBytes), ""},
		// Session turns without hash ids, in blocks of one token.
		{"turns.jsonl", mooncakeLines(3, 100_000, 10, 0, `"s1"`), 1, ":2: input_length: ",
			"a session's turn of 100000 tokens without hash_ids takes 100000 blocks of block_size 1", "config"},
		// The first record's one id and these: one over the bound.
		{"sample.jsonl.gz", mooncakeLines(config.MaxTraceHashIDs/tracefile.MaxHashIDs, 1000, 10, tracefile.MaxHashIDs, ""), 512,
			fmt.Sprintf(":%d: hash_ids: ", config.MaxTraceHashIDs/tracefile.MaxHashIDs+1),
			fmt.Sprintf("the sample's records hold %d hash ids with this one's, more than the %d (8 MiB) a from_trace sample may: lower max_records",
				config.MaxTraceHashIDs+1, config.MaxTraceHashIDs), "config"},
	}
	paths := map[string]string{}
	for _, tr := range traces {
		paths[tr.name] = writeHostile(t, dir, tr.name, tr.lines)
	}
	if fi, err := os.Stat(paths["ids.jsonl.gz"]); err != nil || fi.Size() > 200<<10 {
		t.Fatalf("the issue's trace: %v, %d bytes", err, fi.Size())
	}

	type run struct {
		name string
		args []string
		code int
	}
	for _, tr := range traces {
		path := paths[tr.name]
		runs := []run{
			{"check-config from_trace", []string{"check-config", traceConfig(t, dir, url, path, tr.block, false)}, 1},
			{"run from_trace", []string{"run", "--config.file=" + traceConfig(t, dir, url, path, tr.block, false), "--web.listen-address=127.0.0.1:0",
				"--log.level=warn"}, 1},
		}
		if tr.only == "" {
			runs = append(runs,
				run{"check-config trace_shape", []string{"check-config", traceConfig(t, dir, url, path, tr.block, true)}, 1},
				run{"bench --replay", []string{"bench", "--config.file=" + benchConfig(t, url), "--replay=" + path, "--log.level=error"}, 2},
				run{"fit --trace", []string{"fit", "--trace=" + path}, 1},
			)
		}
		for _, rn := range runs {
			t.Run(tr.name+"/"+rn.name, func(t *testing.T) {
				floor := proctest.ResetPeakRSS()
				var r cliResult
				if rn.args[0] == "run" {
					r = runDaemonToEnd(t, bin, rn.args...)
				} else {
					r = runBounded(t, bin, rn.args...)
				}
				want := path + tr.where + tr.want
				if r.code != rn.code || !strings.Contains(r.stderr, want) {
					t.Errorf("exit code %d, stderr:\n%.2000s\nwant exit code %d and %q", r.code, r.stderr, rn.code, want)
				}
				t.Logf("refused in %v, peak RSS %.1f MiB (this test process, which it cannot be below: %.1f MiB)",
					r.wall.Round(time.Millisecond), float64(r.peakRSS)/(1<<20), float64(floor)/(1<<20))
				checkPeakRSS(t, "", r.peakRSS, floor)
			})
		}
	}
	if n := requests.Load(); n != 0 {
		t.Errorf("the simulator was sent %d requests", n)
	}

	// The control: a good trace through the same counting simulator is
	// replayed.
	good := writeHostile(t, dir, "good.jsonl", mooncakeLines(2, 20, 2, 1, ""))
	r := runBinary(t, bin, nil, "bench", "--config.file="+traceConfig(t, dir, url, good, 512, false), "--replay="+good,
		"--time-scale=100", "--warmup=0s", "--log.level=error")
	if r.code != 0 || requests.Load() < 3 {
		t.Errorf("a good trace: exit code %d, %d requests\n%s", r.code, requests.Load(), r.stderr)
	}
}

// checkPeakRSS fails t when a child's peak RSS is over maxRefusalRSS,
// unless the test process' own (floor, see proctest.ResetPeakRSS) hides
// the child's: under the race detector.
func checkPeakRSS(t *testing.T, what string, peak, floor int64) {
	t.Helper()
	switch {
	case floor > maxRefusalRSS/2:
		t.Logf("the test process holds %.1f MiB: a child's peak RSS is not told from it", float64(floor)/(1<<20))
	case peak > maxRefusalRSS:
		t.Errorf("%speak RSS %.1f MiB, over %d MiB", what, float64(peak)/(1<<20), maxRefusalRSS>>20)
	}
}

// runDaemonToEnd runs the daemon (bounded as runBounded does) and
// expects it to exit within 30 s: a daemon that takes its configuration
// runs on, and fails the test (it is stopped when the test ends).
func runDaemonToEnd(t *testing.T, bin string, args ...string) cliResult {
	t.Helper()
	start := time.Now()
	p := proctest.Start(t, "sh", proctest.Options{Name: "llmprobe run"}, boundedArgs(t, bin, args...)...)
	code, ok := p.Wait(30 * time.Second)
	if !ok {
		t.Fatalf("the daemon runs with the configuration:\n%s", p.Stderr())
	}
	return cliResult{code: code, stdout: p.Stdout(), stderr: p.Stderr(), peakRSS: p.PeakRSS(), wall: time.Since(start)}
}

// TestHostileTraceReload: a reload onto a trace beyond the bounds is
// refused with the trace's file:line, the running configuration goes on,
// and the daemon's memory stays within maxRefusalRSS (a SIGHUP onto the
// issue's hash ids took it to 2.79 GB; onto turns without hash ids, to a
// crash).
func TestHostileTraceReload(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("peak RSS from /proc")
	}
	bin := binary(t)
	dir := t.TempDir()
	url, _ := countingSim(t)
	good := writeHostile(t, dir, "good.jsonl", mooncakeLines(20, 20, 2, 1, ""))
	cfg := traceConfig(t, dir, url, good, 1, false)
	floor := proctest.ResetPeakRSS()
	daemon, base := proctest.StartDaemon(t, bin, proctest.Options{}, "--config.file="+cfg, "--log.level=warn")
	defer func() { _ = daemon.Stop(20 * time.Second) }()
	gauge := func() string {
		t.Helper()
		resp, err := http.Get(base + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		m := regexp.MustCompile(`(?m)^llmprobe_config_last_reload_successful (\S+)$`).FindSubmatch(b)
		if m == nil {
			t.Fatal("no llmprobe_config_last_reload_successful on /metrics")
		}
		return string(m[1])
	}
	for _, tc := range []struct {
		name  string
		lines func(io.Writer)
		want  string
	}{
		{"ids.jsonl.gz", mooncakeLines(100, 1000, 10, 520_000, ""), ":2: hash_ids: 520000 ids"},
		{"turns.jsonl", mooncakeLines(3, 100_000, 10, 0, `"s1"`), ":2: input_length: a session's turn of 100000 tokens"},
	} {
		// The configuration's trace is replaced, as a new trace is.
		tmp := writeHostile(t, dir, tc.name, tc.lines)
		if err := os.Rename(tmp, good); err != nil {
			t.Fatal(err)
		}
		want := good + tc.want
		before := strings.Count(daemon.Stderr(), want)
		daemon.Signal(t, syscall.SIGHUP)
		for deadline := time.Now().Add(20 * time.Second); strings.Count(daemon.Stderr(), want) == before; {
			if time.Now().After(deadline) || daemon.Exited() {
				t.Fatalf("%s: the reload is not refused with %q:\n%s", tc.name, want, daemon.Stderr())
			}
			time.Sleep(50 * time.Millisecond)
		}
		if g := gauge(); g != "0" {
			t.Errorf("%s: llmprobe_config_last_reload_successful = %s after a refused reload", tc.name, g)
		}
		peak := daemon.PeakRSS()
		t.Logf("%s: the daemon's peak RSS %.1f MiB", tc.name, float64(peak)/(1<<20))
		checkPeakRSS(t, tc.name+": the daemon's ", peak, floor)
	}
}
