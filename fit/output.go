// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package fit

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"

	"github.com/llmprobe/llmprobe/config"
	"github.com/llmprobe/llmprobe/internal/scrub"
)

// WorkloadOptions shape the configuration file WriteWorkload writes.
type WorkloadOptions struct {
	// Name is the workload's name (default "fitted").
	Name string
	// TargetName, TargetURL, API and Rate describe the example target
	// (defaults "example", http://127.0.0.1:8000/v1, chat, 0.5 req/s).
	TargetName string
	TargetURL  string
	API        string
	Rate       float64
	// Model is the example target's model (default: the most frequent
	// model in the data, else FallbackModel).
	Model string
	// MirrorFile, for a trace, writes a class that mirrors the trace
	// (from_trace) and a trace_shape arrival instead of the marginal
	// tables; it is the trace's path as the configuration names it
	// (relative to the configuration's directory, or absolute).
	MirrorFile string
}

// FallbackModel is written as the example target's model when neither
// the options nor the data name one.
const FallbackModel = "my-model"

func (o WorkloadOptions) withDefaults(r *Result) WorkloadOptions {
	if o.Name == "" {
		o.Name = "fitted"
	}
	if o.TargetName == "" {
		o.TargetName = "example"
	}
	if o.TargetURL == "" {
		o.TargetURL = "http://127.0.0.1:8000/v1"
	}
	if o.API == "" {
		o.API = config.APIChat
	}
	if o.Rate == 0 {
		o.Rate = 0.5
	}
	if o.Model == "" {
		o.Model = r.Model
	}
	return o
}

// WriteWorkload writes a complete configuration file holding the fitted
// workload, the default global settings and one example target, headed
// by a comment that says where the numbers came from, the log-normal fit
// of each length, and how to adapt the file. `llmprobe check-config`
// accepts it as written.
func WriteWorkload(w io.Writer, r *Result, opts WorkloadOptions) error {
	o := opts.withDefaults(r)
	if !classNameRE.MatchString(o.Name) {
		return fmt.Errorf("invalid workload name %q (letters, digits, _ . : / -; at most 63)", o.Name)
	}
	if !classNameRE.MatchString(o.TargetName) {
		return fmt.Errorf("invalid target name %q (letters, digits, _ . : / -; at most 63)", o.TargetName)
	}
	if !(o.Rate > 0) || math.IsInf(o.Rate, 0) {
		return fmt.Errorf("rate must be a positive number of requests per second, got %v", o.Rate)
	}
	if len(r.Classes) == 0 {
		return errors.New("the result has no classes")
	}
	bw := bufio.NewWriter(w)
	p := func(format string, args ...any) { fmt.Fprintf(bw, format, args...) }

	// Header.
	p("# Workload fitted by `llmprobe fit` from %s.\n", comment(redactSource(r.Source)))
	for _, line := range provenance(r) {
		p("#   %s\n", line)
	}
	p("#\n")
	p("# Log-normal fit, ln(tokens) ~ Normal(mu, sigma): for reference only, the\n")
	p("# empirical quantile tables below are what llmprobe draws from.\n")
	for _, c := range r.Classes {
		prefix := ""
		if len(r.Classes) > 1 {
			prefix = "class " + c.Name + " "
		}
		p("#   %sprompt_tokens: %s\n", prefix, logNormalNote(c.Prompt))
		p("#   %soutput_tokens: %s\n", prefix, logNormalNote(c.Output))
	}
	p("#\n")
	p("# Quantile tables hold p = 0.5, 0.9 and 0.99 always, and 0.01, 0.1, 0.25,\n")
	p("# 0.75, 0.95 and 0.999 where at least %d requests lie beyond the point.\n", MinTail)
	p("# Values are whole tokens (at least 1); min and max are the smallest and\n")
	if r.SourceKind == SourcePrometheus {
		p("# largest lengths the histogram buckets allow. Within a bucket, lengths\n")
		p("# are interpolated log-linearly, so table points are only as precise as\n")
		p("# the server's buckets.\n")
	} else {
		p("# largest lengths seen.\n")
	}
	for _, wn := range r.Warnings {
		p("# Note: %s.\n", comment(wn))
	}
	if j := r.Trace; j != nil {
		writeTraceHeader(bw, j, o.MirrorFile != "")
	}
	p("#\n")
	p("# To adapt: point the target at your endpoint (url, model, api, and\n")
	p("# http_client_config for credentials), set arrival.rate to the probe rate\n")
	p("# you want, add `prefix:` to a class to model shared system prompts, then\n")
	p("# run `llmprobe check-config` on this file.\n")

	g := config.DefaultGlobal
	p("global:\n")
	p("  # Requests in the first minutes after start are kept out of the\n")
	p("  # latency histograms; request_timeout bounds each request end to end.\n")
	p("  warmup: %s\n", g.Warmup)
	p("  request_timeout: %s\n", g.RequestTimeout)

	p("workloads:\n")
	p("  %s:\n", yamlString(o.Name))
	p("    classes:\n")
	for _, c := range r.Classes {
		p("      # %s\n", comment(classNote(r, c)))
		p("      - name: %s\n", yamlString(c.Name))
		p("        weight: %s\n", formatNumber(math.Round(c.Weight*1e4)/1e4))
		if r.Trace != nil && o.MirrorFile != "" {
			writeFromTrace(bw, r.Trace, o.MirrorFile)
			continue
		}
		writeLengths(bw, "prompt_tokens", c.Prompt)
		writeLengths(bw, "output_tokens", c.Output)
		if c.Prefix != nil {
			writePrefix(bw, r.Trace, c.Prefix)
		}
	}

	p("targets:\n")
	p("  - name: %s\n", yamlString(o.TargetName))
	p("    url: %s\n", yamlString(o.TargetURL))
	p("    api: %s\n", yamlString(o.API))
	if o.Model == "" {
		p("    model: %s   # the data names no model: set the served model name\n", FallbackModel)
	} else {
		p("    model: %s\n", yamlString(o.Model))
	}
	p("    workload: %s\n", yamlString(o.Name))
	if r.Trace != nil && o.MirrorFile != "" {
		writeTraceArrival(bw, r.Trace, o.MirrorFile, o.Rate)
	} else {
		p("    arrival: {process: poisson, rate: %s}   # requests per second: a probe, not a load test\n", formatNumber(o.Rate))
	}
	p("    # extra_body: {ignore_eos: true}   # vLLM, SGLang: decode the full planned output length\n")
	return bw.Flush()
}

func writeLengths(w io.Writer, key string, l *Lengths) {
	fmt.Fprintf(w, "        %s:\n", key)
	fmt.Fprintf(w, "          dist: empirical\n")
	fmt.Fprintf(w, "          quantiles:\n")
	for _, pt := range l.Table {
		fmt.Fprintf(w, "            %s: %s\n", strconv.FormatFloat(pt.P, 'f', -1, 64), formatNumber(pt.V))
	}
	fmt.Fprintf(w, "          min: %s\n", formatNumber(l.TableMin()))
	if hi := l.TableMax(); !math.IsNaN(hi) {
		fmt.Fprintf(w, "          max: %s\n", formatNumber(hi))
	}
}

// provenance lists the facts about the data for the header.
func provenance(r *Result) []string {
	var out []string
	const layout = "2006-01-02T15:04:05Z07:00"
	switch r.SourceKind {
	case SourcePrometheus:
		out = append(out, fmt.Sprintf("range: %s ending %s (%s .. %s)", formatDuration(r.End.Sub(r.Start)),
			r.End.UTC().Format(layout), r.Start.UTC().Format(layout), r.End.UTC().Format(layout)))
		for _, q := range r.Queries {
			out = append(out, "query: "+comment(q))
		}
		out = append(out, fmt.Sprintf("requests: %s (PromQL's increase of the histogram count, extrapolated to the range's ends)", formatCount(r.Count())))
	case SourceTrace:
		out = append(out, traceProvenance(r)...)
	default:
		if !r.Start.IsZero() {
			out = append(out, fmt.Sprintf("time range: %s .. %s", r.Start.Format(layout), r.End.Format(layout)))
		}
		if s := r.Log; s != nil {
			line := fmt.Sprintf("%d lines: %d requests used, %d skipped", s.Lines, s.Used, s.Skipped)
			if s.Skipped > 0 {
				line += " (" + formatSkips(s.Skips) + "; first at line" + plural(len(s.FirstSkipped)) + " " + joinInts(s.FirstSkipped) + ")"
			}
			out = append(out, line)
			if s.CachedLines > 0 && s.CachedPrompt > 0 {
				out = append(out, fmt.Sprintf("prompt tokens served from the prefix cache: %.1f%% (over the %d lines that report cached tokens)",
					100*s.Cached/s.CachedPrompt, s.CachedLines))
			}
		}
	}
	for _, z := range []struct {
		name string
		l    *Lengths
	}{{"prompt", r.Prompt}, {"completion", r.Output}} {
		if z.l.Zeros > 0 {
			out = append(out, fmt.Sprintf("%d requests with 0 %s tokens (e.g. cancelled before the first token): counted, drawn as 1 token", z.l.Zeros, z.name))
		}
	}
	if r.Model != "" {
		out = append(out, "model: "+comment(r.Model))
	}
	if r.By != "" {
		out = append(out, fmt.Sprintf("classes: one per value of %s, weighted by share of requests", comment(r.By)))
	}
	return out
}

func classNote(r *Result, c *Class) string {
	n := fmt.Sprintf("%s requests (%.1f%%)", formatCount(c.Prompt.Count), 100*c.Weight)
	if r.By != "" {
		n = fmt.Sprintf("%s=%q: %s", r.By, c.Value, n)
		if c.Value == otherClass {
			n = fmt.Sprintf("%s: the smaller %s groups together", n, r.By)
		}
	}
	return n + "; mean prompt " + formatNumber(roundSig(c.Prompt.Mean)) + ", mean output " + formatNumber(roundSig(c.Output.Mean)) + " tokens"
}

// logNormalNote describes a length's log-normal fit and how well it
// matches the data's tail.
func logNormalNote(l *Lengths) string {
	if l.FitErr != nil {
		return "no fit (" + l.FitErr.Error() + ")"
	}
	median, p99 := math.Exp(l.Mu), math.Exp(l.Mu+l.Sigma*z99)
	dp50, dp99 := l.Quantile(0.5), l.Quantile(0.99)
	note := fmt.Sprintf("mu=%.3f sigma=%.3f, median %s, p99 %s (data: median %s, p99 %s; fit median %s, p99 %s)",
		l.Mu, l.Sigma, formatNumber(roundSig(median)), formatNumber(roundSig(p99)),
		formatNumber(roundSig(dp50)), formatNumber(roundSig(dp99)), relDiff(median, dp50), relDiff(p99, dp99))
	if poorFit(l) {
		note += "; a poor fit: the data is not log-normal (a mix of request kinds?), the table follows it"
	}
	return note
}

// poorFit reports whether the log-normal misses the data's median by more
// than 20% or its p99 by more than 25%.
func poorFit(l *Lengths) bool {
	if l.FitErr != nil {
		return false
	}
	median, p99 := math.Exp(l.Mu), math.Exp(l.Mu+l.Sigma*z99)
	return math.Abs(median/l.Quantile(0.5)-1) > 0.2 || math.Abs(p99/l.Quantile(0.99)-1) > 0.25
}

func relDiff(v, ref float64) string {
	if !(ref > 0) || math.IsNaN(v) {
		return "n/a"
	}
	return fmt.Sprintf("%+.0f%%", 100*(v/ref-1))
}

// WriteSummary writes the summary table: per length the count, skipped
// lines, mean, extremes and quantiles, then the log-normal fit next to
// the data's p99. With several classes, one block per class follows the
// overall one.
func WriteSummary(w io.Writer, r *Result) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "Source: %s\n", redactSource(r.Source))
	for _, line := range provenance(r) {
		fmt.Fprintf(bw, "  %s\n", line)
	}
	for _, wn := range r.Warnings {
		fmt.Fprintf(bw, "  note: %s\n", wn)
	}
	block := func(title string, prompt, output *Lengths, skipped string) {
		fmt.Fprintf(bw, "\n%s\n", title)
		rows := []struct {
			name string
			l    *Lengths
		}{{"prompt_tokens", prompt}, {"output_tokens", output}}
		tw := tabwriter.NewWriter(bw, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "length\tcount\tskipped\tmean\tmin\tp50\tp90\tp95\tp99\tp99.9\tmax\t")
		for _, row := range rows {
			l := row.l
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", row.name, formatCount(l.Count), skipped,
				formatNumber(roundSig(l.Mean)), formatNumber(l.Min),
				formatNumber(roundSig(l.Quantile(0.5))), formatNumber(roundSig(l.Quantile(0.9))),
				formatNumber(roundSig(l.Quantile(0.95))), formatNumber(roundSig(l.Quantile(0.99))),
				formatNumber(roundSig(l.Quantile(0.999))), formatNumber(l.Max))
		}
		tw.Flush()
		fmt.Fprintln(bw)
		tw = tabwriter.NewWriter(bw, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "log-normal fit\tmu\tsigma\tmedian\tvs data\tp99\tvs data\t")
		var poor []string
		for _, row := range rows {
			l := row.l
			if l.FitErr != nil {
				fmt.Fprintf(tw, "%s\t-\t-\t-\t-\t-\t-\t\n", row.name)
				poor = append(poor, row.name+": no fit ("+l.FitErr.Error()+")")
				continue
			}
			median, p99 := math.Exp(l.Mu), math.Exp(l.Mu+l.Sigma*z99)
			fmt.Fprintf(tw, "%s\t%.3f\t%.3f\t%s\t%s\t%s\t%s\t\n", row.name, l.Mu, l.Sigma,
				formatNumber(roundSig(median)), relDiff(median, l.Quantile(0.5)),
				formatNumber(roundSig(p99)), relDiff(p99, l.Quantile(0.99)))
			if poorFit(l) {
				poor = append(poor, row.name+": not log-normal (a mix of request kinds?); the empirical table follows the data")
			}
		}
		tw.Flush()
		for _, p := range poor {
			fmt.Fprintf(bw, "  %s\n", p)
		}
	}
	title := "All requests"
	if r.SourceKind == SourcePrometheus {
		title += " (min and max are bucket bounds; quantiles interpolated within buckets)"
	}
	skipped := "-"
	if r.Log != nil {
		skipped = strconv.Itoa(r.Log.Skipped)
	}
	if r.Trace != nil {
		skipped = strconv.Itoa(r.Trace.Skipped)
	}
	block(title, r.Prompt, r.Output, skipped)
	if r.Trace != nil {
		writeJointSummary(bw, r.Trace)
	}
	if len(r.Classes) > 1 {
		for _, c := range r.Classes {
			block(fmt.Sprintf("Class %s (%s=%q, weight %.4f)", c.Name, r.By, c.Value, c.Weight), c.Prompt, c.Output, "-")
		}
	}
	return bw.Flush()
}

// redactSource masks every URL in a source description (scrub.URLs).
func redactSource(s string) string { return scrub.URLs(s) }

// comment makes text safe inside a one-line YAML comment: no control
// character, line break or bidirectional override (scrub.Chars).
func comment(s string) string { return scrub.Chars(s) }

// yamlString renders s as a YAML scalar, quoted when it needs to be.
func yamlString(s string) string {
	b, err := yaml.Marshal(s)
	if err != nil {
		return strconv.Quote(s)
	}
	return strings.TrimSuffix(string(b), "\n")
}

// formatNumber prints whole numbers without a fraction and others with
// up to 4 significant digits; NaN as "-".
func formatNumber(v float64) string {
	switch {
	case math.IsNaN(v):
		return "-"
	case math.IsInf(v, 1):
		return "+Inf"
	case v == math.Trunc(v) && math.Abs(v) < 1e15:
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}

// formatCount prints a request count: whole when it is (near) whole,
// with one decimal otherwise (PromQL's extrapolated increase).
func formatCount(v float64) string {
	if math.Abs(v-math.Round(v)) < 0.05 {
		return strconv.FormatFloat(math.Round(v), 'f', -1, 64)
	}
	return strconv.FormatFloat(v, 'f', 1, 64)
}

// roundSig rounds to whole tokens above 100 and to 3 significant digits
// below.
func roundSig(v float64) float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return v
	}
	if math.Abs(v) >= 100 {
		return math.Round(v)
	}
	if v == 0 {
		return 0
	}
	scale := math.Pow(10, 2-math.Floor(math.Log10(math.Abs(v))))
	return math.Round(v*scale) / scale
}

func formatDuration(d time.Duration) string { return model.Duration(d).String() }

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ", ")
}
