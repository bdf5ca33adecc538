// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"text/tabwriter"

	"github.com/llmprobe/llmprobe/internal/bounded"
	"github.com/llmprobe/llmprobe/regression"
)

// Comparison settings: a change is real when its test rejects "no
// change" at CompareAlpha (the Mann–Whitney p-value for medians, a
// (1 − CompareAlpha) bootstrap interval of the p99 difference that
// excludes zero); the bootstrap draws CompareResamples resamples from a
// fixed seed, so comparing the same files twice says the same.
const (
	CompareAlpha     = 0.01
	CompareResamples = 2000
	compareSeed      = 20240601
)

// Verdicts of a comparison (lower latency is better).
const (
	VerdictBetter    = "better"
	VerdictWorse     = "worse"
	VerdictNoChange  = "no real change"
	VerdictNoSamples = "no samples"
)

// Comparison is one metric's quantile of a stage in two reports.
type Comparison struct {
	Stage    string // e.g. "1 sim-chat @5 req/s"
	Metric   string // e.g. "TTFT p50"
	Old, New float64
	// Delta is (New − Old) / Old (NaN when Old is 0).
	Delta float64
	// P is the Mann–Whitney p-value (medians; -1 for p99).
	P float64
	// CILow and CIHigh bound (New − Old) / Old for p99.
	CILow, CIHigh float64
	OldN, NewN    int
	Verdict       string
}

// MaxReportSize bounds a JSON report read back (a report keeps at most
// MaxSamples values of each kind per stage: a long sweep is a few MiB). A
// larger file, or a device such as /dev/zero, is refused unread.
const MaxReportSize = 256 << 20

// ReadReport reads a JSON report (WriteJSON) from path.
func ReadReport(path string) (*Report, error) {
	return ReadReportContext(context.Background(), path)
}

// ReadReportContext is ReadReport that gives way to ctx (SIGINT/SIGTERM
// while a read blocks on a pipe).
func ReadReportContext(ctx context.Context, path string) (*Report, error) {
	data, err := bounded.ReadFile(ctx, path, MaxReportSize)
	if err != nil {
		return nil, err
	}
	var r Report
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("%s: not a bench JSON report: %v", path, err)
	}
	if len(r.Stages) == 0 {
		return nil, fmt.Errorf("%s: not a bench JSON report: no stages", path)
	}
	return &r, nil
}

// matchStage finds the stage of new matching s of old: same target and
// requested rate, else same target and stage number when that stage's
// rate is none of old's for the target (it is the other run's take on
// this step of the sweep, not a different load).
func matchStage(s *StageReport, old, new []*StageReport) *StageReport {
	sameRate := func(a, b *StageReport) bool {
		return a.Target == b.Target && math.Abs(a.RequestedRate-b.RequestedRate) <= 1e-9*math.Max(1, a.RequestedRate)
	}
	for _, n := range new {
		if sameRate(n, s) {
			return n
		}
	}
	for _, n := range new {
		if n.Target == s.Target && n.Stage == s.Stage &&
			!slices.ContainsFunc(old, func(o *StageReport) bool { return sameRate(o, n) }) {
			return n
		}
	}
	return nil
}

// Compare compares every stage of old with its match in new (matchStage)
// on TTFT, TPOT and E2E p50 (Mann–Whitney U on the per-request samples)
// and p99 (bootstrap interval of the difference). Stages without a match
// are left out and listed in unmatched.
func Compare(old, new *Report) (out []Comparison, unmatched []string) {
	for _, o := range old.Stages {
		ns := matchStage(o, old.Stages, new.Stages)
		name := fmt.Sprintf("%d %s @%g/s", o.Stage, o.Target, o.RequestedRate)
		if ns == nil {
			unmatched = append(unmatched, name)
			continue
		}
		metrics := []struct {
			name    string
			oq, nq  Quantiles
			samples func(*Samples) []float64
		}{
			{"TTFT", o.TTFT, ns.TTFT, func(s *Samples) []float64 { return s.TTFT }},
			{"TPOT", o.TPOT, ns.TPOT, func(s *Samples) []float64 { return s.TPOT }},
			{"E2E", o.E2E, ns.E2E, func(s *Samples) []float64 { return s.E2E }},
		}
		for _, m := range metrics {
			var a, b []float64
			if o.Samples != nil {
				a = m.samples(o.Samples)
			}
			if ns.Samples != nil {
				b = m.samples(ns.Samples)
			}
			med := Comparison{Stage: name, Metric: m.name + " p50", Old: m.oq.P50, New: m.nq.P50, OldN: len(a), NewN: len(b), P: -1}
			med.Delta = relDelta(med.Old, med.New)
			med.Verdict = VerdictNoSamples
			if len(a) > 0 && len(b) > 0 {
				_, med.P = regression.MannWhitney(a, b)
				med.Verdict = verdict(med.P < CompareAlpha, med.New-med.Old)
			}
			p99 := Comparison{Stage: name, Metric: m.name + " p99", Old: m.oq.P99, New: m.nq.P99, OldN: len(a), NewN: len(b), P: -1}
			p99.Delta = relDelta(p99.Old, p99.New)
			p99.Verdict = VerdictNoSamples
			if lo, hi, ok := BootstrapQuantileDiff(a, b, 0.99, CompareResamples, compareSeed, 1-CompareAlpha); ok {
				p99.CILow, p99.CIHigh = relDelta(0, lo, p99.Old), relDelta(0, hi, p99.Old)
				real := lo > 0 || hi < 0
				p99.Verdict = verdict(real, (lo+hi)/2)
			}
			out = append(out, med, p99)
		}
	}
	return out, unmatched
}

// relDelta is (new − old) / base, base being old unless given.
func relDelta(old, new float64, base ...float64) float64 {
	b := old
	if len(base) > 0 {
		b = base[0]
	}
	if b == 0 {
		return math.NaN()
	}
	return (new - old) / b
}

func verdict(real bool, diff float64) string {
	switch {
	case !real:
		return VerdictNoChange
	case diff < 0:
		return VerdictBetter
	case diff > 0:
		return VerdictWorse
	}
	return VerdictNoChange
}

// WriteCompare writes the comparisons as a narrow table.
func WriteCompare(w io.Writer, cs []Comparison, unmatched []string) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "stage\tmetric\told\tnew\tΔ%\tp / 99% CI of Δ%\tverdict")
	for _, c := range cs {
		test := "-"
		switch {
		case c.Verdict == VerdictNoSamples:
		case c.P >= 0:
			test = fmt.Sprintf("p=%.2g", c.P)
		default:
			test = fmt.Sprintf("[%s, %s]", pct(c.CILow), pct(c.CIHigh))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", c.Stage, c.Metric, fmtSeconds(c.Old), fmtSeconds(c.New), pct(c.Delta), test, c.Verdict)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, u := range unmatched {
		fmt.Fprintf(w, "stage %s: no matching stage in the new report\n", u)
	}
	_, err := fmt.Fprintf(w, "p50: Mann-Whitney U test, real when p < %g; p99: %.0f%% bootstrap interval\n"+
		"(%d resamples, seed %d), real when it excludes 0; up to %d samples per stage and metric\n",
		CompareAlpha, 100*(1-CompareAlpha), CompareResamples, compareSeed, MaxSamples)
	return err
}

func pct(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return fmt.Sprintf("%+.1f%%", 100*v)
}
