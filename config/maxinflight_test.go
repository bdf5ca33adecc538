// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package config

import "testing"

// TestMaxInflightSet: a target says whether its file set max_inflight
// (also to the default's value, or through a merge key), so that a bench
// search raises only a default.
func TestMaxInflightSet(t *testing.T) {
	cfg, err := Load([]byte(`
workloads:
  w: {classes: [{name: c, prompt_tokens: 8, output_tokens: 8}]}
targets:
  - {name: unset, url: "http://127.0.0.1:1/v1", model: m, workload: w, arrival: {rate: 1}}
  - &set {name: set, url: "http://127.0.0.1:1/v1", model: m, workload: w, arrival: {rate: 1}, max_inflight: 64}
  - {<<: *set, name: merged}
`), "x.yml")
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]bool{"unset": false, "set": true, "merged": true} {
		tg := cfg.Target(name)
		if tg.MaxInflight != DefaultMaxInflight || tg.MaxInflightSet() != want {
			t.Errorf("%s: max_inflight %d, set %v; want %d, %v", name, tg.MaxInflight, tg.MaxInflightSet(), DefaultMaxInflight, want)
		}
	}
}
