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

// BurnRateWindows is one condition of a multi-window, multi-burn-rate SLO
// alert (Google SRE workbook, "Alerting on SLOs"): the error budget burns
// faster than BurnRate over both the Long and the Short window.
type BurnRateWindows struct {
	// Long is the window that proves the burn is significant: at burn rate
	// b a Long window spends b × Long / SLOWindow of the budget.
	Long model.Duration
	// Short must burn as fast too, so the alert resolves soon after the
	// burn stops instead of lasting as long as Long remembers it (the
	// workbook's Long / 12).
	Short model.Duration
	// BurnRate is the threshold: the error ratio over the window divided by
	// the error budget (1 − objective). 1 spends exactly the budget over
	// SLOWindow.
	BurnRate float64
}

// BurnRateAlert configures one SLO burn-rate alert: it fires when any of
// its Windows conditions holds.
type BurnRateAlert struct {
	Windows []BurnRateWindows
	// For is the alert's for-duration.
	For model.Duration
	// Severity is its severity label. The defaults follow the mixin's
	// convention (critical pages, warning opens a ticket); set your
	// routing's values, e.g. "page" and "ticket", if they differ.
	Severity string
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
	// before a latency, error or prefix alert evaluates at all, and the
	// minimum of judged requests in the long window of an SLO burn-rate
	// condition. An empty or nearly-empty window (a paused target, a class
	// with a tiny weight) yields no alert instead of a NaN that flaps it.
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

	// SLOWindow is the error-budget period of the SLO rules and panels
	// (the budget remaining is computed over it). It must equal the
	// daemon configuration's slo.window (default 28d), which llmprobe
	// exports as llmprobe_slo_window_seconds: PromQL ranges are fixed, so
	// the rules cannot read it. The overview's SLO row flags a difference.
	SLOWindow model.Duration
	// SLOFast pages on a burn that spends the budget in days: by default
	// burn rate > 14.4 over 1h and 5m, or > 6 over 6h and 30m (the SRE
	// workbook's 2% of a 30-day budget in an hour, 5% in 6 hours).
	SLOFast BurnRateAlert
	// SLOSlow opens a ticket for a burn that spends the budget before the
	// period ends: by default burn rate > 3 over 1d and 2h, or > 1 over 3d
	// and 6h.
	SLOSlow BurnRateAlert
	// SLOMinBadRequests is the low-rate guard of the SLO alerts: a
	// condition holds only if its long window holds at least this many bad
	// requests (and MinRequests judged ones). At 1 request per 5 minutes
	// and objective 0.999 a single bad request is a burn rate over 80 in
	// a 1h window and over 10 in a 6h one; requiring 5 keeps chance from
	// alerting: a target that meets a 0.99 objective has 5 bad requests
	// among the 72 of a 6h window at that rate with probability under
	// 0.1%, while a real burn at that rate (5 of 72 is 7%) still alerts.
	SLOMinBadRequests int
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

		SLOWindow: model.Duration(28 * 24 * time.Hour),
		SLOFast: BurnRateAlert{
			Windows: []BurnRateWindows{
				{Long: model.Duration(time.Hour), Short: model.Duration(5 * time.Minute), BurnRate: 14.4},
				{Long: model.Duration(6 * time.Hour), Short: model.Duration(30 * time.Minute), BurnRate: 6},
			},
			For:      model.Duration(2 * time.Minute),
			Severity: "critical",
		},
		SLOSlow: BurnRateAlert{
			Windows: []BurnRateWindows{
				{Long: model.Duration(24 * time.Hour), Short: model.Duration(2 * time.Hour), BurnRate: 3},
				{Long: model.Duration(3 * 24 * time.Hour), Short: model.Duration(6 * time.Hour), BurnRate: 1},
			},
			For:      model.Duration(15 * time.Minute),
			Severity: "warning",
		},
		SLOMinBadRequests: 5,
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
	errs = append(errs, c.validateSLO()...)
	return errors.Join(errs...)
}

func (c Config) validateSLO() []error {
	var errs []error
	if c.SLOMinBadRequests < 1 {
		errs = append(errs, fmt.Errorf("SLOMinBadRequests must be at least 1, got %d", c.SLOMinBadRequests))
	}
	for name, a := range map[string]BurnRateAlert{"SLOFast": c.SLOFast, "SLOSlow": c.SLOSlow} {
		if len(a.Windows) == 0 {
			errs = append(errs, fmt.Errorf("%s has no Windows", name))
		}
		if a.Severity == "" {
			errs = append(errs, fmt.Errorf("%s.Severity is empty", name))
		}
		for i, w := range a.Windows {
			p := fmt.Sprintf("%s.Windows[%d]", name, i)
			if w.Short <= 0 || w.Short >= w.Long {
				errs = append(errs, fmt.Errorf("%s: Short (%s) must be positive and shorter than Long (%s)", p, w.Short, w.Long))
			}
			if w.Long > c.SLOWindow {
				errs = append(errs, fmt.Errorf("%s: Long (%s) must not exceed SLOWindow (%s)", p, w.Long, c.SLOWindow))
			}
			if w.BurnRate <= 0 {
				errs = append(errs, fmt.Errorf("%s: BurnRate must be positive, got %g", p, w.BurnRate))
			}
		}
	}
	return errs
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
