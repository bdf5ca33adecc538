// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package bench

import (
	"fmt"
	"slices"
	"strings"

	"github.com/llmprobe/llmprobe/bench/report"
	"github.com/llmprobe/llmprobe/config"
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

// perRequest is whether a class has an objective: requests are judged
// one by one (the stage has a goodput).
func (j *sloJudge) perRequest() bool {
	for _, obj := range j.classes {
		if obj != nil {
			return true
		}
	}
	return false
}

// sloCounts are a target's judged requests in a stage.
type sloCounts struct {
	good, bad  int
	judged     map[string]int // per class
	violations [len(slo.Bounds)]int
	// measured counts the requests after the warm-up, cancelled those
	// of them cut at the grace's end (judged by no SLO).
	measured, cancelled int
}

// observe judges one request (after warm-up) of class, and says whether
// it was good.
func (c *sloCounts) observe(j *sloJudge, r *wire.Result) bool {
	c.measured++
	obj := j.classes[r.Class]
	req, ok := r.SLORequest()
	if !ok {
		c.cancelled++
		return false
	}
	if obj == nil {
		return false
	}
	if c.judged == nil {
		c.judged = map[string]int{}
	}
	c.judged[r.Class]++
	v := obj.Judge(req)
	if v.Good {
		c.good++
		return true
	}
	c.bad++
	for i, b := range v.Broke {
		if b {
			c.violations[i]++
		}
	}
	return false
}

// notJudged says why no request was judged ("" when some were).
func (j *sloJudge) notJudged(c *sloCounts) string {
	switch {
	case c.good+c.bad > 0:
		return ""
	case c.measured == 0:
		return "none was planned after the warm-up"
	case c.cancelled == c.measured:
		return "every one planned after the warm-up was cancelled at the grace's end"
	case !j.perRequest():
		return "none planned after the warm-up completed, for the quantile bounds"
	}
	var judged []string
	for class, obj := range j.classes {
		if obj != nil {
			judged = append(judged, class)
		}
	}
	slices.Sort(judged)
	return fmt.Sprintf("none planned after the warm-up was of a class with an objective (%s)", strings.Join(judged, ", "))
}

// report builds the stage's report.SLOReport from the counts, the stage's
// figures (its goodput is theirs) and quantile, the stage's quantiles of a
// metric (ttft, tpot, itl, e2e) and the number of values they rest on.
func (j *sloJudge) report(c *sloCounts, fig *report.Serving, quantile func(metric string, q float64) (float64, int)) *report.SLOReport {
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
	if fig != nil && fig.RequestGoodput != nil {
		rep.Goodput = *fig.RequestGoodput
	}
	for i, n := range c.violations {
		if n > 0 {
			if rep.Violations == nil {
				rep.Violations = map[slo.Bound]int{}
			}
			rep.Violations[slo.Bounds[i]] = n
		}
	}
	sampled := false
	for _, q := range j.quantiles {
		qc := report.QuantileCheck{Bound: q.String()}
		qc.Value, qc.Count = quantile(q.Metric, q.Quantile)
		if qc.Count > 0 {
			qc.Met = qc.Value <= q.Max.Seconds()
			sampled = true
		}
		rep.Met = rep.Met && qc.Met
		rep.Quantiles = append(rep.Quantiles, qc)
	}
	if why := j.notJudged(c); why != "" && !sampled {
		rep.NotJudged, rep.Met = why, false
	}
	return rep
}
