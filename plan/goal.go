// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package plan

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/model"
)

// Goal is a detection goal: catch the Effect within Within in at least
// GoalShare (90%) of steps. Spec is how it was written.
type Goal struct {
	Effect
	Within time.Duration
	Spec   string
}

// ParseGoal parses METRIC:EFFECT:WITHIN (--detect), e.g. ttft:+25%:10m:
//
//	ttft, tpot, e2e   +25% or x1.25 (the median ×1.25), p99+100% or p99x2 (the p99 ×2)
//	errors            5% (the error ratio from 1% to 5%) or x5
//
// WITHIN is a duration (10m, 2h, 1d).
func ParseGoal(s string) (Goal, error) {
	parts := strings.Split(strings.TrimSpace(s), ":")
	if len(parts) != 3 {
		return Goal{}, fmt.Errorf("%q: want METRIC:EFFECT:WITHIN, e.g. ttft:+25%%:10m", s)
	}
	g := Goal{Spec: strings.TrimSpace(s)}
	metric, eff, within := strings.TrimSpace(parts[0]), strings.TrimSpace(parts[1]), strings.TrimSpace(parts[2])
	switch metric {
	case MetricTTFT, MetricTPOT, MetricE2E:
		g.Metric, g.Quantile = metric, 0.5
		if rest, ok := strings.CutPrefix(eff, "p99"); ok {
			g.Quantile, eff = 0.99, rest
		}
		f, err := parseFactor(eff, true)
		if err != nil {
			return Goal{}, fmt.Errorf("%q: %v", s, err)
		}
		g.Effect.Effect = f
	case MetricErrors:
		g.Metric = metric
		if rest, ok := strings.CutPrefix(eff, "x"); ok {
			f, err := strconv.ParseFloat(rest, 64)
			if err != nil || !(f > 1) || f*BaselineErrorRatio >= 1 {
				return Goal{}, fmt.Errorf("%q: errors xF wants a factor F above 1 with F × 1%% below 100%%, e.g. x5", s)
			}
			g.Effect.Effect = f
			break
		}
		p, ok := strings.CutSuffix(eff, "%")
		v, err := strconv.ParseFloat(p, 64)
		if !ok || err != nil || !(v > 100*BaselineErrorRatio && v < 100) {
			return Goal{}, fmt.Errorf("%q: errors wants the error ratio after the step, above the baseline's 1%% and below 100%%, e.g. 5%%", s)
		}
		g.Effect.Effect = v / 100 / BaselineErrorRatio
	default:
		return Goal{}, fmt.Errorf("%q: the metric must be ttft, tpot, e2e or errors, got %q", s, metric)
	}
	d, err := model.ParseDuration(within)
	if err != nil || d <= 0 {
		return Goal{}, fmt.Errorf("%q: WITHIN must be a positive duration such as 10m, got %q", s, within)
	}
	if time.Duration(d) > MaxSimulated {
		return Goal{}, fmt.Errorf("%q: WITHIN must be at most %s", s, model.Duration(MaxSimulated))
	}
	g.Within = time.Duration(d)
	return g, nil
}

// parseFactor reads +N% or xF (×F) as a factor above 1.
func parseFactor(s string, latency bool) (float64, error) {
	const want = "the effect must be a rise such as +25% or x1.25 (p99+100% or p99x2 for the p99)"
	switch {
	case strings.HasPrefix(s, "+") && strings.HasSuffix(s, "%"):
		v, err := strconv.ParseFloat(s[1:len(s)-1], 64)
		if err != nil || !(v > 0) || v > 10000 {
			return 0, fmt.Errorf("%s, got %q", want, s)
		}
		return 1 + v/100, nil
	case strings.HasPrefix(s, "x"), strings.HasPrefix(s, "×"):
		v, err := strconv.ParseFloat(strings.TrimPrefix(strings.TrimPrefix(s, "x"), "×"), 64)
		if err != nil || !(v > 1) || v > 101 {
			return 0, fmt.Errorf("%s, got %q", want, s)
		}
		return v, nil
	}
	return 0, fmt.Errorf("%s, got %q", want, s)
}

// String writes the effect as the text output shows it.
func (e Effect) String() string {
	switch {
	case e.Metric == MetricErrors:
		return fmt.Sprintf("errors %g%% → %g%%", 100*BaselineErrorRatio, 100*BaselineErrorRatio*e.Effect)
	case e.Quantile > 0.5:
		return fmt.Sprintf("%s p%g ×%g", strings.ToUpper(e.Metric), 100*e.Quantile, e.Effect)
	}
	return fmt.Sprintf("%s median %+g%%", strings.ToUpper(e.Metric), roundTo(100*(e.Effect-1), 4))
}
