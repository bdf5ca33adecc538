// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package report

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// WorkloadInfo summarises what a target was sent.
type WorkloadInfo struct {
	Target   string      `json:"target"`
	URL      string      `json:"url"`
	API      string      `json:"api"`
	Model    string      `json:"model"`
	Workload string      `json:"workload"`
	Classes  []ClassInfo `json:"classes"`
}

// ClassInfo summarises one class of a workload.
type ClassInfo struct {
	Name         string  `json:"name"`
	Weight       float64 `json:"weight"`
	PromptTokens string  `json:"prompt_tokens"`
	OutputTokens string  `json:"output_tokens"`
	Prefix       string  `json:"prefix,omitempty"`
	Turns        bool    `json:"multi_turn,omitempty"`
}

// MarkdownOptions adjust WriteMarkdown.
type MarkdownOptions struct {
	// Title heads the document (default "llmprobe bench report").
	Title string
	// Plot, when set, is the picture of the report (WritePlot) to link,
	// as a path relative to the Markdown file.
	Plot string
}

// WriteMarkdown writes the report as Markdown: the run's parameters, then
// per stage and target its load, a narrow latency table with the number
// of samples beside each quantile, the verdict with its reasons, the
// prefix-cache hit rate and the goodput when an SLO was given.
func (r *Report) WriteMarkdown(w io.Writer, o MarkdownOptions) error {
	b := &strings.Builder{}
	title := o.Title
	if title == "" {
		title = "llmprobe bench report"
	}
	fmt.Fprintf(b, "# %s\n\n", mdEscape(title))
	fmt.Fprintf(b, "Run from %s to %s (%s).\n\n", r.Started.UTC().Format("2006-01-02 15:04:05 MST"),
		r.Finished.UTC().Format("2006-01-02 15:04:05 MST"), r.Finished.Sub(r.Started).Round(1e9))
	if o.Plot != "" {
		fmt.Fprintf(b, "![Latency and throughput against achieved load](%s)\n\n", o.Plot)
	}

	b.WriteString("## Parameters\n\n")
	if ri := r.Run; ri != nil {
		args := make([]string, len(ri.CommandLine))
		for i, a := range ri.CommandLine {
			args[i] = shellQuote(a)
		}
		fmt.Fprintf(b, "- llmprobe %s (revision %s, %s), report schema %d\n", mdEscape(ri.Version), mdEscape(orDash(ri.Revision)),
			mdEscape(orDash(ri.GoVersion)), cmp.Or(r.SchemaVersion, ReportSchemaVersion))
		fmt.Fprintf(b, "- command line: `%s`\n", strings.ReplaceAll(strings.Join(args, " "), "`", "'"))
		fmt.Fprintf(b, "- host %s, GOMAXPROCS %d, %d CPUs\n", mdEscape(orDash(ri.Host)), ri.GOMAXPROCS, ri.NumCPU)
		fmt.Fprintf(b, "- seed %d (%s): `--seed=%d` repeats the workload's random draws\n", ri.Seed, mdEscape(orDash(ri.SeedSource)), ri.Seed)
		if ri.CommonRandomNumbers {
			fmt.Fprintf(b, "- %s\n", crnNote)
		}
		for _, warning := range ri.Warnings {
			fmt.Fprintf(b, "- **warning**: %s\n", mdEscape(warning))
		}
		b.WriteString("\n")
	}
	if len(r.Workloads) > 0 {
		b.WriteString("| target | model | API | URL | workload |\n|---|---|---|---|---|\n")
		for _, wi := range r.Workloads {
			fmt.Fprintf(b, "| %s | %s | %s | %s | %s |\n", mdEscape(wi.Target), mdEscape(wi.Model), mdEscape(wi.API), mdEscape(wi.URL), mdEscape(wi.Workload))
		}
		b.WriteString("\n| target | class | weight | prompt tokens | output tokens | shared prefix |\n|---|---|--:|---|---|---|\n")
		for _, wi := range r.Workloads {
			for _, c := range wi.Classes {
				prefix := c.Prefix
				if prefix == "" {
					prefix = "-"
				}
				if c.Turns {
					prefix += " (multi-turn)"
				}
				fmt.Fprintf(b, "| %s | %s | %g | %s | %s | %s |\n", mdEscape(wi.Target), mdEscape(c.Name), c.Weight,
					mdEscape(c.PromptTokens), mdEscape(c.OutputTokens), mdEscape(prefix))
			}
		}
		b.WriteString("\n")
	}
	if len(r.Sampling) > 0 {
		b.WriteString("Sampling:\n\n")
		for _, si := range r.Sampling {
			fmt.Fprintf(b, "- %s/%s: temperature=%g top_p=%g", mdEscape(si.Target), mdEscape(si.Class), si.Temperature, si.TopP)
			if si.TopK > 0 {
				fmt.Fprintf(b, " top_k=%d", si.TopK)
			}
			for _, k := range slices.Sorted(maps.Keys(si.ExtraBody)) {
				fmt.Fprintf(b, " %s=%v", mdEscape(k), si.ExtraBody[k])
			}
			b.WriteString("\n")
		}
		b.WriteString("\n")
	}
	if len(r.SLOBounds) > 0 {
		b.WriteString("SLO bounds:\n\n")
		for _, sb := range r.SLOBounds {
			fmt.Fprintf(b, "- %s (%s)\n", sb.describe(), mdEscape(sb.Label))
		}
		b.WriteString("\n")
	}
	stages := map[int]bool{}
	for _, s := range r.Stages {
		stages[s.Stage] = true
	}
	fmt.Fprintf(b, "%d stages, %d stage reports.\n\n", len(stages), len(r.Stages))

	for _, s := range r.Stages {
		fmt.Fprintf(b, "## Stage %d: %s at %s req/s\n\n", s.Stage, mdEscape(s.Target), strconv.FormatFloat(s.RequestedRate, 'g', -1, 64))
		verdict := "**trusted**"
		if !s.Trusted {
			verdict = "**NOT TRUSTED**"
		}
		dropped, errs := s.counts()
		fmt.Fprintf(b, "Verdict: %s. Requested %.2f req/s, achieved %.2f req/s over %s (then a drain of %s: wall %s); %d sent, %d dropped, %d errors, %d warm-up.\n\n",
			verdict, s.RequestedRate, s.AchievedRate, s.Duration.Round(1e6), s.Drain.Round(1e6), (s.Duration + s.Drain).Round(1e6), s.Sent, dropped, errs, s.Warmup)
		for _, why := range s.Reasons {
			fmt.Fprintf(b, "- %s\n", mdEscape(why))
		}
		for _, warning := range s.Warnings {
			fmt.Fprintf(b, "- **WARNING**: %s\n", mdEscape(warning))
		}
		if short := s.Shortfall(); short != "" {
			fmt.Fprintf(b, "- %s\n", mdEscape(short))
		}
		if d := s.describeDrain(); d != "" {
			fmt.Fprintf(b, "- %s\n", mdEscape(d))
		}
		if d := s.describeOutcomes(); d != "" {
			fmt.Fprintf(b, "- errors: %s\n", mdEscape(d))
		}
		if d := s.describeInterrupted(); d != "" {
			fmt.Fprintf(b, "- **INTERRUPTED**: %s\n", mdEscape(d))
		}
		if len(s.Reasons) > 0 || len(s.Warnings) > 0 || s.Shortfall() != "" || s.describeDrain() != "" || s.describeOutcomes() != "" || s.Interrupted {
			b.WriteString("\n")
		}
		if ri := s.Replay; ri != nil {
			fmt.Fprintf(b, "Replay: %s.\n\n", mdEscape(ri.describe()))
		}
		if f := s.describeFigures(); f != "" {
			fmt.Fprintf(b, "As vllm bench serve reports it (%s):\n\n", mdEscape(f))
		}
		fmt.Fprintf(b, "```text\n%s```\n\n", s.servingBlock(r.SchemaVersion)) // serving_text.go
		writeQuantileTable(b, s.metrics(), r.Percentiles)                     // percentiles.go
		b.WriteString("\n")
		cache := "not reported by the server"
		if s.CacheHitRatio > 0 || s.ReuseIntent > 0 {
			cache = fmt.Sprintf("%.1f%% of prompt tokens (the workload aims at %.1f%%)", 100*s.CacheHitRatio, 100*s.ReuseIntent)
		}
		fmt.Fprintf(b, "Prefix-cache hit rate: %s; client CPU %.3f s per 1000 requests.\n\n", cache, s.ClientCPUPer1000)
		writeServerMarkdown(b, s)
		if sr := s.SLO; sr != nil && sr.NotJudged != "" {
			fmt.Fprintf(b, "SLO not judged: no request was judged (%s).\n\n", mdEscape(sr.NotJudged))
		} else if sr != nil {
			met := "met"
			if !sr.Met {
				met = "**NOT MET**"
			}
			fmt.Fprintf(b, "SLO %s", met)
			if len(sr.Objectives) > 0 {
				fmt.Fprintf(b, ": goodput %.2f req/s, %d of %d good (%.2f%%, objective %.2f%%)",
					sr.Goodput, sr.Good, sr.Good+sr.Bad, 100*sr.GoodShare, 100*sr.RequiredShare)
			}
			b.WriteString(".\n\n")
			for _, q := range sr.Quantiles {
				held := "held"
				if !q.Met {
					held = "NOT HELD"
				}
				fmt.Fprintf(b, "- %s: %s over %d samples (%s)\n", mdEscape(q.Bound), FormatSeconds(q.Value), q.Count, held)
			}
			if len(sr.Quantiles) > 0 {
				b.WriteString("\n")
			}
		}
	}
	writeClosedLoopMarkdown(b, r) // closedloop.go: the closed-loop levels and the dataset
	_, err := io.WriteString(w, b.String())
	return err
}

func (b SLOBound) describe() string {
	if b.Quantile > 0 {
		return fmt.Sprintf("%s p%s ≤ %s", strings.ToUpper(b.Metric), strconv.FormatFloat(100*b.Quantile, 'g', -1, 64), FormatSeconds(b.Seconds))
	}
	return fmt.Sprintf("%s ≤ %s per request", strings.ToUpper(b.Metric), FormatSeconds(b.Seconds))
}

// counts are the stage's dropped requests and its results other than
// success.
func (s *StageReport) counts() (dropped, errs int) {
	for _, n := range s.Dropped {
		dropped += n
	}
	return dropped, failed(s.Outcomes)
}

type namedQuantiles struct {
	name string
	q    Quantiles
}

func (s *StageReport) metrics() []namedQuantiles {
	return []namedQuantiles{{"TTFT", s.TTFT}, {"TPOT", s.TPOT}, {"ITL", s.ITL}, {"E2E", s.E2E}, {"lag", s.Lag}}
}

// shellQuote quotes an argument for a POSIX shell when it needs it.
func shellQuote(a string) string {
	if a != "" && strings.Trim(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_=.,:/@%+") == "" {
		return a
	}
	return "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
}

// mdEscape keeps a value from breaking a table or starting markup.
func mdEscape(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ", "*", `\*`, "_", `\_`, "`", "\\`", "<", "&lt;").Replace(s)
}
