// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package proctest

import (
	"os/exec"
	"syscall"
)

// setParentDeathSignal has the kernel kill a started process when the test
// binary dies (a test timeout, a crash), so no child is left running.
func setParentDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
