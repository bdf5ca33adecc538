// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package probe

import (
	"testing"

	"github.com/llmprobe/llmprobe/config"
)

// Whatever regression settings check-config accepts, the detectors take:
// regression.NewDetector panics on options it refuses, and a valid
// configuration must never take the daemon down.
func TestRegressionSettingsAcceptedByConfigAreValidOptions(t *testing.T) {
	for _, block := range []string{
		`{}`,
		`{min_samples: 5, min_span: 1s, accept_after: 1h, min_effect: {median: 0.001, p99: 0.001, errors: 0.001}}`,
		`{min_samples: 2048, min_span: 1h, accept_after: 8760h, min_effect: {median: 10, p99: 100, errors: 0.999}}`,
	} {
		cfg, err := config.Load([]byte(`
workloads:
  w: {classes: [{name: c, prompt_tokens: 10, output_tokens: 5, regression: `+block+`}]}
targets:
  - {name: t, url: "http://127.0.0.1:1/v1", model: m, workload: w, arrival: {rate: 1}}
`), "regression.yml")
		if err != nil {
			t.Fatalf("%s: %v", block, err)
		}
		tg := cfg.Targets[0]
		if err := cfg.Regression(tg, cfg.Workloads["w"].Classes[0]).DetectorOptions().Validate(); err != nil {
			t.Errorf("%s: check-config accepts it, the detector refuses it: %v", block, err)
		}
	}
	// One past the detector's bound is refused by check-config.
	_, err := config.Load([]byte(`
workloads:
  w: {classes: [{name: c, prompt_tokens: 10, output_tokens: 5, regression: {min_samples: 2049}}]}
targets:
  - {name: t, url: "http://127.0.0.1:1/v1", model: m, workload: w, arrival: {rate: 1}}
`), "regression.yml")
	if err == nil {
		t.Error("min_samples 2049 (above half the detector's window) was accepted")
	}
}
