// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

//go:build !linux

package e2e

import "os/exec"

// setParentDeathSignal is Linux-only; elsewhere t.Cleanup alone stops the
// started processes.
func setParentDeathSignal(*exec.Cmd) {}
