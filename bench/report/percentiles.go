// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package report

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/llmprobe/llmprobe/dist"
)

// AddPercentiles sets q.Percentiles to the percentiles ps of v (none
// when v is empty).
func AddPercentiles(q *Quantiles, v []float64, ps []float64) {
	if len(v) == 0 || len(ps) == 0 {
		return
	}
	s := make([]float64, 0, len(v))
	for _, x := range v {
		if !math.IsNaN(x) {
			s = append(s, x)
		}
	}
	if len(s) == 0 {
		return
	}
	slices.Sort(s)
	q.Percentiles = make(map[string]float64, len(ps))
	for _, p := range ps {
		q.Percentiles[PercentileName(p)] = dist.Quantile(s, p/100)
	}
}

// PercentileName is the name of percentile p (in percent): "p90",
// "p99.9".
func PercentileName(p float64) string { return "p" + strconv.FormatFloat(p, 'g', -1, 64) }

// ParsePercentiles reads a comma-separated list of percentiles in
// percent, e.g. "50,90,99,99.9": each in (0, 100], no repeats, kept in
// the order given.
func ParsePercentiles(s string) ([]float64, error) {
	var out []float64
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(f), "p"))
		v, err := strconv.ParseFloat(f, 64)
		if err != nil || !(v > 0 && v <= 100) {
			return nil, fmt.Errorf("%q: each percentile must be a number in (0, 100], e.g. 50,90,99", s)
		}
		if slices.Contains(out, v) {
			return nil, fmt.Errorf("%q: percentile %g is given twice", s, v)
		}
		out = append(out, v)
	}
	return out, nil
}

// quantileHeader names the quantile columns of the tables: the
// percentiles asked for, else p50, p95 and p99.
func quantileHeader(ps []float64) []string {
	if len(ps) == 0 {
		return []string{"p50", "p95", "p99"}
	}
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = PercentileName(p)
	}
	return out
}

// quantileCells are q's values under quantileHeader(ps), formatted.
func quantileCells(q Quantiles, ps []float64) []string {
	if len(ps) == 0 {
		return []string{fmtQ(q, q.P50), fmtQ(q, q.P95), fmtQ(q, q.P99)}
	}
	out := make([]string, len(ps))
	for i, p := range ps {
		v, ok := q.Percentiles[PercentileName(p)]
		if !ok {
			out[i] = "-"
			continue
		}
		out[i] = fmtQ(q, v)
	}
	return out
}

// writeQuantileTable writes a Markdown table of metrics with the
// quantile columns of ps.
func writeQuantileTable(b *strings.Builder, ms []namedQuantiles, ps []float64) {
	h := quantileHeader(ps)
	fmt.Fprintf(b, "| metric | n | %s | max |\n|---|--:|%s--:|\n", strings.Join(h, " | "), strings.Repeat("--:|", len(h)))
	for _, m := range ms {
		fmt.Fprintf(b, "| %s | %d | %s | %s |\n", m.name, m.q.Count, strings.Join(quantileCells(m.q, ps), " | "), fmtQ(m.q, m.q.Max))
	}
}
