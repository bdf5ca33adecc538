// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// benchChildEnv makes the test binary run one benchmark server process
// ("sim" or "baseline") instead of the tests.
const benchChildEnv = "LLMPROBE_SIM_BENCH_CHILD"

func TestMain(m *testing.M) {
	if mode := os.Getenv(benchChildEnv); mode != "" {
		os.Exit(runBenchChild(mode))
	}
	os.Exit(m.Run())
}

// runBenchChild serves on a loopback port, prints "ADDR host:port", then
// answers each "cpu" line on stdin with "CPU <µs>" (its user+system CPU
// time) until stdin closes.
func runBenchChild(mode string) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	switch mode {
	case "sim":
		s, err := New(zeroConfig(), nil)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		go s.Serve(l)
		defer s.Shutdown(context.Background())
	case "baseline":
		srv := &http.Server{Handler: baselineHandler(), ReadHeaderTimeout: 30 * time.Second}
		go srv.Serve(l)
		defer srv.Close()
	default:
		fmt.Fprintf(os.Stderr, "unknown %s %q\n", benchChildEnv, mode)
		return 1
	}
	fmt.Printf("ADDR %s\n", l.Addr())
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		if sc.Text() != "cpu" {
			continue
		}
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		us := ru.Utime.Sec*1e6 + ru.Utime.Usec + ru.Stime.Sec*1e6 + ru.Stime.Usec
		fmt.Printf("CPU %d\n", us)
	}
	return 0
}

// baselineHandler is the minimal net/http handler the simulator is
// compared with: it reads the body and writes and flushes the same events
// as the simulator's 16-token chat stream (role delta, 16 content deltas,
// [DONE]), pre-formatted.
func baselineHandler() http.Handler {
	const prefix = `data: {"id":"chatcmpl-0123456789abcdef0123456789abcdef","object":"chat.completion.chunk","created":1700000000,"model":"sim-model","choices":[`
	events := [][]byte{[]byte(prefix + `{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}` + "\n\n")}
	for i := 0; i < 16; i++ {
		finish := "null"
		if i == 15 {
			finish = `"length"`
		}
		events = append(events, []byte(prefix+`{"index":0,"delta":{"content":"`+outputWordText[i]+`"},"logprobs":null,"finish_reason":`+finish+`}]}`+"\n\n"))
	}
	events = append(events, []byte("data: [DONE]\n\n"))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header()["Content-Type"] = sseContentType
		f := w.(http.Flusher)
		for _, ev := range events {
			if _, err := w.Write(ev); err != nil {
				return
			}
			f.Flush()
		}
	})
}

// benchChild is a running benchmark server process.
type benchChild struct {
	mode string
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *bufio.Scanner
	url  string
}

func startBenchChild(b *testing.B, mode string) *benchChild {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$", "-test.bench=^$")
	cmd.Env = append(os.Environ(), benchChildEnv+"="+mode)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	outPipe, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	c := &benchChild{mode: mode, cmd: cmd, in: in, out: bufio.NewScanner(outPipe)}
	b.Cleanup(func() {
		_ = c.in.Close()
		done := make(chan struct{})
		go func() { _ = c.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = c.cmd.Process.Kill()
			<-done
		}
	})
	addr, ok := strings.CutPrefix(c.line(b), "ADDR ")
	if !ok {
		b.Fatalf("%s child did not report its address", mode)
	}
	c.url = "http://" + addr + "/v1/chat/completions"
	return c
}

func (c *benchChild) line(b *testing.B) string {
	if !c.out.Scan() {
		b.Fatalf("%s child: no output (%v)", c.mode, c.out.Err())
	}
	return c.out.Text()
}

// cpu returns the child's CPU time (user + system).
func (c *benchChild) cpu(b *testing.B) time.Duration {
	if _, err := io.WriteString(c.in, "cpu\n"); err != nil {
		b.Fatal(err)
	}
	us, err := strconv.ParseInt(strings.TrimPrefix(c.line(b), "CPU "), 10, 64)
	if err != nil {
		b.Fatal(err)
	}
	return time.Duration(us) * time.Microsecond
}

// drive sends n 16-token streamed chat requests over `clients` keep-alive
// connections and checks that each stream is complete.
func drive(b *testing.B, client *http.Client, url string, n, clients int) {
	body := []byte(`{"model":"sim-model","messages":[{"role":"user","content":"Benchmark the simulator with a short prompt."}],"max_tokens":16,"ignore_eos":true,"stream":true}`)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	next := make(chan struct{}, n)
	for i := 0; i < n; i++ {
		next <- struct{}{}
	}
	close(next)
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 0, 8192)
			for range next {
				err := func() error {
					resp, err := client.Post(url, "application/json", bytes.NewReader(body))
					if err != nil {
						return err
					}
					defer resp.Body.Close()
					w := bytes.NewBuffer(buf[:0])
					if _, err := w.ReadFrom(resp.Body); err != nil {
						return err
					}
					got := w.Bytes()
					if resp.StatusCode != 200 || bytes.Count(got, []byte("data: ")) != 18 || !bytes.HasSuffix(got, []byte("data: [DONE]\n\n")) {
						return fmt.Errorf("status %d, incomplete stream %q", resp.StatusCode, got)
					}
					return nil
				}()
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		b.Fatal(firstErr)
	}
}

// BenchmarkStreamCPU compares the CPU cost of the simulator in zero-latency
// mode with a minimal net/http handler writing and flushing the same
// events. Each server runs in its own process (this test binary re-executed)
// and reports its own user+system CPU time; the same bounded workload
// (5,000 16-token streamed chat requests each, over 4 keep-alive clients,
// interleaved in rounds) is driven at both. It prints CPU-seconds per 1,000
// requests for each and their ratio (goal: ≤ 1.5). The workload is fixed,
// whatever b.N.
func BenchmarkStreamCPU(b *testing.B) {
	const (
		perServer = 5000
		rounds    = 5
		clients   = 4
		warmup    = 300
	)
	children := []*benchChild{startBenchChild(b, "baseline"), startBenchChild(b, "sim")}
	client := &http.Client{
		Timeout:   30 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: clients, DisableCompression: true},
	}
	defer client.CloseIdleConnections()
	for _, c := range children {
		drive(b, client, c.url, warmup, clients)
	}
	cpu := make([]time.Duration, len(children))
	b.ResetTimer()
	for r := 0; r < rounds; r++ {
		for i := range children {
			c := children[(i+r)%len(children)] // alternate who goes first
			before := c.cpu(b)
			drive(b, client, c.url, perServer/rounds, clients)
			cpu[(i+r)%len(children)] += c.cpu(b) - before
		}
	}
	b.StopTimer()
	per1k := func(d time.Duration) float64 { return d.Seconds() / perServer * 1000 }
	base, sim := per1k(cpu[0]), per1k(cpu[1])
	ratio := sim / base
	b.ReportMetric(base, "baseline-cpu-s/1k-req")
	b.ReportMetric(sim, "sim-cpu-s/1k-req")
	b.ReportMetric(ratio, "sim/baseline")
	verdict := "within the 1.5x goal"
	if ratio > 1.5 {
		verdict = "ABOVE the 1.5x goal"
	}
	b.Logf("server CPU per 1,000 16-token streamed requests: baseline %.3fs, sim (zero latency) %.3fs, ratio %.2f (%s)", base, sim, ratio, verdict)
}

// BenchmarkDefaultTiming reports the latencies the default timing model
// gives a client (and the server's own TTFT), alone and under a batch of
// 32 concurrent requests: 128-token chat prompts, 64 output tokens.
func BenchmarkDefaultTiming(b *testing.B) {
	cfg := DefaultConfig()
	cfg.EOSProbability = 0
	base, _ := startSim(b, cfg)
	url := base + "/v1/chat/completions"
	prompt := strings.TrimSpace(strings.Repeat("word ", 121)) // 121 + 7 template tokens = 128
	run := func(concurrency int) (ttft, itl time.Duration) {
		results := make([]*streamResult, concurrency)
		var wg sync.WaitGroup
		for i := range results {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// A distinct first word per request keeps the prefix cache out.
				results[i] = stream(b, url, chatBody(fmt.Sprintf("r%d%d %s", i, time.Now().UnixNano(), prompt), 64))
			}()
		}
		wg.Wait()
		var ttfts, itls []time.Duration
		for _, r := range results {
			if !r.done || len(r.tokenAt) != 64 {
				b.Fatalf("stream failed: %v (%d tokens)", r.readErr, len(r.tokenAt))
			}
			ttfts = append(ttfts, r.ttft())
			for i := 1; i < len(r.tokenAt); i++ {
				itls = append(itls, r.tokenAt[i].Sub(r.tokenAt[i-1]))
			}
		}
		return median(ttfts), median(itls)
	}
	b.ResetTimer()
	ttft1, itl1 := run(1)
	ttft32, itl32 := run(32)
	b.StopTimer()
	b.ReportMetric(ttft1.Seconds()*1000, "ttft-ms@1")
	b.ReportMetric(itl1.Seconds()*1000, "itl-ms@1")
	b.ReportMetric(ttft32.Seconds()*1000, "ttft-ms@32")
	b.ReportMetric(itl32.Seconds()*1000, "itl-ms@32")
	b.Logf("default timing, 128-token prompt, 64 tokens: median TTFT %v / ITL %v alone; %v / %v with 32 concurrent",
		ttft1.Round(100*time.Microsecond), itl1.Round(100*time.Microsecond), ttft32.Round(100*time.Microsecond), itl32.Round(100*time.Microsecond))
}

func median(d []time.Duration) time.Duration {
	slices.Sort(d)
	return d[len(d)/2]
}

// discardWriter is a minimal streaming ResponseWriter for in-process
// benchmarks: it keeps the headers and drops the body.
type discardWriter struct {
	h    http.Header
	code int
	n    int
}

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) WriteHeader(code int)        { w.code = code }
func (w *discardWriter) Write(b []byte) (int, error) { w.n += len(b); return len(b), nil }
func (w *discardWriter) Flush()                      {}

// BenchmarkHandlerAllocs reports the handler's own cost (allocs/op, B/op)
// per 16-token chat completion in zero-latency mode, without the network:
// a plain request (no reasoning, no tools) streamed and not, and the same
// with reasoning and a tool call. The plain cases are the ones to keep
// flat.
func BenchmarkHandlerAllocs(b *testing.B) {
	plain := `{"model":"sim-model","messages":[{"role":"user","content":"Benchmark the simulator with a short prompt."}],"max_tokens":16,"ignore_eos":true`
	agent := plain + `,"reasoning_effort":"medium","tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}],"tool_choice":"required"`
	for _, bc := range []struct {
		name, body string
	}{
		{"plain-stream", plain + `,"stream":true}`},
		{"plain-unary", plain + `}`},
		{"agent-stream", agent + `,"stream":true}`},
		{"agent-unary", agent + `}`},
	} {
		b.Run(bc.name, func(b *testing.B) {
			cfg := zeroConfig()
			cfg.ReasoningTokens = 4
			if strings.HasPrefix(bc.name, "plain") {
				cfg.ReasoningTokens = 0
			}
			s, err := New(cfg, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Shutdown(context.Background())
			h := s.Handler()
			body := []byte(bc.body)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				req, _ := http.NewRequest(http.MethodPost, "/v1/chat/completions", bytes.NewReader(body))
				w := &discardWriter{h: make(http.Header)}
				h.ServeHTTP(w, req)
				if w.code != http.StatusOK && w.code != 0 || w.n == 0 {
					b.Fatalf("status %d, %d bytes", w.code, w.n)
				}
			}
		})
	}
}
