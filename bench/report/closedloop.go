// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package report

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/llmprobe/llmprobe/probe/wire"
)

// ClosedLoopNote is said beside every closed-loop result.
const ClosedLoopNote = "closed loop hides queueing: each of N workers sends its next request when its previous one ended, so the load follows the server " +

	"(a slow server is sent less, and no request waits behind those an arrival rate would have sent); its latencies are not those of any arrival rate " +
	"and must not be compared with the open-loop stages: use it for saturation throughput, the open-loop stages for latency under load"

// ClosedLoopStage is one closed-loop level of a target: Concurrency
// workers, each sending a request as soon as its previous one ended,
// for Duration (or until MaxRequests were sent). Report.ClosedLoop holds
// them, apart from the open-loop stages.
type ClosedLoopStage struct {
	Level       int           `json:"level"`
	Target      string        `json:"target"`
	Model       string        `json:"model"`
	Concurrency int           `json:"concurrency"`
	Duration    time.Duration `json:"duration_ns"`
	Sent        int           `json:"sent"`
	// Outcomes counts the results by outcome; Warmup the requests sent
	// in the warm-up (excluded from every figure).
	Outcomes map[wire.Outcome]int `json:"outcomes"`
	Warmup   int                  `json:"warmup_requests"`
	// Served counts the successes that ended in the measured window
	// (after the warm-up); Throughput and OutputTokensPerSec are per
	// second of it (the drain is not in it: not vLLM's figures, which are
	// Serving's).
	Served             int     `json:"served_requests"`
	Throughput         float64 `json:"requests_per_second"`
	OutputTokensPerSec float64 `json:"output_tokens_per_second"`
	// LittleRate is Concurrency / mean E2E (Little's law): the rate the
	// workers' latencies explain; near Throughput when the level held
	// its concurrency.
	LittleRate float64 `json:"littles_law_requests_per_second"`

	TTFT Quantiles `json:"ttft_seconds"`
	TPOT Quantiles `json:"tpot_seconds"`
	ITL  Quantiles `json:"itl_seconds"`
	E2E  Quantiles `json:"e2e_seconds"`

	// InFlightAtEnd were running when the level ended (waited for at
	// most the grace; CutAtGrace of them were cancelled:
	// OutcomeCancelledAtGrace).
	InFlightAtEnd int    `json:"in_flight_at_end"`
	CutAtGrace    int    `json:"cut_at_grace"`
	Note          string `json:"note"`

	// Serving are the level's figures as vllm bench serve defines them
	// (as a stage's: serving.go), which a run of vLLM's with
	// --max-concurrency gives; in the JSON beside the other keys under
	// vLLM's names. Nil when no measured request ended, and in reports
	// written before schema 3.
	Serving *Serving `json:"-"`
}

// writeClosedLoop writes the closed-loop levels after the open-loop
// report, in a section of their own.
func writeClosedLoop(w io.Writer, r *Report) {
	if len(r.ClosedLoop) == 0 {
		return
	}
	fmt.Fprintf(w, "\nCLOSED-LOOP levels (concurrency sweep), not open-loop stages: %s\n", ClosedLoopNote)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "level\ttarget\tconcurrency\tsent\terr\tserved/s\tLittle\tserved tok/s\t")
	for _, l := range r.ClosedLoop {
		fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%d\t%.2f\t%.2f\t%.0f\t\n", l.Level, l.Target, l.Concurrency, l.Sent, l.errors(),
			l.Throughput, l.LittleRate, l.OutputTokensPerSec)
	}
	_ = tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "level\ttarget\tconcurrency\tmetric\tn\t%s\tmax\t\n", strings.Join(quantileHeader(r.Percentiles), "\t"))
	for _, l := range r.ClosedLoop {
		for _, m := range l.metrics() {
			fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%d\t%s\t%s\t\n", l.Level, l.Target, l.Concurrency, m.name, m.q.Count,
				strings.Join(quantileCells(m.q, r.Percentiles), "\t"), fmtQ(m.q, m.q.Max))
		}
	}
	_ = tw.Flush()
	for _, l := range r.ClosedLoop {
		fmt.Fprintf(w, "\nclosed-loop level %d %s: concurrency %d for %s\n", l.Level, l.Target, l.Concurrency, l.Duration.Round(time.Millisecond))
		io.WriteString(w, l.servingBlock(r.SchemaVersion))
	}
	fmt.Fprintln(w)
	for _, l := range r.ClosedLoop {
		if l.InFlightAtEnd > 0 {
			fmt.Fprintf(w, "closed-loop level %d %s: %d requests in flight at the end were waited for (%d cancelled at the grace)\n",
				l.Level, l.Target, l.InFlightAtEnd, l.CutAtGrace)
		}
	}
}

// writeClosedLoopOnly is the text report of a run of closed-loop levels
// only.
func (r *Report) writeClosedLoopOnly(w io.Writer) error {
	writeClosedLoop(w, r)
	writeDataset(w, r.Dataset)
	var sampling []string
	for _, si := range r.Sampling {
		sampling = append(sampling, fmt.Sprintf("%s/%s temperature=%g top_p=%g", si.Target, si.Class, si.Temperature, si.TopP))
	}
	_, err := fmt.Fprintf(w, "sampling: %s\n", strings.Join(sampling, "; "))
	return err
}

func (l *ClosedLoopStage) errors() int { return failed(l.Outcomes) }

// servingBlock is the level's Serving figures as vLLM's summary block
// (with its concurrency, as vLLM's --max-concurrency prints it), or why
// it has none.
func (l *ClosedLoopStage) servingBlock(schema int) string {
	return servingBlock(l.Serving, 0, l.Concurrency, schema)
}

func (l *ClosedLoopStage) metrics() []namedQuantiles {
	return []namedQuantiles{{"TTFT", l.TTFT}, {"TPOT", l.TPOT}, {"ITL", l.ITL}, {"E2E", l.E2E}}
}

// writeDataset names the dataset of the run.
func writeDataset(w io.Writer, info *DatasetInfo) {
	if info != nil {
		fmt.Fprintf(w, "dataset: %s\n", info.describe())
	}
}

// writeClosedLoopMarkdown writes the dataset and the closed-loop levels
// at the end of the Markdown report.
func writeClosedLoopMarkdown(b *strings.Builder, r *Report) {
	if r.Dataset != nil {
		fmt.Fprintf(b, "## Dataset\n\n%s\n\n", mdEscape(r.Dataset.describe()))
	}
	if len(r.ClosedLoop) == 0 {
		return
	}
	fmt.Fprintf(b, "## Closed-loop levels (not open-loop stages)\n\n**Closed loop.** %s.\n\n", mdEscape(ClosedLoopNote))
	b.WriteString("| level | target | concurrency | sent | errors | served req/s | Little's law req/s | served output tok/s |\n|--:|---|--:|--:|--:|--:|--:|--:|\n")
	for _, l := range r.ClosedLoop {
		fmt.Fprintf(b, "| %d | %s | %d | %d | %d | %.2f | %.2f | %.0f |\n", l.Level, mdEscape(l.Target), l.Concurrency, l.Sent, l.errors(),
			l.Throughput, l.LittleRate, l.OutputTokensPerSec)
	}
	b.WriteString("\n")
	for _, l := range r.ClosedLoop {
		fmt.Fprintf(b, "### Closed-loop level %d: %s at concurrency %d\n\n", l.Level, mdEscape(l.Target), l.Concurrency)
		fmt.Fprintf(b, "```text\n%s```\n\n", l.servingBlock(r.SchemaVersion))
		writeQuantileTable(b, l.metrics(), r.Percentiles)
		b.WriteString("\n")
	}
}
