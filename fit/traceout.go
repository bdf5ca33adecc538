// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package fit

import (
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/llmprobe/llmprobe/config"
)

// traceProvenance lists the facts about a trace for the header and the
// summary.
func traceProvenance(r *Result) []string {
	j := r.Trace
	line := fmt.Sprintf("%d records over %s (%s format", j.Records, formatSpan(j.Span), j.Format)
	if j.HashIDs {
		line += fmt.Sprintf(", hash_ids blocks of %d tokens", j.BlockSize)
	}
	line += ")"
	if j.Skipped > 0 {
		line += fmt.Sprintf("; %d lines skipped", j.Skipped)
	}
	out := []string{line}
	if j.SampleSize < j.Records {
		out = append(out, fmt.Sprintf("quantiles and correlation from a uniform sample of %d records; counts, means and extremes exact", j.SampleSize))
	}
	return out
}

// formatSpan prints a trace span: Prometheus style, rounded to the second
// (to the millisecond below one).
func formatSpan(d time.Duration) string {
	if d <= 0 {
		return "0s"
	}
	if d < time.Second {
		return d.Round(time.Millisecond).String()
	}
	return formatDuration(d.Round(time.Second))
}

// ReuseNote describes the prefix reuse a trace implies, "" without hash
// ids.
func (j *Joint) ReuseNote() string {
	if !j.HashIDs {
		return ""
	}
	s := fmt.Sprintf("%.1f%% of prompt tokens (unbounded cache, %d distinct blocks of %d tokens", 100*j.Reuse, j.DistinctBlocks, j.BlockSize)
	if j.ReuseApprox {
		s += fmt.Sprintf("; more than %d: estimated through a Bloom filter, slightly high", maxExactBlocks)
	}
	s += ")"
	if j.CacheBlocks > 0 {
		s += fmt.Sprintf("; %.1f%% with an LRU cache of %d blocks", 100*j.CacheReuse, j.CacheBlocks)
	}
	return s
}

func spearmanText(j *Joint) string {
	if math.IsNaN(j.Spearman) {
		return "- (a length is constant)"
	}
	over := fmt.Sprintf("over all %d records", j.Records)
	if j.SampleSize < j.Records {
		over = fmt.Sprintf("over a uniform sample of %d of %d records", j.SampleSize, j.Records)
	}
	return fmt.Sprintf("%+.3f (%s)", j.Spearman, over)
}

// writeJointSummary writes the joint picture: correlation, reuse,
// sessions, rate, then the 2-D histogram and the rate curve as text.
func writeJointSummary(w io.Writer, j *Joint) {
	fmt.Fprintf(w, "\nJoint structure\n")
	fmt.Fprintf(w, "  rank correlation of (prompt, output) tokens, Spearman: %s\n", spearmanText(j))
	if j.HashIDs {
		fmt.Fprintf(w, "  prefix reuse implied by hash_ids: %s\n", j.ReuseNote())
		if p := j.Prefix; p != nil {
			fmt.Fprintf(w, "    as a shared prefix: %.1f%% of requests start with one of %d prefix(es) of %d tokens\n", 100*p.Probability, p.Groups, p.Tokens)
		}
	} else {
		fmt.Fprintf(w, "  prefix reuse: - (the %s format has no hash_ids)\n", j.Format)
	}
	if s := j.Sessions; s != nil {
		l := s.Turns
		fmt.Fprintf(w, "  sessions: %d (%d requests); turns per session: mean %s, p50 %s, p90 %s, p99 %s, max %s; %.1f%% of requests in multi-turn sessions\n",
			s.Count, s.Requests, formatNumber(roundSig(l.Mean)), formatNumber(roundSig(l.Quantile(0.5))), formatNumber(roundSig(l.Quantile(0.9))),
			formatNumber(roundSig(l.Quantile(0.99))), formatNumber(l.Max), 100*s.MultiTurn)
		if s.Capped {
			fmt.Fprintf(w, "    (more than %d sessions: the later ones are not counted)\n", maxTraceSessions)
		}
	} else {
		fmt.Fprintf(w, "  sessions: - (the trace names none)\n")
	}
	i, peak := j.PeakRate()
	fmt.Fprintf(w, "  arrivals per %s over %s: peak %d (bin %d), peak/mean rate %.2f\n", formatDuration(j.Bin), formatSpan(j.Span), peak, i, j.PeakToMean)

	writeGridText(w, j)
	writeRateText(w, j)
}

// coarse bins of the text histogram: 0, then [1,2), [2,5), [5,10) per
// decade, or whole decades when those make too many columns.
type coarseBins struct{ decades bool }

func (c coarseBins) of(fine int) int {
	if fine == 0 {
		return 0
	}
	d, k := (fine-1)/gridPerDecade, (fine-1)%gridPerDecade
	if c.decades {
		return 1 + d
	}
	g := 0
	switch {
	case k >= 7:
		g = 2
	case k >= 3:
		g = 1
	}
	return 1 + 3*d + g
}

func (c coarseBins) label(i int) string {
	if i == 0 {
		return "0"
	}
	lo, hi := c.edge(i), c.edge(i+1)
	if i == c.of(GridBins-1) {
		return formatNumber(lo) + "+"
	}
	return formatNumber(lo) + "-" + formatNumber(hi)
}

func (c coarseBins) edge(i int) float64 {
	if c.decades {
		return math.Pow(10, float64(i-1))
	}
	return []float64{1, 2, 5}[(i-1)%3] * math.Pow(10, float64((i-1)/3))
}

// writeGridText prints the 2-D histogram as shares of the requests.
func writeGridText(w io.Writer, j *Joint) {
	pLo, pHi, oLo, oHi := GridBins, -1, GridBins, -1
	for p := range GridBins {
		for o := range GridBins {
			if j.Grid[p][o] > 0 {
				pLo, pHi, oLo, oHi = min(pLo, p), max(pHi, p), min(oLo, o), max(oHi, o)
			}
		}
	}
	if pHi < 0 {
		return
	}
	c := coarseBins{}
	if c.of(oHi)-c.of(oLo) >= 12 || c.of(pHi)-c.of(pLo) >= 24 {
		c.decades = true
	}
	r0, r1, c0, c1 := c.of(pLo), c.of(pHi), c.of(oLo), c.of(oHi)
	cells := make([][]int64, r1-r0+1)
	for i := range cells {
		cells[i] = make([]int64, c1-c0+1)
	}
	for p := pLo; p <= pHi; p++ {
		for o := oLo; o <= oHi; o++ {
			cells[c.of(p)-r0][c.of(o)-c0] += j.Grid[p][o]
		}
	}
	fmt.Fprintf(w, "\nPrompt x output tokens (%% of requests; rows prompt tokens, columns output tokens)\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "prompt \\ output\t")
	for k := c0; k <= c1; k++ {
		fmt.Fprintf(tw, "%s\t", c.label(k))
	}
	fmt.Fprintln(tw)
	for i, row := range cells {
		fmt.Fprintf(tw, "%s\t", c.label(r0+i))
		for _, n := range row {
			fmt.Fprintf(tw, "%s\t", shareText(n, j.Records))
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
}

func shareText(n int64, total int) string {
	switch {
	case n == 0:
		return "."
	case float64(n)/float64(total) < 0.0005:
		return "<0.1"
	}
	return fmt.Sprintf("%.1f", 100*float64(n)/float64(total))
}

// maxRateRows bounds the rate curve's text: more bins are shown merged.
const maxRateRows = 48

// writeRateText prints the rate curve, one row a bin, with a bar.
func writeRateText(w io.Writer, j *Joint) {
	f := (len(j.Rate) + maxRateRows - 1) / maxRateRows
	rows := make([]int64, (len(j.Rate)+f-1)/f)
	for i, c := range j.Rate {
		rows[i/f] += c
	}
	peak := int64(1)
	for _, c := range rows {
		peak = max(peak, c)
	}
	bin := time.Duration(f) * j.Bin
	fmt.Fprintf(w, "\nArrivals per %s since the first record\n", formatDuration(bin))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for i, c := range rows {
		fmt.Fprintf(tw, "  +%s\t%d\t%s\n", formatDuration(time.Duration(i)*bin), c, strings.Repeat("#", int(math.Round(40*float64(c)/float64(peak)))))
	}
	tw.Flush()
}

// writeTraceHeader writes the joint picture into the configuration's
// header, and what the marginal tables lose.
func writeTraceHeader(w io.Writer, j *Joint, mirror bool) {
	fmt.Fprintf(w, "#\n# The trace's joint structure:\n")
	fmt.Fprintf(w, "#   rank correlation of (prompt, output), Spearman: %s\n", spearmanText(j))
	if j.HashIDs {
		fmt.Fprintf(w, "#   prefix reuse implied by hash_ids: %s\n", j.ReuseNote())
	}
	if s := j.Sessions; s != nil {
		fmt.Fprintf(w, "#   sessions: %d, mean %s turns, max %s\n", s.Count, formatNumber(roundSig(s.Turns.Mean)), formatNumber(s.Turns.Max))
	}
	fmt.Fprintf(w, "#   arrivals: peak/mean rate %.2f over %s bins\n", j.PeakToMean, formatDuration(j.Bin))
	if mirror {
		fmt.Fprintf(w, "# The class mirrors the trace (from_trace: whole records, so the lengths stay\n")
		fmt.Fprintf(w, "# joint, hash_ids as shared prefixes, sessions as conversations) and the\n")
		fmt.Fprintf(w, "# arrivals follow its rate curve (trace_shape); the file is read at every load.\n")
		return
	}
	fmt.Fprintf(w, "# Note: the marginal tables below lose this joint structure (the correlation,\n")
	fmt.Fprintf(w, "# the sessions, the rate curve; the prefix block keeps only the mean reuse);\n")
	fmt.Fprintf(w, "# `llmprobe fit --trace.mirror` writes a from_trace class that keeps it.\n")
}

// writePrefix writes the prefix block a trace's reuse implies.
func writePrefix(w io.Writer, j *Joint, p *config.Prefix) {
	if j != nil {
		fmt.Fprintf(w, "        # the shared prefix that gives the trace's reuse on average (%.1f%% of prompt tokens)\n", 100*j.Reuse)
	}
	fmt.Fprintf(w, "        prefix: {groups: %d, tokens: %d, probability: %s}\n", p.Groups, p.Tokens, formatNumber(p.Probability))
}

// writeFromTrace writes a class' from_trace block.
func writeFromTrace(w io.Writer, j *Joint, file string) {
	fmt.Fprintf(w, "        from_trace:\n")
	fmt.Fprintf(w, "          file: %s\n", yamlString(file))
	fmt.Fprintf(w, "          format: %s\n", j.Format)
	if j.HashIDs {
		fmt.Fprintf(w, "          block_size: %d\n", j.BlockSize)
	}
}

// MirrorPeriod is the period a trace_shape arrival folds the trace over:
// a day for a trace of a day or more, else its span rounded up to the
// minute; 0 when the trace spans less than 30 s (too short a curve).
func (j *Joint) MirrorPeriod() time.Duration {
	switch {
	case j.Span >= 24*time.Hour:
		return 24 * time.Hour
	case j.Span < 30*time.Second:
		return 0
	}
	return max(time.Minute, ((j.Span+time.Minute-1)/time.Minute)*time.Minute)
}

// writeTraceArrival writes a target's trace_shape arrival.
func writeTraceArrival(w io.Writer, j *Joint, file string, rate float64) {
	period := j.MirrorPeriod()
	if period == 0 {
		fmt.Fprintf(w, "    # the trace spans %s, too short for a trace_shape rate curve\n", formatSpan(j.Span))
		fmt.Fprintf(w, "    arrival: {process: poisson, rate: %s}   # requests per second: a probe, not a load test\n", formatNumber(rate))
		return
	}
	fmt.Fprintf(w, "    # the trace's rate curve over %s, scaled to a mean of arrival.rate (a probe, not a load test)\n", formatDuration(period))
	fmt.Fprintf(w, "    arrival:\n")
	fmt.Fprintf(w, "      process: trace_shape\n")
	fmt.Fprintf(w, "      rate: %s\n", formatNumber(rate))
	fmt.Fprintf(w, "      trace: {file: %s, format: %s, period: %s}\n", yamlString(file), j.Format, formatDuration(period))
}
