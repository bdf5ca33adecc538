// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package proctest

import (
	"os"
	"os/exec"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
)

// setParentDeathSignal has the kernel kill a started process when the test
// binary dies (a test timeout, a crash), so no child is left running.
func setParentDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// peakRSS is an ended process' peak resident set, in bytes.
func peakRSS(ps *os.ProcessState) int64 {
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
		return ru.Maxrss << 10 // KiB
	}
	return 0
}

// livePeakRSS is a running process' peak resident set so far (VmHWM), in
// bytes; 0 when it cannot be read.
func livePeakRSS(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}

// ResetPeakRSS lowers the test process' peak resident set to what it
// holds now, after returning its free memory to the system. A child's
// peak RSS counts the test process' peak at the time the child was
// started (the kernel carries the parent's high-water mark across the
// child's exec: Go starts children sharing its memory until then), so a
// test that reads a child's PeakRSS calls this just before starting it.
// It returns that floor: the test process' peak after the reset (the
// race detector's shadow memory keeps it high), 0 when unknown.
func ResetPeakRSS() int64 {
	debug.FreeOSMemory()
	_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) // Linux 4.0: reset the high-water mark
	return livePeakRSS(os.Getpid())
}
