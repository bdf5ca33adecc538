// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

//go:build !linux

package proctest

import (
	"os"
	"os/exec"
)

// setParentDeathSignal is Linux-only; elsewhere Start's cleanup alone stops
// the started processes, and a crashed test run may leave them running.
func setParentDeathSignal(*exec.Cmd) {}

// peakRSS and livePeakRSS are Linux-only: 0 elsewhere.
func peakRSS(*os.ProcessState) int64 { return 0 }

func livePeakRSS(int) int64 { return 0 }

// ResetPeakRSS does nothing where PeakRSS is not measured.
func ResetPeakRSS() int64 { return 0 }
