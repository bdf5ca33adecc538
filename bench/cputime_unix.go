// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

//go:build unix

package bench

import (
	"syscall"
	"time"
)

// cpuTime is this process' user+system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
