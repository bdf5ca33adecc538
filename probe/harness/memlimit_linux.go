// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package harness

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// CgroupMemoryLimit returns the memory limit of the process' cgroup: the
// least memory.max (cgroup v2) or memory.limit_in_bytes (v1) of its
// cgroup and of the parents it can see; ok is false when none is set
// (or the process is in no cgroup it can read).
func CgroupMemoryLimit() (limit int64, ok bool) {
	return cgroupMemoryLimit("/proc/self/cgroup", "/proc/self/mountinfo")
}

func cgroupMemoryLimit(cgroupFile, mountinfoFile string) (limit int64, ok bool) {
	cg := findCgroup(cgroupFile, mountinfoFile, "memory")
	for _, h := range []struct{ dir, mount, file string }{
		{cg.v2, cg.v2Mount, "memory.max"},
		{cg.v1, cg.v1Mount, "memory.limit_in_bytes"},
	} {
		if h.dir == "" {
			continue
		}
		for dir := h.dir; ; dir = filepath.Dir(dir) {
			if n, found := readMemoryLimit(filepath.Join(dir, h.file)); found && (!ok || n < limit) {
				limit, ok = n, true
			}
			if dir == h.mount || !strings.HasPrefix(dir, h.mount) || dir == filepath.Dir(dir) {
				break
			}
		}
	}
	return limit, ok
}

// readMemoryLimit reads a limit file: a byte count, or "max" (v2) or a
// value near 2^63 (v1's "unlimited") for none.
func readMemoryLimit(path string) (int64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || n <= 0 || n >= 1<<62 {
		return 0, false
	}
	return n, true
}
