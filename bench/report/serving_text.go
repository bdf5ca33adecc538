// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package report

import (
	"fmt"
	"io"
	"strings"
)

// writeServing writes the stage's head line (stage, target, its time and
// which requests its figures are of), then servingBlock.
func (s *StageReport) writeServing(w io.Writer, schema int) {
	head := s.describeWall()
	if f := s.describeFigures(); f != "" {
		head += "; " + f
	}
	fmt.Fprintf(w, "stage %d %s: %s\n", s.Stage, s.Target, head)
	io.WriteString(w, s.servingBlock(schema))
}

// servingBlock is the stage's Serving figures as vLLM's summary block, or
// a line saying why it has none (schema is the report's: one written
// before they were kept has none).
func (s *StageReport) servingBlock(schema int) string {
	return servingBlock(s.Serving, s.RequestedRate, 0, schema)
}

// servingBlock is fig as vLLM's summary block (writeBlock), or why there
// is none.
func servingBlock(fig *Serving, rate float64, concurrency, schema int) string {
	switch {
	case fig != nil:
		var b strings.Builder
		fig.writeBlock(&b, rate, concurrency)
		return b.String()
	case schema > 0 && schema < 3:
		return fmt.Sprintf("no figures of vllm bench serve's definitions: the report is of schema %d, older than they are\n", schema)
	}
	return "no figures: no request planned after the warm-up ended by itself\n"
}

// blockWidth is the width of the block's headings.
const blockWidth = 50

// heading is title centred in blockWidth columns of fill, as Python's
// "{:{c}^{n}}" (the odd column on the right).
func heading(title string, fill byte) string {
	pad := max(blockWidth-len(title), 0)
	return strings.Repeat(string(fill), pad/2) + title + strings.Repeat(string(fill), pad-pad/2)
}

// writeBlock writes s as vllm bench serve prints its result (benchmark()
// in vllm/benchmarks/serve.py): labels left-justified to 40 columns, a
// space, values left-justified to 10 (trailing spaces and all), the same
// lines in the same order. rate is the configured request rate (0: none,
// vLLM's inf, which prints no line), concurrency the closed loop's (0:
// none, no line). The goodput line is printed when an SLO judged the
// requests; the peak line keeps vLLM's label, "Peak output token
// throughput (tok/s):", so that one line only begins "Output token
// throughput (tok/s):".
func (s *Serving) writeBlock(w io.Writer, rate float64, concurrency int) {
	i := func(label string, v int) { fmt.Fprintf(w, "%-40s %-10d\n", label, v) }
	f := func(label string, v float64) { fmt.Fprintf(w, "%-40s %-10.2f\n", label, v) }
	fmt.Fprintln(w, heading(" Serving Benchmark Result ", '='))
	i("Successful requests:", s.Completed)
	i("Failed requests:", s.Failed)
	if concurrency > 0 {
		i("Maximum request concurrency:", concurrency)
	}
	if rate > 0 {
		f("Request rate configured (RPS):", rate)
	}
	f("Benchmark duration (s):", s.Duration)
	i("Total input tokens:", s.TotalInputTokens)
	i("Total generated tokens:", s.TotalOutputTokens)
	f("Request throughput (req/s):", s.RequestThroughput)
	if s.RequestGoodput != nil {
		f("Request goodput (req/s):", *s.RequestGoodput)
	}
	f("Output token throughput (tok/s):", s.OutputThroughput)
	f("Peak output token throughput (tok/s):", s.MaxOutputTokensPerS)
	f("Peak concurrent requests:", float64(s.MaxConcurrentRequests))
	f("Total token throughput (tok/s):", s.TotalTokenThroughput)
	for _, m := range []struct {
		title, name string
		l           Latency
	}{
		{"Time to First Token", "TTFT", s.TTFT},
		{"Time per Output Token (excl. 1st token)", "TPOT", s.TPOT},
		{"Inter-token Latency", "ITL", s.ITL},
		{"End-to-end Latency", "E2EL", s.E2EL},
	} {
		fmt.Fprintln(w, heading(m.title, '-'))
		f("Mean "+m.name+" (ms):", m.l.Mean)
		f("Median "+m.name+" (ms):", m.l.Median)
		for _, p := range m.l.Percentiles {
			f("P"+percentWord(p.P)+" "+m.name+" (ms):", p.Value)
		}
	}
	fmt.Fprintln(w, strings.Repeat("=", blockWidth))
}
