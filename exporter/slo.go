// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package exporter

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmprobe/llmprobe/probe/wire"
	"github.com/llmprobe/llmprobe/slo"
)

// sloMetrics are the series of the configured service-level objectives,
// one set per (target, class) with an SLO (config.Config.SLO): they feed
// the error-budget and burn-rate rules of the mixin.
type sloMetrics struct {
	requests   *prometheus.CounterVec // target, class, result
	violations *prometheus.CounterVec // target, class, bound
	objective  *prometheus.GaugeVec   // target, class
	window     *prometheus.GaugeVec   // target, class
}

const (
	labelResult = "result"
	labelBound  = "bound"
)

func newSLOMetrics() sloMetrics {
	return sloMetrics{
		requests: prometheus.NewCounterVec(counterOpts("slo_requests_total",
			"Requests judged against the SLO of their target and class, after warm-up: good (succeeded and met every latency bound of the SLO) or bad (failed, or broke a bound). Requests llmprobe itself cancelled (shutdown) are not judged."),
			[]string{labelTarget, labelClass, labelResult}),
		violations: prometheus.NewCounterVec(counterOpts("slo_violations_total",
			"Bad requests by the SLO bound they broke: ttft, tpot, e2e, or error (the request failed). A request that broke several latency bounds counts once for each."),
			[]string{labelTarget, labelClass, labelBound}),
		objective: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: "slo_objective_ratio",
			Help: "The SLO's objective: the share of requests that must be good."}, targetClassLabels),
		window: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: "slo_window_seconds",
			Help: "The SLO's error-budget period (slo.window)."}, targetClassLabels),
	}
}

func (s sloMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{s.requests, s.violations, s.objective, s.window}
}

func (s sloMetrics) vecs() []partialDeleter {
	return []partialDeleter{s.requests, s.violations, s.objective, s.window}
}

// classSLO is one (target, class)'s objective and its resolved series.
type classSLO struct {
	obj        *slo.Objective
	good, bad  prometheus.Counter
	violations [len(slo.Bounds)]prometheus.Counter
	// tally counts what the series count, for the status page (a
	// counter's value cannot be read back cheaply); reloads that keep the
	// class's SLO keep it.
	tally *sloTally
}

type sloTally struct{ good, bad atomic.Uint64 }

// series creates (at 0) every series of target's class under obj; prev
// is the class's SLO before a reload, or nil.
func (s sloMetrics) series(target, class string, obj *slo.Objective, prev *classSLO) *classSLO {
	c := &classSLO{
		obj:   obj,
		tally: new(sloTally),
		good:  s.requests.WithLabelValues(target, class, "good"),
		bad:   s.requests.WithLabelValues(target, class, "bad"),
	}
	for i, b := range slo.Bounds {
		c.violations[i] = s.violations.WithLabelValues(target, class, string(b))
	}
	if prev != nil {
		c.tally = prev.tally
	}
	s.objective.WithLabelValues(target, class).Set(obj.Ratio)
	s.window.WithLabelValues(target, class).Set(time.Duration(obj.Window).Seconds())
	return c
}

// observe judges one request that ended after warm-up.
func (c *classSLO) observe(r *wire.Result) {
	req, ok := r.SLORequest()
	if !ok {
		return
	}
	v := c.obj.Judge(req)
	if v.Good {
		c.good.Inc()
		c.tally.good.Add(1)
		return
	}
	c.bad.Inc()
	c.tally.bad.Add(1)
	for i, broke := range v.Broke {
		if broke {
			c.violations[i].Inc()
		}
	}
}

// SLOCounts is one class's SLO and what it has judged since the series
// were created (start, or the reload that gave the class its SLO).
type SLOCounts struct {
	Objective *slo.Objective
	Good, Bad uint64
}

// SLO returns the SLO of target's class and its counts; ok is false when
// the class has none.
func (m *Metrics) SLO(target, class string) (c SLOCounts, ok bool) {
	cs := m.class(target, class)
	if cs == nil || cs.slo == nil {
		return SLOCounts{}, false
	}
	return SLOCounts{Objective: cs.slo.obj, Good: cs.slo.tally.good.Load(), Bad: cs.slo.tally.bad.Load()}, true
}

// GoodShare is the share of judged requests that were good (NaN before
// the first).
func (c SLOCounts) GoodShare() float64 {
	return float64(c.Good) / float64(c.Good+c.Bad)
}
