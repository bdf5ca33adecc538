// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

//go:build !linux

package proctest

import "os/exec"

// setParentDeathSignal is Linux-only; elsewhere Start's cleanup alone stops
// the started processes, and a crashed test run may leave them running.
func setParentDeathSignal(*exec.Cmd) {}
