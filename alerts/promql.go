// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package alerts

import (
	"strconv"
	"strings"
)

// LatencyMetrics are the latency histograms of the metrics contract, by
// short name (see LatencyMetric).
var LatencyMetrics = []string{"ttft", "tpot", "itl", "e2e"}

// Quantiles are the quantiles recorded for every latency histogram.
var Quantiles = []float64{0.5, 0.95, 0.99}

// LatencyMetric returns the histogram name of a latency short name:
// LatencyMetric("ttft") is "llmprobe_ttft_seconds".
func LatencyMetric(short string) string { return "llmprobe_" + short + "_seconds" }

// FormatFloat formats a threshold or quantile the way it appears in PromQL
// and in rule labels: shortest representation, no exponent for ordinary
// values ("0.99", "2", "0.05").
func FormatFloat(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// HistogramQuantile returns PromQL for the q-quantile of histogram metric
// aggregated by the given labels over window. It reads the native histogram
// when the series exists and falls back to the classic _bucket series
// otherwise, so it works whether Prometheus scrapes native histograms,
// classic buckets, or both. matchers is a braced selector such as
// Config.Matchers returns; window is a PromQL duration or a Grafana
// variable such as $__rate_interval.
//
// When both representations exist the native one wins: `or` keeps the
// left-hand side for every label set present on both sides.
func HistogramQuantile(q float64, metric string, by []string, matchers, window string) string {
	qs := FormatFloat(q)
	return "histogram_quantile(" + qs + ", sum" + byClause(by) + " (rate(" + metric + matchers + "[" + window + "])))\n" +
		"or\n" +
		"histogram_quantile(" + qs + ", sum" + byClause(append(append([]string(nil), by...), "le")) + " (rate(" + metric + "_bucket" + matchers + "[" + window + "])))"
}

// HistogramCount returns PromQL for the number of observations a histogram
// gained over window, aggregated by the given labels: from the native
// histogram when present, else from the classic _count series.
func HistogramCount(metric string, by []string, matchers, window string) string {
	return "histogram_count(sum" + byClause(by) + " (increase(" + metric + matchers + "[" + window + "])))\n" +
		"or\n" +
		"sum" + byClause(by) + " (increase(" + metric + "_count" + matchers + "[" + window + "]))"
}

func byClause(by []string) string {
	if len(by) == 0 {
		return ""
	}
	return " by (" + strings.Join(by, ", ") + ")"
}

// Paren wraps a (possibly multi-line, possibly `or`-joined) expression in
// parentheses so it can be an operand of a binary operator.
func Paren(expr string) string {
	if !strings.Contains(expr, "\n") {
		return "(" + expr + ")"
	}
	return "(\n" + indent(expr, "  ") + "\n)"
}

func indent(s, prefix string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = prefix + l
		}
	}
	return strings.Join(lines, "\n")
}
