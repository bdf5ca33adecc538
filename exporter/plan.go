// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package exporter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmprobe/llmprobe/config"
	"github.com/llmprobe/llmprobe/plan"
)

// The daemon's plan figures (docs/plan.md, "In the daemon"): what the
// running configuration's rates buy — the detection delay of each
// regression per class — and spend — its tokens a day. A Planner computes
// package plan's figures once per configuration, in a goroutine of its
// own after each (re)load, never on a request's path; a reload that
// changes nothing the plan reads keeps them. It is the collector of
// llmprobe_plan_detection_delay_seconds and llmprobe_probe_tokens_per_day
// and feeds the status page.

var (
	planDelayDesc = prometheus.NewDesc("llmprobe_plan_detection_delay_seconds",
		"Median delay from a regression to the daemon's regression alarm at the class's configured rate, planned on the reference model (llmprobe plan; docs/design.md \"Planning the rate\"). effect as in --detect: +25%, +50% (the median), p99x2, 5% (errors from 1%). +Inf: not caught within the horizon in over half the steps.",
		[]string{"target", "class", "metric", "effect"}, nil)
	planTokensDesc = prometheus.NewDesc("llmprobe_probe_tokens_per_day",
		"Tokens a day the class's configured rate spends (llmprobe plan): kind prompt, output, or cached_prompt (the prompt tokens a prefix cache can serve).",
		[]string{"target", "class", "kind"}, nil)
)

// Planner plans each configuration the daemon runs, in the background.
// Create it with NewPlanner and give it every configuration with
// SetConfig.
type Planner struct {
	ctx    context.Context
	logger *slog.Logger
	opts   plan.Options

	mu  sync.Mutex
	cur *planRun
}

// planRun is the plan of one configuration: running until done closes.
type planRun struct {
	cfg    *config.Config
	cancel context.CancelFunc
	done   chan struct{}
	// Set before done closes.
	rep  *plan.Report
	err  error
	took time.Duration
}

// NewPlanner returns a planner that stops planning when ctx is done.
// o are the plan's options; Workers 0 is one goroutine here (the daemon's
// probing keeps the other cores).
func NewPlanner(ctx context.Context, logger *slog.Logger, o plan.Options) *Planner {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if o.Workers <= 0 {
		o.Workers = 1
	}
	return &Planner{ctx: ctx, logger: logger, opts: o}
}

// SetConfig plans cfg in the background, abandoning the plan of the
// previous configuration if it is still running; a configuration that
// changes nothing the plan reads keeps the previous plan.
func (p *Planner) SetConfig(cfg *config.Config) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cur != nil && samePlanInputs(p.cur.cfg, cfg) {
		return
	}
	if p.cur != nil {
		p.cur.cancel()
	}
	ctx, cancel := context.WithCancel(p.ctx)
	r := &planRun{cfg: cfg, cancel: cancel, done: make(chan struct{})}
	p.cur = r
	go func() {
		defer close(r.done)
		defer cancel()
		start := time.Now()
		r.rep, r.err = plan.PlanContext(ctx, cfg, p.opts)
		r.took = time.Since(start)
		switch {
		case errors.Is(r.err, context.Canceled):
		case r.err != nil:
			p.logger.Warn("planning the configuration failed: no plan figures", "err", r.err)
		default:
			p.logger.Debug("planned the configuration", "took", r.took.Round(time.Millisecond), "classes", len(r.rep.Classes))
		}
	}()
}

// samePlanInputs reports whether b plans as a does: the same targets,
// workloads and regression interval (what Plan reads).
func samePlanInputs(a, b *config.Config) bool {
	return a.Global.RegressionInterval == b.Global.RegressionInterval &&
		reflect.DeepEqual(a.Targets, b.Targets) && reflect.DeepEqual(a.Workloads, b.Workloads)
}

// Report returns the plan of the running configuration, nil while it is
// being computed (or when it failed: err says why).
func (p *Planner) Report() (rep *plan.Report, err error) {
	p.mu.Lock()
	r := p.cur
	p.mu.Unlock()
	if r == nil {
		return nil, nil
	}
	select {
	case <-r.done:
		return r.rep, r.err
	default:
		return nil, nil
	}
}

// wait blocks until the running configuration's plan is done or ctx is.
func (p *Planner) wait(ctx context.Context) error {
	p.mu.Lock()
	r := p.cur
	p.mu.Unlock()
	if r == nil {
		return errors.New("no configuration")
	}
	select {
	case <-r.done:
		return r.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Describe implements prometheus.Collector.
func (p *Planner) Describe(ch chan<- *prometheus.Desc) {
	ch <- planDelayDesc
	ch <- planTokensDesc
}

// Collect implements prometheus.Collector: nothing until the plan is
// done.
func (p *Planner) Collect(ch chan<- prometheus.Metric) {
	rep, _ := p.Report()
	if rep == nil {
		return
	}
	for _, c := range rep.Classes {
		for _, d := range c.Detection {
			v := math.Inf(1)
			if d.MedianSeconds != nil {
				v = *d.MedianSeconds
			}
			ch <- prometheus.MustNewConstMetric(planDelayDesc, prometheus.GaugeValue, v, c.Target, c.Class, d.Metric, EffectLabel(d))
		}
		for _, k := range []struct {
			kind string
			v    float64
		}{{"prompt", c.TokensPerDay.Prompt}, {"output", c.TokensPerDay.Output}, {"cached_prompt", c.TokensPerDay.CachedPrompt}} {
			ch <- prometheus.MustNewConstMetric(planTokensDesc, prometheus.GaugeValue, k.v, c.Target, c.Class, k.kind)
		}
	}
}

// EffectLabel is a detection's effect label, in --detect's words: +25%
// (the median ×1.25), p99x2, 5% (errors from 1% to 5%).
func EffectLabel(d plan.Detection) string {
	switch {
	case d.Metric == plan.MetricErrors:
		return fmt.Sprintf("%g%%", roundSig(100*plan.BaselineErrorRatio*d.Effect))
	case d.Quantile != nil && *d.Quantile > 0.5:
		return fmt.Sprintf("p%gx%g", 100**d.Quantile, roundSig(d.Effect))
	}
	return fmt.Sprintf("%+g%%", roundSig(100*(d.Effect-1)))
}

func roundSig(v float64) float64 {
	if v == 0 {
		return 0
	}
	p := math.Pow(10, 6-math.Ceil(math.Log10(math.Abs(v))))
	return math.Round(v*p) / p
}

// planView is a target's plan on the status page.
type planView struct {
	Pending bool   // being computed
	Err     string // why there is none
	Effects []string
	Classes []planClassView
}

type planClassView struct {
	Class  string
	Rate   float64
	Delays []string // per Effects: "1.6 min (p90 2.1 min)", "never", "–"
	// Prompt (Cached of it) and Output are tokens a day, written short.
	Prompt, Cached, Output string
	Cost                   string // "" without pricing
}

// view is target's plan for the status page (nil without a planner).
func (p *Planner) view(target string) *planView {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	none := p.cur == nil
	p.mu.Unlock()
	if none {
		return nil // no configuration yet
	}
	rep, err := p.Report()
	switch {
	case err != nil:
		return &planView{Err: err.Error()}
	case rep == nil:
		return &planView{Pending: true}
	}
	v := &planView{}
	var effects []plan.Detection
	for _, c := range rep.Classes {
		if c.Target != target {
			continue
		}
		for _, d := range c.Detection {
			if !hasEffect(effects, d) {
				effects = append(effects, d)
			}
		}
	}
	for _, e := range effects {
		v.Effects = append(v.Effects, strings.ToUpper(e.Metric)+" "+EffectLabel(e))
	}
	for _, c := range rep.Classes {
		if c.Target != target {
			continue
		}
		cv := planClassView{Class: c.Class, Rate: c.Rate,
			Prompt: plan.FormatCount(c.TokensPerDay.Prompt), Cached: plan.FormatCount(c.TokensPerDay.CachedPrompt), Output: plan.FormatCount(c.TokensPerDay.Output)}
		if c.CostPerDay != nil {
			cv.Cost = fmt.Sprintf("%.4g", *c.CostPerDay)
		}
		for _, e := range effects {
			cell := "–"
			for _, d := range c.Detection {
				if d.Metric == e.Metric && d.Effect == e.Effect && reflect.DeepEqual(d.Quantile, e.Quantile) {
					cell = plan.FormatDelay(d.MedianSeconds)
					if d.MedianSeconds != nil {
						cell += " (p90 " + plan.FormatDelay(d.P90Seconds) + ")"
					}
				}
			}
			cv.Delays = append(cv.Delays, cell)
		}
		v.Classes = append(v.Classes, cv)
	}
	return v
}

func hasEffect(ds []plan.Detection, d plan.Detection) bool {
	for _, e := range ds {
		if e.Metric == d.Metric && e.Effect == d.Effect && reflect.DeepEqual(e.Quantile, d.Quantile) {
			return true
		}
	}
	return false
}
