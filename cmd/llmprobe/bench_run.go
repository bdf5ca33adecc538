// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/common/version"

	"github.com/llmprobe/llmprobe/bench"
	"github.com/llmprobe/llmprobe/bench/report"
	"github.com/llmprobe/llmprobe/config"
	"github.com/llmprobe/llmprobe/internal/scrub"
	"github.com/llmprobe/llmprobe/probe/wire"
)

// What bench does around its stages: the output files checked before the
// first request, the preflight request per target, the report's run
// information, the live progress coordinated with log lines, and the
// verdict on errors and interruption that sets the exit code.

// benchOutput is one --output file and how it is written.
type benchOutput struct {
	path   string
	format report.Format
}

// checkBenchOutputs validates every file the run will write (--output,
// --plot, --requests) before anything is sent: a known extension, no
// path given twice, and a directory that exists and takes a new file
// (tried by creating and removing a temporary file in it); an existing
// file must be a regular file that opens for writing (it is not changed).
func checkBenchOutputs(o *benchOptions) ([]benchOutput, error) {
	var outs []benchOutput
	seen := map[string]string{}
	check := func(flag, path string) error {
		abs, err := filepath.Abs(path)
		if err != nil {
			return usagef("%s %q: %v", flag, path, err)
		}
		if prev, ok := seen[abs]; ok {
			return usagef("%s %q: the same file is already written by %s", flag, path, prev)
		}
		seen[abs] = flag
		if err := checkWritable(path); err != nil {
			return usagef("%s %q: %v", flag, path, err)
		}
		return nil
	}
	for _, p := range o.outputs {
		f, ok := report.FormatOf(p)
		if !ok || f.Plot {
			return nil, usagef("--output %q: the file must end in %s", p, report.Extensions(false))
		}
		if err := check("--output", p); err != nil {
			return nil, err
		}
		outs = append(outs, benchOutput{path: p, format: f})
	}
	if o.plot != "" {
		if err := check("--plot", o.plot); err != nil {
			return nil, err
		}
	}
	if o.requests != "" {
		if err := check("--requests", o.requests); err != nil {
			return nil, err
		}
	}
	return outs, nil
}

// checkWritable says why path cannot be written, without changing it.
func checkWritable(path string) error {
	dir := filepath.Dir(path)
	fi, err := os.Stat(dir)
	switch {
	case err != nil:
		return fmt.Errorf("its directory %s: %w", dir, errors.Unwrap(err))
	case !fi.IsDir():
		return fmt.Errorf("%s is not a directory", dir)
	}
	if fi, err := os.Stat(path); err == nil {
		if !fi.Mode().IsRegular() {
			return fmt.Errorf("exists and is not a regular file")
		}
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			return fmt.Errorf("cannot be written: %w", errors.Unwrap(err))
		}
		return f.Close()
	}
	f, err := os.CreateTemp(dir, ".llmprobe-bench-check-*")
	if err != nil {
		return fmt.Errorf("its directory %s takes no new file: %w", dir, errors.Unwrap(err))
	}
	name := f.Name()
	f.Close()
	return os.Remove(name)
}

// resolveSeed sets global.seed for the run: --seed, else the
// configuration's, else a random one, and says which.
func resolveSeed(cfg *config.Config, flag uint64, flagSet bool) (uint64, string) {
	switch {
	case flagSet:
		cfg.Global.Seed = flag
		return flag, "flag"
	case cfg.Global.Seed != 0:
		return cfg.Global.Seed, "config"
	}
	for cfg.Global.Seed == 0 { // 0 means "random per runner" to the engine
		cfg.Global.Seed = rand.Uint64()
	}
	return cfg.Global.Seed, "random"
}

// runInfo is what the report says of the run that wrote it.
func runInfo(args []string, seed uint64, source string) *report.RunInfo {
	host, _ := os.Hostname()
	ri := &report.RunInfo{
		Version:     version.Version,
		Revision:    version.Revision,
		CommandLine: redactArgs(args),
		Host:        host,
		GOMAXPROCS:  runtime.GOMAXPROCS(0),
		NumCPU:      runtime.NumCPU(),
		Seed:        seed,
		SeedSource:  source,
	}
	if info, ok := debug.ReadBuildInfo(); ok {
		ri.GoVersion = info.GoVersion
		if ri.Revision == "" {
			for _, s := range info.Settings {
				if s.Key == "vcs.revision" {
					ri.Revision = s.Value
				}
			}
		}
	}
	return ri
}

// stageWarnings are the warnings of the planned open-loop stages, given
// before the run: a stage asking for more than this host's ceiling
// (harnessCeiling; the targets share the process, so their rates add
// up), and a stage the warm-up fills (it is inside the stage's duration).
func stageWarnings(stages []bench.Stage, targets int, warmup time.Duration, selftestFile string) []string {
	ceiling, source := harnessCeiling(selftestFile)
	var out []string
	for i, st := range stages {
		if w := aboveCeiling(i+1, st.Rate*float64(targets), targets, ceiling, source); w != "" {
			out = append(out, w)
		}
		if warmup >= st.Duration {
			out = append(out, fmt.Sprintf("stage %d: the warm-up (%v) is as long as the stage (%v): none of its requests is measured; give a shorter --warmup or a longer stage", i+1, warmup, st.Duration))
		}
	}
	return out
}

// ranAboveCeiling are the ceiling's warnings of the stages of rep (a
// search's, a replay's), once they ran.
func ranAboveCeiling(rep *report.Report, selftestFile string) []string {
	ceiling, source := harnessCeiling(selftestFile)
	var out []string
	for i := 0; i < len(rep.Stages); {
		total, targets := 0.0, 0
		for _, s := range rep.Stages[i:] {
			if s.Stage != rep.Stages[i].Stage {
				break
			}
			total, targets = total+s.RequestedRate, targets+1
		}
		if w := aboveCeiling(rep.Stages[i].Stage, total, targets, ceiling, source); w != "" {
			out = append(out, w)
		}
		i += targets
	}
	return out
}

// aboveCeiling is the warning of a stage asking for total req/s of its
// targets together, when that is above ceiling ("" otherwise).
func aboveCeiling(stage int, total float64, targets int, ceiling float64, source string) string {
	if !(total > ceiling) {
		return ""
	}
	rate := fmtRate(total) + " req/s"
	if targets > 1 {
		rate += fmt.Sprintf(" (%d targets together)", targets)
	}
	return fmt.Sprintf("stage %d asks for %s, above the %s req/s this host drives with an honest verdict (%s): expect it NOT TRUSTED (harness saturated); give llmprobe more CPU, or split the load over several hosts",
		stage, rate, fmtRate(ceiling), source)
}

// secretFlag matches the flags whose value is a secret, should one exist.
var secretFlag = regexp.MustCompile(`(?i)(key|token|secret|password|passwd|credential|auth|bearer)`)

// redacted stands for a secret in the command line.
const redacted = "<redacted>"

// redactArgs is the command line with secrets hidden: the value of any
// flag named like a secret (--x.api-key=V, or V after --x.api-key), and
// every URL's user information and query values (redactURLArg).
// No bench flag takes a secret today (keys come from the configuration's
// files and environment, never written); this keeps it so.
func redactArgs(args []string) []string {
	out := make([]string, len(args))
	hideNext := false
	for i, a := range args {
		switch {
		case hideNext:
			out[i], hideNext = redacted, false
			continue
		case strings.HasPrefix(a, "-"):
			name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
			if secretFlag.MatchString(name) {
				if hasValue {
					out[i] = a[:len(a)-len(value)] + redacted
				} else {
					out[i], hideNext = a, !strings.HasPrefix(name, "no-")
				}
				continue
			}
			if hasValue {
				out[i] = a[:len(a)-len(value)] + redactURLArg(value)
				continue
			}
		}
		out[i] = redactURLArg(a)
	}
	return out
}

// redactURLArg masks every URL in an argument as everywhere else
// (scrub.URL): each element of a comma-separated list
// (--server-metrics=A,B), the URL of TARGET=URL included.
func redactURLArg(s string) string {
	parts := strings.Split(s, ",")
	for i, p := range parts {
		parts[i] = scrub.URLs(p)
	}
	return strings.Join(parts, ",")
}

// preflight sends one request per selected target and fails the run,
// naming each target that failed and why (with what to try for a 404),
// unless every one succeeded. quick says the target came from --url.
func preflight(ctx context.Context, logger *slog.Logger, opts bench.Options, quick bool) error {
	results, err := bench.Preflight(ctx, opts)
	if err != nil && ctx.Err() != nil {
		return errors.New("interrupted during the preflight requests: nothing was benchmarked")
	}
	if err != nil {
		return fmt.Errorf("preflight: %w", err)
	}
	var failed []string
	for _, r := range results {
		if r.OK() {
			logger.Info("preflight request succeeded", "target", r.Target, "ttft", r.TTFT, "e2e", r.E2E)
			continue
		}
		cause := r.Cause()
		if t := opts.Config.Target(r.Target); t != nil && r.StatusCode == http.StatusNotFound {
			cause += "; " + notFoundHint(r, t.API, quick)
		}
		failed = append(failed, fmt.Sprintf("target %s (%s): %s", r.Target, r.URL, cause))
	}
	switch len(failed) {
	case 0:
		return nil
	case 1:
		return fmt.Errorf("preflight request failed, nothing was benchmarked (--no-preflight skips the check): %s", failed[0])
	}
	return fmt.Errorf("preflight requests failed, nothing was benchmarked (--no-preflight skips the check):\n  %s", strings.Join(failed, "\n  "))
}

// notFoundHint is what to try when target r's preflight request was
// answered 404: the endpoint it asked, and for a base URL without a /v1
// segment (where OpenAI-compatible servers serve) that URL with /v1,
// else where the served models are listed (vLLM and the simulator answer
// 404 for a model they do not serve).
func notFoundHint(r bench.PreflightResult, api string, quick bool) string {
	base := strings.TrimSuffix(r.URL, "/")
	s := fmt.Sprintf("the server answered 404 for %s%s", base, wire.API(api).Path())
	if u, err := url.Parse(r.URL); err == nil && !slices.Contains(strings.Split(u.Path, "/"), "v1") {
		if quick {
			return s + "; OpenAI-compatible servers serve under /v1: try --url=" + base + "/v1"
		}
		return s + fmt.Sprintf("; OpenAI-compatible servers serve under /v1: try url: %s/v1 for target %s", base, r.Target)
	}
	return s + fmt.Sprintf("; GET %s/models lists the models the server serves", base)
}

// benchVerdict is the run's failure when a stage's error share is above
// maxRatio (each such stage named with its outcomes) or the run was
// interrupted (ctx cancelled); nil otherwise. The reports are written
// before.
func benchVerdict(ctx context.Context, rep *report.Report, maxRatio float64) error {
	var bad []string
	interrupted := ctx.Err() != nil
	for _, s := range rep.Stages {
		interrupted = interrupted || s.Interrupted
		if errs, results, share := s.ErrorShare(); errs > 0 && share > maxRatio {
			bad = append(bad, fmt.Sprintf("stage %d %s: %d of %d results failed (%.1f%%)", s.Stage, s.Target, errs, results, 100*share))
		}
	}
	switch {
	case len(bad) > 0:
		return fmt.Errorf("the error share is above --max-error-ratio=%g in %s (their outcomes are above)", maxRatio, strings.Join(bad, "; "))
	case interrupted:
		return errors.New("interrupted: the run was cancelled before its end; the reports hold the stages run so far, a stage cut short marked interrupted")
	}
	return nil
}

// console coordinates what bench writes while stages run: the progress
// block, redrawn in place on a terminal, and log lines (bench's own and
// the simulator child's), which clear the block, are written, and have
// the block redrawn below them, so that neither overwrites the other.
type console struct {
	mu    sync.Mutex
	out   io.Writer // the terminal the block is drawn on
	width int       // its columns (0: unknown); longer lines are cut, lest they wrap
	block string    // the block on screen ("" none)
}

// clear erases the block; the cursor ends at the start of its first line.
func (c *console) clear() {
	if c.block == "" {
		return
	}
	s := "\r"
	if n := strings.Count(c.block, "\n"); n > 0 {
		s += fmt.Sprintf("\x1b[%dA", n)
	}
	io.WriteString(c.out, s+"\x1b[J")
}

// draw replaces the block by block; done leaves it as the stage's summary
// (the next block starts below it).
func (c *console) draw(block string, done bool) {
	if c.width > 1 {
		lines := strings.Split(block, "\n")
		for i, l := range lines {
			if r := []rune(l); len(r) >= c.width {
				lines[i] = string(r[:c.width-1])
			}
		}
		block = strings.Join(lines, "\n")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.clear()
	if done {
		io.WriteString(c.out, block+"\n")
		c.block = ""
		return
	}
	io.WriteString(c.out, block)
	c.block = block
}

// around runs write (a log line) with the block out of its way.
func (c *console) around(write func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.clear()
	write()
	if c.block != "" {
		io.WriteString(c.out, c.block)
	}
}

// consoleHandler is a slog handler whose records are written around the
// console's block.
type consoleHandler struct {
	slog.Handler
	c *console
}

func (h consoleHandler) Handle(ctx context.Context, r slog.Record) error {
	var err error
	h.c.around(func() { err = h.Handler.Handle(ctx, r) })
	return err
}

func (h consoleHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return consoleHandler{h.Handler.WithAttrs(as), h.c}
}

func (h consoleHandler) WithGroup(name string) slog.Handler {
	return consoleHandler{h.Handler.WithGroup(name), h.c}
}

// lineWriter writes whole lines to w around the console's block (the
// simulator child's standard error).
type lineWriter struct {
	c   *console
	w   io.Writer
	mu  sync.Mutex
	buf []byte
}

func (l *lineWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	if i := bytes.LastIndexByte(l.buf, '\n'); i >= 0 {
		lines := slices.Clone(l.buf[:i+1])
		l.buf = append(l.buf[:0], l.buf[i+1:]...)
		l.c.around(func() { _, _ = l.w.Write(lines) })
	}
	return len(p), nil
}

// progressPlan is what the progress needs to know of the run beyond a
// stage's figures: the planned stages (for the run's ETA), or the most
// stages of a search.
type progressPlan struct {
	stages []bench.Stage // the planned stages (none for a search)
	total  int           // the stages, or the most a search runs
	exact  bool          // total is the count, not a bound
}

// progressPlan is the plan of the run o asks for.
func (o *benchOptions) progressPlan(stages []bench.Stage) progressPlan {
	if !o.find.active() {
		return progressPlan{stages: stages, total: len(stages), exact: true}
	}
	levels := len(o.find.opts.Levels)
	if o.find.mode == "" {
		return progressPlan{total: levels, exact: true}
	}
	return progressPlan{total: o.find.maxStages + levels}
}

// checkBenchConfig checks, once the configuration is loaded and before
// anything is sent, what the command line asks of it: the targets
// --target names, the --server-metrics URLs, and a search's one target
// and SLO.
func checkBenchConfig(o *benchOptions, opts bench.Options) error {
	for _, name := range opts.Targets {
		if opts.Config.Target(name) == nil {
			names := make([]string, 0, len(opts.Config.Targets))
			for _, t := range opts.Config.Targets {
				names = append(names, t.Name)
			}
			if len(names) > 10 {
				names = append(names[:10], "...")
			}
			return usagef("--target %q: the configuration has no such target (its targets: %s)", name, strings.Join(names, ", "))
		}
	}
	if err := bench.CheckServerMetrics(opts); err != nil {
		return usagef("--server-metrics: %v", err)
	}
	return o.find.checkConfig(opts)
}

// countTargets is how many targets of cfg names selects (all when empty).
func countTargets(cfg *config.Config, names []string) int {
	n := 0
	for _, t := range cfg.Targets {
		if len(names) == 0 || slices.Contains(names, t.Name) {
			n++
		}
	}
	return n
}

// formatProgress is a stage's progress: a header with the stage i/n, its
// rate, elapsed of its duration and the ETAs, then one line per target
// with what it was sent and its rate (req/s), errors, drops and TTFT.
// Every line is under 80 columns for target names up to 16 characters.
func formatProgress(p bench.Progress, plan progressPlan) []string {
	of := fmt.Sprintf("%d/%d", p.Stage, max(plan.total, p.Stages))
	if !plan.exact && plan.total > 0 {
		of = fmt.Sprintf("%d of at most %d", p.Stage, plan.total)
	}
	rate := ""
	if p.RequestedRate > 0 {
		rate = fmt.Sprintf(" at %s req/s", fmtRate(p.RequestedRate))
	}
	head := fmt.Sprintf("stage %s%s: %s of %s", of, rate, p.Elapsed.Truncate(time.Second), p.Duration)
	if p.Done {
		head += ", done"
	} else {
		left := max(p.Duration-p.Elapsed, 0).Round(time.Second)
		head += fmt.Sprintf(", ETA %s", left)
		if p.Stage < len(plan.stages) {
			for _, st := range plan.stages[p.Stage:] {
				left += st.Duration
			}
			head += fmt.Sprintf(" (run %s)", left)
		}
	}
	lines := []string{head}
	targets := p.Targets
	if len(targets) == 0 { // a Progress from before per-target figures
		targets = []bench.TargetProgress{{Sent: p.Sent, Rate: p.Rate, Errors: p.Errors, Dropped: p.Dropped,
			TTFTP50: p.TTFTP50, TTFTP99: p.TTFTP99, TTFTCount: p.TTFTCount}}
	}
	for _, t := range targets {
		ttft := "TTFT -"
		if t.TTFTCount > 0 {
			ttft = fmt.Sprintf("TTFT p50 %s p99 %s", fmtDur(t.TTFTP50), fmtDur(t.TTFTP99))
		}
		name := t.Target
		if name == "" {
			name = "all"
		}
		lines = append(lines, fmt.Sprintf("  %s: %d sent (%.1f req/s), %d err, %d drop, %s", name, t.Sent, t.Rate, t.Errors, t.Dropped, ttft))
	}
	return lines
}

func fmtRate(r float64) string { return fmt.Sprintf("%.4g", r) }

// progressPrinter draws the progress block in place on a terminal.
func progressPrinter(c *console, plan progressPlan) func(bench.Progress) {
	return func(p bench.Progress) {
		c.draw(strings.Join(formatProgress(p, plan), "\n"), p.Done)
	}
}

// plainProgressInterval is how often progress is written where standard
// output is not a terminal.
const plainProgressInterval = 10 * time.Second

// plainProgress writes the progress as one plain line (no control
// characters) to w: every plainProgressInterval and at each stage's end.
func plainProgress(w io.Writer, plan progressPlan) func(bench.Progress) {
	var mu sync.Mutex
	return func(p bench.Progress) {
		lines := formatProgress(p, plan)
		for i := range lines {
			lines[i] = strings.TrimSpace(lines[i])
		}
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(w, "bench progress: %s\n", strings.Join(lines, "; "))
	}
}
