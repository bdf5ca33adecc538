// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package bench_test

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/llmprobe/llmprobe/bench"
	"github.com/llmprobe/llmprobe/config"
	"github.com/llmprobe/llmprobe/exporter"
	"github.com/llmprobe/llmprobe/internal/otlptest"
)

// BenchmarkTracingOverhead measures what tracing costs the daemon: the
// same open-loop load against the simulator (a separate process) with
// tracing off, on at 100% sampling (exporting to an OTLP/gRPC receiver in
// a third process), and on with an unreachable collector; the modes are
// interleaved and repeated so that the machine's drift affects them alike.
// It prints client CPU per 1,000 requests and the achieved rate of each.
// Goals: on costs at most 30% more CPU per request than off, and the
// unreachable collector does not lower the achieved rate.

const otlpChildEnv = "LLMPROBE_BENCH_OTLP_CHILD"

// The OTLP receiver child is the test binary re-executed with
// otlpChildEnv set; init runs before TestMain.
func init() {
	if os.Getenv(otlpChildEnv) != "" {
		os.Exit(otlpChild())
	}
}

var (
	tracingRate     = flag.Float64("tracing.rate", 800, "requested rate of each BenchmarkTracingOverhead stage (req/s)")
	tracingDuration = flag.Duration("tracing.duration", 8*time.Second, "duration of each BenchmarkTracingOverhead stage")
	tracingRounds   = flag.Int("tracing.rounds", 2, "times BenchmarkTracingOverhead runs each mode")
)

// otlpChild serves an OTLP/gRPC trace receiver until stdin closes, then
// prints how many spans it received.
func otlpChild() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	sink, stop := otlptest.Serve(l)
	fmt.Println(sink.Addr)
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n') // EOF when the parent is done
	stop()
	fmt.Println(sink.Count())
	return 0
}

type otlpProcess struct {
	cmd   *exec.Cmd
	addr  string
	stdin interface{ Close() error }
	out   *bufio.Reader
}

func startOTLPProcess(b *testing.B) *otlpProcess {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$", "-test.bench=^$")
	cmd.Env = append(os.Environ(), otlpChildEnv+"=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	p := &otlpProcess{cmd: cmd, stdin: stdin, out: bufio.NewReader(stdout)}
	b.Cleanup(func() {
		stdin.Close()
		_ = cmd.Wait()
	})
	line, err := p.out.ReadString('\n')
	if err != nil {
		b.Fatalf("OTLP receiver child: %v", err)
	}
	p.addr = strings.TrimSpace(line)
	return p
}

// received stops the receiver and returns the number of spans it got.
func (p *otlpProcess) received() string {
	p.stdin.Close()
	line, _ := p.out.ReadString('\n')
	return strings.TrimSpace(line)
}

type tracingMode struct {
	name    string
	tracing *exporter.Tracing
	cpu     float64 // client CPU s per 1,000 requests, summed over rounds
	rate    float64 // achieved req/s, summed over rounds
	sent    int
}

func BenchmarkTracingOverhead(b *testing.B) {
	if testing.Short() {
		b.Skip("a minute-long load run")
	}
	for _, k := range []string{"OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
		"OTEL_TRACES_SAMPLER", "OTEL_TRACES_SAMPLER_ARG", "OTEL_BSP_MAX_QUEUE_SIZE", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE"} {
		b.Setenv(k, "")
	}
	simProc := startSimProcess(b)
	sink := startOTLPProcess(b)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()

	insecure := true
	newTracing := func(endpoint string) *exporter.Tracing {
		t, err := exporter.NewTracing(context.Background(), exporter.TracingOptions{
			Config: config.Tracing{Endpoint: endpoint, Insecure: &insecure}, DefaultServiceName: "llmprobe-bench"})
		if err != nil || t == nil {
			b.Fatalf("tracing to %s: %v", endpoint, err)
		}
		return t
	}
	modes := []*tracingMode{
		{name: "off"},
		{name: "on (100% sampled)", tracing: newTracing(sink.addr)},
		{name: "on, collector unreachable", tracing: newTracing(closed)},
	}
	shutdown := func() {
		for _, m := range modes {
			if m.tracing != nil {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				_ = m.tracing.Shutdown(ctx)
				cancel()
			}
		}
	}
	defer shutdown()

	cfg := benchConfig(b, simProc.base, 16, 16)
	stage := []bench.Stage{{Rate: *tracingRate, Duration: *tracingDuration}}
	for range b.N {
		for round := 0; round < *tracingRounds; round++ {
			for _, m := range modes {
				opts := bench.Options{Config: cfg, Stages: stage, Warmup: -1, Grace: 10 * time.Second, Logger: slog.New(slog.DiscardHandler)}
				if m.tracing != nil {
					opts.Tracer, opts.Propagator = m.tracing.Tracer(), m.tracing.Propagator()
				}
				rep, err := bench.Run(context.Background(), opts)
				if err != nil {
					b.Fatal(err)
				}
				s := rep.Stages[0]
				m.cpu += s.ClientCPUPer1000
				m.rate += s.AchievedRate
				m.sent += s.Sent
			}
		}
	}
	shutdown() // flush what is queued before the counts are read
	rounds := float64(b.N * *tracingRounds)
	var sb strings.Builder
	fmt.Fprintf(&sb, "requested %.0f req/s, %v per stage, %d rounds, 16-token prompts and completions\n", *tracingRate, *tracingDuration, int(rounds))
	fmt.Fprintf(&sb, "%-28s %22s %16s %s\n", "tracing", "client CPU s/1k req", "achieved req/s", "spans")
	off := modes[0].cpu / rounds
	for _, m := range modes {
		cpu, rate := m.cpu/rounds, m.rate/rounds
		spans := "-"
		if m.tracing != nil {
			st := m.tracing.Stats()
			spans = fmt.Sprintf("exported %d, dropped %d (queue full) + %d (export failed), %d export failures",
				st.Exported, st.DroppedFull, st.DroppedFailed, st.ExportFailures)
		}
		fmt.Fprintf(&sb, "%-28s %14.3f (%+5.1f%%) %16.1f %s\n", m.name, cpu, 100*(cpu/off-1), rate, spans)
	}
	fmt.Fprintf(&sb, "OTLP receiver got %s spans", sink.received())
	figures(b, "%s", sb.String())
	b.ReportMetric(modes[1].cpu/modes[0].cpu, "cpu_on/off")
	b.ReportMetric(modes[2].rate/modes[0].rate, "rate_unreachable/off")
}
