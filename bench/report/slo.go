// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package report

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/llmprobe/llmprobe/slo"
)

// SLOReport is a stage's goodput: its requests judged one by one against
// the SLO of their class (slo.Objective.Judge, as the daemon's
// llmprobe_slo_* counters are), and the stage's quantiles against the
// quantile bounds of --slo.
type SLOReport struct {
	// Objectives describes the objective of each judged class.
	Objectives map[string]string `json:"objectives,omitempty"`
	Good       int               `json:"good"`
	Bad        int               `json:"bad"`
	// GoodShare is Good / (Good + Bad); Goodput is good requests per
	// second of the stage's duration as vLLM's (Serving.RequestGoodput:
	// the same requests, over the same time).
	GoodShare float64 `json:"good_share"`
	Goodput   float64 `json:"goodput_per_second"`
	// RequiredShare is the good share the objectives ask of the requests
	// judged: each request's class objective, averaged over the requests.
	RequiredShare float64           `json:"required_good_share"`
	Violations    map[slo.Bound]int `json:"violations,omitempty"`
	Quantiles     []QuantileCheck   `json:"quantile_bounds,omitempty"`
	// Met: the good share reached the required share (when requests were
	// judged) and every quantile bound held.
	Met bool `json:"met"`
	// NotJudged says why nothing was judged (no request against an
	// objective, no sample for a quantile bound): the SLO was neither met
	// nor broken, and Met is false (nothing says it held). Empty when
	// something was judged.
	NotJudged string `json:"not_judged,omitempty"`
}

// verdict is the SLO's verdict in a word or two.
func (r *SLOReport) verdict() string {
	switch {
	case r.NotJudged != "":
		return "not judged"
	case r.Met:
		return "met"
	}
	return "NOT MET"
}

// QuantileCheck is one quantile bound over a stage.
type QuantileCheck struct {
	Bound string `json:"bound"` // e.g. "TPOT p99 ≤ 100ms"
	// Value is the stage's quantile (0 without samples).
	Value float64 `json:"value_seconds"`
	// Count is the number of samples the quantile rests on; with none the
	// bound is not met (nothing says it held).
	Count int  `json:"count"`
	Met   bool `json:"met"`
}

// writeSLO writes one line per stage and target judged against an SLO.
func writeSLO(w io.Writer, stages []*StageReport) {
	for _, s := range stages {
		r := s.SLO
		if r == nil {
			continue
		}
		if r.NotJudged != "" {
			fmt.Fprintf(w, "stage %d %s SLO not judged: no request was judged (%s)\n", s.Stage, s.Target, r.NotJudged)
			continue
		}
		var parts []string
		if len(r.Objectives) > 0 {
			parts = append(parts, fmt.Sprintf("goodput %.2f/s, %d of %d good (%.2f%%, objective %.2f%%)",
				r.Goodput, r.Good, r.Good+r.Bad, 100*r.GoodShare, 100*r.RequiredShare))
			var v []string
			for _, b := range slo.Bounds {
				if n := r.Violations[b]; n > 0 {
					v = append(v, fmt.Sprintf("%s %d", b, n))
				}
			}
			if len(v) > 0 {
				parts = append(parts, "broken: "+strings.Join(v, ", "))
			}
		}
		for _, q := range r.Quantiles {
			verdict := "held"
			if !q.Met {
				verdict = "NOT HELD"
			}
			value := "no samples"
			if q.Count > 0 {
				value = time.Duration(q.Value * float64(time.Second)).Round(10 * time.Microsecond).String()
			}
			parts = append(parts, fmt.Sprintf("%s: %s over %d (%s)", q.Bound, value, q.Count, verdict))
		}
		fmt.Fprintf(w, "stage %d %s SLO %s: %s\n", s.Stage, s.Target, r.verdict(), strings.Join(parts, "; "))
	}
}
