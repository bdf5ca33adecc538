// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package plan

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/llmprobe/llmprobe/alerts"
	"github.com/llmprobe/llmprobe/config"
	"github.com/llmprobe/llmprobe/probe/workload"
	"github.com/llmprobe/llmprobe/regression"
)

// Options tune Plan. The zero value plans with the reference model, the
// default trials and effects, every CPU and the mixin's default
// burn-rate windows.
type Options struct {
	// Trials is the steps each figure simulates (0: DefaultTrials).
	Trials int
	// Workers is how many goroutines simulate (0: GOMAXPROCS).
	Workers int
	// Seed makes the figures (0: a fixed default, the same every run).
	Seed uint64
	// Goals are detection goals (--detect): each class's lowest rate
	// meeting each, and its target's.
	Goals []Goal
	// Observed are the daemon's recent samples by target and class
	// (--from): a class with enough of them is planned on them (shape
	// observed).
	Observed map[Key]*Samples
	// Alerts holds the burn-rate windows and guards the SLO alerts use
	// (nil: alerts.DefaultConfig()).
	Alerts *alerts.Config
	// Effects are the regressions planned for every class (nil:
	// DefaultEffects).
	Effects []Effect
}

// Key names a class of a target.
type Key struct{ Target, Class string }

// Report is a plan: `llmprobe plan --format=json` writes it.
type Report struct {
	Classes []Class  `json:"classes"`
	Targets []Target `json:"targets"`
}

// Class is a class's plan at its share of its target's rate.
type Class struct {
	Target string `json:"target"`
	Class  string `json:"class"`
	// Rate is the class's requests per second: its weight's share of the
	// target's arrivals, times its turns.
	Rate float64 `json:"rate"`
	// Shape is ShapeAssumed (the reference model) or ShapeObserved.
	Shape        string      `json:"shape"`
	TokensPerDay Tokens      `json:"tokens_per_day"`
	CostPerDay   *float64    `json:"cost_per_day"`
	Detection    []Detection `json:"detection"`
	// SLO is nil when the class has no SLO.
	SLO   *SLO         `json:"slo,omitempty"`
	Goals []GoalResult `json:"goals,omitempty"`
	Notes []string     `json:"notes,omitempty"`
}

// Detection is what the detector does with one regression of the class
// at its rate.
type Detection struct {
	Metric string `json:"metric"`
	// Quantile is 0.5 or 0.99; null for errors.
	Quantile *float64 `json:"quantile"`
	// Effect is the ratio: 1.25 for +25%, 2 for p99 ×2, 5 for errors 1% →
	// 5%.
	Effect float64 `json:"effect"`
	// MedianSeconds and P90Seconds are the delays from the change to
	// the alarm; null when over half (a tenth) of the steps were not
	// caught within the horizon.
	MedianSeconds *float64 `json:"median_seconds"`
	P90Seconds    *float64 `json:"p90_seconds"`
	// MissRate is the share of steps not caught within DeadlineSeconds:
	// a goal's deadline for this regression, else the horizon.
	MissRate        float64 `json:"miss_rate"`
	DeadlineSeconds float64 `json:"deadline_seconds"`
	// HistorySeconds is the history simulated before the step, Trials
	// the steps.
	HistorySeconds float64 `json:"history_seconds"`
	Trials         int     `json:"trials"`
	// FalseAlarmsPer30Days is the union bound on this series' false
	// alarms (regression.FalseAlarmBound over 30 days of evaluations):
	// the rate the levels allow, whatever the traffic; the measured one
	// is lower (docs/design.md, "Regression detection").
	FalseAlarmsPer30Days float64 `json:"false_alarms_per_30_days"`
}

// GoalResult is the lowest rate at which a class meets a goal.
type GoalResult struct {
	Detect string `json:"detect"`
	// Met says the class's current rate meets it.
	Met bool `json:"met"`
	// Rate is the lowest class rate meeting it and TargetRate the
	// target's rate that gives the class that rate; null when no rate up
	// to MaxGoalRate does.
	Rate         *float64 `json:"rate"`
	TargetRate   *float64 `json:"target_rate"`
	TokensPerDay *Tokens  `json:"tokens_per_day"`
	CostPerDay   *float64 `json:"cost_per_day"`
}

// Target sums a target's classes.
type Target struct {
	Target       string       `json:"target"`
	Rate         float64      `json:"rate"`
	TokensPerDay Tokens       `json:"tokens_per_day"`
	CostPerDay   *float64     `json:"cost_per_day"`
	Goals        []TargetGoal `json:"goals,omitempty"`
	Notes        []string     `json:"notes,omitempty"`
}

// TargetGoal is the lowest target rate at which every class of the
// target meets a goal, and what it spends.
type TargetGoal struct {
	Detect       string   `json:"detect"`
	Rate         *float64 `json:"rate"`
	TokensPerDay *Tokens  `json:"tokens_per_day"`
	CostPerDay   *float64 `json:"cost_per_day"`
}

// classPlan is a class being planned.
type classPlan struct {
	out   *Class
	t     *config.Target
	wc    *workload.Class
	share float64 // the class's arrivals per arrival of the target
	tok   arrivalTokens
	shape shape
	opts  regression.Options
	on    bool
	// tails caches each metric's p90 and p99 (quantiles90and99): a
	// goal's search builds a cell per rate it tries.
	tails map[string][2]float64
}

// Plan plans every class of every target of cfg (a validated
// configuration).
func Plan(cfg *config.Config, o Options) (*Report, error) {
	return PlanContext(context.Background(), cfg, o)
}

// PlanContext is Plan, stopped (with ctx's error) once ctx is done: the
// daemon's plan of a configuration it no longer runs.
func PlanContext(ctx context.Context, cfg *config.Config, o Options) (*Report, error) {
	if cfg == nil {
		return nil, errors.New("plan: no configuration")
	}
	if o.Trials <= 0 {
		o.Trials = DefaultTrials
	}
	if o.Seed == 0 {
		o.Seed = 0x6c6c6d70726f6265 // "llmprobe"
	}
	effects := o.Effects
	if effects == nil {
		effects = DefaultEffects
	}
	for _, g := range o.Goals {
		if !slices.Contains(effects, g.Effect) {
			effects = append(slices.Clip(effects), g.Effect)
		}
	}
	mixin := alerts.DefaultConfig()
	if o.Alerts != nil {
		mixin = *o.Alerts
	}
	every := time.Duration(cfg.Global.RegressionInterval)
	if every <= 0 {
		every = time.Minute
	}
	p := newPool(ctx, o.Workers)

	rep := &Report{Classes: []Class{}, Targets: []Target{}}
	var classes []*classPlan
	for _, t := range cfg.Targets {
		w := cfg.Workload(t)
		if w == nil {
			return nil, fmt.Errorf("plan: target %q: no workload %q", t.Name, t.Workload)
		}
		compiled := workload.NewWorkload(w)
		total := 0.0
		for _, c := range w.Classes {
			total += c.Weight
		}
		for i, c := range w.Classes {
			wc := compiled.Classes[i]
			cp := &classPlan{t: t, wc: wc}
			if total > 0 {
				cp.share = c.Weight / total
			}
			cp.tok = classTokens(wc, t.API)
			rc := cfg.Regression(t, c)
			cp.opts, cp.on = rc.DetectorOptions(), rc.On()
			out := &Class{Target: t.Name, Class: c.Name, Shape: ShapeAssumed, Detection: []Detection{}}
			out.Rate = t.Arrival.Rate * cp.share * cp.tok.requests
			cp.out = out
			ref := assumed{c: wc, api: t.API}
			cp.shape = ref
			if s := o.Observed[Key{t.Name, c.Name}]; s != nil {
				if obs, ok := newObserved(s); ok {
					cp.shape = mixed{obs: obs, ref: ref}
					out.Shape = ShapeObserved
					var missing []string
					for _, m := range latencyMetrics {
						if !obs.has(m) && ref.sampler(m) != nil {
							missing = append(missing, m)
						}
					}
					if len(missing) > 0 {
						out.Notes = append(out.Notes, fmt.Sprintf("observed: %s from the reference model (fewer than %d samples)", strings.Join(missing, ", "), MinObserved))
					}
				} else {
					out.Notes = append(out.Notes, fmt.Sprintf("assumed: the daemon had fewer than %d recent samples of this class (%d requests)", MinObserved, s.Requests))
				}
			}
			out.TokensPerDay = cp.tok.perDay(out.Rate)
			out.CostPerDay = costPerDay(t.Pricing, out.TokensPerDay)
			if obj := cfg.SLO(t, c); obj != nil {
				out.SLO = sloWindows(obj, out.Rate, mixin)
			}
			if t.WorkloadFrom != nil {
				out.Notes = append(out.Notes, "workload_from refits the lengths at run time: planned on the configured ones")
			}
			if t.Discovery != nil {
				out.Notes = append(out.Notes, "a discovery target: planned at arrival.rate as configured (rate_per: "+t.RatePer+")")
			}
			if c.Images != nil {
				out.Notes = append(out.Notes, "image tokens are not counted")
			}
			classes = append(classes, cp)
		}
	}

	// The figures at the classes' rates, all in one batch.
	type pending struct {
		cp  *classPlan
		e   Effect
		job *job
	}
	var jobs []*job
	var figures []pending
	for _, cp := range classes {
		switch {
		case !cp.on:
			cp.out.Notes = append(cp.out.Notes, "regression detection is off for this class")
			continue
		case !(cp.out.Rate > 0):
			cp.out.Notes = append(cp.out.Notes, "no requests: nothing is detected")
			continue
		}
		for _, e := range effects {
			c := cp.cell(e, cp.out.Rate, every, o.Seed, 0)
			if c == nil {
				continue
			}
			for _, g := range o.Goals {
				if g.Effect == e {
					c.horizon = max(c.horizon, min(g.Within, MaxSimulated))
					c.deadline = g.Within
				}
			}
			j := &job{c: c, n: o.Trials}
			jobs = append(jobs, j)
			figures = append(figures, pending{cp, e, j})
		}
	}
	p.run(jobs)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for _, f := range figures {
		s := regression.Summarise(f.job.out, f.job.c.deadline)
		d := Detection{Metric: f.e.Metric, Effect: f.e.Effect, MissRate: s.Missed,
			DeadlineSeconds: f.job.c.deadline.Seconds(), HistorySeconds: f.job.c.history.Seconds(), Trials: f.job.n,
			FalseAlarmsPer30Days: regression.FalseAlarmBound(f.job.c.kind, f.cp.opts, float64(30*24*time.Hour/every))}
		if f.e.Metric != MetricErrors {
			q := f.e.Quantile
			d.Quantile = &q
		}
		d.MedianSeconds, d.P90Seconds = seconds(s.Median), seconds(s.P90)
		f.cp.out.Detection = append(f.cp.out.Detection, d)
	}

	// The goals: each class's lowest rate, then its target's.
	for _, cp := range classes {
		for _, g := range o.Goals {
			gr := GoalResult{Detect: g.Spec}
			for _, d := range cp.out.Detection {
				if d.Metric == g.Metric && d.Effect == g.Effect.Effect && (d.Quantile == nil || *d.Quantile == g.Quantile) {
					gr.Met = d.MissRate <= 1-GoalShare+1e-9
				}
			}
			switch {
			case !cp.on:
			case cp.cell(g.Effect, 1, every, o.Seed, g.Within) == nil:
				// The class has no such metric.
			default:
				mk := func(rate float64) *cell { return cp.cell(g.Effect, rate, every, o.Seed, g.Within) }
				if r, ok := p.lowestRate(mk, o.Trials, cp.out.Rate); ok {
					rr := roundUp(r, 3)
					gr.Rate = &rr
					if f := cp.share * cp.tok.requests; f > 0 {
						tr := roundUp(r/f, 3)
						gr.TargetRate = &tr
					}
					tok := cp.tok.perDay(r)
					gr.TokensPerDay = &tok
					gr.CostPerDay = costPerDay(cp.t.Pricing, tok)
				}
			}
			cp.out.Goals = append(cp.out.Goals, gr)
		}
	}

	if err := ctx.Err(); err != nil {
		return nil, err
	}

	// Per target: the sums, and each goal's rate for every class.
	for _, t := range cfg.Targets {
		tp := Target{Target: t.Name, Rate: t.Arrival.Rate}
		var mine []*classPlan
		for _, cp := range classes {
			if cp.t == t {
				mine = append(mine, cp)
				tp.TokensPerDay = tp.TokensPerDay.plus(cp.out.TokensPerDay)
			}
		}
		tp.CostPerDay = costPerDay(t.Pricing, tp.TokensPerDay)
		if t.Pricing == nil {
			tp.Notes = append(tp.Notes, noPricing)
		}
		for gi, g := range o.Goals {
			tg := TargetGoal{Detect: g.Spec}
			need, ok := 0.0, true
			for _, cp := range mine {
				gr := cp.out.Goals[gi]
				if gr.TargetRate == nil {
					if cp.on && gr.Rate == nil && cp.cell(g.Effect, 1, every, o.Seed, g.Within) != nil {
						ok = false
					}
					continue
				}
				need = max(need, *gr.TargetRate)
			}
			if ok && need > 0 {
				tg.Rate = &need
				var tok Tokens
				for _, cp := range mine {
					tok = tok.plus(cp.tok.perDay(need * cp.share * cp.tok.requests))
				}
				tg.TokensPerDay = &tok
				tg.CostPerDay = costPerDay(t.Pricing, tok)
			}
			tp.Goals = append(tp.Goals, tg)
		}
		rep.Targets = append(rep.Targets, tp)
	}
	for _, cp := range classes {
		rep.Classes = append(rep.Classes, *cp.out)
	}
	return rep, nil
}

// cell is the figure of effect e for the class at rate (its requests per
// second); within, when not zero, is a goal's deadline and horizon. nil
// when the class has no such metric. Cells are built on one goroutine.
func (cp *classPlan) cell(e Effect, rate float64, every time.Duration, seed uint64, within time.Duration) *cell {
	c := &cell{opts: cp.opts, every: every, rate: rate, errAfter: BaselineErrorRatio * e.Effect,
		seed: seedOf(seed, append([]string{cp.out.Class}, e.key()...)...)}
	if e.Metric == MetricErrors {
		c.kind = regression.Ratio
	} else {
		c.kind = regression.Latency
		if cp.shape.sampler(e.Metric) == nil {
			return nil
		}
		if e.Metric == MetricTPOT {
			if cp.tok.longOutput < 1e-3 {
				return nil
			}
			c.rate *= cp.tok.longOutput
		}
		c.newSampler = func() sampler { return cp.shape.sampler(e.Metric) }
		if e.Quantile > 0.5 {
			q, ok := cp.tails[e.Metric]
			if !ok {
				q[0], q[1] = quantiles90and99(cp.shape, e.Metric)
				if cp.tails == nil {
					cp.tails = map[string][2]float64{}
				}
				cp.tails[e.Metric] = q
			}
			p90, p99 := q[0], q[1]
			if !(p99 > p90) {
				return nil
			}
			c.change = regression.TailChange(p90, p99, e.Effect)
		} else {
			f := e.Effect
			c.change = func(v float64) float64 { return v * f }
		}
	}
	c.history = historyFor(e, c.rate)
	c.horizon = horizonFor(c.rate)
	c.deadline = c.horizon
	if within > 0 {
		c.horizon, c.deadline = within, within
	}
	return c
}

// perDay is the tokens a day at rate requests per second of the class.
func (a arrivalTokens) perDay(rate float64) Tokens {
	if !(a.requests > 0) {
		return Tokens{}
	}
	arrivals := rate / a.requests * 86400
	return Tokens{Prompt: arrivals * a.prompt, Output: arrivals * a.output, CachedPrompt: arrivals * a.cached}
}

// seconds is d in seconds, nil for never.
func seconds(d time.Duration) *float64 {
	if d == regression.Never {
		return nil
	}
	v := d.Seconds()
	return &v
}

// roundUp rounds v > 0 up to n significant digits: a rate found to meet
// a goal is not written lower than it was.
func roundUp(v float64, n int) float64 {
	if !(v > 0) || math.IsInf(v, 0) {
		return v
	}
	p := math.Pow(10, float64(n)-math.Ceil(math.Log10(v)))
	return math.Ceil(v*p-1e-9) / p
}

// roundTo rounds v to n significant digits.
func roundTo(v float64, n int) float64 {
	if v == 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return v
	}
	p := math.Pow(10, float64(n)-math.Ceil(math.Log10(math.Abs(v))))
	return math.Round(v*p) / p
}
