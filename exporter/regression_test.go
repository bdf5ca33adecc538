// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package exporter

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// The detector's decisions become the series the alerts read: 1 while a
// regression holds, the effect and the evidence on each side, the change
// point as a Unix time (0 while none is held), error ratios for errors
// only, effect ratios for latency only.
func TestRegressionSeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewStatusCollector(testStatus))
	want := `
# HELP llmprobe_regression_change_timestamp_seconds When the detector estimates the distribution changed (the change point of the regression it holds), as a Unix time; 0 while it holds none.
# TYPE llmprobe_regression_change_timestamp_seconds gauge
llmprobe_regression_change_timestamp_seconds{class="chat",metric="e2e",target="alpha"} 0
llmprobe_regression_change_timestamp_seconds{class="chat",metric="errors",target="alpha"} 0
llmprobe_regression_change_timestamp_seconds{class="chat",metric="tpot",target="alpha"} 0
llmprobe_regression_change_timestamp_seconds{class="chat",metric="ttft",target="alpha"} 1.7000003e+09
# HELP llmprobe_regression_error_ratio Error ratio (outcome other than success) of the baseline and of the current window the error detector compares; NaN while a side is empty.
# TYPE llmprobe_regression_error_ratio gauge
llmprobe_regression_error_ratio{class="chat",target="alpha",window="baseline"} 0.01
llmprobe_regression_error_ratio{class="chat",target="alpha",window="current"} 0.0125
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"llmprobe_regression_change_timestamp_seconds", "llmprobe_regression_error_ratio"); err != nil {
		t.Error(err)
	}
	mfs := gather(t, reg)
	value := func(name string, labels map[string]string) (float64, bool) {
		for _, m := range mfs[name].GetMetric() {
			ok := true
			for _, lp := range m.GetLabel() {
				if v, set := labels[lp.GetName()]; set && v != lp.GetValue() {
					ok = false
				}
			}
			if ok {
				return m.GetGauge().GetValue(), true
			}
		}
		return 0, false
	}
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"llmprobe_regression", map[string]string{"metric": "ttft"}, 1},
		{"llmprobe_regression", map[string]string{"metric": "tpot"}, 0},
		{"llmprobe_regression", map[string]string{"metric": "errors"}, 0},
		{"llmprobe_regression_effect_ratio", map[string]string{"metric": "ttft", "statistic": "median"}, 1.45},
		{"llmprobe_regression_effect_ratio", map[string]string{"metric": "ttft", "statistic": "p99"}, 1.3},
		{"llmprobe_regression_samples", map[string]string{"metric": "ttft", "window": "baseline"}, 900},
		{"llmprobe_regression_samples", map[string]string{"metric": "ttft", "window": "current"}, 240},
	} {
		got, ok := value(c.name, c.labels)
		if !ok || got != c.want {
			t.Errorf("%s%v = %v (found %v), want %v", c.name, c.labels, got, ok, c.want)
		}
	}
	if _, ok := value("llmprobe_regression_effect_ratio", map[string]string{"metric": "errors"}); ok {
		t.Error("llmprobe_regression_effect_ratio has an errors series; errors have error ratios, not latency effects")
	}
	if n := len(mfs["llmprobe_regression"].GetMetric()); n != 4 {
		t.Errorf("llmprobe_regression has %d series, want 4 (one per metric of alpha's one judged class; beta has none)", n)
	}
}
