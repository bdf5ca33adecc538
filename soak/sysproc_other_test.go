// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

//go:build !linux

package soak

import "os/exec"

// setParentDeathSignal is Linux-only; elsewhere a crashed test run may
// leave its children running until they are stopped by hand.
func setParentDeathSignal(*exec.Cmd) {}
