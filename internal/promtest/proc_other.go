// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

//go:build !linux

package promtest

import "os/exec"

// setParentDeathSignal is a no-op where the kernel offers no parent-death
// signal; Start's cleanup still stops the server when the test ends.
func setParentDeathSignal(*exec.Cmd) {}
