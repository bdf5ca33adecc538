// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/alecthomas/kingpin/v2"

	"github.com/llmprobe/llmprobe/bench"
	"github.com/llmprobe/llmprobe/bench/report"
	"github.com/llmprobe/llmprobe/config"
)

// findFlags are bench's search flags: --find, --levels, --capacity and
// the --find.* rules.
type findFlags struct {
	mode         string
	levels       string
	capacity     float64
	startRate    float64
	startRateSet bool
	factor       float64
	minGain      float64
	minRequests  int
	minWindow    time.Duration
	maxWindow    time.Duration
	precision    float64
	maxStages    int

	rules givenFlags        // the --find.* flags
	opts  bench.FindOptions // set by check
}

func (f *findFlags) register(cmd *kingpin.CmdClause) {
	rule := func(name, help string) *kingpin.FlagClause { return f.rules.flag(cmd, name, help) }
	cmd.Flag("find", "Search instead of running --stage: capacity (ramp the rate until the served throughput stops growing or the queue runs away) or slo (bisect the highest rate that meets --slo, or the targets' slo blocks). One target.").EnumVar(&f.mode, bench.FindCapacity, bench.FindSLO)
	cmd.Flag("levels", "Run one stage at each of these fractions of the capacity (found by --find=capacity, or --capacity), e.g. 0.7,0.85,0.95.").PlaceHolder("F,F,...").StringVar(&f.levels)
	cmd.Flag("capacity", "The target's capacity in requests/s, for --levels and --find=slo instead of measuring it.").PlaceHolder("RATE").Float64Var(&f.capacity)
	rule("find.start-rate", "First rate of a search, req/s. Default: --find=capacity estimates it by a short closed-loop concurrency ramp (doubling workers until the served rate stops growing) and starts below the estimate; --find=slo starts at the capacity, else at "+strconv.FormatFloat(bench.DefaultFindStartRate, 'g', -1, 64)+".").Float64Var(&f.startRate)
	rule("find.factor", "Ratio of successive rates of the capacity ramp (and of the SLO search's bracketing steps).").Default(strconv.FormatFloat(bench.DefaultFindFactor, 'g', -1, 64)).Float64Var(&f.factor)
	rule("find.min-gain", "The capacity ramp stops when neither served requests/s nor output tokens/s grew by this share over the previous stage.").Default(strconv.FormatFloat(bench.DefaultFindMinGain, 'g', -1, 64)).Float64Var(&f.minGain)
	rule("find.min-requests", "N: completed requests a search stage should hold (its window is max(--find.min-window, 1.25 N / rate)); for --find=slo raised to 1/(1-q) for a quantile q (p99: 100).").Default(strconv.Itoa(bench.DefaultFindMinRequests)).IntVar(&f.minRequests)
	rule("find.min-window", "Shortest measured window of a search stage (after --warmup).").Default(bench.DefaultFindMinWindow.String()).DurationVar(&f.minWindow)
	rule("find.max-window", "Longest measured window of a search stage.").Default(bench.DefaultFindMaxWindow.String()).DurationVar(&f.maxWindow)
	rule("find.precision", "The SLO search stops when the rates that met and did not meet the SLO are within this share of each other.").Default(strconv.FormatFloat(bench.DefaultFindPrecision, 'g', -1, 64)).Float64Var(&f.precision)
	rule("find.max-stages", "Most stages of the capacity ramp, and of the SLO search.").Default(strconv.Itoa(bench.DefaultFindMaxStages)).IntVar(&f.maxStages)
}

// active reports whether a search was asked for.
func (f *findFlags) active() bool { return f.mode != "" || f.levels != "" }

// check validates the search flags (usage errors) and fills opts.
func (f *findFlags) check(stages bool) error {
	capacitySet := f.capacity != 0
	if !f.active() {
		if capacitySet {
			return usagef("--capacity is only used by --levels and --find=slo")
		}
		if name := f.rules.first(); name != "" {
			return usagef("--%s applies only to --find or --levels", name)
		}
		return nil
	}
	f.startRateSet = f.rules.given("find.start-rate")
	if stages {
		return usagef("--stage cannot be combined with --find or --levels: a search sizes its own stages")
	}
	if capacitySet && !(f.capacity > 0) {
		return usagef("--capacity must be a positive number of requests per second, got %v", f.capacity)
	}
	if f.capacity > config.MaxArrivalRate {
		return usagef("--capacity %g is above the arrival cap of %d requests per second", f.capacity, config.MaxArrivalRate)
	}
	if capacitySet && f.mode == bench.FindCapacity {
		return usagef("--capacity and --find=capacity are exclusive: give the capacity or find it")
	}
	if capacitySet && f.levels == "" && f.mode != bench.FindSLO {
		return usagef("--capacity is only used by --levels and --find=slo")
	}
	var levels []float64
	if f.levels != "" {
		if f.mode != bench.FindCapacity && !capacitySet {
			return usagef("--levels needs the capacity: --find=capacity or --capacity=RATE")
		}
		for s := range strings.SplitSeq(f.levels, ",") {
			v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
			if err != nil || !(v > 0 && v <= 2) {
				return usagef("--levels %q: each level must be a fraction of the capacity in (0, 2], e.g. 0.7,0.85,0.95", f.levels)
			}
			levels = append(levels, v)
		}
	}
	switch {
	case f.startRateSet && !(f.startRate > 0):
		return usagef("--find.start-rate must be a positive number of requests per second, got %v", f.startRate)
	case f.startRate > config.MaxArrivalRate:
		return usagef("--find.start-rate %g is above the arrival cap of %d requests per second", f.startRate, config.MaxArrivalRate)
	case !(f.factor > 1):
		return usagef("--find.factor must be greater than 1, got %v", f.factor)
	case !(f.minGain > 0 && f.minGain < 1):
		return usagef("--find.min-gain must be a share in (0, 1), got %v", f.minGain)
	case f.minRequests < 1:
		return usagef("--find.min-requests must be at least 1, got %d", f.minRequests)
	case f.minWindow <= 0 || f.maxWindow < f.minWindow:
		return usagef("--find.min-window must be positive and at most --find.max-window, got %v and %v", f.minWindow, f.maxWindow)
	case !(f.precision > 0 && f.precision < 1):
		return usagef("--find.precision must be a share in (0, 1), got %v", f.precision)
	case f.maxStages < 2:
		return usagef("--find.max-stages must be at least 2, got %d", f.maxStages)
	}
	f.opts = bench.FindOptions{Mode: f.mode, Capacity: f.capacity, Levels: levels,
		StartRate: f.startRate, Factor: f.factor, MinGain: f.minGain, MinRequests: f.minRequests,
		MinWindow: f.minWindow, MaxWindow: f.maxWindow, Precision: f.precision, MaxStages: f.maxStages}
	return nil
}

// checkConfig checks the search against the loaded configuration, before
// anything is sent: one target, and for --find=slo an SLO to judge by.
func (f *findFlags) checkConfig(opts bench.Options) error {
	if !f.active() {
		return nil
	}
	if n := countTargets(opts.Config, opts.Targets); n != 1 {
		return usagef("%v", bench.ErrFindTargets)
	}
	if f.mode == bench.FindSLO && opts.SLO == nil && !configHasSLO(opts) {
		return usagef("--find=slo needs an SLO: --slo (e.g. tpot_p99=100ms,ttft_p99=1s) or an slo: block of the target")
	}
	return nil
}

// run runs the search, or the stages when none was asked for.
func (f *findFlags) run(ctx context.Context, opts bench.Options) (*report.Report, error) {
	if !f.active() {
		return bench.Run(ctx, opts)
	}
	rep, err := bench.Find(ctx, opts, f.opts)
	if errors.Is(err, bench.ErrFindTargets) {
		return nil, usagef("%v", err)
	}
	return rep, err
}

// configHasSLO reports whether a selected target's class has an objective.
func configHasSLO(opts bench.Options) bool {
	for _, t := range opts.Config.Targets {
		if len(opts.Targets) > 0 && !slices.Contains(opts.Targets, t.Name) {
			continue
		}
		if w := opts.Config.Workload(t); w != nil {
			for _, c := range w.Classes {
				if opts.Config.SLO(t, c) != nil {
					return true
				}
			}
		}
	}
	return false
}
