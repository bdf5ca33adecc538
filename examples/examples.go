// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

// Package examples holds the shipped configuration files: the demo that
// `llmprobe run --demo` embeds and the workload catalog.
//
// It holds data only and imports no llmprobe package; its tests run the
// files through config, the probe and the simulator.
package examples

import _ "embed"

// Demo is the embedded demo configuration. Its target URLs are the
// placeholder DemoURLPlaceholder, replaced by the simulator's base URL.
//
//go:embed demo.yml
var Demo []byte

// DemoURLPlaceholder stands for the built-in simulator's base URL in Demo.
const DemoURLPlaceholder = "${SIM_URL}"
