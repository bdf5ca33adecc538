// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package report

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/llmprobe/llmprobe/servermetrics"
)

// fmtFloat formats v with format after scaling it, or names it when it is
// not finite.
func fmtFloat(v float64, format string, scale float64) string {
	if s := servermetrics.NonFinite(v); s != "" {
		return s
	}
	return fmt.Sprintf(format, v*scale)
}

// isNonFinite reports whether a formatted figure is NaN or ±Inf.
func isNonFinite(s string) bool { return s == "NaN" || s == "+Inf" || s == "-Inf" }

// nonFiniteNote is the Markdown's sentence under a table that shows NaN
// or ±Inf.
const nonFiniteNote = "NaN, +Inf and -Inf are what the server or Prometheus sent: JSON has no such numbers, so the JSON report has them written as null.\n\n"

// TTFTGap is the probe's TTFT quantile minus the server's over the same
// stage window (seconds): what the network, the gateway and the client
// add to what the engine measures.
type TTFTGap struct {
	P50 servermetrics.Float `json:"p50"`
	P99 servermetrics.Float `json:"p99"`
}

// fmtOpt formats an optional figure ("-" when absent).
func fmtOpt(v *servermetrics.Float, format string, scale float64) string {
	if v == nil {
		return "-"
	}
	return fmtFloat(float64(*v), format, scale)
}

func p50(q *servermetrics.Quantiles) float64 { return float64(q.P50) }
func p99(q *servermetrics.Quantiles) float64 { return float64(q.P99) }

// fmtGap formats a signed difference of seconds.
func fmtGap(f servermetrics.Float) string {
	v := float64(f)
	if s := servermetrics.NonFinite(v); s != "" {
		return s
	}
	if v < 0 {
		return "-" + FormatSeconds(-v)
	}
	return "+" + FormatSeconds(v)
}

// why is the reason figure key of ss is null.
func why(ss *servermetrics.Stats, key string) string {
	if w := ss.Unavailable[key]; w != "" {
		return w
	}
	return "not reported" // a report written before reasons were kept
}

// show formats an optional figure of ss, or says why it has none.
func show(ss *servermetrics.Stats, key string, v *servermetrics.Float, format string, scale float64) string {
	if v == nil {
		return why(ss, key)
	}
	return fmtFloat(float64(*v), format, scale)
}

// showQ formats a server quantile, or says why there is none.
func showQ(ss *servermetrics.Stats, key string, q *servermetrics.Quantiles, v func(*servermetrics.Quantiles) float64) string {
	switch {
	case q == nil:
		return why(ss, key)
	case q.Count == 0:
		return "no observations in the window"
	}
	return FormatSeconds(v(q))
}

// showGap formats the probe − server TTFT gap, or says why there is none.
func (s *StageReport) showGap(v func(*TTFTGap) servermetrics.Float) string {
	ss := s.Server
	switch {
	case s.TTFTGap != nil:
		return fmtGap(v(s.TTFTGap))
	case ss.TTFT == nil:
		return "no server TTFT: " + why(ss, "ttft_seconds")
	case ss.TTFT.Count == 0:
		return "no server TTFT observations in the window"
	}
	return "no first token in the probe's stage"
}

// Short codes of the text tables' cells without a figure: the lines under
// the tables say why.
const (
	cellNotExported = "n/e" // not exported by the engine
	cellMissing     = "n/a" // no figure, for the reason given
)

// cell is a text table's cell: the figure, or a short code.
func cell(ss *servermetrics.Stats, key string, v *servermetrics.Float, format string, scale float64) string {
	if v == nil {
		return code(ss, key)
	}
	return fmtFloat(float64(*v), format, scale)
}

func code(ss *servermetrics.Stats, key string) string {
	if strings.HasPrefix(ss.Unavailable[key], "not exported by ") {
		return cellNotExported
	}
	return cellMissing
}

func cellQ(ss *servermetrics.Stats, key string, q *servermetrics.Quantiles, v func(*servermetrics.Quantiles) float64) string {
	switch {
	case q == nil:
		return code(ss, key)
	case q.Count == 0:
		return "none"
	}
	return FormatSeconds(v(q))
}

func (s *StageReport) cellGap(v func(*TTFTGap) servermetrics.Float) string {
	switch ss := s.Server; {
	case s.TTFTGap != nil:
		return fmtGap(v(s.TTFTGap))
	case ss.TTFT == nil:
		return code(ss, "ttft_seconds")
	case ss.TTFT.Count == 0:
		return "none"
	}
	return cellMissing
}

// serverColumns are the text tables' figures: label and JSON name.
var serverColumns = []struct{ label, key string }{
	{"KV", "kv_cache_usage_ratio"}, {"run", "requests_running"}, {"wait", "requests_waiting"},
	{"prompt/s", "prompt_tokens_per_second"}, {"uncached/s", "uncached_prompt_tokens_per_second"},
	{"gen/s", "generation_tokens_per_second"}, {"finished", "requests_finished"}, {"prefix", "prefix_cache_hit_ratio"},
	{"srv TTFT", "ttft_seconds"}, {"queue", "queue_time_seconds"},
}

// writeServerReasons writes, under the text tables, why each figure of a
// stage is missing: one line per reason, naming the columns.
func writeServerReasons(w io.Writer, s *StageReport, uncached bool) {
	ss := s.Server
	var order []string
	cols := map[string][]string{}
	var notes []string
	for _, c := range serverColumns {
		if c.key == "uncached_prompt_tokens_per_second" && !uncached {
			continue
		}
		why, ok := ss.Unavailable[c.key]
		if !ok {
			continue
		}
		group := why
		if rest, found := strings.CutPrefix(why, "not exported by "+ss.Engine); found && ss.Engine != "" {
			group = "not exported by " + ss.Engine
			if more, ok := strings.CutPrefix(rest, ": "); ok && !slices.Contains(notes, more) {
				notes = append(notes, c.label+": "+more)
			}
		}
		if cols[group] == nil {
			order = append(order, group)
		}
		cols[group] = append(cols[group], c.label)
	}
	for _, g := range order {
		if slices.Contains(ss.Errors, g) || g == "no successful scrape" {
			continue // said with the scrapes' errors
		}
		fmt.Fprintf(w, "stage %d %s server metrics: %s: %s\n", s.Stage, s.Target, strings.Join(cols[g], ", "), g)
	}
	for _, n := range notes {
		fmt.Fprintf(w, "stage %d %s server metrics: %s\n", s.Stage, s.Target, n)
	}
}

// writeServerMetrics writes the server's figures per stage and target
// (nothing when no stage has them).
func writeServerMetrics(w io.Writer, stages []*StageReport) {
	if !slices.ContainsFunc(stages, func(s *StageReport) bool { return s.Server != nil }) {
		return
	}
	uncached := slices.ContainsFunc(stages, func(s *StageReport) bool {
		return s.Server != nil && s.Server.UncachedPromptTokensPerSec != nil
	})
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := "stage\ttarget\tserver\tKV\trun\twait\tprompt/s\t"
	if uncached {
		head += "uncached/s\t"
	}
	fmt.Fprintln(tw, head+"gen/s\tfinished\tprefix\t")
	for _, s := range stages {
		if ss := s.Server; ss != nil {
			row := []string{strconv.Itoa(s.Stage), s.Target, cmp.Or(ss.Engine, "?"),
				cell(ss, "kv_cache_usage_ratio", ss.KVCacheUsage, "%.1f%%", 100), cell(ss, "requests_running", ss.RequestsRunning, "%.1f", 1),
				cell(ss, "requests_waiting", ss.RequestsWaiting, "%.1f", 1), cell(ss, "prompt_tokens_per_second", ss.PromptTokensPerSec, "%.0f", 1)}
			if uncached {
				row = append(row, cell(ss, "uncached_prompt_tokens_per_second", ss.UncachedPromptTokensPerSec, "%.0f", 1))
			}
			row = append(row, cell(ss, "generation_tokens_per_second", ss.GenerationTokensPerSec, "%.0f", 1),
				cell(ss, "requests_finished", ss.RequestsFinished, "%.0f", 1), cell(ss, "prefix_cache_hit_ratio", ss.PrefixCacheHitRatio, "%.1f%%", 100))
			fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
		}
	}
	_ = tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "stage\ttarget\tsrv TTFT p50\tp99\tprobe-srv p50\tp99\tqueue p50\tp99\t")
	for _, s := range stages {
		if ss := s.Server; ss != nil {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", s.Stage, s.Target,
				cellQ(ss, "ttft_seconds", ss.TTFT, p50), cellQ(ss, "ttft_seconds", ss.TTFT, p99),
				s.cellGap(func(g *TTFTGap) servermetrics.Float { return g.P50 }), s.cellGap(func(g *TTFTGap) servermetrics.Float { return g.P99 }),
				cellQ(ss, "queue_time_seconds", ss.QueueTime, p50), cellQ(ss, "queue_time_seconds", ss.QueueTime, p99))
		}
	}
	_ = tw.Flush()
	coded := slices.ContainsFunc(stages, func(s *StageReport) bool {
		ss := s.Server
		return ss != nil && (slices.ContainsFunc(serverColumns, func(c struct{ label, key string }) bool {
			_, missing := ss.Unavailable[c.key]
			return missing && (uncached || c.key != "uncached_prompt_tokens_per_second")
		}) || ss.TTFT != nil && ss.TTFT.Count == 0 || ss.QueueTime != nil && ss.QueueTime.Count == 0)
	})
	if coded {
		fmt.Fprintf(w, "%s: not exported by the engine; %s: not available (why is below); none: no observations\n", cellNotExported, cellMissing)
	}
	for _, s := range stages {
		if ss := s.Server; ss != nil {
			for _, e := range ss.Errors {
				fmt.Fprintf(w, "stage %d %s server metrics (%d of %d scrapes failed): %s\n", s.Stage, s.Target, ss.FailedScrapes, ss.Scrapes, e)
			}
			writeServerReasons(w, s, uncached)
		}
	}
}

// writeServerMarkdown adds a stage's server and GPU figures to the
// Markdown report (nothing without them).
func writeServerMarkdown(b *strings.Builder, s *StageReport) {
	if ss := s.Server; ss != nil {
		fmt.Fprintf(b, "### Server metrics (%s)\n\n", mdEscape(cmp.Or(ss.Engine, "engine not recognised")))
		fmt.Fprintf(b, "Scraped %s %d times over %s (%d failed); gauges are averaged over the scrapes, the rest are deltas between the first and the last. "+
			"What each figure is, per engine, is in llmprobe's docs/bench.md; a figure the server does not give says why.\n\n",
			mdEscape(ss.URL), ss.Scrapes, ss.Window.Round(time.Millisecond), ss.FailedScrapes)
		for _, e := range ss.Errors {
			fmt.Fprintf(b, "- scrape: %s\n", mdEscape(e))
		}
		if len(ss.Errors) > 0 {
			b.WriteString("\n")
		}
		b.WriteString("| figure | value |\n|---|--:|\n")
		odd := false
		row := func(name, v string) {
			odd = odd || isNonFinite(v)
			fmt.Fprintf(b, "| %s | %s |\n", name, mdEscape(v))
		}
		row("KV-cache usage", show(ss, "kv_cache_usage_ratio", ss.KVCacheUsage, "%.1f%%", 100))
		row("requests running", show(ss, "requests_running", ss.RequestsRunning, "%.1f", 1))
		row("requests waiting", show(ss, "requests_waiting", ss.RequestsWaiting, "%.1f", 1))
		row("server TTFT p50", showQ(ss, "ttft_seconds", ss.TTFT, p50))
		row("server TTFT p99", showQ(ss, "ttft_seconds", ss.TTFT, p99))
		row("probe − server TTFT p50", s.showGap(func(g *TTFTGap) servermetrics.Float { return g.P50 }))
		row("probe − server TTFT p99", s.showGap(func(g *TTFTGap) servermetrics.Float { return g.P99 }))
		row("queue time p50", showQ(ss, "queue_time_seconds", ss.QueueTime, p50))
		row("queue time p99", showQ(ss, "queue_time_seconds", ss.QueueTime, p99))
		row("prefix-cache hit rate", show(ss, "prefix_cache_hit_ratio", ss.PrefixCacheHitRatio, "%.1f%%", 100))
		row("prompt tokens/s", show(ss, "prompt_tokens_per_second", ss.PromptTokensPerSec, "%.0f", 1))
		row("uncached prompt tokens/s", show(ss, "uncached_prompt_tokens_per_second", ss.UncachedPromptTokensPerSec, "%.0f", 1))
		row("generation tokens/s", show(ss, "generation_tokens_per_second", ss.GenerationTokensPerSec, "%.0f", 1))
		row("requests finished", show(ss, "requests_finished", ss.RequestsFinished, "%.0f", 1))
		b.WriteString("\n")
		if odd {
			b.WriteString(nonFiniteNote)
		}
	}
	if g := s.GPU; g != nil {
		fmt.Fprintf(b, "### GPU (averaged over %s)\n\n", g.Window.Round(time.Millisecond))
		for _, e := range g.Errors {
			fmt.Fprintf(b, "- %s\n", mdEscape(e))
		}
		if len(g.Errors) > 0 {
			b.WriteString("\n")
		}
		if len(g.Devices) > 0 {
			b.WriteString("| host | GPU | model | util | SM active | FB used | power |\n|---|---|---|--:|--:|--:|--:|\n")
			odd := false
			for _, d := range g.Devices {
				vals := []string{fmtOpt(d.UtilPercent, "%.1f%%", 1), fmtOpt(d.SMActive, "%.1f%%", 100),
					fmtOpt(d.FBUsedMiB, "%.0f MiB", 1), fmtOpt(d.PowerWatts, "%.1f W", 1)}
				odd = odd || slices.ContainsFunc(vals, isNonFinite)
				fmt.Fprintf(b, "| %s | %s | %s | %s |\n", mdEscape(d.Hostname), mdEscape(d.GPU), mdEscape(d.Model), strings.Join(vals, " | "))
			}
			b.WriteString("\n")
			if odd {
				b.WriteString(nonFiniteNote)
			}
		}
	}
	writeCostMarkdown(b, s)
}

// writeGPU writes each stage's GPU averages once (nothing when no stage
// has them).
func writeGPU(w io.Writer, stages []*StageReport) {
	var rows []*StageReport
	for _, s := range stages {
		if s.GPU != nil && (len(rows) == 0 || rows[len(rows)-1].Stage != s.Stage) {
			rows = append(rows, s)
		}
	}
	if len(rows) == 0 {
		return
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "stage\thost\tgpu\tutil\tSM active\tFB used\tpower\t")
	for _, s := range rows {
		for _, d := range s.GPU.Devices {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t\n", s.Stage, cmp.Or(d.Hostname, "-"), cmp.Or(d.GPU, "-"),
				fmtOpt(d.UtilPercent, "%.1f%%", 1), fmtOpt(d.SMActive, "%.1f%%", 100),
				fmtOpt(d.FBUsedMiB, "%.0f MiB", 1), fmtOpt(d.PowerWatts, "%.1f W", 1))
		}
	}
	_ = tw.Flush()
	for _, s := range rows {
		for _, e := range s.GPU.Errors {
			fmt.Fprintf(w, "stage %d GPU: %s\n", s.Stage, e)
		}
	}
}

// writeCost writes each stage's energy and cost per token once (nothing
// when no stage has them).
func writeCost(w io.Writer, stages []*StageReport) {
	var rows []*StageReport
	for _, s := range stages {
		if s.Cost != nil && (len(rows) == 0 || rows[len(rows)-1].Stage != s.Stage) {
			rows = append(rows, s)
		}
	}
	if len(rows) == 0 {
		return
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "stage\tgen tok/s\ttokens\tpower\tGPUs\tJ/token\tGPU-h/1M tok\tcost/1M tok\t")
	for _, s := range rows {
		c := s.Cost
		gpus := "-"
		if c.GPUs > 0 {
			gpus = fmt.Sprint(c.GPUs)
		}
		fmt.Fprintf(tw, "%d\t%.0f\t%s\t%s\t%s\t%s\t%s\t%s\t\n", s.Stage, float64(c.TokensPerSec), c.TokensSource,
			fmtOpt(c.PowerWatts, "%.1f W", 1), gpus, fmtOpt(c.JoulesPerToken, "%.3g", 1),
			fmtOpt(c.GPUHoursPerMillion, "%.3g", 1), fmtOpt(c.CostPerMillion, "%.3g", 1))
	}
	_ = tw.Flush()
	var notes []string
	for _, s := range rows {
		for _, n := range s.Cost.Notes {
			notes = append(notes, fmt.Sprintf("stage %d cost: %s", s.Stage, n))
		}
	}
	for _, n := range slices.Compact(notes) {
		fmt.Fprintln(w, n)
	}
}

// writeCostMarkdown adds a stage's energy and cost per token to the
// Markdown report (nothing without them).
func writeCostMarkdown(b *strings.Builder, s *StageReport) {
	c := s.Cost
	if c == nil {
		return
	}
	fmt.Fprintf(b, "### Energy and cost per generated token\n\n")
	src := "the engine's own generation-token counter (all its traffic)"
	if c.TokensSource == servermetrics.CostTokensProbe {
		src = "the probe's own output tokens"
	}
	fmt.Fprintf(b, "%.0f tokens/s generated, from %s.\n\n", float64(c.TokensPerSec), src)
	for _, n := range c.Notes {
		fmt.Fprintf(b, "- %s\n", mdEscape(n))
	}
	if len(c.Notes) > 0 {
		b.WriteString("\n")
	}
	gpus := "-"
	if c.GPUs > 0 {
		gpus = fmt.Sprint(c.GPUs)
	}
	price := "-"
	if c.PricePerGPUHour > 0 {
		price = fmt.Sprintf("%g", c.PricePerGPUHour)
	}
	b.WriteString("| GPU power | GPUs | J/token | GPU-hours per 1M tokens | price per GPU-hour | cost per 1M tokens |\n|--:|--:|--:|--:|--:|--:|\n")
	fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s |\n\n", fmtOpt(c.PowerWatts, "%.1f W", 1), gpus, fmtOpt(c.JoulesPerToken, "%.3g", 1),
		fmtOpt(c.GPUHoursPerMillion, "%.3g", 1), price, fmtOpt(c.CostPerMillion, "%.3g", 1))
}
