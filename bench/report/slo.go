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
	// second of the stage.
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
		met := "met"
		if !r.Met {
			met = "NOT MET"
		}
		fmt.Fprintf(w, "stage %d %s SLO %s: %s\n", s.Stage, s.Target, met, strings.Join(parts, "; "))
	}
}
