// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package config

import (
	"testing"
	"time"

	"github.com/prometheus/common/model"
)

// A class's regression block refines its target's field by field; what
// neither sets takes the defaults, and enabled: false on either layer
// turns detection off (the class's word wins).
func TestRegressionResolves(t *testing.T) {
	cfg, err := Load([]byte(`
workloads:
  w:
    classes:
      - {name: plain, prompt_tokens: 10, output_tokens: 5}
      - {name: strict, prompt_tokens: 10, output_tokens: 5, regression: {min_effect: {median: 0.1}, min_samples: 50}}
      - {name: off, prompt_tokens: 10, output_tokens: 5, regression: {enabled: false}}
targets:
  - name: a
    url: http://127.0.0.1:8000/v1
    model: m
    workload: w
    arrival: {rate: 1}
    regression: {min_effect: {p99: 1, errors: 0.05}, accept_after: 48h}
  - name: b
    url: http://127.0.0.1:8000/v1
    model: m
    workload: w
    arrival: {rate: 1}
    regression: {enabled: false}
`), "regression.yml")
	if err != nil {
		t.Fatal(err)
	}
	w := cfg.Workloads["w"]
	a, b := cfg.Targets[0], cfg.Targets[1]
	for _, tc := range []struct {
		t          *Target
		class      int
		on         bool
		median     float64
		p99        float64
		errors     float64
		minSamples int
		accept     time.Duration
	}{
		{a, 0, true, DefaultRegressionMedian, 1, 0.05, DefaultRegressionMinSamples, 48 * time.Hour},
		{a, 1, true, 0.1, 1, 0.05, 50, 48 * time.Hour},
		{a, 2, false, DefaultRegressionMedian, 1, 0.05, DefaultRegressionMinSamples, 48 * time.Hour},
		{b, 0, false, DefaultRegressionMedian, DefaultRegressionP99, DefaultRegressionErrors, DefaultRegressionMinSamples, time.Duration(DefaultRegressionAcceptAfter)},
	} {
		cl := w.Classes[tc.class]
		r := cfg.Regression(tc.t, cl)
		got := []any{r.On(), r.MinEffect.Median, r.MinEffect.P99, r.MinEffect.Errors, r.MinSamples, r.AcceptAfter}
		want := []any{tc.on, tc.median, tc.p99, tc.errors, tc.minSamples, model.Duration(tc.accept)}
		for i := range got {
			if got[i] != want[i] {
				t.Errorf("%s/%s: field %d = %v, want %v", tc.t.Name, cl.Name, i, got[i], want[i])
			}
		}
	}
}
