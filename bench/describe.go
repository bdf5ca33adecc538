// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package bench

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/llmprobe/llmprobe/bench/report"
	"github.com/llmprobe/llmprobe/config"
	"github.com/llmprobe/llmprobe/internal/scrub"
	"github.com/llmprobe/llmprobe/slo"
)

// What a report says of the run's configuration: what each target was
// sent and the SLO bounds the stages are judged by.

// describeWorkload summarises what t was sent.
func describeWorkload(cfg *config.Config, t *config.Target) report.WorkloadInfo {
	// Credentials can sit in a URL's user information or query: neither
	// is written.
	wi := report.WorkloadInfo{Target: t.Name, URL: scrub.URL(t.URL), API: t.API, Model: t.Model, Workload: t.Workload}
	w := cfg.Workload(t)
	if w == nil {
		return wi
	}
	for _, c := range w.Classes {
		ci := report.ClassInfo{Name: c.Name, Weight: c.Weight, PromptTokens: describeDist(c.PromptTokens),
			OutputTokens: describeDist(c.OutputTokens), Turns: c.Turns != nil}
		if p := c.Prefix; p != nil {
			ci.Prefix = fmt.Sprintf("%d groups × %d tokens, p=%g", p.Groups, p.Tokens, p.Probability)
		}
		wi.Classes = append(wi.Classes, ci)
	}
	return wi
}

// describeDist is a token-length distribution in a few words.
func describeDist(d config.Dist) string {
	var parts []string
	add := func(name string, v *float64) {
		if v != nil {
			parts = append(parts, name+"="+strconv.FormatFloat(*v, 'g', -1, 64))
		}
	}
	add("value", d.Value)
	add("median", d.Median)
	add("p99", d.P99)
	add("mean", d.Mean)
	add("stddev", d.Stddev)
	add("mu", d.Mu)
	add("sigma", d.Sigma)
	for _, q := range slices.Sorted(maps.Keys(d.Quantiles)) {
		parts = append(parts, fmt.Sprintf("q%g=%g", q, d.Quantiles[q]))
	}
	if d.File != "" {
		parts = append(parts, "file="+d.File)
	}
	add("min", d.Min)
	add("max", d.Max)
	kind := d.Kind
	if kind == "" {
		kind = "fixed"
	}
	if len(parts) == 0 {
		return kind
	}
	return kind + " " + strings.Join(parts, " ")
}

// sloBounds lists the bounds the stages are judged by: spec's when given,
// else the per-request bounds of the configured objectives (deduplicated).
func sloBounds(cfg *config.Config, targets []*config.Target, spec *slo.Spec) []report.SLOBound {
	var out []report.SLOBound
	add := func(metric string, q float64, d time.Duration, label string) {
		if d <= 0 {
			return
		}
		b := report.SLOBound{Metric: metric, Quantile: q, Seconds: d.Seconds(), Label: label}
		if !slices.ContainsFunc(out, func(o report.SLOBound) bool {
			return o.Metric == b.Metric && o.Quantile == b.Quantile && o.Seconds == b.Seconds
		}) {
			out = append(out, b)
		}
	}
	perRequest := func(o *slo.Objective, label string) {
		add("ttft", 0, time.Duration(o.TTFT), label)
		add("tpot", 0, time.Duration(o.TPOT), label)
		add("e2e", 0, time.Duration(o.E2E), label)
	}
	if spec != nil {
		if spec.Objective != nil {
			perRequest(spec.Objective, "--slo")
		}
		for _, q := range spec.Quantiles {
			add(q.Metric, q.Quantile, q.Max, "--slo")
		}
		return out
	}
	for _, t := range targets {
		w := cfg.Workload(t)
		if w == nil {
			continue
		}
		for _, c := range w.Classes {
			if o := cfg.SLO(t, c); o != nil {
				perRequest(o, t.Name+"/"+c.Name)
			}
		}
	}
	return out
}
