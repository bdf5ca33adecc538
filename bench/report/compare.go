// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package report

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/llmprobe/llmprobe/dist"
	"github.com/llmprobe/llmprobe/internal/bounded"
	"github.com/llmprobe/llmprobe/regression"
)

// CompareAlpha is the family-wise error rate of a comparison: the
// chance that two runs which differ by chance only get any verdict of a
// real change, over all the tests of all the stages compared. Holm's
// step-down procedure keeps it, whatever the dependence between the tests
// (TTFT and E2E of a stage are far from independent).
const CompareAlpha = 0.01

// CompareQuantile is the tail quantile compared beside the median.
const CompareQuantile = 0.99

// Verdicts of a comparison (lower latency is better).
const (
	VerdictBetter    = "better"
	VerdictWorse     = "worse"
	VerdictNoChange  = "no real change"
	VerdictNoSamples = "no samples"
	// VerdictUntrusted: the stage was not trusted in one of the reports
	// (Comparison.Untrusted says why); it is not tested.
	VerdictUntrusted = "no verdict: not trusted"
)

// Comparison is one metric's quantile of a stage in two reports.
type Comparison struct {
	Stage    string // e.g. "1 sim-chat @5 req/s"
	Metric   string // e.g. "TTFT p50"
	Old, New float64
	// Delta is (New − Old) / Old (NaN when Old is 0).
	Delta float64
	// P is the test's two-sided p-value: Mann–Whitney U for p50, Fisher's
	// exact test of the counts above the pooled p99 for p99. PAdjusted is
	// P adjusted by Holm's procedure over every test of the comparison;
	// the change is real when PAdjusted < CompareAlpha. Both are -1 when
	// there was no test (no samples, or a stage not trusted).
	P, PAdjusted float64
	OldN, NewN   int
	Verdict      string
	// Untrusted says why the stage got no verdict: which report did not
	// trust it and the verdict's own reasons ("" when both trusted it).
	Untrusted string
	// RateP is the two-sided p-value that the stage's two runs achieved
	// (sent) the same rate (rateP; -1: a report has no counts): below
	// RateAlpha their latencies were taken at different loads.
	RateP float64
	// RateWhy gives the two runs' counts behind RateP.
	RateWhy string
}

// RateAlpha is the p-value under which compare says that two matched
// stages' achieved rates differ by more than chance. It is a warning per
// stage, not a verdict, so it is not adjusted over the stages.
const RateAlpha = 0.01

// rateP is the two-sided p-value that n1 requests sent in d1 and n2 in
// d2 came at one rate: as Poisson counts, given their sum n, n2 is
// binomial(n, d2 / (d1 + d2)); by its normal approximation with a
// continuity correction (the stages of a search hold a hundred requests
// and more). Arrivals more regular than Poisson (a constant process)
// vary less, so it warns less often than it could there. It is 1 when
// there is nothing to compare.
func rateP(n1 int, d1 time.Duration, n2 int, d2 time.Duration) float64 {
	n := float64(n1 + n2)
	if n1 < 0 || n2 < 0 || n == 0 || d1 <= 0 || d2 <= 0 {
		return 1
	}
	p := d2.Seconds() / (d1 + d2).Seconds()
	z := (math.Abs(float64(n2)-n*p) - 0.5) / math.Sqrt(n*p*(1-p))
	if !(z > 0) {
		return 1
	}
	return math.Erfc(z / math.Sqrt2)
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
// and p99 (Fisher's exact test of how many of each side's samples lie
// above the pooled p99), then adjusts the p-values over all those tests
// by Holm's procedure: a verdict of a real change is wrong, for two runs
// alike, with probability at most CompareAlpha per comparison. A stage
// either report did not trust is not tested (VerdictUntrusted, with the
// reasons in Untrusted). Stages without a match are left out and listed
// in unmatched.
func Compare(old, new *Report) (out []Comparison, unmatched []string) {
	for _, o := range old.Stages {
		ns := matchStage(o, old.Stages, new.Stages)
		name := fmt.Sprintf("%d %s @%g/s", o.Stage, o.Target, o.RequestedRate)
		if ns == nil {
			unmatched = append(unmatched, name)
			continue
		}
		rp, rwhy := -1.0, ""
		if o.AchievedRate > 0 && ns.AchievedRate > 0 {
			// Matched by the requested rate, shown with the achieved ones.
			name += fmt.Sprintf(" (sent %.3g → %.3g/s)", o.AchievedRate, ns.AchievedRate)
			rp = rateP(o.Sent, o.Duration, ns.Sent, ns.Duration)
			rwhy = fmt.Sprintf("%d sent in %v, then %d in %v", o.Sent, o.Duration.Round(time.Millisecond), ns.Sent, ns.Duration.Round(time.Millisecond))
		}
		untrusted := untrustedWhy(o, ns)
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
			for _, q := range []struct {
				label    string
				old, new float64
				test     func(a, b []float64) float64
			}{
				{"p50", m.oq.P50, m.nq.P50, func(a, b []float64) float64 { _, p := regression.MannWhitney(a, b); return p }},
				{"p99", m.oq.P99, m.nq.P99, func(a, b []float64) float64 { return QuantileTest(a, b, CompareQuantile) }},
			} {
				c := Comparison{Stage: name, Metric: m.name + " " + q.label, Old: q.old, New: q.new,
					OldN: len(a), NewN: len(b), P: -1, PAdjusted: -1, Verdict: VerdictNoSamples, RateP: rp, RateWhy: rwhy}
				c.Delta = relDelta(c.Old, c.New)
				switch {
				case len(a) == 0 || len(b) == 0: // nothing to test, trusted or not
				case untrusted != "":
					c.Verdict, c.Untrusted = VerdictUntrusted, untrusted
				default:
					c.P = q.test(a, b)
				}
				out = append(out, c)
			}
		}
	}
	holm(out)
	for i := range out {
		if c := &out[i]; c.P >= 0 {
			c.Verdict = verdict(c.PAdjusted < CompareAlpha, c.New-c.Old)
		}
	}
	return out, unmatched
}

// untrustedWhy says why a pair of stages cannot be compared: each side
// the verdict did not trust, with its reasons ("" when both were
// trusted).
func untrustedWhy(o, n *StageReport) string {
	var parts []string
	for _, side := range []struct {
		name string
		s    *StageReport
	}{{"old", o}, {"new", n}} {
		if side.s.Trusted {
			continue
		}
		why := strings.Join(side.s.Reasons, "; ")
		if why == "" {
			why = "no reason recorded"
		}
		parts = append(parts, fmt.Sprintf("the %s report's stage %d was NOT TRUSTED: %s", side.name, side.s.Stage, why))
	}
	return strings.Join(parts, "; ")
}

// holm sets PAdjusted of every tested comparison (P ≥ 0) to Holm's
// step-down adjustment over all of them: with the m p-values in
// increasing order, the i-th (from 0) is adjusted to the largest
// min(1, (m−j)·p_j) for j ≤ i. Rejecting where PAdjusted < α keeps the
// family-wise error rate under α whatever the tests' dependence.
func holm(cs []Comparison) {
	var idx []int
	for i, c := range cs {
		if c.P >= 0 {
			idx = append(idx, i)
		}
	}
	slices.SortStableFunc(idx, func(x, y int) int { return cmp.Compare(cs[x].P, cs[y].P) })
	m := len(idx)
	running := 0.0
	for rank, i := range idx {
		running = math.Max(running, math.Min(1, float64(m-rank)*cs[i].P))
		cs[i].PAdjusted = running
	}
}

// QuantileTest is the two-sided p-value that quantile q of b's
// distribution differs from a's: the values of both above the pooled
// sample's quantile q are counted per side, and given how many there are
// in all, the count of b's is hypergeometric when the two are alike
// (Fisher's exact test; regression.FisherGreater gives each tail, the
// smaller doubled). It is exact whatever the distribution, where a
// bootstrap interval of so far a tail is not: at 40 samples a side a
// nominal 99% interval of the p99 difference excluded zero for 5% of
// pairs alike. With few values above the pooled quantile (under about 10)
// it cannot be small: a p99 of a few hundred samples says little. It is 1
// when a side is empty.
func QuantileTest(a, b []float64, q float64) float64 {
	if len(a) == 0 || len(b) == 0 {
		return 1
	}
	pooled := append(slices.Clone(a), b...)
	slices.Sort(pooled)
	t := dist.Quantile(pooled, q)
	above := func(v []float64) (k int) {
		for _, x := range v {
			if x > t {
				k++
			}
		}
		return k
	}
	ka, kb := above(a), above(b)
	p := 2 * math.Min(regression.FisherGreater(kb, len(b), ka, len(a)), regression.FisherGreater(ka, len(a), kb, len(b)))
	return math.Min(1, p)
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

// WriteCompare writes the comparisons as a narrow table, then why any
// stage got no verdict and how the verdicts were reached.
func WriteCompare(w io.Writer, cs []Comparison, unmatched []string) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "stage\tmetric\told\tnew\tΔ%\tp\tHolm p\tverdict")
	tests := 0
	for _, c := range cs {
		p, adj := "-", "-"
		if c.P >= 0 {
			p, adj = fmtP(c.P), fmtP(c.PAdjusted)
			tests++
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", c.Stage, c.Metric, FormatSeconds(c.Old), FormatSeconds(c.New), pct(c.Delta), p, adj, c.Verdict)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	var said []string
	for _, c := range cs {
		if c.Untrusted != "" && !slices.Contains(said, c.Stage) {
			said = append(said, c.Stage)
			fmt.Fprintf(w, "stage %s: no verdict: %s\n", c.Stage, c.Untrusted)
		}
	}
	said = nil
	for _, c := range cs {
		if c.RateP >= 0 && c.RateP < RateAlpha && !slices.Contains(said, c.Stage) {
			said = append(said, c.Stage)
			fmt.Fprintf(w, "stage %s: the achieved rates differ by more than chance (p = %s; %s): the latencies were taken at different loads (the same --seed repeats the arrivals)\n",
				c.Stage, fmtP(c.RateP), c.RateWhy)
		}
	}
	for _, u := range unmatched {
		fmt.Fprintf(w, "stage %s: no matching stage in the new report\n", u)
	}
	_, err := fmt.Fprintf(w, "p50: Mann-Whitney U test; p99: Fisher's exact test of the samples above the pooled p99;\n"+
		"real when the Holm-adjusted p < %g over all %d tests (family-wise error rate %g);\n"+
		"stages not trusted are not tested; up to %d samples per stage and metric\n",
		CompareAlpha, tests, CompareAlpha, MaxSamples)
	return err
}

// fmtP formats a p-value in two significant digits.
func fmtP(p float64) string {
	if p >= 0.995 {
		return "1"
	}
	return fmt.Sprintf("%.2g", p)
}

func pct(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return fmt.Sprintf("%+.1f%%", 100*v)
}
