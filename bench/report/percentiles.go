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

// tableQuantiles are the percentiles the tables show: the median, then
// those asked for (ps), or p50, p95 and p99 for a report without them
// (written before schema 3 without --percentiles).
func tableQuantiles(ps []float64) []float64 {
	if len(ps) == 0 {
		return []float64{50, 95, 99}
	}
	return append([]float64{50}, slices.DeleteFunc(slices.Clone(ps), func(p float64) bool { return p == 50 })...)
}

// quantileHeader names the quantile columns of the tables
// (tableQuantiles).
func quantileHeader(ps []float64) []string {
	var out []string
	for _, p := range tableQuantiles(ps) {
		out = append(out, PercentileName(p))
	}
	return out
}

// quantileCells are q's values under quantileHeader(ps), formatted.
func quantileCells(q Quantiles, ps []float64) []string {
	var out []string
	for _, p := range tableQuantiles(ps) {
		v, ok := q.Percentiles[PercentileName(p)]
		switch {
		case ok:
		case p == 50:
			v = q.P50
		case p == 95:
			v = q.P95
		case p == 99:
			v = q.P99
		default:
			out = append(out, "-")
			continue
		}
		out = append(out, fmtQ(q, v))
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
