// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package bench

import (
	"slices"
	"time"

	"github.com/llmprobe/llmprobe/bench/report"
	"github.com/llmprobe/llmprobe/config"
	"github.com/llmprobe/llmprobe/dist"
	"github.com/llmprobe/llmprobe/probe/wire"
	"github.com/llmprobe/llmprobe/slo"
)

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

// report builds the stage's report.SLOReport from the counts and the stage's
// latency samples (seconds, any order; copied before sorting).
func (j *sloJudge) report(c *sloCounts, elapsed time.Duration, samples map[string][]float64) *report.SLOReport {
	rep := &report.SLOReport{Good: c.good, Bad: c.bad, Met: true}
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
		qc := report.QuantileCheck{Bound: q.String(), Count: len(v)}
		if len(v) > 0 {
			qc.Value = dist.Quantile(v, q.Quantile)
			qc.Met = qc.Value <= q.Max.Seconds()
		}
		rep.Met = rep.Met && qc.Met
		rep.Quantiles = append(rep.Quantiles, qc)
	}
	return rep
}
