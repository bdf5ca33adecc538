// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

//go:build race

package sim

// raceEnabled is true under the race detector, which slows the engine
// several times over: its steps no longer keep to the timing model.
const raceEnabled = true
