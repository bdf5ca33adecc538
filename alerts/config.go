// Package alerts holds llmprobe's monitoring mixin configuration and
// generates its Prometheus recording and alerting rules.
//
// Config is the single place where selectors, SLO thresholds, windows and
// for-durations live. The dashboards generator (package dashboards) reads the
// same Config, so a dashboard panel and the alert it explains always use the
// same window, the same threshold and the same recorded series.
//
// The generated files are committed: alerts/llmprobe.rules.yml (plain
// Prometheus rule_files) and deploy/kubernetes/prometheusrule.yaml (the
// prometheus-operator wrapper). `make dashboards` regenerates them and a test
// fails when they drift from the generator.
package alerts

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/prometheus/common/model"
)

// LatencyAlert configures the two alerts on one latency histogram (TTFT or
// TPOT): the p99 over an absolute SLO, and the p99 regressed against the same
// window one week earlier.
type LatencyAlert struct {
	// SLO is the p99 threshold in seconds.
	SLO float64
	// For is how long the p99 must stay over the SLO before the alert fires.
	For model.Duration
	// RegressionFactor: the alert fires when p99 > RegressionFactor × p99 a
	// week ago ...
	RegressionFactor float64
	// RegressionMinDelta: ... and p99 is at least this many seconds above
	// last week's (so a 40 ms → 70 ms change on a tiny model does not page).
	RegressionMinDelta float64
	// RegressionFor is the for-duration of the regression alert.
	RegressionFor model.Duration
}

// Config is the monitoring mixin's configuration. DefaultConfig returns the
// values the committed files are generated from.
type Config struct {
	// Selector selects llmprobe's own series: PromQL label matchers without
	// the braces, e.g. `job="llmprobe"` or `job="llmprobe", cluster="eu1"`.
	Selector string
	// RunbookURL is the runbook document; each alert links to
	// RunbookURL + "#" + lower-case alert name (a heading of docs/runbook.md).
	RunbookURL string
	// DashboardURL is the base URL of the overview dashboard, put in the
	// dashboard_url annotation of every alert. Empty leaves it out.
	DashboardURL string

	// LongWindow is the window of the recorded quantiles and ratios the
	// alerts evaluate. At 0.2 req/s a 30m window holds ~360 requests, so a
	// p99 rests on several observations beyond the 99th percentile rank.
	LongWindow model.Duration
	// ShortWindow is the second window of the multi-window error-ratio
	// alert: it must also be over the threshold, so the alert resolves
	// quickly once errors stop.
	ShortWindow model.Duration
	// MinRequests is the minimum number of observations a window must hold
	// before a latency, error or prefix alert evaluates at all. An empty or
	// nearly-empty window (a paused target, a class with a tiny weight)
	// yields no alert instead of a NaN that flaps it.
	MinRequests int
	// KeepFiringFor keeps latency and error alerts firing through short
	// gaps in which the window holds fewer than MinRequests observations.
	KeepFiringFor model.Duration

	TTFT LatencyAlert
	TPOT LatencyAlert

	// ErrorRatio is the failed/completed ratio (outcome != success) over
	// both windows above which LLMProbeErrorRatioHigh fires.
	ErrorRatio float64
	ErrorFor   model.Duration

	// AchievedRatio: LLMProbeAchievedRateBelowRequested fires when sent /
	// scheduled requests over LongWindow falls below it.
	AchievedRatio float64
	AchievedFor   model.Duration
	// SaturatedFor is how long llmprobe_harness_saturated must have been 1
	// (at least once in every SaturatedFor window) before
	// LLMProbeHarnessSaturated fires.
	SaturatedFor model.Duration
	// OverloadedFor is the same for llmprobe_target_overloaded and
	// LLMProbeTargetOverloaded.
	OverloadedFor model.Duration

	// NotProbedWindow and NotProbedMinExpected: LLMProbeTargetNotProbed
	// fires when a target whose requested rate predicts at least
	// NotProbedMinExpected requests in NotProbedWindow sent none.
	NotProbedWindow      model.Duration
	NotProbedMinExpected float64
	NotProbedFor         model.Duration
	// DownFor is the for-duration of LLMProbeDown (scrape failing or absent).
	DownFor model.Duration

	// PrefixHitFactor: LLMProbePrefixCacheHitRatioLow fires when the observed
	// cached/prompt token ratio is below PrefixHitFactor × the configured
	// intent, for classes whose intent is at least PrefixMinIntent.
	PrefixHitFactor float64
	PrefixMinIntent float64
	PrefixFor       model.Duration

	// ReloadFor is the for-duration of LLMProbeConfigReloadFailed.
	ReloadFor model.Duration
}

// DefaultConfig returns the configuration the committed rules and
// dashboards are generated from.
func DefaultConfig() Config {
	return Config{
		Selector:     `job="llmprobe"`,
		RunbookURL:   "https://github.com/llmprobe/llmprobe/blob/main/docs/runbook.md",
		DashboardURL: "",

		LongWindow:    model.Duration(30 * time.Minute),
		ShortWindow:   model.Duration(5 * time.Minute),
		MinRequests:   20,
		KeepFiringFor: model.Duration(10 * time.Minute),

		TTFT: LatencyAlert{
			SLO:                2,
			For:                model.Duration(15 * time.Minute),
			RegressionFactor:   1.5,
			RegressionMinDelta: 0.25,
			RegressionFor:      model.Duration(30 * time.Minute),
		},
		TPOT: LatencyAlert{
			SLO:                0.1,
			For:                model.Duration(15 * time.Minute),
			RegressionFactor:   1.5,
			RegressionMinDelta: 0.01,
			RegressionFor:      model.Duration(30 * time.Minute),
		},

		ErrorRatio: 0.05,
		ErrorFor:   model.Duration(10 * time.Minute),

		AchievedRatio: 0.95,
		AchievedFor:   model.Duration(15 * time.Minute),
		SaturatedFor:  model.Duration(5 * time.Minute),
		OverloadedFor: model.Duration(10 * time.Minute),

		NotProbedWindow:      model.Duration(15 * time.Minute),
		NotProbedMinExpected: 10,
		NotProbedFor:         model.Duration(10 * time.Minute),
		DownFor:              model.Duration(10 * time.Minute),

		PrefixHitFactor: 0.5,
		PrefixMinIntent: 0.1,
		PrefixFor:       model.Duration(30 * time.Minute),

		ReloadFor: model.Duration(5 * time.Minute),
	}
}

// Validate reports the first setting that cannot produce working rules.
func (c Config) Validate() error {
	var errs []error
	if strings.TrimSpace(c.Selector) == "" {
		errs = append(errs, errors.New("Selector is empty: it must select llmprobe's series, e.g. job=\"llmprobe\""))
	}
	if strings.ContainsAny(c.Selector, "{}") {
		errs = append(errs, fmt.Errorf("Selector %q must be label matchers without braces", c.Selector))
	}
	if c.RunbookURL == "" {
		errs = append(errs, errors.New("RunbookURL is empty"))
	}
	for name, d := range map[string]model.Duration{
		"LongWindow": c.LongWindow, "ShortWindow": c.ShortWindow, "NotProbedWindow": c.NotProbedWindow,
		"SaturatedFor": c.SaturatedFor, "OverloadedFor": c.OverloadedFor,
	} {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("%s must be positive, got %s", name, d))
		}
	}
	if c.ShortWindow >= c.LongWindow {
		errs = append(errs, fmt.Errorf("ShortWindow (%s) must be shorter than LongWindow (%s)", c.ShortWindow, c.LongWindow))
	}
	if c.MinRequests < 1 {
		errs = append(errs, fmt.Errorf("MinRequests must be at least 1, got %d", c.MinRequests))
	}
	for name, la := range map[string]LatencyAlert{"TTFT": c.TTFT, "TPOT": c.TPOT} {
		if la.SLO <= 0 {
			errs = append(errs, fmt.Errorf("%s.SLO must be positive, got %g", name, la.SLO))
		}
		if la.RegressionFactor <= 1 {
			errs = append(errs, fmt.Errorf("%s.RegressionFactor must be above 1, got %g", name, la.RegressionFactor))
		}
		if la.RegressionMinDelta < 0 {
			errs = append(errs, fmt.Errorf("%s.RegressionMinDelta must not be negative, got %g", name, la.RegressionMinDelta))
		}
	}
	for name, r := range map[string]float64{
		"ErrorRatio": c.ErrorRatio, "AchievedRatio": c.AchievedRatio,
		"PrefixHitFactor": c.PrefixHitFactor, "PrefixMinIntent": c.PrefixMinIntent,
	} {
		if r <= 0 || r >= 1 {
			errs = append(errs, fmt.Errorf("%s must be strictly between 0 and 1, got %g", name, r))
		}
	}
	if c.NotProbedMinExpected <= 0 {
		errs = append(errs, fmt.Errorf("NotProbedMinExpected must be positive, got %g", c.NotProbedMinExpected))
	}
	return errors.Join(errs...)
}

// Matchers returns the llmprobe selector joined with extra matchers, inside
// braces: Matchers(`outcome!="success"`) is {job="llmprobe", outcome!="success"}.
func (c Config) Matchers(extra ...string) string {
	parts := make([]string, 0, 1+len(extra))
	if s := strings.TrimSpace(c.Selector); s != "" {
		parts = append(parts, s)
	}
	for _, e := range extra {
		if e != "" {
			parts = append(parts, e)
		}
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// RunbookLink returns the runbook URL of one alert.
func (c Config) RunbookLink(alert string) string {
	return c.RunbookURL + "#" + strings.ToLower(alert)
}
