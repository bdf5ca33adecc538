//go:build !linux

package e2e

import "os/exec"

// setParentDeathSignal is Linux-only; elsewhere t.Cleanup alone stops the
// started processes.
func setParentDeathSignal(*exec.Cmd) {}
