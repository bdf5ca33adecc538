// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/alecthomas/kingpin/v2"

	"github.com/llmprobe/llmprobe/bench"
	"github.com/llmprobe/llmprobe/bench/report"
	"github.com/llmprobe/llmprobe/config"
	"github.com/llmprobe/llmprobe/examples"
	"github.com/llmprobe/llmprobe/internal/bounded"
	"github.com/llmprobe/llmprobe/internal/httpclient"
	"github.com/llmprobe/llmprobe/internal/scrub"
	"github.com/llmprobe/llmprobe/slo"
)

// benchOptions are the bench command's flags.
type benchOptions struct {
	configFile    string
	targets       []string
	stages        []string
	stageDuration time.Duration
	grace         time.Duration // --stage.grace
	warmup        time.Duration
	outputs       []string // --output, repeatable
	stopSaturated bool
	sim           bool
	simConfig     string
	simZero       bool
	simArgs       []string // further flags of the simulator child
	slo           string
	plot          string   // --plot: FILE.svg or FILE.png
	requests      string   // --requests: FILE.jsonl
	args          []string // positional: compare OLD.json NEW.json
	serverMetrics []string // --server-metrics
	promURL       string   // --prometheus.url
	gpuSelector   string   // --gpu.selector
	gpuPrice      float64  // --gpu.price-per-hour
	gpuCount      int      // --gpu.count
	preflight     bool     // --preflight (--no-preflight)
	maxErrorRatio float64  // --max-error-ratio
	seed          uint64   // --seed
	seedSet       bool
	selftestFile  string    // --selftest.file
	crn           bool      // --common-random-numbers
	childOut      io.Writer // the simulator child's output (nil: standard error)

	quick  quickFlags  // --url, --model, ... (bench_quick.go)
	find   findFlags   // --find, --levels, --capacity, --find.*
	load   loadFlags   // --dataset, --max-requests, --percentiles, --concurrency (bench_load.go)
	replay replayFlags // --replay, --replay.*, --time-scale (bench_replay.go)

	stageDurationSet bool // --stage.duration was given
	warmupSet        bool // --warmup was given
}

func registerBench(app *kingpin.Application) command {
	cmd := app.Command("bench", "Run a finite benchmark sweep: each stage holds a requested open-loop rate for a duration; print p50/p95/p99 of TTFT, TPOT, ITL and E2E with the load they were taken at and whether the harness delivered it.")
	o := &benchOptions{}
	cmd.Flag("config.file", "llmprobe configuration file (targets, workloads). With --sim and no file, the embedded demo configuration.").StringVar(&o.configFile)
	cmd.Flag("target", "Only these targets (repeatable). Default: all.").StringsVar(&o.targets)
	o.quick.register(cmd)
	cmd.Flag("stage", "A stage as RATE[:DURATION], e.g. 10:60s (repeatable, run in order). Instead: --find, --concurrency, --replay, or the quick start's --request-rate.").StringsVar(&o.stages)
	cmd.Flag("stage.duration", "Duration of stages given without one, and of closed-loop levels (the quick start's stage: 30s without it).").Default("60s").IsSetByUser(&o.stageDurationSet).DurationVar(&o.stageDuration)
	cmd.Flag("stage.grace", "Wait at most this long after each stage for its requests still in flight (their results count for the stage; those still running then are cancelled, and the report says how many). 0: the longest request timeout of the targets.").Default("0s").DurationVar(&o.grace)
	cmd.Flag("warmup", "Warm-up at the start of each stage (inside its duration), excluded from its latency figures; 0: none (the default with the quick start's --num-prompts).").Default("5s").IsSetByUser(&o.warmupSet).DurationVar(&o.warmup)
	cmd.Flag("output", "Also write the report to this file: FILE.json (what compare reads) or FILE.md (Markdown); repeatable. Every output file (and --plot, --requests) is checked before the first request.").PlaceHolder("FILE").StringsVar(&o.outputs)
	cmd.Flag("preflight", "Send one request per target, which must succeed, before the first stage (--no-preflight: do not).").Default("true").BoolVar(&o.preflight)
	cmd.Flag("max-error-ratio", "Exit non-zero (after writing the reports) when a stage's share of failed results is above this.").Default("0.5").Float64Var(&o.maxErrorRatio)
	cmd.Flag("seed", "Seed of the workload's random draws (arrivals, classes, lengths, prompts): the same seed repeats them. Default: global.seed, else a random one; the report records it.").IsSetByUser(&o.seedSet).Uint64Var(&o.seed)
	cmd.Flag("common-random-numbers", "Every stage reuses the same random draws (arrival gaps, classes, lengths), rescaled to its rate, for a paired comparison of stages; the report says so. Default: each stage draws its own, from the seed and the stage's number.").BoolVar(&o.crn)
	cmd.Flag("plot", "Also draw latency (TTFT, TPOT, E2E p50 and p99) and served throughput against the achieved rate, stages in rate order, into this file: FILE.svg or FILE.png.").PlaceHolder("FILE").StringVar(&o.plot)
	cmd.Flag("requests", "Also write one JSON line per request (stage, class, times, TTFT, ITLs, E2E, tokens, outcome; no text) to this file.").PlaceHolder("FILE.jsonl").StringVar(&o.requests)
	cmd.Arg("compare", "compare OLD.json NEW.json: say, per stage and metric, whether the latency of NEW differs from OLD's beyond chance (Mann-Whitney U for medians, Fisher's exact test for p99, Holm-adjusted; no verdict on stages not trusted).").StringsVar(&o.args)
	cmd.Flag("slo", "Judge each stage's goodput by this SLO instead of the configuration's slo blocks: per-request bounds ttft=, tpot=, e2e=, objective= and quantile bounds such as tpot_p99=100ms, comma-separated (e.g. ttft=500ms,tpot=60ms).").StringVar(&o.slo)
	cmd.Flag("server-metrics", "Scrape the target server's Prometheus metrics at this URL beside every stage (vLLM, SGLang, llama.cpp, TGI): one URL for all targets, one per target in order, or TARGET=URL (repeatable or comma-separated); with --sim, "+examples.DemoURLPlaceholder+" stands for the simulator's base URL. A failed scrape is reported, never fatal.").PlaceHolder("URL").StringsVar(&o.serverMetrics)
	cmd.Flag("prometheus.url", "Prometheus to ask for dcgm-exporter GPU figures averaged over each stage (with --gpu.selector).").PlaceHolder("URL").StringVar(&o.promURL)
	cmd.Flag("gpu.selector", `Label matchers selecting the GPUs' DCGM series for --prometheus.url, e.g. 'Hostname="gpu-node-1"'.`).StringVar(&o.gpuSelector)
	cmd.Flag("gpu.price-per-hour", "What one GPU costs per hour: each stage also reports the GPU cost per million generated tokens (with --gpu.count, or the GPUs --prometheus.url finds). 0: none.").Default("0").Float64Var(&o.gpuPrice)
	cmd.Flag("gpu.count", "The number of GPUs serving the targets, for the GPU time and cost per generated token. 0: those --prometheus.url finds with --gpu.selector.").Default("0").IntVar(&o.gpuCount)
	o.find.register(cmd)
	o.load.register(cmd)
	o.replay.register(cmd)
	cmd.Flag("selftest.file", "Result of llmprobe selftest: a stage asking for more than the ceiling it measured on this host (without one, the documented ceiling per CPU) is warned of before the run and in the report.").Default(defaultSelftestFile()).StringVar(&o.selftestFile)
	cmd.Flag("stop-when-saturated", "Stop after the first stage whose load was not delivered.").BoolVar(&o.stopSaturated)
	cmd.Flag("sim", "Start the built-in simulator in a child process on a loopback port; "+examples.DemoURLPlaceholder+" in the config stands for its base URL.").BoolVar(&o.sim)
	cmd.Flag("sim.config.file", "Simulator configuration for --sim.").PlaceHolder("FILE").StringVar(&o.simConfig)
	cmd.Flag("sim.zero-latency", "Run the --sim simulator in zero-latency mode (measures the harness itself).").BoolVar(&o.simZero)
	return command{
		clause: cmd,
		run: func(ctx context.Context, logger *slog.Logger) error {
			return runBench(ctx, logger, o)
		},
	}
}

func runBench(ctx context.Context, logger *slog.Logger, o *benchOptions) error {
	if len(o.args) > 0 {
		if o.args[0] != "compare" || len(o.args) != 3 {
			return usagef("unexpected %q: the only argument form is compare OLD.json NEW.json", strings.Join(o.args, " "))
		}
		return runBenchCompare(ctx, os.Stdout, o.args[1], o.args[2])
	}
	if o.stageDuration <= 0 {
		return usagef("--stage.duration must be positive, got %v", o.stageDuration)
	}
	if o.warmup < 0 {
		return usagef("--warmup must not be negative, got %v (0: no warm-up)", o.warmup)
	}
	if !o.sim {
		switch {
		case o.simConfig != "":
			return usagef("--sim.config.file needs --sim")
		case o.simZero:
			return usagef("--sim.zero-latency needs --sim")
		}
	}
	if err := o.find.check(len(o.stages) > 0); err != nil {
		return err
	}
	if err := o.load.check(o.find.active()); err != nil {
		return err
	}
	if err := o.replay.check(o); err != nil {
		return err
	}
	if o.stopSaturated && (o.find.active() || o.replay.path != "") {
		return usagef("--stop-when-saturated stops a list of --stage; a search stops by its own rules, a replay is one stage")
	}
	if err := o.quick.check(o); err != nil {
		return err
	}
	if o.stageDurationSet && o.find.active() {
		o.find.opts.StageDuration = o.stageDuration // the search's measured window (bench-find.md)
	}
	if o.configFile == "" && !o.sim && !o.quick.active() {
		return usagef("--config.file is required (or --url and --model for the quick start, --sim for the embedded demo)")
	}
	stages, err := parseStages(o.stages, o.stageDuration)
	if err != nil {
		return err
	}
	stages = append(stages, o.quick.stages(o, o.load.maxRequests)...)
	if o.plot != "" && len(stages) == 0 && !o.find.active() && o.replay.path == "" {
		return usagef("--plot draws open-loop stages against their achieved rate; closed-loop levels (--concurrency) are not drawn: add --stage or leave out --plot")
	}
	if len(stages) == 0 && !o.find.active() && len(o.load.levels) == 0 && o.replay.path == "" {
		return usagef("required flag(s) '--stage' not provided (or --concurrency for closed-loop levels, --replay for a trace)")
	}
	if o.grace < 0 {
		return usagef("--stage.grace must not be negative, got %v", o.grace)
	}
	if err := checkGPUFlags(o); err != nil {
		return err
	}
	var plotFormat report.Format
	if o.plot != "" {
		f, ok := report.FormatOf(o.plot)
		if !ok || !f.Plot {
			return usagef("--plot %q: the file must end in %s", o.plot, report.Extensions(true))
		}
		plotFormat = f
	}
	var spec *slo.Spec
	if o.slo != "" {
		if spec, err = slo.ParseSpec(o.slo); err != nil {
			return usagef("--slo: %w", err)
		}
	}
	if !(o.maxErrorRatio >= 0 && o.maxErrorRatio <= 1) {
		return usagef("--max-error-ratio must be a share in [0, 1], got %v", o.maxErrorRatio)
	}
	// Every file the run writes is checked before anything is sent.
	outputs, err := checkBenchOutputs(o)
	if err != nil {
		return err
	}
	// So is the whole trace to replay.
	if err := o.replay.open(ctx, o.load.maxRequests); err != nil {
		return err
	}
	plan := o.progressPlan(stages)
	var con *console
	if isTerminal(os.Stdout) {
		// Log lines (and the simulator's) are written around the
		// progress block, never over it.
		con = &console{out: os.Stdout, width: termWidth(os.Stdout)}
		logger = slog.New(consoleHandler{logger.Handler(), con})
		o.childOut = &lineWriter{c: con, w: os.Stderr}
	}
	var data []byte
	if o.configFile != "" && o.sim {
		if data, err = bounded.ReadFile(ctx, o.configFile, config.MaxFileSize); err != nil {
			return err
		}
	}
	var cfg *config.Config
	switch {
	case o.quick.active():
		if cfg, err = o.quick.config(ctx, logger); err != nil {
			return err
		}
	case o.sim:
		base, stop, _, err := startSimChild(ctx, logger, o)
		if err != nil {
			return err
		}
		defer stop()
		for i, u := range o.serverMetrics {
			o.serverMetrics[i] = strings.ReplaceAll(u, examples.DemoURLPlaceholder, base)
		}
		if o.configFile == "" {
			cfg, err = loadDemo(base)
		} else {
			data = bytes.ReplaceAll(data, []byte(examples.DemoURLPlaceholder), []byte(base+"/v1"))
			cfg, err = config.Load(data, o.configFile)
		}
		if err != nil {
			return invalidConfig(err)
		}
	default:
		// As run does: the files the targets' http_client_config names
		// are checked too.
		if cfg, err = config.LoadFileContext(ctx, o.configFile); err != nil {
			return invalidConfig(err)
		}
	}
	seed, seedSource := resolveSeed(cfg, o.seed, o.seedSet)
	bopts := bench.Options{
		Config:              cfg,
		Targets:             o.targets,
		Stages:              stages,
		Warmup:              o.warmup,
		Grace:               o.grace,
		Logger:              logger,
		StopWhenSaturated:   o.stopSaturated,
		CommonRandomNumbers: o.crn,
		SLO:                 spec,
		ServerMetrics:       o.serverMetrics,
		PrometheusURL:       o.promURL,
		GPUSelector:         o.gpuSelector,
		GPUPricePerHour:     o.gpuPrice,
		GPUCount:            o.gpuCount,
	}
	if err := o.load.apply(ctx, &bopts, o.stageDuration); err != nil {
		return err
	}
	if bopts.Replay = o.replay.replay; bopts.Replay != nil {
		bopts.MaxRequests = 0 // the replay's: OpenReplay took it
	}
	if con != nil {
		bopts.Progress = progressPrinter(con, plan)
	} else {
		bopts.Progress, bopts.ProgressInterval = plainProgress(os.Stderr, plan), plainProgressInterval
	}
	// What needs the configuration is checked before anything is sent.
	if err := checkBenchConfig(o, bopts); err != nil {
		return err
	}
	warnings := stageWarnings(stages, countTargets(cfg, o.targets), o.warmup, o.selftestFile)
	for _, w := range warnings {
		logger.Warn(w)
	}
	if o.preflight {
		if err := preflight(ctx, logger, bopts, o.quick.active()); err != nil {
			return err
		}
	}
	var reqFile *os.File
	if o.requests != "" {
		if reqFile, err = os.Create(o.requests); err != nil {
			return err
		}
		defer reqFile.Close()
		bopts.Requests = report.NewRequestLog(reqFile)
	}
	rep, err := o.find.run(ctx, bopts)
	if err != nil {
		return err
	}
	rep.SchemaVersion, rep.Run = report.ReportSchemaVersion, runInfo(os.Args[1:], seed, seedSource)
	if len(stages) == 0 {
		// A search's or a replay's stages are known once they ran.
		for _, w := range ranAboveCeiling(rep, o.selftestFile) {
			logger.Warn(w)
			warnings = append(warnings, w)
		}
	}
	rep.Run.Warnings = warnings
	rep.Run.CommonRandomNumbers = o.crn
	if reqFile != nil {
		if err := bopts.Requests.Flush(); err != nil {
			return fmt.Errorf("--requests: %w", err)
		}
		if err := reqFile.Close(); err != nil {
			return fmt.Errorf("--requests: %w", err)
		}
		logger.Info("requests written", "file", o.requests, "lines", bopts.Requests.Lines())
	}
	if err := rep.WriteText(os.Stdout); err != nil {
		return err
	}
	if o.plot != "" {
		if err := writeFile(o.plot, func(w io.Writer) error { return rep.Write(w, plotFormat, report.MarkdownOptions{}) }); err != nil {
			return err
		}
		logger.Info("plot written", "file", o.plot)
	}
	for _, out := range outputs {
		write := func(w io.Writer) error {
			return rep.Write(w, out.format, report.MarkdownOptions{Plot: relativeLink(out.path, o.plot)})
		}
		if err := writeFile(out.path, write); err != nil {
			return err
		}
		logger.Info("report written", "file", out.path)
	}
	return benchVerdict(ctx, rep, o.maxErrorRatio)
}

// givenFlags registers a group of flags and records which of them the
// command line sets, in the order they were registered.
type givenFlags struct {
	names []string
	set   map[string]*bool
}

// flag registers flag name of cmd in the group.
func (g *givenFlags) flag(cmd *kingpin.CmdClause, name, help string) *kingpin.FlagClause {
	if g.set == nil {
		g.set = map[string]*bool{}
	}
	g.names, g.set[name] = append(g.names, name), new(bool)
	return cmd.Flag(name, help).IsSetByUser(g.set[name])
}

// given says whether the command line sets flag name.
func (g *givenFlags) given(name string) bool { return *g.set[name] }

// first is the first flag of the group the command line sets, but for
// those named in except ("" for none).
func (g *givenFlags) first(except ...string) string {
	for _, name := range g.names {
		if g.given(name) && !slices.Contains(except, name) {
			return name
		}
	}
	return ""
}

// writeFile writes path with write, which writes to memory first: a
// failed write leaves no truncated file behind.
func writeFile(path string, write func(io.Writer) error) error {
	var b bytes.Buffer
	if err := write(&b); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return os.WriteFile(path, b.Bytes(), 0o666)
}

// relativeLink is target as a link from a document at doc ("" without
// target).
func relativeLink(doc, target string) string {
	if target == "" {
		return ""
	}
	d, err1 := filepath.Abs(filepath.Dir(doc))
	t, err2 := filepath.Abs(target)
	if err1 != nil || err2 != nil {
		return filepath.ToSlash(target)
	}
	rel, err := filepath.Rel(d, t)
	if err != nil {
		return filepath.ToSlash(target)
	}
	return filepath.ToSlash(rel)
}

// runBenchCompare is `bench compare OLD.json NEW.json`; the reads give
// way to ctx (SIGINT/SIGTERM).
func runBenchCompare(ctx context.Context, w io.Writer, oldPath, newPath string) error {
	old, err := report.ReadReportContext(ctx, oldPath)
	if err != nil {
		return err
	}
	cur, err := report.ReadReportContext(ctx, newPath)
	if err != nil {
		return err
	}
	cs, unmatched := report.Compare(old, cur)
	return report.WriteCompare(w, cs, unmatched)
}

// isTerminal says whether f is a terminal: a character device other than
// the null device (portable, no ioctl and no new dependency).
func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	if err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		return false
	}
	if null, err := os.Stat(os.DevNull); err == nil && os.SameFile(fi, null) {
		return false
	}
	return true
}

func fmtDur(seconds float64) string {
	d := time.Duration(seconds * float64(time.Second))
	switch {
	case d >= time.Second:
		return d.Round(10 * time.Millisecond).String()
	case d >= time.Millisecond:
		return d.Round(100 * time.Microsecond).String()
	}
	return d.Round(time.Microsecond).String()
}

// parseStages reads RATE[:DURATION] stages.
func parseStages(specs []string, def time.Duration) ([]bench.Stage, error) {
	var out []bench.Stage
	for _, s := range specs {
		rate, dur, hasDur := strings.Cut(s, ":")
		r, err := strconv.ParseFloat(rate, 64)
		if err != nil || !(r > 0) {
			return nil, usagef("--stage %q: rate must be a positive number of requests per second", s)
		}
		if r > config.MaxArrivalRate {
			return nil, usagef("--stage %q: rate %g is above the arrival cap of %d requests per second (for more, split the load over several targets)", s, r, config.MaxArrivalRate)
		}
		d := def
		if hasDur {
			if d, err = time.ParseDuration(dur); err != nil {
				return nil, usagef("--stage %q: %s (a duration is like 30s or 5m)", s, strings.TrimPrefix(err.Error(), "time: "))
			}
			if d <= 0 {
				return nil, usagef("--stage %q: duration must be positive, like 30s or 5m", s)
			}
		}
		out = append(out, bench.Stage{Rate: r, Duration: d})
	}
	return out, nil
}

// startSimChild runs `llmprobe sim` as a child process, so the simulator's
// CPU is not counted as the harness', and waits until it is healthy. It
// returns the base URL, a stop function and the child's pid.
func startSimChild(ctx context.Context, logger *slog.Logger, o *benchOptions) (string, func(), int, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", nil, 0, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, 0, err
	}
	addr := l.Addr().String()
	l.Close()
	args := []string{"sim", "--web.listen-address=" + addr, "--log.level=warn"}
	if o.simConfig != "" {
		args = append(args, "--sim.config.file="+o.simConfig)
	}
	if o.simZero {
		args = append(args, "--sim.zero-latency")
	}
	args = append(args, o.simArgs...)
	cmd := exec.Command(exe, args...)
	out := o.childOut
	if out == nil {
		out = os.Stderr
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return "", nil, 0, err
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	stop := func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}
	base := "http://" + addr
	deadline := time.Now().Add(10 * time.Second)
	health, err := httpclient.New(httpclient.Plain, "llmprobe_bench_sim", httpclient.Options{Timeout: 5 * time.Second})
	if err != nil {
		stop()
		return "", nil, 0, err
	}
	defer health.CloseIdleConnections()
	for {
		resp, err := health.Get(base + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case <-done:
			return "", nil, 0, fmt.Errorf("the simulator exited before it was healthy (its error is above)")
		default:
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			stop()
			return "", nil, 0, fmt.Errorf("the simulator did not become healthy at %s", base)
		}
		time.Sleep(50 * time.Millisecond)
	}
	logger.Info("simulator started in a child process", "url", base, "pid", cmd.Process.Pid)
	return base, stop, cmd.Process.Pid, nil
}

// checkGPUFlags refuses, before anything starts, a --prometheus.url that
// is not a URL Prometheus can be asked at, a --gpu.selector without it,
// and a --gpu.price-per-hour or --gpu.count that cannot give a cost per
// token.
func checkGPUFlags(o *benchOptions) error {
	if o.promURL != "" {
		if u, err := url.Parse(o.promURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return usagef("--prometheus.url %q: want an http or https URL, like http://prometheus:9090", scrub.URL(o.promURL))
		}
	}
	switch {
	case o.gpuSelector != "" && o.promURL == "":
		return usagef("--gpu.selector needs --prometheus.url: the selector picks the GPUs' series Prometheus is asked for")
	case o.gpuPrice < 0 || math.IsNaN(o.gpuPrice) || math.IsInf(o.gpuPrice, 0):
		return usagef("--gpu.price-per-hour must be 0 (none) or positive, got %g", o.gpuPrice)
	case o.gpuCount < 0:
		return usagef("--gpu.count must not be negative, got %d", o.gpuCount)
	case o.gpuPrice > 0 && o.gpuCount == 0 && o.promURL == "":
		return usagef("--gpu.price-per-hour needs the number of GPUs: --gpu.count, or --prometheus.url (with --gpu.selector) to count them")
	}
	return nil
}
