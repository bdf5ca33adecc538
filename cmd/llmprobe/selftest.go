// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/common/model"

	"github.com/llmprobe/llmprobe/bench"
	"github.com/llmprobe/llmprobe/config"
	"github.com/llmprobe/llmprobe/internal/bounded"
)

// `llmprobe selftest` measures, on this host and with the user's request
// shape, the highest rate llmprobe drives with an honest verdict: a
// zero-latency simulator in a child process answers at once, so every
// limit found is the harness' (or the host's). bench's ceiling search
// (bench.SearchCeiling, bench/ceiling.go) ramps the rate up by doubling
// until a step is not delivered and measured honestly (the daemon's
// verdicts, bench's stage rules), then bisects; when even the start rate
// is not honest it halves the rate until one is (or --min-rate is not
// either: an error saying what to do, nothing saved). This file holds the
// flags, the simulator child, the bottleneck and the advice printed with
// the ceiling, and the result, saved where `llmprobe run` looks for it,
// to warn when a configuration asks for more.

// selftestResult is what selftest saves (and run reads).
type selftestResult struct {
	Ceiling    float64   `json:"ceiling_requests_per_second"`
	Bottleneck string    `json:"bottleneck"`
	MeasuredAt time.Time `json:"measured_at"`
	Host       string    `json:"host"`
	GOMAXPROCS int       `json:"gomaxprocs"`
	NumCPU     int       `json:"num_cpu"`
	Shape      string    `json:"request_shape"`
}

// documentedCeilingPerCPU is the rate one CPU drives with an honest
// verdict when no selftest result exists (docs/architecture.md,
// "Capacity": 2,000 req/s held on two cores with the simulator beside it).
const documentedCeilingPerCPU = 1000

// defaultSelftestFile is where selftest saves its result and run reads it.
func defaultSelftestFile() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "llmprobe", "selftest.json")
}

const selftestShape = `
global: {warmup: 0s, request_timeout: 30s}
workloads:
  selftest:
    classes:
      - {name: chat, prompt_tokens: 64, output_tokens: 16, sampling: {temperature: 0.7}}
targets:
  - {name: selftest, url: "${SIM_URL}/v1", model: sim-model, workload: selftest, arrival: {rate: 1}, extra_body: {ignore_eos: true}}
`

type selftestOptions struct {
	configFile string
	target     string
	step       time.Duration
	startRate  float64
	minRate    float64
	minRateSet bool
	maxRate    float64
	bisections int
	output     string
}

func registerSelftest(app *kingpin.Application) command {
	cmd := app.Command("selftest", "Measure the highest request rate this host drives with an honest verdict, against a zero-latency simulator in a child process, and name the bottleneck.")
	o := &selftestOptions{}
	cmd.Flag("config.file", "Take the request shape (the workload and API) of a target of this configuration; default: 64-token prompts, 16 streamed tokens, chat.").StringVar(&o.configFile)
	cmd.Flag("target", "The target whose request shape is used (default: the first).").StringVar(&o.target)
	cmd.Flag("step.duration", "How long each rate is held.").Default("10s").DurationVar(&o.step)
	cmd.Flag("start-rate", "The first rate, in requests per second; each step doubles it (or, when it is not honest, halves it).").Default("250").Float64Var(&o.startRate)
	cmd.Flag("min-rate", "Stop halving here (default 1, or --start-rate when lower): when not even this rate is honest, selftest fails and saves nothing.").IsSetByUser(&o.minRateSet).Default("1").Float64Var(&o.minRate)
	cmd.Flag("max-rate", "Stop ramping here.").Default("20000").Float64Var(&o.maxRate)
	cmd.Flag("bisections", "Steps between the last good and the first bad rate.").Default("3").IntVar(&o.bisections)
	cmd.Flag("output", "Save the result here ('' for nowhere); llmprobe run reads the default to warn about rates above it.").Default(defaultSelftestFile()).StringVar(&o.output)
	return command{
		clause: cmd,
		run: func(ctx context.Context, logger *slog.Logger) error {
			return runSelftest(ctx, logger, o, os.Stdout)
		},
	}
}

func runSelftest(ctx context.Context, logger *slog.Logger, o *selftestOptions, out io.Writer) error {
	if !o.minRateSet && o.startRate > 0 && o.startRate < o.minRate {
		o.minRate = o.startRate // a start below the default floor is the floor
	}
	if o.step < 2*time.Second || !(o.minRate > 0) || o.startRate < o.minRate || o.maxRate < o.startRate || o.bisections < 0 {
		return usagef("selftest: --step.duration must be at least 2s, 0 < --min-rate <= --start-rate <= --max-rate and --bisections at least 0")
	}
	cfg, shape, err := selftestConfig(o)
	if err != nil {
		return err
	}
	// The simulator serves the target's model: a request naming another
	// gets 404, and every rate would fail.
	base, stop, simPID, err := startSimChild(ctx, logger, &benchOptions{simZero: true, simArgs: []string{
		"--sim.max-num-seqs=65536", "--sim.max-num-batched-tokens=1048576", "--sim.num-kv-blocks=1048576",
		"--model=" + cfg.Targets[0].Model}})
	if err != nil {
		return err
	}
	defer stop()
	cfg.Targets[0].URL = base + "/v1"
	fmt.Fprintf(out, "selftest: %s, GOMAXPROCS %d on %d CPUs, %v per step, against a zero-latency simulator (pid %d)\n",
		shape, runtime.GOMAXPROCS(0), runtime.NumCPU(), o.step, simPID)

	measure := func(rate float64) (bench.CeilingStep, error) {
		cpu0 := processCPU(simPID)
		st, err := bench.MeasureRate(ctx, bench.Options{
			Config: cfg, Warmup: -1, Grace: 5 * time.Second, Logger: slog.New(slog.DiscardHandler),
		}, rate, o.step)
		if err != nil {
			return bench.CeilingStep{}, err
		}
		st.ServerCPU = (processCPU(simPID) - cpu0).Seconds() / o.step.Seconds()
		return st, nil
	}

	var steps []bench.CeilingStep
	search := bench.CeilingOptions{StartRate: o.startRate, MinRate: o.minRate, MaxRate: o.maxRate, Bisections: o.bisections}
	good, bad, err := bench.SearchCeiling(ctx, search, measure, func(st bench.CeilingStep) { steps = append(steps, st); printStep(out, st) })
	if err != nil {
		return err
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	res := selftestResult{MeasuredAt: time.Now().UTC(), GOMAXPROCS: runtime.GOMAXPROCS(0), NumCPU: runtime.NumCPU(), Shape: shape}
	res.Host, _ = os.Hostname()
	switch {
	case good == nil:
		// Nothing to save: a result of 0 would tell run nothing, and
		// exit 0 would tell a script the host was measured.
		why := bottleneck(*bad, o.step)
		fmt.Fprintf(out, "\nNot even %s req/s (--min-rate) is delivered honestly on this host: %s\n", fmtSelftestRate(bad.Rate), why)
		return fmt.Errorf("selftest: no rate from %s down to %s req/s was delivered honestly, so nothing was saved%s. %s",
			fmtSelftestRate(o.startRate), fmtSelftestRate(o.minRate), savedWhere(o.output), selftestAdvice(*bad, steps))
	case bad == nil:
		res.Ceiling = good.Rate
		res.Bottleneck = "none found up to --max-rate"
		fmt.Fprintf(out, "\nThis host drives at least %s req/s with an honest verdict (no limit found up to --max-rate).\n", fmtSelftestRate(good.Rate))
	default:
		res.Ceiling = good.Rate
		res.Bottleneck = bottleneck(*bad, o.step)
		fmt.Fprintf(out, "\nThis host drives %s req/s with an honest verdict; at %s req/s: %s\n", fmtSelftestRate(good.Rate), fmtSelftestRate(bad.Rate), res.Bottleneck)
	}
	if o.output != "" && res.Ceiling > 0 {
		if err := saveSelftest(o.output, res); err != nil {
			return err
		}
		fmt.Fprintf(out, "saved to %s (llmprobe run warns when a configuration asks for more)\n", o.output)
	}
	return nil
}

// fmtSelftestRate writes a rate as the steps are named: whole from
// 10 req/s up, with up to 3 significant digits below.
func fmtSelftestRate(r float64) string {
	if r >= 10 {
		return fmt.Sprintf("%.0f", r)
	}
	return strconv.FormatFloat(r, 'g', 3, 64)
}

func savedWhere(output string) string {
	if output == "" {
		return ""
	}
	return " to " + output
}

// selftestAdvice says what to do when not even the lowest rate held
// (bad) after the steps measured: failing requests, if any step saw them,
// are what to fix first, even when the last step sent nothing to fail (a
// short step at a low rate may plan no arrival at all).
func selftestAdvice(bad bench.CeilingStep, steps []bench.CeilingStep) string {
	for _, st := range steps {
		if !bad.Failed && st.Failed {
			bad = st
		}
	}
	if bad.Failed {
		return "The requests themselves fail against the simulator (" + bad.Because + "): check the request shape selftest takes from --config.file and --target (the API, the lengths, the sampling and extra_body), e.g. with `llmprobe bench --sim`."
	}
	return "The harness cannot keep its timing even at the lowest rate (" + bad.Because + "): stop other load on this host (or run selftest where llmprobe will run), give llmprobe more CPUs (GOMAXPROCS, the container's CPU limit), and run selftest again; --min-rate lowers the floor."
}

// bottleneck names what limited a step: the process whose CPU ran out,
// else the verdict's own reason.
func bottleneck(st bench.CeilingStep, step time.Duration) string {
	s := st.Stage
	clientCPU := s.ClientCPUPer1000 * s.AchievedRate / 1000 // CPU seconds per second
	procs := float64(runtime.GOMAXPROCS(0))
	switch {
	case st.ServerCPU >= 0.9 && st.ServerCPU >= clientCPU:
		return fmt.Sprintf("the simulator used %.2f CPUs (llmprobe %.2f): on this host they compete for CPU; a real target elsewhere leaves llmprobe more (%s)", st.ServerCPU, clientCPU, st.Because)
	case clientCPU >= 0.9*procs:
		return fmt.Sprintf("llmprobe's CPU: %.2f of its %d (GOMAXPROCS) CPUs at %.3f CPU-s per 1000 requests (%s)", clientCPU, int(procs), s.ClientCPUPer1000, st.Because)
	case clientCPU+st.ServerCPU >= 0.9*float64(runtime.NumCPU()):
		return fmt.Sprintf("the host's CPUs: llmprobe %.2f and the simulator %.2f of %d (%s)", clientCPU, st.ServerCPU, runtime.NumCPU(), st.Because)
	}
	return st.Because
}

func printStep(out io.Writer, st bench.CeilingStep) {
	s := st.Stage
	verdict := "honest"
	if !st.Good {
		verdict = "NOT HONEST: " + st.Because
	}
	fmt.Fprintf(out, "  %7s req/s  achieved %8.1f/s  lag p99 %8v  llmprobe %.3f CPU-s/1k  simulator %.2f CPUs  %s\n",
		fmtSelftestRate(st.Rate), s.AchievedRate, time.Duration(s.Lag.P99*float64(time.Second)).Round(10*time.Microsecond), s.ClientCPUPer1000, st.ServerCPU, verdict)
}

// selftestConfig is the request shape to measure: the named (or first)
// target of the user's configuration, or the default shape; the caller
// points its URL at the simulator.
func selftestConfig(o *selftestOptions) (*config.Config, string, error) {
	if o.configFile == "" {
		cfg, err := config.Load([]byte(strings.ReplaceAll(selftestShape, "${SIM_URL}", "http://127.0.0.1:1")), "selftest (built in)")
		return cfg, "64-token prompts, 16 streamed tokens (chat)", err
	}
	cfg, err := config.LoadFile(o.configFile)
	if err != nil {
		return nil, "", invalidConfig(err)
	}
	t := cfg.Targets[0]
	if o.target != "" {
		if t = cfg.Target(o.target); t == nil {
			return nil, "", fmt.Errorf("--target %q: no such target in %s", o.target, o.configFile)
		}
	}
	tc := *t
	tc.Name = "selftest"
	tc.HTTPClientConfig = config.DefaultTargetHTTPClientConfig
	tc.MaxInflight = 1 << 20
	tc.WorkloadFrom = nil
	cfg.Targets = []*config.Target{&tc}
	cfg.Global.Warmup = model.Duration(0)
	return cfg, fmt.Sprintf("the request shape of target %q (%s API, workload %q)", t.Name, t.API, t.Workload), nil
}

func saveSelftest(path string, r selftestResult) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(data, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// harnessCeiling is the rate this host is known to drive honestly: the
// saved selftest result if there is one, else the documented figure per
// CPU. source says which.
func harnessCeiling(file string) (ceiling float64, source string) {
	if file != "" {
		// A result is a few hundred bytes; /dev/zero is refused unread.
		if data, err := bounded.ReadFile(context.Background(), file, 1<<20); err == nil {
			var r selftestResult
			if json.Unmarshal(data, &r) == nil && r.Ceiling > 0 {
				return r.Ceiling, fmt.Sprintf("llmprobe selftest on %s (%s)", r.MeasuredAt.Format(time.DateOnly), file)
			}
		}
	}
	n := runtime.GOMAXPROCS(0)
	return float64(documentedCeilingPerCPU * n), fmt.Sprintf("the documented %d req/s per CPU × GOMAXPROCS %d; run llmprobe selftest to measure this host", documentedCeilingPerCPU, n)
}

// processCPU is a process' user+system CPU time (Linux /proc), 0 when
// unknown.
func processCPU(pid int) time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name (field 2) may hold spaces: fields count from its
	// closing parenthesis; utime and stime are fields 14 and 15.
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0
	}
	var ut, st int64
	if _, err := fmt.Sscan(f[11], &ut); err != nil {
		return 0
	}
	if _, err := fmt.Sscan(f[12], &st); err != nil {
		return 0
	}
	const clockTicks = 100 // USER_HZ on Linux
	return time.Duration(ut+st) * time.Second / clockTicks
}
