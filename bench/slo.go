// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package bench

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/llmprobe/llmprobe/config"
	"github.com/llmprobe/llmprobe/dist"
	"github.com/llmprobe/llmprobe/probe/wire"
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

// sloJudge holds what a target's requests are judged against in a stage.
type sloJudge struct {
	classes   map[string]*slo.Objective // nil entries: no objective
	quantiles []slo.QuantileBound
}

// newSLOJudge resolves the objective of each class of t: spec's, when
// given, else the configuration's. It is nil when nothing is judged.
func newSLOJudge(cfg *config.Config, t *config.Target, spec *slo.Spec) *sloJudge {
	j := &sloJudge{classes: map[string]*slo.Objective{}}
	if spec != nil {
		j.quantiles = spec.Quantiles
	}
	judged := len(j.quantiles) > 0
	if w := cfg.Workload(t); w != nil {
		for _, c := range w.Classes {
			obj := cfg.SLO(t, c)
			if spec != nil && spec.Objective != nil {
				obj = spec.Objective
			}
			j.classes[c.Name] = obj
			judged = judged || obj != nil
		}
	}
	if !judged {
		return nil
	}
	return j
}

// sloCounts are a target's judged requests in a stage.
type sloCounts struct {
	good, bad  int
	judged     map[string]int // per class
	violations [len(slo.Bounds)]int
}

// observe judges one request (after warm-up) of class.
func (c *sloCounts) observe(j *sloJudge, r *wire.Result) {
	obj := j.classes[r.Class]
	if obj == nil {
		return
	}
	req, ok := r.SLORequest()
	if !ok {
		return
	}
	if c.judged == nil {
		c.judged = map[string]int{}
	}
	c.judged[r.Class]++
	v := obj.Judge(req)
	if v.Good {
		c.good++
		return
	}
	c.bad++
	for i, b := range v.Broke {
		if b {
			c.violations[i]++
		}
	}
}

// report builds the stage's SLOReport from the counts and the stage's
// latency samples (seconds, any order; copied before sorting).
func (j *sloJudge) report(c *sloCounts, elapsed time.Duration, samples map[string][]float64) *SLOReport {
	rep := &SLOReport{Good: c.good, Bad: c.bad, Met: true}
	for class, obj := range j.classes {
		if obj != nil {
			if rep.Objectives == nil {
				rep.Objectives = map[string]string{}
			}
			rep.Objectives[class] = obj.String()
		}
	}
	if n := c.good + c.bad; n > 0 {
		rep.GoodShare = float64(c.good) / float64(n)
		for class, k := range c.judged {
			rep.RequiredShare += float64(k) / float64(n) * j.classes[class].Ratio
		}
		// A good share within float rounding of the required one is met.
		rep.Met = rep.GoodShare >= rep.RequiredShare-1e-12
	} else if len(rep.Objectives) > 0 {
		rep.Met = false // nothing was judged: nothing says it held
	}
	if secs := elapsed.Seconds(); secs > 0 {
		rep.Goodput = float64(c.good) / secs
	}
	for i, n := range c.violations {
		if n > 0 {
			if rep.Violations == nil {
				rep.Violations = map[slo.Bound]int{}
			}
			rep.Violations[slo.Bounds[i]] = n
		}
	}
	for _, q := range j.quantiles {
		v := slices.Clone(samples[q.Metric])
		slices.Sort(v)
		qc := QuantileCheck{Bound: q.String(), Count: len(v)}
		if len(v) > 0 {
			qc.Value = dist.Quantile(v, q.Quantile)
			qc.Met = qc.Value <= q.Max.Seconds()
		}
		rep.Met = rep.Met && qc.Met
		rep.Quantiles = append(rep.Quantiles, qc)
	}
	return rep
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
