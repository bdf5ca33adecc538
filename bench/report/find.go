// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package report

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// FindReport is the outcome of a search: Report.Find.
type FindReport struct {
	Mode string `json:"mode"`
	// Rules states how stages were sized and judged.
	Rules []string `json:"rules"`
	// Capacity is the capacity the levels and the SLO search used: found
	// by the ramp, or given.
	Capacity *CapacityResult `json:"capacity,omitempty"`
	// Ramp lists the capacity ramp's stages in order.
	Ramp []FindStep `json:"capacity_ramp,omitempty"`
	// Levels are the stages at fractions of the capacity.
	Levels []LevelStage `json:"levels,omitempty"`
	// SLO is the outcome of the SLO search.
	SLO *SLOSearch `json:"slo_search,omitempty"`
	// Estimate is how the capacity ramp chose its first rate (nil when
	// it was given).
	Estimate *CapacityEstimate `json:"capacity_estimate,omitempty"`
	// Untrusted lists the stages that were not taken as evidence because
	// the verdict did not trust them.
	Untrusted []int `json:"untrusted_stages_not_evidence,omitempty"`
}

// CapacityResult is the capacity of the target.
type CapacityResult struct {
	// Given: the capacity was given (--capacity), not measured.
	Given bool `json:"given"`
	// Found: a trusted stage showed the plateau or the runaway queue, so
	// RequestsPerSecond is the capacity; otherwise it is only a lower
	// bound (the ramp stopped on an untrusted stage or ran out of
	// stages), and StopReason says why.
	Found                 bool    `json:"found"`
	RequestsPerSecond     float64 `json:"requests_per_second"`
	OutputTokensPerSecond float64 `json:"output_tokens_per_second"`
	// Stage is the stage that showed it (the trusted stage with the
	// highest served rate) and OfferedRate the rate it was sent at.
	Stage       int     `json:"stage,omitempty"`
	OfferedRate float64 `json:"offered_rate,omitempty"`
	StopReason  string  `json:"stop_reason,omitempty"`
}

// FindStep is one stage of the capacity ramp.
type FindStep struct {
	Stage                 int     `json:"stage"`
	OfferedRate           float64 `json:"offered_rate"`
	SentRate              float64 `json:"sent_rate"`
	ServedRate            float64 `json:"served_rate"`
	ServedOutputTokensSec float64 `json:"served_output_tokens_per_second"`
	Served                int     `json:"served_requests"`
	TTFTP50               float64 `json:"ttft_p50_seconds"`
	Trusted               bool    `json:"trusted"`
	// Gain is ServedRate over the previous trusted step's, minus 1 (0 for
	// the first).
	Gain float64 `json:"served_gain"`
}

// LevelStage is one stage at a fraction of the capacity.
type LevelStage struct {
	Fraction float64 `json:"fraction"`
	Rate     float64 `json:"rate"`
	Stage    int     `json:"stage"`
}

// SLOSearch is the outcome of the SLO search: the highest rate that met
// the SLO, bracketed by the probes just below and above the limit.
type SLOSearch struct {
	// MinSamples is the number of samples (per quantile bound, and of
	// judged requests) a stage needed to be evidence.
	MinSamples int `json:"min_samples"`
	// Found: some stage met the SLO. Rate is the highest rate that did.
	Found bool    `json:"found"`
	Rate  float64 `json:"rate,omitempty"`
	// Met is the stage at Rate; Above the lowest stage above it that did
	// not meet the SLO (or was no evidence of it): the limit lies between
	// their rates. Either is nil when the search found none.
	Met   *SLOProbe `json:"met,omitempty"`
	Above *SLOProbe `json:"not_met_above,omitempty"`
	// Precision is Above's rate over Rate, minus 1.
	Precision float64    `json:"precision,omitempty"`
	Probes    []SLOProbe `json:"probes"`
	Note      string     `json:"note,omitempty"`
}

// SLOProbe is one stage of the SLO search.
type SLOProbe struct {
	Stage      int     `json:"stage"`
	Rate       float64 `json:"rate"`
	ServedRate float64 `json:"served_rate"`
	Trusted    bool    `json:"trusted"`
	// Met: the stage is evidence that the SLO holds at Rate. Why says what
	// it is otherwise: "SLO not met", "not trusted", "too few samples",
	// "not keeping up".
	Met bool   `json:"met"`
	Why string `json:"why,omitempty"`
	// Quantiles are the stage's quantile bounds with their values and
	// sample counts; Judged is the number of requests judged against the
	// per-request objective and GoodShare their good share.
	Quantiles []QuantileCheck `json:"quantile_bounds,omitempty"`
	Judged    int             `json:"judged_requests"`
	GoodShare float64         `json:"good_share"`
}

// writeFind writes the search's outcome after the stage table.
func writeFind(w io.Writer, f *FindReport) {
	if f == nil {
		return
	}
	mode := f.Mode
	if mode == "" {
		mode = "levels"
	}
	fmt.Fprintf(w, "find %s:\n", mode)
	for _, r := range f.Rules {
		fmt.Fprintf(w, "  rule: %s\n", r)
	}
	writeEstimate(w, f.Estimate)
	for _, st := range f.Ramp {
		trusted := ""
		if !st.Trusted {
			trusted = " NOT TRUSTED, not evidence"
		}
		fmt.Fprintf(w, "  ramp stage %d: offered %.3g req/s, sent %.3g, served %.3g req/s (%d, %+.1f%%), %.0f output tok/s, TTFT p50 %s%s\n",
			st.Stage, st.OfferedRate, st.SentRate, st.ServedRate, st.Served, 100*st.Gain, st.ServedOutputTokensSec, FormatSeconds(st.TTFTP50), trusted)
	}
	if c := f.Capacity; c != nil {
		switch {
		case c.Given:
			fmt.Fprintf(w, "  capacity: %.3g req/s (given)\n", c.RequestsPerSecond)
		case c.Stage == 0:
			fmt.Fprintf(w, "  capacity: NOT FOUND, no trusted stage (%s)\n", c.StopReason)
		default:
			what := "capacity"
			if !c.Found {
				what = "capacity NOT FOUND, at least"
			}
			fmt.Fprintf(w, "  %s: %.3g req/s served, %.0f output tok/s, shown by stage %d (offered %.3g req/s); stopped: %s\n",
				what, c.RequestsPerSecond, c.OutputTokensPerSecond, c.Stage, c.OfferedRate, c.StopReason)
		}
	}
	for _, l := range f.Levels {
		fmt.Fprintf(w, "  level %g × capacity = %.3g req/s: stage %d\n", l.Fraction, l.Rate, l.Stage)
	}
	if r := f.SLO; r != nil {
		for _, p := range r.Probes {
			verdict := "met"
			if !p.Met {
				verdict = "NOT MET (" + p.Why + ")"
			}
			fmt.Fprintf(w, "  slo probe stage %d: %.3g req/s (served %.3g): %s; %s\n", p.Stage, p.Rate, p.ServedRate, verdict, probeFigures(p))
		}
		switch {
		case !r.Found:
			fmt.Fprintf(w, "  SLO: NOT MET at any rate probed (%s)\n", r.Note)
		case r.Above == nil:
			fmt.Fprintf(w, "  SLO: met up to %.3g req/s (stage %d; %s)\n", r.Rate, r.Met.Stage, r.Note)
		default:
			fmt.Fprintf(w, "  SLO: met up to %.3g req/s (stage %d: %s); not at %.3g req/s (stage %d: %s); the limit lies between (within %.1f%%)",
				r.Rate, r.Met.Stage, probeFigures(*r.Met), r.Above.Rate, r.Above.Stage, probeFigures(*r.Above), 100*r.Precision)
			if r.Note != "" {
				fmt.Fprintf(w, "; %s", r.Note)
			}
			fmt.Fprintln(w)
		}
	}
	if len(f.Untrusted) > 0 {
		s := make([]string, len(f.Untrusted))
		for i, n := range f.Untrusted {
			s[i] = fmt.Sprint(n)
		}
		fmt.Fprintf(w, "  stages %s are not trusted: not taken as evidence of capacity or of meeting the SLO\n", strings.Join(s, ", "))
	}
}

// probeFigures is a probe's quantiles and sample counts in words.
func probeFigures(p SLOProbe) string {
	var parts []string
	for _, q := range p.Quantiles {
		v := "no samples"
		if q.Count > 0 {
			v = FormatSeconds(q.Value)
		}
		parts = append(parts, fmt.Sprintf("%s: %s, n=%d", q.Bound, v, q.Count))
	}
	if p.Judged > 0 {
		parts = append(parts, fmt.Sprintf("good %.2f%% of n=%d", 100*p.GoodShare, p.Judged))
	}
	if len(parts) == 0 {
		return "no figures"
	}
	return strings.Join(parts, ", ")
}

// CapacityEstimate is how the capacity ramp chose its first rate
// (FindReport.Estimate).
type CapacityEstimate struct {
	// Levels are the closed-loop levels, in order.
	Levels []EstimateLevel `json:"levels"`
	// RequestsPerSecond is the estimate (0: none); StartRate the ramp's
	// first rate.
	RequestsPerSecond float64       `json:"requests_per_second"`
	StartRate         float64       `json:"ramp_start_rate"`
	Duration          time.Duration `json:"duration_ns"`
	Note              string        `json:"note"`
}

// EstimateLevel is one closed-loop level of the estimate.
type EstimateLevel struct {
	Concurrency int           `json:"concurrency"`
	Duration    time.Duration `json:"duration_ns"`
	Completed   int           `json:"completed"`
	Errors      int           `json:"errors"`
	// Rate is Completed per second of Duration; Concurrency / Rate is
	// the mean E2E it implies (Little's law).
	Rate float64 `json:"requests_per_second"`
}

// writeEstimate writes the estimate's levels before the ramp.
func writeEstimate(w io.Writer, e *CapacityEstimate) {
	if e == nil {
		return
	}
	for _, l := range e.Levels {
		fmt.Fprintf(w, "  estimate level (closed loop, not evidence): concurrency %d, %d completed in %s, %d errors: %.3g req/s (mean E2E %s by Little's law)\n",
			l.Concurrency, l.Completed, l.Duration.Round(10*time.Millisecond), l.Errors, l.Rate, FormatSeconds(float64(l.Concurrency)/l.Rate))
	}
	fmt.Fprintf(w, "  estimate: %.3g req/s in %s (%s); the ramp starts at %.3g req/s\n",
		e.RequestsPerSecond, e.Duration.Round(100*time.Millisecond), e.Note, e.StartRate)
}
