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
	// Capped are the bounds that stopped the search short of evidence
	// (an untrusted stage where it needed one), each once, with what to
	// change.
	Capped []Cap `json:"capped_by,omitempty"`
	// MaxInflight is set when bench raised the target's max_inflight for
	// the search (the configuration did not set it).
	MaxInflight *MaxInflightRaise `json:"max_inflight_raised,omitempty"`
}

// The bounds of Cap.By.
const (
	// CapMaxInflight: the target had max_inflight requests running and
	// arrivals were dropped (the verdict "target overloaded").
	CapMaxInflight = "max_inflight"
	// CapHarness: the harness could not deliver the load (the verdict
	// "harness saturated").
	CapHarness = "harness"
)

// Cap is a bound that capped a search: the first untrusted stage it
// showed in, the verdict's reason and what to change.
type Cap struct {
	By string `json:"by"`
	// What names the bound with its value, e.g. "max_inflight (64, set
	// in the configuration)".
	What   string  `json:"what"`
	Stage  int     `json:"stage"`
	Rate   float64 `json:"requested_rate"`
	Reason string  `json:"reason"`
	Advice string  `json:"advice"`
}

// MaxInflightRaise is how bench raised a target's max_inflight, unset in
// the configuration, for a search: from the default to the most any of
// its stages needed (Rule).
type MaxInflightRaise struct {
	From int    `json:"from"`
	To   int    `json:"to"`
	Rule string `json:"rule"`
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
	// AchievedRate is the rate that stage achieved (sent per second).
	AchievedRate float64 `json:"achieved_rate,omitempty"`
	StopReason   string  `json:"stop_reason,omitempty"`
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
	// Rate is the requested rate (Fraction × the capacity), AchievedRate
	// the stage's (sent per second) and ServedRate what the target
	// served.
	Rate         float64 `json:"rate"`
	Stage        int     `json:"stage"`
	AchievedRate float64 `json:"achieved_rate,omitempty"`
	ServedRate   float64 `json:"served_rate,omitempty"`
	// NotTrusted: the verdict did not trust the stage.
	NotTrusted bool `json:"not_trusted,omitempty"`
	// OfLowerBound: the capacity was not found, so Fraction is of its
	// lower bound.
	OfLowerBound bool `json:"of_lower_bound,omitempty"`
}

// SLOSearch is the outcome of the SLO search: the highest rate that met
// the SLO, bracketed by the probes just below and above the limit.
type SLOSearch struct {
	// MinSamples is the number of samples (per quantile bound, and of
	// judged requests) a stage needed to be evidence.
	MinSamples int `json:"min_samples"`
	// Found: some stage met the SLO. Rate is the highest achieved rate
	// (sent per second) that did, RequestedRate that stage's requested
	// rate.
	Found         bool    `json:"found"`
	Rate          float64 `json:"rate,omitempty"`
	RequestedRate float64 `json:"requested_rate,omitempty"`
	// Met is the stage at Rate; Above the lowest stage above it that did
	// not meet the SLO (or was no evidence of it): the limit lies between
	// their rates. Either is nil when the search found none.
	Met   *SLOProbe `json:"met,omitempty"`
	Above *SLOProbe `json:"not_met_above,omitempty"`
	// Precision is Above's achieved rate over Rate, minus 1 (0 without
	// Above: an untrusted stage never bounds the limit).
	Precision float64    `json:"precision,omitempty"`
	Probes    []SLOProbe `json:"probes"`
	Note      string     `json:"note,omitempty"`
}

// SLOProbe is one stage of the SLO search.
type SLOProbe struct {
	Stage int `json:"stage"`
	// Rate is the requested rate, AchievedRate the rate sent, ServedRate
	// the rate served.
	Rate         float64 `json:"rate"`
	AchievedRate float64 `json:"achieved_rate,omitempty"`
	ServedRate   float64 `json:"served_rate"`
	Trusted      bool    `json:"trusted"`
	// Met: the stage is evidence that the SLO holds at AchievedRate;
	// NotMet: that it does not ("SLO not met", "not keeping up"). Why
	// says what it is otherwise: also "not trusted" or "too few samples",
	// which are evidence of neither.
	Met    bool   `json:"met"`
	NotMet bool   `json:"not_met,omitempty"`
	Why    string `json:"why,omitempty"`
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
			load := fmt.Sprintf("offered %.3g req/s", c.OfferedRate) // a report from before achieved rates were kept
			if c.AchievedRate > 0 {
				load = fmt.Sprintf("sent %.3g req/s, %.3g requested", c.AchievedRate, c.OfferedRate)
			}
			fmt.Fprintf(w, "  %s: %.3g req/s served, %.0f output tok/s, shown by stage %d (%s); stopped: %s\n",
				what, c.RequestsPerSecond, c.OutputTokensPerSecond, c.Stage, load, c.StopReason)
		}
	}
	for _, l := range f.Levels {
		of := "capacity"
		if l.OfLowerBound {
			of = "the capacity's lower bound (the capacity was NOT FOUND)"
		}
		achieved := ""
		if l.AchievedRate > 0 {
			achieved = fmt.Sprintf(", achieved %.3g req/s, served %.3g", l.AchievedRate, l.ServedRate)
			if l.NotTrusted {
				achieved += " NOT TRUSTED"
			}
		}
		fmt.Fprintf(w, "  level %g × %s = %.3g req/s requested: stage %d%s\n", l.Fraction, of, l.Rate, l.Stage, achieved)
	}
	if r := f.SLO; r != nil {
		for _, p := range r.Probes {
			verdict := "met"
			if !p.Met {
				verdict = "NOT MET (" + p.Why + ")"
			}
			fmt.Fprintf(w, "  slo probe stage %d: %s (served %.3g): %s; %s\n", p.Stage, probeRate(p), p.ServedRate, verdict, probeFigures(p))
		}
		switch {
		case !r.Found:
			fmt.Fprintf(w, "  SLO: NOT MET at any rate probed (%s)\n", r.Note)
		case r.Above == nil:
			fmt.Fprintf(w, "  SLO: met up to %s (stage %d; %s)\n", probeRate(*r.Met), r.Met.Stage, r.Note)
		default:
			fmt.Fprintf(w, "  SLO: met up to %s (stage %d: %s); not at %s (stage %d: %s); the limit lies between (within %.1f%%)",
				probeRate(*r.Met), r.Met.Stage, probeFigures(*r.Met), probeRate(*r.Above), r.Above.Stage, probeFigures(*r.Above), 100*r.Precision)
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
	for _, c := range f.Capped {
		fmt.Fprintf(w, "  capped by %s at stage %d (%.3g req/s requested): %s; %s\n", c.What, c.Stage, c.Rate, c.Reason, c.Advice)
	}
	if m := f.MaxInflight; m != nil {
		fmt.Fprintf(w, "  max_inflight raised from %d (not set in the configuration) to at most %d for the search's stages\n", m.From, m.To)
	}
}

// probeRate is a probe's achieved rate with the requested one beside it
// (a report written before achieved rates were kept shows the requested
// one alone).
func probeRate(p SLOProbe) string {
	if p.AchievedRate == 0 {
		return fmt.Sprintf("%.3g req/s", p.Rate)
	}
	return fmt.Sprintf("%.3g req/s achieved (%.3g requested)", p.AchievedRate, p.Rate)
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
