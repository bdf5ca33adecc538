// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/llmprobe/llmprobe/bench/report"
	"github.com/llmprobe/llmprobe/config"
)

// Search modes of FindOptions.Mode.
const (
	FindCapacity = "capacity"
	FindSLO      = "slo"
)

// Defaults of FindOptions' unset fields.
const (
	DefaultFindStartRate   = 1.0
	DefaultFindFactor      = 1.5
	DefaultFindMinGain     = 0.10
	DefaultFindMinRequests = 100
	DefaultFindMinWindow   = 10 * time.Second
	DefaultFindMaxWindow   = 10 * time.Minute
	DefaultFindPrecision   = 0.05
	DefaultFindMaxStages   = 16
	// findKeepUp is the share of its sent rate a stage must serve for its
	// latencies to be those of a steady state (see FindOptions).
	findKeepUp = 0.9
	// findWindowMargin stretches a stage's measured window so that, at a
	// rate the target keeps up with, about 1.25 × N requests complete in
	// it: a Poisson count of mean 1.25 × 100 falls below 100 with
	// probability about 1%.
	findWindowMargin = 1.25
)

// FindOptions configure a search run by Find.
//
// Every stage of a search has the same shape: the warm-up (Options.Warmup,
// excluded from every figure, which lets the batch and the queue settle)
// then a measured window of max(MinWindow, 1.25 × N / rate), at most
// MaxWindow, where N is the number of completed requests a stage must
// hold (MinRequests, raised for the SLO's quantiles, see below): at a rate
// the target keeps up with, about 1.25 × N requests complete in it.
//
// Capacity: stages at StartRate × Factor^k (k = 0, 1, ...) until, against
// the previous stage, neither the served request rate
// (report.StageReport.ServedRate) nor the served output tokens/s grew by MinGain
// (plateau), or TTFT p50 more than doubled while the served rate grew by
// less than half the offered step (the queue runs away), or a stage is
// not trusted (the harness could not deliver the load, or the target
// dropped arrivals over max_inflight), or MaxStages ran. The capacity is
// the trusted stage with the highest served rate.
//
// SLO: a stage meets the SLO when it is trusted, served at least 90% of
// the rate it was sent (otherwise its queue grows and its latencies are
// those of a transient, which a longer stage would make worse), holds
// enough samples and its report.SLOReport is met. A quantile bound q needs
// max(MinRequests, ⌈1/(1−q)⌉) samples (p99: 100, p99.9: 1000), a
// per-request objective of ratio r max(MinRequests, ⌈1/(1−r)⌉) judged
// requests. From the capacity (found or given), else from StartRate, the
// rate is multiplied or divided by Factor until one stage meets the SLO
// and one above it does not, then bisected until the two are within
// Precision of each other.
type FindOptions struct {
	// Mode is FindCapacity, FindSLO, or empty (Levels at Capacity only).
	Mode string
	// Capacity, when positive, is the capacity in requests/s: no ramp is
	// run, and Levels and the SLO search start from it.
	Capacity float64
	// Levels are fractions of the capacity to run one stage each at,
	// after the capacity is known.
	Levels []float64

	StartRate   float64 // first rate of a ramp, req/s
	Factor      float64 // ratio of successive ramp rates, > 1
	MinGain     float64 // a served-rate gain below it is a plateau
	MinRequests int     // N: completed requests a stage should hold
	MinWindow   time.Duration
	MaxWindow   time.Duration
	Precision   float64 // bisection stops when hi/lo − 1 ≤ Precision
	MaxStages   int     // stages of the ramp, and of the SLO search
	// StageDuration, when positive (--stage.duration given), is every
	// stage's measured window, lengthened where it would hold fewer than
	// 1.25 × N requests (the rule for trusting a stage); otherwise the
	// window is max(MinWindow, 1.25 × N / rate).
	StageDuration time.Duration
}

func (f *FindOptions) defaults() {
	if f.Mode == "" || f.Capacity > 0 {
		// The capacity ramp, and the SLO search without a capacity,
		// estimate their start when none is given (find_estimate.go).
		orDefault(&f.StartRate, DefaultFindStartRate)
	}
	if f.Factor <= 1 {
		f.Factor = DefaultFindFactor
	}
	orDefault(&f.MinGain, DefaultFindMinGain)
	orDefault(&f.MinRequests, DefaultFindMinRequests)
	orDefault(&f.MinWindow, DefaultFindMinWindow)
	orDefault(&f.MaxWindow, DefaultFindMaxWindow)
	f.MaxWindow = max(f.MaxWindow, f.MinWindow)
	orDefault(&f.Precision, DefaultFindPrecision)
	orDefault(&f.MaxStages, DefaultFindMaxStages)
}

// orDefault sets *v to def unless *v is positive.
func orDefault[T ~int | ~int64 | ~float64](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

// ErrFindTargets is returned when a search is asked of other than one
// target.
var ErrFindTargets = errors.New("a search (--find, --levels) runs against exactly one target: select it with --target")

// Find runs a search (f.Mode) against the one target opts selects and
// returns every stage it ran, with the outcome in report.Report.Find. opts.Stages
// is ignored. A cancelled ctx ends the search with what it has.
func Find(ctx context.Context, opts Options, f FindOptions) (*report.Report, error) {
	f.defaults()
	switch f.Mode {
	case FindCapacity, FindSLO, "":
	default:
		return nil, fmt.Errorf("unknown search %q (want %s or %s)", f.Mode, FindCapacity, FindSLO)
	}
	if f.Mode == "" && len(f.Levels) == 0 {
		return nil, fmt.Errorf("nothing to search: give a mode or levels")
	}
	if f.Mode != FindCapacity && len(f.Levels) > 0 && !(f.Capacity > 0) {
		return nil, fmt.Errorf("levels need a capacity: find it (mode %s) or give it", FindCapacity)
	}
	var target *config.Target
	n := 0
	for _, t := range opts.Config.Targets {
		if len(opts.Targets) == 0 || slices.Contains(opts.Targets, t.Name) {
			target = t
			n++
		}
	}
	if n != 1 {
		return nil, ErrFindTargets
	}
	warmup := opts.Warmup
	if warmup < 0 {
		warmup = time.Duration(opts.Config.Global.Warmup)
	}
	s := &search{ctx: ctx, opts: opts, f: f, warmup: warmup, target: target,
		raise: !target.MaxInflightSet(), inflight: target.MaxInflight,
		rep: &report.Report{Started: time.Now()}, find: &report.FindReport{Mode: f.Mode}}
	s.rep.Find = s.find
	s.need = f.MinRequests
	if f.Mode == FindSLO {
		s.need = s.sloSamples()
	}
	s.find.Rules = s.rules()
	if f.Capacity > 0 {
		s.find.Capacity = &report.CapacityResult{Given: true, Found: true, RequestsPerSecond: f.Capacity}
	}
	var err error
	if f.Mode == FindCapacity {
		err = s.capacity()
	}
	if err == nil && f.Mode == FindSLO && s.find.Capacity == nil && !(f.StartRate > 0) {
		s.f.StartRate = s.estimate()
	}
	if err == nil && len(f.Levels) > 0 && s.find.Capacity != nil && s.find.Capacity.RequestsPerSecond > 0 {
		err = s.levels()
	}
	if err == nil && f.Mode == FindSLO {
		err = s.slo()
	}
	if err != nil {
		return nil, err
	}
	s.rep.Percentiles = opts.Percentiles
	if opts.Dataset != nil {
		s.rep.Dataset = opts.Dataset.Info()
	}
	s.rep.Finished = time.Now()
	return s.rep, nil
}

type search struct {
	ctx    context.Context
	opts   Options
	f      FindOptions
	warmup time.Duration
	need   int // samples a stage should hold
	rep    *report.Report
	find   *report.FindReport

	target *config.Target // the one target searched
	// raise: the configuration did not set the target's max_inflight,
	// so each stage runs with what it needs (inflightFor); e2e is the
	// latest mean E2E seen (seconds, 0: none yet) and inflight the
	// max_inflight of the stage that ran last.
	raise    bool
	e2e      float64
	inflight int
}

// sloSamples is N for the SLO search: MinRequests, raised to ⌈1/(1−q)⌉
// for each quantile bound q and each per-request objective's ratio.
func (s *search) sloSamples() int {
	need := s.f.MinRequests
	raise := func(q float64) {
		if q > 0 && q < 1 {
			need = max(need, int(math.Ceil(1/(1-q)-1e-9)))
		}
	}
	if s.opts.SLO != nil {
		for _, q := range s.opts.SLO.Quantiles {
			raise(q.Quantile)
		}
		if s.opts.SLO.Objective != nil {
			raise(s.opts.SLO.Objective.Ratio)
		}
	}
	if s.opts.SLO == nil || s.opts.SLO.Objective == nil {
		for _, t := range s.opts.Config.Targets {
			if w := s.opts.Config.Workload(t); w != nil && (len(s.opts.Targets) == 0 || slices.Contains(s.opts.Targets, t.Name)) {
				for _, c := range w.Classes {
					if o := s.opts.Config.SLO(t, c); o != nil {
						raise(o.Ratio)
					}
				}
			}
		}
	}
	return need
}

func (s *search) rules() []string {
	window := fmt.Sprintf("each stage: %v warm-up (excluded), then a measured window of max(%v, %.2f × %d / rate), at most %v, so that about %.2f × %d requests complete in it at a rate the target keeps up with; --stage.duration is not used (give it to set the window)",
		s.warmup, s.f.MinWindow, findWindowMargin, s.need, s.f.MaxWindow, findWindowMargin, s.need)
	if s.f.StageDuration > 0 {
		window = fmt.Sprintf("each stage: %v warm-up (excluded), then a measured window of --stage.duration %v, lengthened to %.2f × %d / rate (at most --find.max-window) where that is longer, so that about %.2f × %d requests complete in it at a rate the target keeps up with (the rule for trusting a stage)",
			s.warmup, s.f.StageDuration, findWindowMargin, s.need, findWindowMargin, s.need)
	}
	r := []string{
		window,
		"served rate: successful requests that ended inside the measured window, per second of it (the grace period's completions do not count)",
		"a stage the verdict does not trust (harness saturated, or drops over max_inflight) is never evidence of capacity or of meeting the SLO, nor a side of a bracket; the search says which bound capped it and what to change",
		"rates: each stage's load is the rate it achieved (requests sent per second), the requested rate beside it; capacity is what the target served",
	}
	if s.raise {
		r = append(r, s.inflightRule())
	}
	if s.f.Mode != "" && !(s.f.StartRate > 0) && s.find.Capacity == nil {
		r = append(r, s.estimateRule())
	}
	if s.f.Mode == FindCapacity {
		start := strconv.FormatFloat(s.f.StartRate, 'g', -1, 64)
		if !(s.f.StartRate > 0) {
			start = "(the estimate's start)"
		}
		r = append(r, fmt.Sprintf("capacity ramp: rates %s × %g^k req/s until neither the served rate nor the served output tokens/s grows by %.0f%% over the previous stage, or TTFT p50 more than doubles while the served rate grows by less than half the step or is under %.0f%% of the stage's achieved rate, or a stage is not trusted, or %d stages ran; capacity = the trusted stage with the highest served rate",
			start, s.f.Factor, 100*s.f.MinGain, 100*findKeepUp, s.f.MaxStages))
	}
	if s.f.Mode == FindSLO {
		r = append(r, fmt.Sprintf("SLO search: a stage meets the SLO when it is trusted, served at least %.0f%% of the rate it was sent, holds at least %d samples per quantile bound (max(%d, ⌈1/(1−q)⌉)) and %d judged requests for a per-request objective, and its bounds held; it is evidence the SLO is not met when it is trusted and its bounds did not hold or it did not keep up; the achieved rate is stepped by ×%g to a bracket of the two, then bisected until the bracket is within %.0f%%; an untrusted stage or one with too few samples is evidence of neither, and no rate at or above it is tried again",
			100*findKeepUp, s.need, s.f.MinRequests, s.need, s.f.Factor, 100*s.f.Precision))
	}
	return r
}

// stage runs one stage at rate and appends it to the report.
func (s *search) stage(rate float64) (*report.StageReport, error) {
	window := time.Duration(findWindowMargin * float64(s.need) / rate * float64(time.Second))
	if s.f.StageDuration > 0 {
		window = min(max(window, s.f.StageDuration), max(s.f.MaxWindow, s.f.StageDuration))
	} else {
		window = min(max(window, s.f.MinWindow), s.f.MaxWindow)
	}
	o := s.opts
	o.Stages = []Stage{{Rate: rate, Duration: (s.warmup + window).Round(time.Millisecond)}}
	s.inflight = s.target.MaxInflight
	if s.raise {
		o.Config = s.withInflight(s.inflightFor(rate, o.Stages[0].Duration))
	}
	o.Warmup = s.warmup
	o.StopWhenSaturated = false
	// A search sizes its stages and runs open-loop ones only.
	o.MaxRequests, o.Concurrency = 0, nil
	// Number the stage in the request log and the progress line as in
	// the report: after the stages already run.
	o.StageOffset = len(s.rep.Stages)
	r, err := Run(s.ctx, o)
	if err != nil {
		return nil, err
	}
	if s.rep.Sampling == nil {
		s.rep.Sampling, s.rep.Workloads, s.rep.SLOBounds = r.Sampling, r.Workloads, r.SLOBounds
	}
	if len(r.Stages) != 1 {
		return nil, nil // cancelled before the stage ran
	}
	sr := r.Stages[0]
	sr.Stage = len(s.rep.Stages) + 1
	s.rep.Stages = append(s.rep.Stages, sr)
	if !sr.Trusted {
		s.find.Untrusted = append(s.find.Untrusted, sr.Stage)
		s.noteCaps(sr)
	}
	if sr.E2E.Count > 0 {
		s.e2e = sr.E2E.Mean
	}
	return sr, nil
}

// noteCaps records the bounds an untrusted stage shows, by its verdict's
// reasons, each bound once (the first stage it capped).
func (s *search) noteCaps(sr *report.StageReport) {
	for _, why := range sr.Reasons {
		c := report.Cap{Stage: sr.Stage, Rate: sr.RequestedRate, Reason: why}
		switch {
		case strings.HasPrefix(why, reasonOverloaded):
			c.By = report.CapMaxInflight
			if s.raise {
				c.What = fmt.Sprintf("max_inflight (%d, raised by bench for this stage)", s.inflight)
				c.Advice = "the stage held more requests than its rate × (mean E2E + its length): set a higher max_inflight for the target in the configuration"
			} else {
				c.What = fmt.Sprintf("max_inflight (%d, set in the configuration)", s.inflight)
				c.Advice = "raise the target's max_inflight, or leave it unset for bench to raise it to what each search stage needs"
			}
		case strings.HasPrefix(why, reasonHarness):
			c.By, c.What = report.CapHarness, "the harness"
			c.Advice = "this machine could not send the load on time: free CPU (stop other processes), run `llmprobe selftest` for the rate it delivers honestly, or split the load over several llmprobe processes"
		default:
			continue
		}
		if !slices.ContainsFunc(s.find.Capped, func(o report.Cap) bool { return o.By == c.By }) {
			s.find.Capped = append(s.find.Capped, c)
		}
	}
}

// maxSearchInflight bounds the max_inflight a search raises a target's
// to.
const maxSearchInflight = 1 << 14

// inflightFor is the max_inflight a stage at rate lasting d needs, by
// Little's law: rate × (mean E2E + d), the requests a stage holds in
// flight if its whole length queues (past capacity the queue grows all
// stage long), never below the target's own. The mean E2E is the latest
// stage's, else the estimate's (concurrency / rate of its last level),
// else the request timeout.
func (s *search) inflightFor(rate float64, d time.Duration) int {
	w := s.e2e
	if w <= 0 {
		if e := s.find.Estimate; e != nil && len(e.Levels) > 0 {
			if l := e.Levels[len(e.Levels)-1]; l.Rate > 0 {
				w = float64(l.Concurrency) / l.Rate
			}
		}
	}
	if w <= 0 {
		w = s.target.Timeout(s.opts.Config.Global).Seconds()
	}
	need := rate * (w + d.Seconds())
	if !(need < maxSearchInflight) {
		return maxSearchInflight
	}
	return max(s.target.MaxInflight, int(math.Ceil(need)))
}

// withInflight is the search's configuration with the target's
// max_inflight set to n, and records it.
func (s *search) withInflight(n int) *config.Config {
	s.inflight = n
	if n > s.target.MaxInflight {
		r := s.find.MaxInflight
		if r == nil {
			r = &report.MaxInflightRaise{From: s.target.MaxInflight, Rule: s.inflightRule()}
			s.find.MaxInflight = r
		}
		r.To = max(r.To, n)
	}
	cfg := *s.opts.Config
	cfg.Targets = slices.Clone(cfg.Targets)
	for i, t := range cfg.Targets {
		if t == s.target {
			tc := *t
			tc.MaxInflight = n
			cfg.Targets[i] = &tc
		}
	}
	return &cfg
}

// inflightRule states inflightFor for report.FindReport.Rules.
func (s *search) inflightRule() string {
	return fmt.Sprintf("max_inflight: the configuration does not set it, so each stage runs with rate × (mean E2E + the stage's length) (Little's law, with the whole stage queued as headroom: the latest stage's mean E2E, else the estimate's, else the request timeout), never below %d, at most %d",
		s.target.MaxInflight, maxSearchInflight)
}

// capacity runs the ramp.
func (s *search) capacity() error {
	var prev, best *report.StageReport
	stop := ""
	found := false
	rate := s.f.StartRate
	if !(rate > 0) {
		rate = s.estimate()
	}
	for i := 0; i < s.f.MaxStages && s.ctx.Err() == nil; i++ {
		if rate > config.MaxArrivalRate {
			stop = fmt.Sprintf("the next rate, %.3g req/s, is above the arrival cap of %d requests per second", rate, config.MaxArrivalRate)
			break
		}
		sr, err := s.stage(rate)
		if err != nil {
			return err
		}
		if sr == nil {
			break
		}
		step := report.FindStep{Stage: sr.Stage, OfferedRate: sr.RequestedRate, SentRate: sr.AchievedRate,
			ServedRate: sr.ServedRate, ServedOutputTokensSec: sr.ServedOutputTokensPerSec, Served: sr.Served,
			TTFTP50: sr.TTFT.P50, Trusted: sr.Trusted}
		if !sr.Trusted {
			s.find.Ramp = append(s.find.Ramp, step)
			stop = fmt.Sprintf("stage %d (%.3g req/s) is not trusted (%s): not evidence, the ramp stops", sr.Stage, rate, strings.Join(sr.Reasons, "; "))
			break
		}
		if best == nil || sr.ServedRate > best.ServedRate {
			best = sr
		}
		if prev != nil && prev.ServedRate > 0 {
			step.Gain = sr.ServedRate/prev.ServedRate - 1
		}
		s.find.Ramp = append(s.find.Ramp, step)
		if sr.Served == 0 {
			stop = fmt.Sprintf("stage %d served no request in its window", sr.Stage)
			break
		}
		if prev != nil {
			gainTok := 0.0
			if prev.ServedOutputTokensPerSec > 0 {
				gainTok = sr.ServedOutputTokensPerSec/prev.ServedOutputTokensPerSec - 1
			}
			if step.Gain < s.f.MinGain && gainTok < s.f.MinGain {
				stop = fmt.Sprintf("plateau: stage %d served %+.1f%% requests/s and %+.1f%% output tokens/s over stage %d, less than %.0f%%",
					sr.Stage, 100*step.Gain, 100*gainTok, prev.Stage, 100*s.f.MinGain)
				found = true
				break
			}
			if prev.TTFT.Count > 0 && sr.TTFT.P50 > 2*prev.TTFT.P50 && step.Gain < (s.f.Factor-1)/2 {
				stop = fmt.Sprintf("queue runs away: stage %d's TTFT p50 %s is more than twice stage %d's %s while the served rate grew %+.1f%% for a %+.0f%% step",
					sr.Stage, report.FormatSeconds(sr.TTFT.P50), prev.Stage, report.FormatSeconds(prev.TTFT.P50), 100*step.Gain, 100*(s.f.Factor-1))
				found = true
				break
			}
			// The same queue, seen in the stage itself: with heavy-tailed
			// lengths the stage below served less than it was sent (its
			// long requests end after its window), so its gain says
			// little.
			if prev.TTFT.Count > 0 && sr.TTFT.P50 > 2*prev.TTFT.P50 && sr.ServedRate < findKeepUp*sr.AchievedRate {
				stop = fmt.Sprintf("queue runs away: stage %d's TTFT p50 %s is more than twice stage %d's %s while it served %.3g of the %.3g req/s it was sent (under %.0f%%)",
					sr.Stage, report.FormatSeconds(sr.TTFT.P50), prev.Stage, report.FormatSeconds(prev.TTFT.P50), sr.ServedRate, sr.AchievedRate, 100*findKeepUp)
				found = true
				break
			}
		}
		prev = sr
		rate *= s.f.Factor
	}
	if stop == "" {
		if s.ctx.Err() != nil {
			stop = "cancelled"
		} else {
			stop = fmt.Sprintf("%d stages ran and the served rate still grew", s.f.MaxStages)
		}
	}
	c := &report.CapacityResult{Found: found && best != nil, StopReason: stop}
	if best != nil {
		c.RequestsPerSecond, c.OutputTokensPerSecond = best.ServedRate, best.ServedOutputTokensPerSec
		c.Stage, c.OfferedRate, c.AchievedRate = best.Stage, best.RequestedRate, best.AchievedRate
	}
	s.find.Capacity = c
	return nil
}

// levels runs a stage at each fraction of the capacity.
func (s *search) levels() error {
	for _, frac := range s.f.Levels {
		if s.ctx.Err() != nil {
			return nil
		}
		c := s.find.Capacity
		rate := frac * c.RequestsPerSecond
		sr, err := s.stage(rate)
		if err != nil {
			return err
		}
		if sr == nil {
			return nil
		}
		s.find.Levels = append(s.find.Levels, report.LevelStage{Fraction: frac, Rate: rate, Stage: sr.Stage,
			AchievedRate: sr.AchievedRate, ServedRate: sr.ServedRate, NotTrusted: !sr.Trusted, OfLowerBound: !c.Found})
	}
	return nil
}

// judgeSLO decides whether a stage is evidence that the SLO holds.
func (s *search) judgeSLO(sr *report.StageReport) report.SLOProbe {
	p := report.SLOProbe{Stage: sr.Stage, Rate: sr.RequestedRate, AchievedRate: sr.AchievedRate, ServedRate: sr.ServedRate, Trusted: sr.Trusted}
	if sr.SLO != nil {
		p.Quantiles = sr.SLO.Quantiles
		p.Judged = sr.SLO.Good + sr.SLO.Bad
		p.GoodShare = sr.SLO.GoodShare
	}
	var few []string
	if sr.SLO != nil {
		for _, q := range sr.SLO.Quantiles {
			if q.Count < s.need {
				few = append(few, fmt.Sprintf("%s over %d", q.Bound, q.Count))
			}
		}
		if len(sr.SLO.Objectives) > 0 && p.Judged < s.need {
			few = append(few, fmt.Sprintf("%d judged requests", p.Judged))
		}
	}
	switch {
	case !sr.Trusted:
		p.Why = "not trusted: " + strings.Join(sr.Reasons, "; ")
	case sr.SLO == nil:
		p.Why = "no SLO judged"
	case !sr.SLO.Met:
		p.Why, p.NotMet = "SLO not met", true
	case sr.ServedRate < findKeepUp*sr.AchievedRate:
		// Before the sample count: a stage that does not keep up also
		// completes too few.
		p.Why, p.NotMet = fmt.Sprintf("not keeping up: served %.3g of %.3g req/s sent", sr.ServedRate, sr.AchievedRate), true
	case len(few) > 0:
		p.Why = fmt.Sprintf("too few samples (need %d): %s", s.need, strings.Join(few, ", "))
	default:
		p.Met = true
	}
	return p
}

// slo brackets then bisects the achieved rate at which the SLO stops
// holding. Only evidence brackets: the highest achieved rate of a stage
// that met the SLO (lo), and the lowest above it of a trusted stage that
// did not (hi). A stage that is evidence of neither (not trusted, too
// few samples) is a ceiling: no rate at or above it is tried again, and
// the search bisects below it instead. It ends when the bracket, or lo
// and the ceiling, are within Precision.
func (s *search) slo() error {
	res := &report.SLOSearch{MinSamples: s.need}
	s.find.SLO = res
	budget := s.f.MaxStages
	rate := s.f.StartRate
	if c := s.find.Capacity; c != nil && c.RequestsPerSecond > 0 {
		rate = c.RequestsPerSecond
	}
	floor := rate / math.Pow(s.f.Factor, float64(s.f.MaxStages))
	var lo, hi *report.SLOProbe
	ceil := math.Inf(1) // the lowest requested rate of a stage that was no evidence, above lo
	for budget > 0 && s.ctx.Err() == nil {
		sr, err := s.stage(rate)
		if err != nil {
			return err
		}
		if sr == nil {
			break // cancelled
		}
		if sr.SLO == nil {
			return fmt.Errorf("--find=slo: no SLO to judge by: give --slo or an slo: block of the target")
		}
		budget--
		res.Probes = append(res.Probes, s.judgeSLO(sr))
		lo, hi, ceil = sloBracket(res.Probes)
		top := ceil
		if hi != nil {
			top = min(top, hi.AchievedRate)
		}
		switch {
		case lo == nil:
			// Nothing met yet: step down from the lowest rate that was
			// not met or no evidence.
			rate = min(top, rate) / s.f.Factor
			if rate < floor {
				budget = 0
			}
		case math.IsInf(top, 1):
			rate = lo.AchievedRate * s.f.Factor
		case top/lo.AchievedRate-1 <= s.f.Precision:
			budget = 0
		default:
			rate = (lo.AchievedRate + top) / 2
		}
		if rate > config.MaxArrivalRate {
			break
		}
	}
	// The probes slice no longer grows: point into it by copies.
	if lo != nil {
		m := *lo
		res.Found, res.Rate, res.RequestedRate, res.Met = true, m.AchievedRate, m.Rate, &m
	}
	if hi != nil {
		a := *hi
		res.Above = &a
	}
	switch {
	case lo == nil:
		res.Note = "no stage met the SLO"
	case hi == nil && !math.IsInf(ceil, 1):
		res.Note = fmt.Sprintf("the limit is not bracketed: no stage at or above %.3g req/s requested was evidence either way (see capped_by)", ceil)
	case hi == nil:
		res.Note = "every stage met the SLO: the limit is above the highest rate probed"
	default:
		res.Precision = hi.AchievedRate/lo.AchievedRate - 1
		if res.Precision > s.f.Precision {
			res.Note = fmt.Sprintf("the search ran out of stages before the bracket was within %.0f%%", 100*s.f.Precision)
		}
	}
	return nil
}

// sloBracket is the SLO search's evidence so far: lo the probe that met
// the SLO at the highest achieved rate, hi the probe that did not (trusted,
// bounds broken or not keeping up) at the lowest achieved rate above lo's,
// and ceil the lowest requested rate above lo's of a probe that was no
// evidence (+Inf: none).
func sloBracket(probes []report.SLOProbe) (lo, hi *report.SLOProbe, ceil float64) {
	for i := range probes {
		if p := &probes[i]; p.Met && (lo == nil || p.AchievedRate > lo.AchievedRate) {
			lo = p
		}
	}
	ceil = math.Inf(1)
	for i := range probes {
		p := &probes[i]
		if lo != nil && p.AchievedRate <= lo.AchievedRate && (p.Met || p.NotMet) {
			continue
		}
		switch {
		case p.NotMet:
			if hi == nil || p.AchievedRate < hi.AchievedRate {
				hi = p
			}
		case !p.Met && (lo == nil || p.Rate > lo.AchievedRate):
			ceil = min(ceil, p.Rate)
		}
	}
	return lo, hi, ceil
}
