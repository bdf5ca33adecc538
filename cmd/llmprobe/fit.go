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
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/alecthomas/kingpin/v2"
	commoncfg "github.com/prometheus/common/config"
	"github.com/prometheus/common/model"

	"github.com/llmprobe/llmprobe/config"
	"github.com/llmprobe/llmprobe/fit"
	"github.com/llmprobe/llmprobe/internal/bounded"
	"github.com/llmprobe/llmprobe/internal/httpclient"
	"github.com/llmprobe/llmprobe/tracefile"
)

// fitFlags holds the parsed command line of `llmprobe fit`.
type fitFlags struct {
	accessLog        string
	promptFields     []string
	completionFields []string
	by               string

	promURL          string
	promConfigFile   string
	selector         string
	rangeStr         string
	timeStr          string
	promptMetric     string
	completionMetric string
	promTimeout      time.Duration

	trace            string
	traceFormat      string
	traceBlockSize   int
	traceCacheBlocks int
	traceBin         time.Duration
	traceMirror      bool

	output       string
	plot         string
	workloadName string
	model        string
	targetURL    string
	rate         float64
}

// registerFit registers `llmprobe fit`, which derives a workload from an
// access log or from a serving engine's token histograms in Prometheus
// (see docs/fit.md).
func registerFit(app *kingpin.Application) command {
	cmd := app.Command("fit", "Derive a workload (empirical length distributions) from an access log or from the server's token histograms in Prometheus; write a config file, a summary table and a histogram plot.")
	f := &fitFlags{}
	cmd.Flag("access-log", "JSON-lines access log to fit ('-' reads standard input; gzip is recognised).").PlaceHolder("FILE").StringVar(&f.accessLog)
	cmd.Flag("prompt-field", "Dotted path of the prompt token count (repeatable, tried in order). Default: "+strings.Join(fit.DefaultPromptFields, ", ")+".").PlaceHolder("PATH").StringsVar(&f.promptFields)
	cmd.Flag("completion-field", "Dotted path of the completion token count (repeatable, tried in order). Default: "+strings.Join(fit.DefaultCompletionFields, ", ")+".").PlaceHolder("PATH").StringsVar(&f.completionFields)
	cmd.Flag("by", "Split the requests into one class per value of this log field or Prometheus label (e.g. model), weighted by share.").PlaceHolder("FIELD").StringVar(&f.by)

	cmd.Flag("prometheus.url", "Prometheus base URL to read the server's token histograms from.").PlaceHolder("URL").StringVar(&f.promURL)
	cmd.Flag("prometheus.config.file", "YAML file with an http_client_config (prometheus/common) for Prometheus: basic_auth, authorization, tls_config, proxy.").PlaceHolder("FILE").StringVar(&f.promConfigFile)
	cmd.Flag("selector", "Label matchers selecting the server's series, e.g. 'namespace=\"prod\",model_name=\"llama\"'.").PlaceHolder("SEL").StringVar(&f.selector)
	cmd.Flag("range", "Time range to fit, ending at --time (Prometheus duration: 24h, 7d).").Default("24h").StringVar(&f.rangeStr)
	cmd.Flag("time", "End of the range: RFC 3339 or Unix seconds. Default: now.").PlaceHolder("TIME").StringVar(&f.timeStr)
	cmd.Flag("prometheus.prompt-metric", "Prompt-length histogram (without _bucket). Default: vLLM's, then SGLang's.").PlaceHolder("NAME").StringVar(&f.promptMetric)
	cmd.Flag("prometheus.completion-metric", "Completion-length histogram (without _bucket). Default: vLLM's, then SGLang's.").PlaceHolder("NAME").StringVar(&f.completionMetric)
	cmd.Flag("prometheus.timeout", "Timeout of the Prometheus queries, all together.").Default("2m").DurationVar(&f.promTimeout)

	cmd.Flag("trace", "Request trace to fit, with its joint structure (Mooncake, Azure, BurstGPT, llmprobe --requests, access log; gzip/zstd recognised; see docs/fit.md).").PlaceHolder("FILE").StringVar(&f.trace)
	cmd.Flag("trace.format", "Format of --trace: auto, mooncake, azure, burstgpt, llmprobe, accesslog.").Default("auto").EnumVar(&f.traceFormat, "auto", "mooncake", "azure", "burstgpt", "llmprobe", "accesslog")
	cmd.Flag("trace.block-size", "Tokens per hash_ids block of --trace (Mooncake's: 512).").Default("512").IntVar(&f.traceBlockSize)
	cmd.Flag("trace.cache-blocks", "Also report the reuse an LRU prefix cache of this many blocks sees (0: only the unbounded cache's).").Default("0").IntVar(&f.traceCacheBlocks)
	cmd.Flag("trace.bin", "Bin width of the trace's rate curve.").Default("1h").DurationVar(&f.traceBin)
	cmd.Flag("trace.mirror", "Write a class that mirrors --trace (from_trace, joint lengths, prefixes, sessions) and a trace_shape arrival instead of marginal tables.").BoolVar(&f.traceMirror)

	cmd.Flag("output", "Where to write the workload configuration ('-': standard output, and the summary goes to standard error).").Default("-").PlaceHolder("FILE").StringVar(&f.output)
	cmd.Flag("plot", "Also draw the length histograms to this file (.svg or .png).").PlaceHolder("FILE").StringVar(&f.plot)
	cmd.Flag("workload", "Name of the fitted workload.").Default("fitted").StringVar(&f.workloadName)
	cmd.Flag("model", "Model of the example target. Default: the most frequent model in the data.").StringVar(&f.model)
	cmd.Flag("target.url", "Base URL of the example target.").Default("http://127.0.0.1:8000/v1").StringVar(&f.targetURL)
	cmd.Flag("rate", "Request rate (per second) of the example target.").Default("0.5").Float64Var(&f.rate)
	return command{
		clause: cmd,
		run: func(ctx context.Context, logger *slog.Logger) error {
			return runFit(ctx, logger, f, os.Stdout, os.Stderr)
		},
	}
}

func runFit(ctx context.Context, logger *slog.Logger, f *fitFlags, stdout, stderr io.Writer) error {
	sources := 0
	for _, s := range []string{f.accessLog, f.promURL, f.trace} {
		if s != "" {
			sources++
		}
	}
	if sources != 1 {
		return usagef("fit: give exactly one source, --access-log=FILE, --prometheus.url=URL or --trace=FILE")
	}
	if f.trace != "" && f.by != "" {
		return usagef("fit: --by applies to --access-log and --prometheus.url, not --trace")
	}
	if f.traceMirror && f.trace == "" {
		return usagef("fit: --trace.mirror needs --trace=FILE")
	}
	if f.trace != "" && (f.traceBlockSize < 1 || f.traceBlockSize > config.MaxTraceBlockSize) {
		return usagef("fit: --trace.block-size must be from 1 to %d tokens, got %d", config.MaxTraceBlockSize, f.traceBlockSize)
	}
	if !(f.rate > 0) || math.IsInf(f.rate, 0) {
		return usagef("fit: --rate must be a positive number of requests per second, got %v", f.rate)
	}
	plotFormat := ""
	if f.plot != "" {
		var err error
		if plotFormat, err = fit.PlotFormat(f.plot); err != nil {
			return usageError{err}
		}
	}

	var (
		res *fit.Result
		err error
	)
	switch {
	case f.trace != "":
		// A trace streams through small live state and much short-lived
		// garbage (a record a line): the binary's GOGC=400, meant for the
		// daemon, would let the heap grow to five times the live state.
		if os.Getenv("GOGC") == "" {
			defer debug.SetGCPercent(debug.SetGCPercent(traceGCPercent))
		}
		res, err = fit.FromTrace(ctx, f.trace, fit.TraceOptions{
			Format:      tracefile.Format(f.traceFormat),
			BlockSize:   f.traceBlockSize,
			CacheBlocks: f.traceCacheBlocks,
			Bin:         f.traceBin,
		})
		if err != nil {
			err = fmt.Errorf("fit: --trace: %w", err)
		}
	case f.accessLog != "":
		res, err = fit.FromAccessLog(ctx, f.accessLog, fit.LogOptions{
			PromptFields:     f.promptFields,
			CompletionFields: f.completionFields,
			By:               f.by,
		})
	default:
		res, err = fitPrometheus(ctx, f)
	}
	if err != nil {
		return err
	}
	mirror := ""
	if f.traceMirror {
		if mirror, err = mirrorPath(f.trace, f.output); err != nil {
			return err
		}
	}

	var cfg bytes.Buffer
	if err := fit.WriteWorkload(&cfg, res, fit.WorkloadOptions{
		Name:      f.workloadName,
		TargetURL: f.targetURL,
		Model:     f.model,
		Rate:      f.rate,

		MirrorFile: mirror,
	}); err != nil {
		return err
	}
	// What fit writes must be a configuration check-config accepts; a flag
	// such as --target.url can still make it invalid.
	name := f.output
	if name == "-" {
		name = "fitted workload"
	}
	if _, err := config.Load(cfg.Bytes(), name); err != nil {
		return fmt.Errorf("fit: the written configuration would not validate:\n%w", err)
	}
	summary := stdout
	if f.output == "-" {
		summary = stderr
		if _, err := stdout.Write(cfg.Bytes()); err != nil {
			return fmt.Errorf("writing the workload: %w", err)
		}
	} else {
		if err := writeFileAtomic(f.output, cfg.Bytes()); err != nil {
			return err
		}
		logger.Info("wrote workload configuration", "file", f.output, "classes", len(res.Classes))
	}
	if f.plot != "" {
		var img bytes.Buffer
		if err := fit.WritePlot(&img, res, plotFormat); err != nil {
			return err
		}
		if err := writeFileAtomic(f.plot, img.Bytes()); err != nil {
			return err
		}
		logger.Info("wrote plot", "file", f.plot)
	}
	return fit.WriteSummary(summary, res)
}

// traceGCPercent is the GOGC of fit --trace (see runFit).
const traceGCPercent = 25

// mirrorPath is the trace's path as the written configuration names it:
// relative to the configuration's directory (the working directory for
// standard output) when the trace lies under it, else absolute.
func mirrorPath(trace, output string) (string, error) {
	abs, err := filepath.Abs(trace)
	if err != nil {
		return "", err
	}
	dir := "."
	if output != "-" {
		dir = filepath.Dir(output)
	}
	absDir, err := filepath.Abs(dir)
	if err != nil {
		return abs, nil
	}
	if rel, err := filepath.Rel(absDir, abs); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return rel, nil
	}
	return abs, nil
}

func fitPrometheus(ctx context.Context, f *fitFlags) (*fit.Result, error) {
	rng, err := model.ParseDuration(f.rangeStr)
	if err != nil || rng <= 0 {
		return nil, usagef("fit: --range=%q is not a positive duration (e.g. 24h, 7d)", f.rangeStr)
	}
	at, err := parseFitTime(f.timeStr)
	if err != nil {
		return nil, err
	}
	// One client, as every client of the binary (internal/httpclient): a
	// redirect to another host is refused.
	hc := httpclient.Plain
	if f.promConfigFile != "" {
		c, err := loadHTTPConfigFile(ctx, f.promConfigFile)
		if err != nil {
			return nil, fmt.Errorf("fit: --prometheus.config.file: %w", err)
		}
		hc = *c
	}
	client, err := httpclient.New(hc, "llmprobe_fit", httpclient.Options{})
	if err != nil {
		return nil, fmt.Errorf("fit: --prometheus.config.file %s: %w", f.promConfigFile, err)
	}
	if f.promTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, f.promTimeout)
		defer cancel()
	}
	return fit.FromPrometheus(ctx, client, fit.PromOptions{
		URL:              f.promURL,
		Selector:         f.selector,
		Range:            time.Duration(rng),
		Time:             at,
		PromptMetric:     f.promptMetric,
		CompletionMetric: f.completionMetric,
		By:               f.by,
	})
}

// maxHTTPConfigFile bounds --prometheus.config.file (an http_client_config:
// a few KiB).
const maxHTTPConfigFile = 1 << 20

// loadHTTPConfigFile is prometheus/common's LoadHTTPConfigFile with a
// bounded read: relative file names in it are relative to its directory.
func loadHTTPConfigFile(ctx context.Context, path string) (*commoncfg.HTTPClientConfig, error) {
	data, err := bounded.ReadFile(ctx, path, maxHTTPConfigFile)
	if err != nil {
		return nil, err
	}
	hc, err := commoncfg.LoadHTTPConfig(string(data))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	hc.SetDirectory(filepath.Dir(path))
	return hc, nil
}

// parseFitTime parses --time: RFC 3339, or Unix seconds (with a
// fraction). Empty means now (the zero time).
func parseFitTime(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if v, err := strconv.ParseFloat(s, 64); err == nil && v > 0 && !math.IsInf(v, 0) {
		sec, frac := math.Modf(v)
		return time.Unix(int64(sec), int64(math.Round(frac*1e9))), nil
	}
	return time.Time{}, usagef("fit: --time=%q is neither RFC 3339 nor Unix seconds", s)
}

// writeFileAtomic writes data to path through a temporary file in the
// same directory, so that a failed run never leaves half a file.
func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after a successful rename this is a no-op error
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
