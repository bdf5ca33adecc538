// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package promtest

import (
	"os/exec"
	"syscall"
)

// setParentDeathSignal has the kernel kill the child when the test process
// dies, so an aborted test run leaves no Prometheus running.
func setParentDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
