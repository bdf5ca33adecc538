// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package alerts

import (
	"fmt"
	"strings"
	"time"

	"github.com/prometheus/common/model"
)

// RuleFile is a Prometheus rule file (rule_files: / promtool check rules).
type RuleFile struct {
	Groups []RuleGroup `yaml:"groups"`
}

// RuleGroup is one group of a rule file.
type RuleGroup struct {
	Name     string `yaml:"name"`
	Interval string `yaml:"interval,omitempty"`
	Rules    []Rule `yaml:"rules"`
}

// Rule is a recording rule (Record set) or an alerting rule (Alert set).
type Rule struct {
	Record        string            `yaml:"record,omitempty"`
	Alert         string            `yaml:"alert,omitempty"`
	Expr          string            `yaml:"expr"`
	For           string            `yaml:"for,omitempty"`
	KeepFiringFor string            `yaml:"keep_firing_for,omitempty"`
	Labels        map[string]string `yaml:"labels,omitempty"`
	Annotations   map[string]string `yaml:"annotations,omitempty"`
}

// Alert names, one runbook section each.
const (
	AlertTTFTOverSLO                = "LLMProbeTTFTOverSLO"
	AlertTTFTRegressed              = "LLMProbeTTFTRegressed"
	AlertTPOTOverSLO                = "LLMProbeTPOTOverSLO"
	AlertTPOTRegressed              = "LLMProbeTPOTRegressed"
	AlertLatencyRegressed           = "LLMProbeLatencyRegressed"
	AlertErrorsRegressed            = "LLMProbeErrorsRegressed"
	AlertErrorRatioHigh             = "LLMProbeErrorRatioHigh"
	AlertDown                       = "LLMProbeDown"
	AlertTargetNotProbed            = "LLMProbeTargetNotProbed"
	AlertAchievedRateBelowRequested = "LLMProbeAchievedRateBelowRequested"
	AlertHarnessSaturated           = "LLMProbeHarnessSaturated"
	AlertTargetOverloaded           = "LLMProbeTargetOverloaded"
	AlertPrefixCacheHitRatioLow     = "LLMProbePrefixCacheHitRatioLow"
	AlertConfigReloadFailed         = "LLMProbeConfigReloadFailed"
	AlertSLOBurnRateFast            = "LLMProbeSLOBurnRateFast"
	AlertSLOBurnRateSlow            = "LLMProbeSLOBurnRateSlow"
)

// SignalLabel is the label every llmprobe alert carries to say what it is
// about: latency, errors, slo, harness, load, probe, cache, config, replica or
// discovery. The
// documented Alertmanager inhibit rule silences SignalLabel="latency" and
// SignalLabel="slo" alerts of a target while LLMProbeHarnessSaturated fires
// for it.
const SignalLabel = "llmprobe_signal"

// Label sets of the recorded series.
var (
	byTargetModelClass = []string{"target", "model", "class"}
	byTargetModel      = []string{"target", "model"}
	byTarget           = []string{"target"}
)

func win(d model.Duration) string { return d.String() }

// QuantileRecord names the recorded quantiles of latency histogram short
// ("ttft", ...) over LongWindow, labelled target, model, class and quantile.
func (c Config) QuantileRecord(short string) string {
	return "target_model_class_quantile:" + LatencyMetric(short) + ":histogram_quantile_rate" + win(c.LongWindow)
}

// CountRecord names the recorded observation count of latency histogram
// short over LongWindow, labelled target, model, class.
func (c Config) CountRecord(short string) string {
	return "target_model_class:" + LatencyMetric(short) + "_count:increase" + win(c.LongWindow)
}

// RequestsRateRecord names the completed-requests rate over window d.
func (c Config) RequestsRateRecord(d model.Duration) string {
	return "target_model_class:llmprobe_requests:rate" + win(d)
}

// FailedRateRecord names the failed-requests (outcome != success) rate.
func (c Config) FailedRateRecord(d model.Duration) string {
	return "target_model_class:llmprobe_requests_failed:rate" + win(d)
}

// ErrorRatioRecord names the failed/completed ratio per target and model.
func (c Config) ErrorRatioRecord(d model.Duration) string {
	return "target_model:llmprobe_requests_failed_per_requests:ratio_rate" + win(d)
}

// ScheduledRateRecord, SentRateRecord and DroppedRateRecord name the
// per-target harness rates over LongWindow.
func (c Config) ScheduledRateRecord() string {
	return "target:llmprobe_requests_scheduled:rate" + win(c.LongWindow)
}

// SentRateRecord: see ScheduledRateRecord.
func (c Config) SentRateRecord() string {
	return "target:llmprobe_requests_sent:rate" + win(c.LongWindow)
}

// DroppedRateRecord: see ScheduledRateRecord.
func (c Config) DroppedRateRecord() string {
	return "target:llmprobe_requests_dropped:rate" + win(c.LongWindow)
}

// AchievedRatioRecord names sent/scheduled per target over LongWindow.
func (c Config) AchievedRatioRecord() string {
	return "target:llmprobe_requests_sent_per_scheduled:ratio_rate" + win(c.LongWindow)
}

// RequestedRateRecord names the requested rate per target (the sum of the
// llmprobe_target_request_rate gauges of all replicas).
func (c Config) RequestedRateRecord() string { return "target:llmprobe_target_request_rate:sum" }

// PrefixHitRatioRecord names the observed cached/prompt token ratio.
func (c Config) PrefixHitRatioRecord() string {
	return "target_model_class:llmprobe_cached_prompt_tokens_per_prompt_tokens:ratio_rate" + win(c.LongWindow)
}

// PrefixIntentRecord names the configured prefix-reuse intent per target
// and class.
func (c Config) PrefixIntentRecord() string {
	return "target_class:llmprobe_prefix_reuse_target_ratio:max"
}

// RecordingRules returns the recording rules the alerts and the dashboards'
// alerting-view panels read.
func (c Config) RecordingRules() RuleGroup {
	sel := c.Matchers()
	long := win(c.LongWindow)
	var rules []Rule
	for _, m := range LatencyMetrics {
		for _, q := range Quantiles {
			rules = append(rules, Rule{
				Record: c.QuantileRecord(m),
				Expr:   HistogramQuantile(q, LatencyMetric(m), c.grouped(byTargetModelClass...), sel, long),
				Labels: map[string]string{"quantile": FormatFloat(q)},
			})
		}
		rules = append(rules, Rule{
			Record: c.CountRecord(m),
			Expr:   HistogramCount(LatencyMetric(m), c.grouped(byTargetModelClass...), sel, long),
		})
	}
	for _, d := range []model.Duration{c.ShortWindow, c.LongWindow} {
		rules = append(rules,
			Rule{
				Record: c.RequestsRateRecord(d),
				Expr:   fmt.Sprintf("sum"+c.by("target", "model", "class")+" (rate(llmprobe_requests_total%s[%s]))", sel, win(d)),
			},
			Rule{
				Record: c.FailedRateRecord(d),
				Expr:   fmt.Sprintf("sum"+c.by("target", "model", "class")+" (rate(llmprobe_requests_total%s[%s]))", c.Matchers(`outcome!="success"`), win(d)),
			},
			Rule{
				Record: c.ErrorRatioRecord(d),
				Expr: fmt.Sprintf("sum"+c.by("target", "model")+" (%s)\n/\nsum"+c.by("target", "model")+" (%s)",
					c.FailedRateRecord(d), c.RequestsRateRecord(d)),
			},
		)
	}
	rules = append(rules,
		Rule{
			Record: c.ScheduledRateRecord(),
			Expr:   fmt.Sprintf("sum"+c.by("target")+" (rate(llmprobe_requests_scheduled_total%s[%s]))", sel, long),
		},
		Rule{
			Record: c.SentRateRecord(),
			Expr:   fmt.Sprintf("sum"+c.by("target")+" (rate(llmprobe_requests_sent_total%s[%s]))", sel, long),
		},
		Rule{
			Record: c.DroppedRateRecord(),
			Expr:   fmt.Sprintf("sum"+c.by("target")+" (rate(llmprobe_requests_dropped_total%s[%s]))", sel, long),
		},
		Rule{
			Record: c.AchievedRatioRecord(),
			Expr:   c.SentRateRecord() + "\n/\n" + c.ScheduledRateRecord(),
		},
		Rule{
			Record: c.RequestedRateRecord(),
			Expr:   fmt.Sprintf("sum"+c.by("target")+" (llmprobe_target_request_rate%s)", sel),
		},
		Rule{
			Record: c.PrefixHitRatioRecord(),
			Expr: fmt.Sprintf("sum"+c.by("target", "model", "class")+" (rate(llmprobe_cached_prompt_tokens_total%s[%s]))\n/\n"+
				"sum"+c.by("target", "model", "class")+" (rate(llmprobe_prompt_tokens_total%s[%s]))", sel, long, sel, long),
		},
		Rule{
			Record: c.PrefixIntentRecord(),
			Expr:   fmt.Sprintf("max"+c.by("target", "class")+" (llmprobe_prefix_reuse_target_ratio%s)", sel),
		},
	)
	rules = append(rules, c.CostRules()...)
	rules = append(rules, c.ReplicaRecordingRules()...)
	return RuleGroup{Name: "llmprobe.recording", Rules: rules}
}

func seconds(d model.Duration) string { return FormatFloat(time.Duration(d).Seconds()) }

// humanSeconds renders a threshold in seconds for an annotation: "2s", "100ms".
func humanSeconds(s float64) string {
	return model.Duration(time.Duration(s * float64(time.Second))).String()
}

func percent(r float64) string { return FormatFloat(r*100) + "%" }

func (c Config) annotations(alert, summary, description string) map[string]string {
	a := map[string]string{
		"summary":     summary,
		"description": description,
		"runbook_url": c.RunbookLink(alert),
	}
	if c.DashboardURL != "" {
		a["dashboard_url"] = c.DashboardURL
	}
	return a
}

// raisedRule is a warning on a target's 0/1 gauge (a flag the daemon
// raises): it fires when the gauge was 1 at some point of every window of
// length d for d.
func (c Config) raisedRule(alert, gauge string, d model.Duration, signal, summary, description string) Rule {
	return Rule{
		Alert:       alert,
		Expr:        fmt.Sprintf("max"+c.by("target")+" (max_over_time(%s%s[%s])) > 0", gauge, c.Matchers(), win(d)),
		For:         win(d),
		Labels:      labels("warning", signal),
		Annotations: c.annotations(alert, summary, description),
	}
}

func labels(severity, signal string) map[string]string {
	return map[string]string{"severity": severity, SignalLabel: signal}
}

// latencyAlerts returns the over-SLO and regression alerts of one latency
// histogram.
func (c Config) latencyAlerts(short, upper, what string, la LatencyAlert, overName, regName string) []Rule {
	q := c.QuantileRecord(short) + `{quantile="0.99"}`
	count := c.CountRecord(short)
	minReq := fmt.Sprint(c.MinRequests)
	long := win(c.LongWindow)
	lastWeek := "{{ with " + c.seriesQuery(c.QuantileRecord(short), `quantile=\"0.99\"`, byTargetModelClass, " offset 1w") +
		" | query }}{{ . | first | value | humanizeDuration }}{{ end }}"
	over := Rule{
		Alert: overName,
		Expr: q + " > " + FormatFloat(float64(la.SLO)) + "\n" +
			"and " + c.on("target", "model", "class") + "\n" +
			count + " >= " + minReq,
		For:           win(la.For),
		KeepFiringFor: win(c.KeepFiringFor),
		Labels:        labels("critical", "latency"),
		Annotations: c.annotations(overName,
			fmt.Sprintf("%s p99 of {{ $labels.target }} ({{ $labels.class }}) is over its %s SLO.", upper, humanSeconds(float64(la.SLO))),
			fmt.Sprintf("The p99 %s of target {{ $labels.target }}, model {{ $labels.model }}, class {{ $labels.class }} "+
				"is {{ $value | humanizeDuration }} over the last %s, above the %s SLO. "+
				"Check the harness-health row first: a saturated harness inflates latency.", what, long, humanSeconds(float64(la.SLO)))),
	}
	reg := Rule{
		Alert: regName,
		Expr: "(\n" +
			"  " + q + "\n" +
			"    > " + FormatFloat(la.RegressionFactor) + " * (" + q + " offset 1w)\n" +
			"  and\n" +
			"  " + q + " - (" + q + " offset 1w)\n" +
			"    > " + FormatFloat(float64(la.RegressionMinDelta)) + "\n" +
			")\n" +
			"and " + c.on("target", "model", "class") + "\n" +
			count + " >= " + minReq + "\n" +
			"and " + c.on("target", "model", "class") + "\n" +
			"(" + count + " offset 1w) >= " + minReq,
		For:           win(la.RegressionFor),
		KeepFiringFor: win(c.KeepFiringFor),
		Labels:        labels("warning", "latency"),
		Annotations: c.annotations(regName,
			fmt.Sprintf("%s p99 of {{ $labels.target }} ({{ $labels.class }}) regressed against the same time last week.", upper),
			fmt.Sprintf("The p99 %s of target {{ $labels.target }}, model {{ $labels.model }}, class {{ $labels.class }} "+
				"is {{ $value | humanizeDuration }} over the last %s; the same window a week ago it was %s. "+
				"The alert fires above %s× last week's value and at least %s more.",
				what, long, lastWeek, FormatFloat(la.RegressionFactor), humanSeconds(float64(la.RegressionMinDelta)))),
	}
	return []Rule{over, reg}
}

// AlertingRules returns the alerting rules.
func (c Config) AlertingRules() RuleGroup {
	sel := c.Matchers()
	minReq := fmt.Sprint(c.MinRequests)
	long := win(c.LongWindow)
	var rules []Rule
	rules = append(rules, c.latencyAlerts("ttft", "TTFT", "time to first token", c.TTFT, AlertTTFTOverSLO, AlertTTFTRegressed)...)
	rules = append(rules, c.latencyAlerts("tpot", "TPOT", "time per output token", c.TPOT, AlertTPOTOverSLO, AlertTPOTRegressed)...)

	rules = append(rules, c.regressionAlerts()...)

	er := FormatFloat(c.ErrorRatio)
	rules = append(rules, Rule{
		Alert: AlertErrorRatioHigh,
		Expr: c.ErrorRatioRecord(c.LongWindow) + " > " + er + "\n" +
			"and " + c.on("target", "model") + "\n" +
			c.ErrorRatioRecord(c.ShortWindow) + " > " + er + "\n" +
			"and " + c.on("target", "model") + "\n" +
			"sum" + c.by("target", "model") + " (" + c.RequestsRateRecord(c.LongWindow) + ") * " + seconds(c.LongWindow) + " >= " + minReq,
		For:           win(c.ErrorFor),
		KeepFiringFor: win(c.KeepFiringFor),
		Labels:        labels("critical", "errors"),
		Annotations: c.annotations(AlertErrorRatioHigh,
			"{{ $labels.target }} fails {{ $value | humanizePercentage }} of probe requests.",
			fmt.Sprintf("{{ $value | humanizePercentage }} of the requests llmprobe sent to target {{ $labels.target }} (model {{ $labels.model }}) "+
				"over the last %s ended with an outcome other than success (threshold %s, also exceeded over the last %s). "+
				"The Requests and errors row breaks this down by outcome.", long, percent(c.ErrorRatio), win(c.ShortWindow))),
	})

	rules = append(rules, Rule{
		Alert:  AlertDown,
		Expr:   "up" + sel + " == 0\nor\nabsent(up" + sel + ")",
		For:    win(c.DownFor),
		Labels: labels("warning", "probe"),
		Annotations: c.annotations(AlertDown,
			"llmprobe is not being scraped: no endpoint is probed.",
			fmt.Sprintf("Prometheus has not scraped llmprobe ({{ $labels.job }}{{ with $labels.instance }} on {{ . }}{{ end }}) for %s: "+
				"either the scrape fails or no target matching %s exists. Nothing is being measured, so no latency alert can fire.",
				win(c.DownFor), sel)),
	})

	npw := win(c.NotProbedWindow)
	rules = append(rules, Rule{
		Alert: AlertTargetNotProbed,
		Expr: c.RequestedRateRecord() + " * " + seconds(c.NotProbedWindow) + " >= " + FormatFloat(c.NotProbedMinExpected) + "\n" +
			"unless " + c.on("target") + "\n" +
			fmt.Sprintf("sum"+c.by("target")+" (increase(llmprobe_requests_sent_total%s[%s])) > 0", sel, npw),
		For:    win(c.NotProbedFor),
		Labels: labels("warning", "probe"),
		Annotations: c.annotations(AlertTargetNotProbed,
			"llmprobe sends no requests to {{ $labels.target }}.",
			fmt.Sprintf("Target {{ $labels.target }} is configured for {{ $value | humanize }} requests per %s but llmprobe sent none in that window. "+
				"Its runner is stuck or stopped; its latency is not being measured.", npw)),
	})

	rules = append(rules, Rule{
		Alert: AlertAchievedRateBelowRequested,
		Expr: c.AchievedRatioRecord() + " < " + FormatFloat(c.AchievedRatio) + "\n" +
			"and " + c.on("target") + "\n" +
			c.ScheduledRateRecord() + " * " + seconds(c.LongWindow) + " >= " + minReq,
		For:    win(c.AchievedFor),
		Labels: labels("warning", "harness"),
		Annotations: c.annotations(AlertAchievedRateBelowRequested,
			"llmprobe sends only {{ $value | humanizePercentage }} of the requests scheduled for {{ $labels.target }}.",
			fmt.Sprintf("Over the last %s llmprobe sent {{ $value | humanizePercentage }} of the requests its arrival timeline scheduled for "+
				"target {{ $labels.target }} (threshold %s); the rest were dropped (see llmprobe_requests_dropped_total by reason: "+
				"inflight_limit is the target's doing, late the harness'). "+
				"The measured latencies describe a lighter load than configured.", long, percent(c.AchievedRatio))),
	})

	rules = append(rules, c.raisedRule(AlertHarnessSaturated, "llmprobe_harness_saturated", c.SaturatedFor, "harness",
		"llmprobe cannot keep up with the schedule for {{ $labels.target }}: its numbers are not trustworthy.",
		fmt.Sprintf("llmprobe_harness_saturated has been 1 for target {{ $labels.target }} repeatedly over the last %s: "+
			"the harness itself sends late, falls short of its schedule or timestamps late because it is starved of CPU "+
			"(llmprobe_harness_saturation_reason says which), so measured latency includes the harness's own delay. "+
			"Latency and SLO burn-rate alerts for this target are inhibited while this fires.", win(c.SaturatedFor))))

	rules = append(rules, c.raisedRule(AlertTargetOverloaded, "llmprobe_target_overloaded", c.OverloadedFor, "load",
		"{{ $labels.target }} does not absorb the offered load: requests over max_inflight are dropped.",
		fmt.Sprintf("llmprobe_target_overloaded has been 1 for target {{ $labels.target }} repeatedly over the last %s: "+
			"so many requests were still running that arrivals over max_inflight were dropped. The target is too slow for the offered load; "+
			"the latency llmprobe measures is right (its latency alerts stay armed) but describes less load than configured.", win(c.OverloadedFor))))

	rules = append(rules, Rule{
		Alert: AlertPrefixCacheHitRatioLow,
		Expr: c.PrefixHitRatioRecord() + "\n" +
			"  < " + c.on("target", "class") + " group_left ()\n" +
			"  " + FormatFloat(c.PrefixHitFactor) + " * " + c.PrefixIntentRecord() + "\n" +
			"and " + c.on("target", "class") + "\n" +
			c.PrefixIntentRecord() + " >= " + FormatFloat(c.PrefixMinIntent) + "\n" +
			"and " + c.on("target", "model", "class") + "\n" +
			c.CountRecord("ttft") + " >= " + minReq,
		For:    win(c.PrefixFor),
		Labels: labels("warning", "cache"),
		Annotations: c.annotations(AlertPrefixCacheHitRatioLow,
			"Prefix-cache hits of {{ $labels.target }} ({{ $labels.class }}) are far below the configured reuse.",
			fmt.Sprintf("Over the last %s {{ $value | humanizePercentage }} of the prompt tokens sent to target {{ $labels.target }}, class {{ $labels.class }}, "+
				"were served from the prefix cache, less than %s of the configured intent "+
				"({{ with %s | query }}{{ . | first | value | humanizePercentage }}{{ end }}). "+
				"Latency measured without the intended reuse is pessimistic against production.",
				long, percent(c.PrefixHitFactor), c.seriesQuery(c.PrefixIntentRecord(), "", []string{"target", "class"}, ""))),
	})

	rules = append(rules, Rule{
		Alert:  AlertConfigReloadFailed,
		Expr:   "llmprobe_config_last_reload_successful" + sel + " == 0",
		For:    win(c.ReloadFor),
		Labels: labels("warning", "config"),
		Annotations: c.annotations(AlertConfigReloadFailed,
			"llmprobe failed to reload its configuration.",
			"The last configuration reload of llmprobe {{ $labels.instance }} failed; it keeps probing with the previous configuration. "+
				"Run `llmprobe check-config` on the file to see the errors."),
	})

	rules = append(rules,
		c.burnRateAlert(AlertSLOBurnRateFast, c.SLOFast, "at this pace the budget is gone within days"),
		c.burnRateAlert(AlertSLOBurnRateSlow, c.SLOSlow, "at this pace it runs out before the SLO window ends"),
	)
	rules = append(rules, c.ReplicaAlerts()...)
	return RuleGroup{Name: "llmprobe.alerts", Rules: rules}
}

// Rules returns the complete rule file: recording rules first (the alerts
// read them), then alerting rules.
func (c Config) Rules() (RuleFile, error) {
	if err := c.Validate(); err != nil {
		return RuleFile{}, fmt.Errorf("invalid mixin config: %w", err)
	}
	return RuleFile{Groups: []RuleGroup{c.RecordingRules(), c.SLORecordingRules(), c.AlertingRules()}}, nil
}

// AlertNames returns the names of all alerting rules, in file order.
func (c Config) AlertNames() []string {
	var names []string
	for _, r := range c.AlertingRules().Rules {
		names = append(names, r.Alert)
	}
	return names
}

// trimLines removes trailing spaces from every line (YAML literal blocks
// cannot hold them).
func trimLines(s string) string {
	lines := strings.Split(s, "\n")
	for i := range lines {
		lines[i] = strings.TrimRight(lines[i], " ")
	}
	return strings.Join(lines, "\n")
}
