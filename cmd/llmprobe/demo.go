// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"github.com/llmprobe/llmprobe/config"
	"github.com/llmprobe/llmprobe/examples"
)

// demoName names the embedded demo configuration in errors.
const demoName = "demo.yml (embedded)"

// loadDemo loads the embedded demo configuration (examples/demo.yml) with
// every target pointed at the simulator whose base URL is simBase.
//
// The file itself is a complete configuration: its targets probe
// `llmprobe sim` at its default address, so `llmprobe check-config
// examples/demo.yml` passes and the file runs as is beside `llmprobe
// sim`. Demo mode (run --demo, bench --sim) starts the simulator on a
// free loopback port instead, and moves the targets there. (The demo's
// URLs used to be a ${SIM_URL} placeholder, which made the shipped file
// fail check-config.)
func loadDemo(simBase string) (*config.Config, error) {
	cfg, err := config.Load(examples.Demo, demoName)
	if err != nil {
		return nil, err
	}
	pointAtSim(cfg, simBase)
	return cfg, nil
}

// pointAtSim points every target of cfg at the simulator at simBase.
func pointAtSim(cfg *config.Config, simBase string) {
	for _, t := range cfg.Targets {
		t.URL = simBase + "/v1"
	}
}
