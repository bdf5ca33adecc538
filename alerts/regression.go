// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package alerts

import (
	"strings"
)

// The series of the daemon's regression detector (docs/design.md
// "Regression detection"; docs/metrics.md). The alerts and the dashboards
// read these names.
const (
	RegressionMetric           = "llmprobe_regression"
	RegressionEffectMetric     = "llmprobe_regression_effect_ratio"
	RegressionErrorRatioMetric = "llmprobe_regression_error_ratio"
	RegressionSamplesMetric    = "llmprobe_regression_samples"
	RegressionChangeMetric     = "llmprobe_regression_change_timestamp_seconds"
	TargetInfoMetric           = "llmprobe_target_info"
	TargetChangesMetric        = "llmprobe_target_changes_total"
	TargetLastChangeMetric     = "llmprobe_target_last_change_timestamp_seconds"
)

var byTargetClassMetric = []string{"target", "class", "metric"}

// templateSelector makes the selector a piece of a printf format inside a
// template string: quotes escaped, percent signs doubled.
func templateSelector(s string) string {
	return strings.NewReplacer(`"`, `\"`, "%", "%%").Replace(s)
}

// selectorWith joins the llmprobe selector, made a piece of a printf
// format (templateSelector), with fixed matchers.
func (c Config) selectorWith(fixed string) string {
	var m []string
	if s := strings.TrimSpace(c.Selector); s != "" {
		m = append(m, templateSelector(s))
	}
	if fixed != "" {
		m = append(m, fixed)
	}
	return strings.Join(m, ",")
}

// regressionQuery renders a template expression that queries one of the
// detector's series for the alert's own target, class and metric (and
// group labels), with fixed extra matchers, aggregated with max over the
// llmprobe replicas.
func (c Config) regressionQuery(metric, fixed string, labels []string) string {
	return c.seriesQuery("max("+metric, c.selectorWith(fixed), labels, ")")
}

// causeText is the annotation text that names the suspected cause: the
// kinds of identity change the target made within CauseLookback, when the
// last was, and what it reports now; or that it made none.
func (c Config) causeText() string {
	lookback := win(c.CauseLookback)
	// sel renders printf "<before>{<selector>,target=%q,...}<after>" $labels.target ...
	sel := func(before, after string) string {
		return c.seriesQuery(before, c.selectorWith(""), []string{"target"}, after)
	}
	changed := sel("sum by (what) (increase("+TargetChangesMetric, "["+lookback+"])) > 0")
	last := sel("max("+TargetLastChangeMetric, ")")
	info := sel(TargetInfoMetric, "")
	return "{{ with " + changed + " | query }}" +
		"Suspected cause: the target changed its {{ range $i, $c := . }}{{ if $i }}, {{ end }}{{ $c.Labels.what }}{{ end }} within the last " + lookback +
		"{{ with " + last + " | query }}, last at {{ . | first | value | humanizeTimestamp }}{{ end }}" +
		"{{ with " + info + " | query }}{{ with . | first }}; it now reports model {{ .Labels.model }}, fingerprint {{ .Labels.fingerprint }}, server {{ .Labels.server }}, version {{ .Labels.version }}{{ end }}{{ end }}." +
		"{{ else }}The target reported no change of its model, fingerprint, server or version within the last " + lookback + ": look at the serving side (load, replicas, configuration) and the network.{{ end }}"
}

// regressionAlerts returns LLMProbeLatencyRegressed and
// LLMProbeErrorsRegressed, which fire while the daemon's detector holds a
// regression (llmprobe_regression is 1).
func (c Config) regressionAlerts() []Rule {
	sel := func(extra string) string { return c.Matchers(extra) }
	effect := func(stat string) string {
		return "{{ with " + c.regressionQuery(RegressionEffectMetric, `statistic=\"`+stat+`\"`, byTargetClassMetric) + " | query }}{{ . | first | value | printf \"%.2f\" }}{{ end }}"
	}
	samples := func(metric, window string) string {
		labels := byTargetClassMetric
		fixed := `window=\"` + window + `\"`
		if metric != "" {
			labels = []string{"target", "class"}
			fixed = `metric=\"` + metric + `\",` + fixed
		}
		return "{{ with " + c.regressionQuery(RegressionSamplesMetric, fixed, labels) + " | query }}{{ . | first | value | printf \"%.0f\" }}{{ end }}"
	}
	since := func(labels []string, fixed string) string {
		return "{{ with " + c.regressionQuery(RegressionChangeMetric, fixed, labels) + " | query }}{{ . | first | value | humanizeTimestamp }}{{ end }}"
	}
	errRatio := func(window string) string {
		return "{{ with " + c.regressionQuery(RegressionErrorRatioMetric, `window=\"`+window+`\"`, []string{"target", "class"}) +
			" | query }}{{ . | first | value | humanizePercentage }}{{ end }}"
	}
	latency := Rule{
		Alert:         AlertLatencyRegressed,
		Expr:          "max" + c.by(byTargetClassMetric...) + " (" + RegressionMetric + sel(`metric!="errors"`) + ") == 1",
		For:           win(c.DetectedRegressionFor),
		KeepFiringFor: win(c.KeepFiringFor),
		Labels:        labels("warning", "latency"),
		Annotations: c.annotations(AlertLatencyRegressed,
			"{{ $labels.metric | toUpper }} of {{ $labels.target }} ({{ $labels.class }}) got worse than its baseline.",
			"llmprobe's regression detector holds that the {{ $labels.metric }} of target {{ $labels.target }}, class {{ $labels.class }}, "+
				"got worse since "+since(byTargetClassMetric, "")+": the median is "+effect("median")+"× and the p99 "+effect("p99")+"× the baseline's "+
				"("+samples("", "current")+" requests since the change against "+samples("", "baseline")+" before it; "+
				"the tests and their false-alarm rate are in docs/design.md, \"Regression detection\"). "+c.causeText()+c.diagnosisText(false)),
	}
	errorsRule := Rule{
		Alert:         AlertErrorsRegressed,
		Expr:          "max" + c.by("target", "class") + " (" + RegressionMetric + sel(`metric="errors"`) + ") == 1",
		For:           win(c.DetectedRegressionFor),
		KeepFiringFor: win(c.KeepFiringFor),
		Labels:        labels("warning", "errors"),
		Annotations: c.annotations(AlertErrorsRegressed,
			"{{ $labels.target }} ({{ $labels.class }}) fails more requests than its baseline.",
			"llmprobe's regression detector holds that target {{ $labels.target }}, class {{ $labels.class }}, fails more often since "+
				since([]string{"target", "class"}, `metric=\"errors\"`)+": "+errRatio("current")+" of "+samples("errors", "current")+
				" requests since the change against "+errRatio("baseline")+" of "+samples("errors", "baseline")+" before it. "+c.causeText()),
	}
	return []Rule{latency, errorsRule}
}
