// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package exporter

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmprobe/llmprobe/probe"
)

// The regression detector's series (docs/design.md "Regression
// detection"). Every (target, class, metric) of a class with detection on
// has them from the first scrape: 0, NaN effects and zero counts until
// the detector has evidence.
var (
	regressionLabels = []string{labelTarget, labelClass, "metric"}
	regressionDesc   = prometheus.NewDesc(namespace+"_regression",
		"1 while llmprobe's regression detector holds that this metric (ttft, tpot, e2e or errors) of the class got worse than its baseline (the period before the target's last identity change, else a trailing reference), by a rank or exceedance test at a stated false-alarm rate and by at least the class's regression.min_effect; else 0.", regressionLabels, nil)
	regressionEffectDesc = prometheus.NewDesc(namespace+"_regression_effect_ratio",
		"Current window's median (statistic=\"median\") and p99 (statistic=\"p99\") over the baseline's, for ttft, tpot and e2e; NaN until both sides have the samples the quantile needs.", append(regressionLabels[:3:3], "statistic"), nil)
	regressionErrorRatioDesc = prometheus.NewDesc(namespace+"_regression_error_ratio",
		"Error ratio (outcome other than success) of the baseline and of the current window the error detector compares; NaN while a side is empty.", []string{labelTarget, labelClass, "window"}, nil)
	regressionSamplesDesc = prometheus.NewDesc(namespace+"_regression_samples",
		"Requests behind the detector's decision: in the baseline and in the current window.", append(regressionLabels[:3:3], "window"), nil)
	regressionChangeDesc = prometheus.NewDesc(namespace+"_regression_change_timestamp_seconds",
		"When the detector estimates the distribution changed (the change point of the regression it holds), as a Unix time; 0 while it holds none.", regressionLabels, nil)
)

func describeRegression(ch chan<- *prometheus.Desc) {
	ch <- regressionDesc
	ch <- regressionEffectDesc
	ch <- regressionErrorRatioDesc
	ch <- regressionSamplesDesc
	ch <- regressionChangeDesc
}

func collectRegression(ch chan<- prometheus.Metric, target string, rs []probe.RegressionStatus) {
	for _, r := range rs {
		ch <- prometheus.MustNewConstMetric(regressionDesc, prometheus.GaugeValue, boolValue(r.Regressed), target, r.Class, r.Metric)
		if r.Metric == probe.RegressionErrors {
			ch <- prometheus.MustNewConstMetric(regressionErrorRatioDesc, prometheus.GaugeValue, r.BaselineRatio, target, r.Class, "baseline")
			ch <- prometheus.MustNewConstMetric(regressionErrorRatioDesc, prometheus.GaugeValue, r.CurrentRatio, target, r.Class, "current")
		} else {
			ch <- prometheus.MustNewConstMetric(regressionEffectDesc, prometheus.GaugeValue, r.MedianRatio, target, r.Class, r.Metric, "median")
			ch <- prometheus.MustNewConstMetric(regressionEffectDesc, prometheus.GaugeValue, r.P99Ratio, target, r.Class, r.Metric, "p99")
		}
		ch <- prometheus.MustNewConstMetric(regressionSamplesDesc, prometheus.GaugeValue, float64(r.BaselineN), target, r.Class, r.Metric, "baseline")
		ch <- prometheus.MustNewConstMetric(regressionSamplesDesc, prometheus.GaugeValue, float64(r.CurrentN), target, r.Class, r.Metric, "current")
		ts := 0.0
		if !r.ChangePoint.IsZero() {
			ts = float64(r.ChangePoint.UnixNano()) / 1e9
		}
		ch <- prometheus.MustNewConstMetric(regressionChangeDesc, prometheus.GaugeValue, ts, target, r.Class, r.Metric)
	}
}
