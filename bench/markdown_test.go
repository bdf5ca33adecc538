// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package bench_test

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/llmprobe/llmprobe/bench/report"
)

// TestMarkdown: the Markdown report of a real run has a title, the run's
// parameters (target, model, sampling, workload classes with their
// lengths), per stage the verdict (with reasons when untrusted), a narrow
// latency table with n beside the quantiles, the prefix-cache hit rate,
// the goodput under the SLO, and the picture's link when given.
func TestMarkdown(t *testing.T) {
	sw := runSweep(t)
	rep := untrustedCopy(t, sw.rep)
	var sb strings.Builder
	if err := rep.WriteMarkdown(&sb, report.MarkdownOptions{Plot: "plots/run.svg"}); err != nil {
		t.Fatal(err)
	}
	md := sb.String()
	t.Logf("\n%s", md)
	for _, want := range []string{
		"# llmprobe bench report\n",
		"![Latency and throughput against achieved load](plots/run.svg)",
		"## Parameters",
		"| sim | sim-model | chat |",
		"| sim | chat | 0.7 | uniform min=16 max=64 | fixed value=8 | 2 groups × 32 tokens, p=0.9 |",
		"| sim | long | 0.3 | fixed value=200 | fixed value=16 | - |",
		"- sim/chat: temperature=",
		"ignore\\_eos=true",
		"- TTFT ≤ 500.0ms per request (--slo)",
		"## Stage 1: sim at 4 req/s",
		"## Stage 2: sim at 8 req/s",
		"Verdict: **trusted**",
		"Verdict: **NOT TRUSTED**",
		"- target overloaded: for the test",
		"| metric | n | p50 | p90 | p99 | max |",
		"```text\n============ Serving Benchmark Result ============\n",
		"\nOutput token throughput (tok/s):         ",
		"Prefix-cache hit rate: ",
		"goodput ",
		"TPOT p99 ≤ 100ms: ",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the Markdown has no %q", want)
		}
	}
	for _, s := range rep.Stages {
		row := fmt.Sprintf("| TTFT | %d |", s.TTFT.Count)
		if s.TTFT.Count == 0 || !strings.Contains(md, row) {
			t.Errorf("stage %d: no row %q", s.Stage, row)
		}
		if s.CacheHitRatio > 0 && !strings.Contains(md, fmt.Sprintf("Prefix-cache hit rate: %.1f%%", 100*s.CacheHitRatio)) {
			t.Errorf("stage %d: the hit rate %.3f is not stated", s.Stage, s.CacheHitRatio)
		}
	}
	for i, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(line, "| metric") || strings.HasPrefix(line, "| TTFT") {
			if len([]rune(line)) > 80 {
				t.Errorf("line %d is %d columns: %q", i+1, len([]rune(line)), line)
			}
		}
	}
	var plain strings.Builder
	if err := trustedCopy(t, sw.rep).WriteMarkdown(&plain, report.MarkdownOptions{}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(plain.String(), "![") || strings.Contains(plain.String(), "NOT TRUSTED") {
		t.Error("a picture link without a picture, or an untrusted verdict in a trusted run")
	}
}

// TestTextNarrow: the text report's tables fit in 100 columns and give n
// beside each quantile.
func TestTextNarrow(t *testing.T) {
	sw := runSweep(t)
	var sb strings.Builder
	if err := sw.rep.WriteText(&sb); err != nil {
		t.Fatal(err)
	}
	text := sb.String()
	t.Logf("\n%s", text)
	for i, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "sampling:") || strings.HasPrefix(line, "stage ") && strings.Contains(line, ": ") {
			continue // prose lines
		}
		if n := len([]rune(line)); n > 100 {
			t.Errorf("line %d is %d columns: %q", i+1, n, line)
		}
	}
	if !strings.Contains(text, "metric") || !strings.Contains(text, "  n  ") {
		t.Errorf("no metric table with n")
	}
	for _, s := range sw.rep.Stages {
		if !regexp.MustCompile(fmt.Sprintf(`(?m)^ +%d +sim +TTFT +%d +\S+ms `, s.Stage, s.TTFT.Count)).MatchString(text) {
			t.Errorf("stage %d: no TTFT row with n=%d", s.Stage, s.TTFT.Count)
		}
	}
}
