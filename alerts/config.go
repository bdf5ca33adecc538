// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

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
//
// alerts imports no llmprobe package but internal/bounded: the mixin reads
// metric names, never the probe's code.
package alerts

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/common/model"
)

// LatencyAlert configures the two alerts on one latency histogram (TTFT or
// TPOT): the p99 over an absolute SLO, and the p99 regressed against the same
// window one week earlier.
type LatencyAlert struct {
	// SLO is the p99 threshold in seconds.
	SLO Seconds `yaml:"slo"`
	// For is how long the p99 must stay over the SLO before the alert fires.
	For model.Duration `yaml:"for"`
	// RegressionFactor: the alert fires when p99 > RegressionFactor × p99 a
	// week ago ...
	RegressionFactor float64 `yaml:"regression_factor"`
	// RegressionMinDelta: ... and p99 is at least this many seconds above
	// last week's (so a 40 ms → 70 ms change on a tiny model does not page).
	RegressionMinDelta Seconds `yaml:"regression_min_delta"`
	// RegressionFor is the for-duration of the regression alert.
	RegressionFor model.Duration `yaml:"regression_for"`
}

// BurnRateWindows is one condition of a multi-window, multi-burn-rate SLO
// alert (Google SRE workbook, "Alerting on SLOs"): the error budget burns
// faster than BurnRate over both the Long and the Short window.
type BurnRateWindows struct {
	// Long is the window that proves the burn is significant: at burn rate
	// b a Long window spends b × Long / SLOWindow of the budget.
	Long model.Duration `yaml:"long"`
	// Short must burn as fast too, so the alert resolves soon after the
	// burn stops instead of lasting as long as Long remembers it (the
	// workbook's Long / 12).
	Short model.Duration `yaml:"short"`
	// BurnRate is the threshold: the error ratio over the window divided by
	// the error budget (1 − objective). 1 spends exactly the budget over
	// SLOWindow.
	BurnRate float64 `yaml:"burn_rate"`
}

// BurnRateAlert configures one SLO burn-rate alert: it fires when any of
// its Windows conditions holds.
type BurnRateAlert struct {
	Windows []BurnRateWindows `yaml:"windows"`
	// For is the alert's for-duration.
	For model.Duration `yaml:"for"`
	// Severity is its severity label. The defaults follow the mixin's
	// convention (critical pages, warning opens a ticket); set your
	// routing's values, e.g. "page" and "ticket", if they differ.
	Severity string `yaml:"severity"`
}

// ObjectMeta is the metadata of a generated Kubernetes object.
type ObjectMeta struct {
	Name string `yaml:"name"`
	// Namespace is left out of the object when empty (kubectl's or the
	// operator's namespace applies).
	Namespace   string            `yaml:"namespace,omitempty"`
	Labels      map[string]string `yaml:"labels,omitempty"`
	Annotations map[string]string `yaml:"annotations,omitempty"`
}

// Config is the monitoring mixin's configuration. DefaultConfig returns the
// values the committed files are generated from.
type Config struct {
	// Selector selects llmprobe's own series: PromQL label matchers without
	// the braces, e.g. `job="llmprobe"` or `job="llmprobe", cluster="eu1"`.
	Selector string `yaml:"selector"`
	// RunbookURL is the runbook document; each alert links to
	// RunbookURL + "#" + lower-case alert name (a heading of docs/runbook.md).
	RunbookURL string `yaml:"runbook_url"`
	// DashboardURL is the base URL of the overview dashboard, put in the
	// dashboard_url annotation of every alert. Empty leaves it out.
	DashboardURL string `yaml:"dashboard_url"`
	// GroupLabels are labels every aggregation of the rules keeps beside
	// target, model and class, e.g. [cluster] when one Prometheus (or
	// Thanos) holds the llmprobes of several clusters: recorded series and
	// alerts are then per cluster, and the dashboards filter recorded
	// series by those of DashboardVariables listed here. Empty (the
	// default) aggregates across them.
	GroupLabels []string `yaml:"group_labels"`
	// DashboardSelector is label matchers (without braces) every dashboard
	// query of llmprobe's series carries. Empty by default: the dashboard
	// variables select, so a renamed job (a Helm nameOverride) still shows.
	DashboardSelector string `yaml:"dashboard_selector"`
	// DashboardVariables are the labels the dashboards offer as variables
	// before target, model and class, in order, each listing the values
	// llmprobe_build_info has (multi-value, All by default). A label the
	// series lack lists nothing, and All selects every series.
	DashboardVariables []string `yaml:"dashboard_variables"`
	// StatusPageURL, when set, is linked from every dashboard.
	StatusPageURL string `yaml:"status_page_url"`
	// PrometheusRule is the metadata of the prometheus-operator
	// PrometheusRule the mixin writes; its labels must match your
	// Prometheus' ruleSelector (kube-prometheus-stack: release: <name>).
	PrometheusRule ObjectMeta `yaml:"prometheus_rule"`
	// DashboardsConfigMap is the metadata of the ConfigMap holding the
	// dashboards for Grafana's dashboard sidecar (label grafana_dashboard
	// by default; a grafana_folder annotation picks the folder).
	DashboardsConfigMap ObjectMeta `yaml:"dashboards_configmap"`

	// LongWindow is the window of the recorded quantiles and ratios the
	// alerts evaluate. At 0.2 req/s a 30m window holds ~360 requests, so a
	// p99 rests on several observations beyond the 99th percentile rank.
	LongWindow model.Duration `yaml:"long_window"`
	// ShortWindow is the second window of the multi-window error-ratio
	// alert: it must also be over the threshold, so the alert resolves
	// quickly once errors stop.
	ShortWindow model.Duration `yaml:"short_window"`
	// MinRequests is the minimum number of observations a window must hold
	// before a latency, error or prefix alert evaluates at all, and the
	// minimum of judged requests in the long window of an SLO burn-rate
	// condition. An empty or nearly-empty window (a paused target, a class
	// with a tiny weight) yields no alert instead of a NaN that flaps it.
	MinRequests int `yaml:"min_requests"`
	// KeepFiringFor keeps latency and error alerts firing through short
	// gaps in which the window holds fewer than MinRequests observations.
	KeepFiringFor model.Duration `yaml:"keep_firing_for"`

	TTFT LatencyAlert `yaml:"ttft"`
	TPOT LatencyAlert `yaml:"tpot"`

	// ErrorRatio is the failed/completed ratio (outcome != success) over
	// both windows above which LLMProbeErrorRatioHigh fires.
	ErrorRatio float64        `yaml:"error_ratio"`
	ErrorFor   model.Duration `yaml:"error_for"`

	// AchievedRatio: LLMProbeAchievedRateBelowRequested fires when sent /
	// scheduled requests over LongWindow falls below it.
	AchievedRatio float64        `yaml:"achieved_ratio"`
	AchievedFor   model.Duration `yaml:"achieved_for"`
	// SaturatedFor is how long llmprobe_harness_saturated must have been 1
	// (at least once in every SaturatedFor window) before
	// LLMProbeHarnessSaturated fires.
	SaturatedFor model.Duration `yaml:"saturated_for"`
	// OverloadedFor is the same for llmprobe_target_overloaded and
	// LLMProbeTargetOverloaded.
	OverloadedFor model.Duration `yaml:"overloaded_for"`

	// NotProbedWindow and NotProbedMinExpected: LLMProbeTargetNotProbed
	// fires when a target whose requested rate predicts at least
	// NotProbedMinExpected requests in NotProbedWindow sent none.
	NotProbedWindow      model.Duration `yaml:"not_probed_window"`
	NotProbedMinExpected float64        `yaml:"not_probed_min_expected"`
	NotProbedFor         model.Duration `yaml:"not_probed_for"`
	// DownFor is the for-duration of LLMProbeDown (scrape failing or absent).
	DownFor model.Duration `yaml:"down_for"`

	// PrefixHitFactor: LLMProbePrefixCacheHitRatioLow fires when the observed
	// cached/prompt token ratio is below PrefixHitFactor × the configured
	// intent, for classes whose intent is at least PrefixMinIntent.
	PrefixHitFactor float64        `yaml:"prefix_hit_factor"`
	PrefixMinIntent float64        `yaml:"prefix_min_intent"`
	PrefixFor       model.Duration `yaml:"prefix_for"`

	// ReloadFor is the for-duration of LLMProbeConfigReloadFailed.
	ReloadFor model.Duration `yaml:"reload_for"`

	// DetectedRegressionFor is the for-duration of LLMProbeLatencyRegressed
	// and LLMProbeErrorsRegressed, which read the daemon's own regression
	// detector (llmprobe_regression): its decision already carries the
	// evidence and the stated false-alarm rate, so this only rides out a
	// scrape or two.
	DetectedRegressionFor model.Duration `yaml:"detected_regression_for"`
	// CauseLookback is how far back the regression alerts look for a change
	// of the target's identity (llmprobe_target_changes_total) to name as
	// the suspected cause.
	CauseLookback model.Duration `yaml:"cause_lookback"`

	// SLOWindow is the error-budget period of the SLO rules and panels
	// (the budget remaining is computed over it). It must equal the
	// daemon configuration's slo.window (default 28d), which llmprobe
	// exports as llmprobe_slo_window_seconds: PromQL ranges are fixed, so
	// the rules cannot read it. The overview's SLO row flags a difference.
	SLOWindow model.Duration `yaml:"slo_window"`
	// SLOFast pages on a burn that spends the budget in days: by default
	// burn rate > 14.4 over 1h and 5m, or > 6 over 6h and 30m (the SRE
	// workbook's 2% of a 30-day budget in an hour, 5% in 6 hours).
	SLOFast BurnRateAlert `yaml:"slo_fast"`
	// SLOSlow opens a ticket for a burn that spends the budget before the
	// period ends: by default burn rate > 3 over 1d and 2h, or > 1 over 3d
	// and 6h.
	SLOSlow BurnRateAlert `yaml:"slo_slow"`
	// SLOMinBadRequests is the low-rate guard of the SLO alerts: a
	// condition holds only if its long window holds at least this many bad
	// requests (and MinRequests judged ones). At 1 request per 5 minutes
	// and objective 0.999 a single bad request is a burn rate over 80 in
	// a 1h window and over 10 in a 6h one; requiring 5 keeps chance from
	// alerting: a target that meets a 0.99 objective has 5 bad requests
	// among the 72 of a 6h window at that rate with probability under
	// 0.1%, while a real burn at that rate (5 of 72 is 7%) still alerts.
	SLOMinBadRequests int `yaml:"slo_min_bad_requests"`

	// Cost configures the energy and cost per generated token recording
	// rules (cost.go) and the correlation dashboard's panels of them.
	Cost CostConfig `yaml:"cost"`

	// ClusterLabel is the label naming a cluster in a multi-cluster
	// Prometheus (or Thanos): the dashboards' cluster variables filter
	// by it.
	ClusterLabel string `yaml:"cluster_label"`
	// ShowMultiCluster shows the dashboards' cluster variables (the
	// ClusterLabel entry of DashboardVariables and the correlation
	// dashboard's server cluster). False (the default) hides them, as
	// kubernetes-mixin's showMultiCluster does: with one cluster they
	// list one value or none, and All selects every series.
	ShowMultiCluster bool `yaml:"show_multi_cluster"`
	// TraceDatasourceType is the plugin type of the data source holding
	// llmprobe's spans: tempo (the default) or jaeger. The overview's one
	// trace panel queries the data source its trace_datasource variable
	// picks among those of this type.
	TraceDatasourceType string `yaml:"trace_datasource_type"`

	// ReplicaOutlier configures LLMProbeReplicaOutlier and the per-replica
	// recording rules (replica.go) of targets with discovery.
	ReplicaOutlier ReplicaOutlierAlert `yaml:"replica_outlier"`
	// Discovery configures the discovery alerts (replica.go).
	Discovery DiscoveryAlerts `yaml:"discovery"`
}

// Trace data source types TraceDatasourceType accepts.
const (
	TraceDatasourceTempo  = "tempo"
	TraceDatasourceJaeger = "jaeger"
)

// defaultLatencyAlert is a latency alert's default: the latency alerts
// share their durations and regression factor, and differ in their SLO
// (seconds) and the smallest regression worth an alert (seconds).
func defaultLatencyAlert(slo, regressionMinDelta Seconds) LatencyAlert {
	return LatencyAlert{
		SLO:                slo,
		For:                model.Duration(15 * time.Minute),
		RegressionFactor:   1.5,
		RegressionMinDelta: regressionMinDelta,
		RegressionFor:      model.Duration(30 * time.Minute),
	}
}

// DefaultConfig returns the configuration the committed rules and
// dashboards are generated from.
func DefaultConfig() Config {
	return Config{
		Selector:     `job="llmprobe"`,
		RunbookURL:   "https://github.com/llmprobe/llmprobe/blob/main/docs/runbook.md",
		DashboardURL: "",

		DashboardVariables: []string{"job", "cluster", "namespace", "instance"},
		PrometheusRule: ObjectMeta{
			Name:   "llmprobe",
			Labels: partOfLabels(),
		},
		DashboardsConfigMap: ObjectMeta{
			Name:   "llmprobe-dashboards",
			Labels: withLabel(partOfLabels(), "grafana_dashboard", "1"),
		},

		LongWindow:    model.Duration(30 * time.Minute),
		ShortWindow:   model.Duration(5 * time.Minute),
		MinRequests:   20,
		KeepFiringFor: model.Duration(10 * time.Minute),

		TTFT: defaultLatencyAlert(2, 0.25),
		TPOT: defaultLatencyAlert(0.1, 0.01),

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

		DetectedRegressionFor: model.Duration(time.Minute),
		CauseLookback:         model.Duration(24 * time.Hour),

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

		Cost:                defaultCostConfig(),
		ClusterLabel:        "cluster",
		TraceDatasourceType: TraceDatasourceTempo,
		ReplicaOutlier:      defaultReplicaOutlier(),
		Discovery:           defaultDiscoveryAlerts(),
	}
}

// FieldError is a setting that cannot produce working rules or
// dashboards. Field is its path as a mixin file spells it, e.g.
// "slo_fast.windows[1].short".
type FieldError struct {
	Field string
	Msg   string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Msg }

func fieldErr(field, format string, args ...any) error {
	return &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// Validate reports every setting that cannot produce working rules and
// dashboards, each a *FieldError, joined.
func (c Config) Validate() error {
	var errs []error
	if strings.TrimSpace(c.Selector) == "" {
		errs = append(errs, fieldErr("selector", `is empty: it must select llmprobe's series, e.g. job="llmprobe"`))
	} else if err := validateMatchers(c.Selector); err != nil {
		errs = append(errs, fieldErr("selector", "%v", err))
	}
	if err := validateMatchers(c.DashboardSelector); err != nil {
		errs = append(errs, fieldErr("dashboard_selector", "%v", err))
	}
	if c.RunbookURL == "" {
		errs = append(errs, fieldErr("runbook_url", "is empty"))
	}
	errs = append(errs, validateLabelList("group_labels", c.GroupLabels, reservedLabels)...)
	errs = append(errs, validateLabelList("dashboard_variables", c.DashboardVariables,
		append(slices.Clone(reservedLabels), ReservedDashboardVariables...))...)
	errs = append(errs, c.PrometheusRule.validate("prometheus_rule")...)
	errs = append(errs, c.DashboardsConfigMap.validate("dashboards_configmap")...)
	for _, d := range []struct {
		name string
		d    model.Duration
	}{
		{"long_window", c.LongWindow}, {"short_window", c.ShortWindow}, {"not_probed_window", c.NotProbedWindow},
		{"saturated_for", c.SaturatedFor}, {"overloaded_for", c.OverloadedFor},
		{"cause_lookback", c.CauseLookback},
	} {
		if d.d <= 0 {
			errs = append(errs, fieldErr(d.name, "must be positive, got %s", d.d))
		}
	}
	if c.ShortWindow > 0 && c.ShortWindow >= c.LongWindow {
		errs = append(errs, fieldErr("short_window", "%s must be shorter than long_window (%s)", c.ShortWindow, c.LongWindow))
	}
	if c.DetectedRegressionFor < 0 {
		errs = append(errs, fieldErr("detected_regression_for", "must not be negative, got %s", c.DetectedRegressionFor))
	}
	if c.MinRequests < 1 {
		errs = append(errs, fieldErr("min_requests", "must be at least 1, got %d", c.MinRequests))
	}
	for _, la := range []struct {
		name string
		a    LatencyAlert
	}{{"ttft", c.TTFT}, {"tpot", c.TPOT}} {
		if la.a.SLO <= 0 {
			errs = append(errs, fieldErr(la.name+".slo", "must be positive, got %g", float64(la.a.SLO)))
		}
		if la.a.RegressionFactor <= 1 {
			errs = append(errs, fieldErr(la.name+".regression_factor", "must be above 1, got %g", la.a.RegressionFactor))
		}
		if la.a.RegressionMinDelta < 0 {
			errs = append(errs, fieldErr(la.name+".regression_min_delta", "must not be negative, got %g", float64(la.a.RegressionMinDelta)))
		}
	}
	for _, r := range []struct {
		name string
		v    float64
	}{
		{"error_ratio", c.ErrorRatio}, {"achieved_ratio", c.AchievedRatio},
		{"prefix_hit_factor", c.PrefixHitFactor}, {"prefix_min_intent", c.PrefixMinIntent},
	} {
		if r.v <= 0 || r.v >= 1 {
			errs = append(errs, fieldErr(r.name, "must be strictly between 0 and 1, got %g", r.v))
		}
	}
	if c.NotProbedMinExpected <= 0 {
		errs = append(errs, fieldErr("not_probed_min_expected", "must be positive, got %g", c.NotProbedMinExpected))
	}
	errs = append(errs, c.validateSLO()...)
	errs = append(errs, c.validateCost()...)
	errs = append(errs, c.validateReplicas()...)
	if !labelName.MatchString(c.ClusterLabel) {
		errs = append(errs, fieldErr("cluster_label", "%q is not a valid label name", c.ClusterLabel))
	}
	if c.TraceDatasourceType != TraceDatasourceTempo && c.TraceDatasourceType != TraceDatasourceJaeger {
		errs = append(errs, fieldErr("trace_datasource_type", "must be %s or %s, got %q", TraceDatasourceTempo, TraceDatasourceJaeger, c.TraceDatasourceType))
	}
	return errors.Join(errs...)
}

func (c Config) validateSLO() []error {
	var errs []error
	if c.SLOWindow <= 0 {
		errs = append(errs, fieldErr("slo_window", "must be positive, got %s", c.SLOWindow))
	}
	if c.SLOMinBadRequests < 1 {
		errs = append(errs, fieldErr("slo_min_bad_requests", "must be at least 1, got %d", c.SLOMinBadRequests))
	}
	for _, a := range []struct {
		name string
		a    BurnRateAlert
	}{{"slo_fast", c.SLOFast}, {"slo_slow", c.SLOSlow}} {
		if len(a.a.Windows) == 0 {
			errs = append(errs, fieldErr(a.name+".windows", "is empty: the alert needs at least one window pair"))
		}
		if a.a.Severity == "" {
			errs = append(errs, fieldErr(a.name+".severity", "is empty"))
		}
		for i, w := range a.a.Windows {
			p := fmt.Sprintf("%s.windows[%d]", a.name, i)
			if w.Short <= 0 || w.Short >= w.Long {
				errs = append(errs, fieldErr(p+".short", "%s must be positive and shorter than long (%s)", w.Short, w.Long))
			}
			if w.Long > c.SLOWindow {
				errs = append(errs, fieldErr(p+".long", "%s must not exceed slo_window (%s)", w.Long, c.SLOWindow))
			}
			if w.BurnRate <= 0 {
				errs = append(errs, fieldErr(p+".burn_rate", "must be positive, got %g", w.BurnRate))
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
