// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package harness

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// linuxReader reads the run-queue wait of the process' threads and its
// cgroup's CPU throttling.
type linuxReader struct {
	// Per thread, the last schedstat reading, so that a thread that exits
	// does not make the sums go back.
	threads          map[int]schedstat
	wait, timeslices uint64 // cumulative, over threads past and present
	noSchedstat      bool

	cpuStat string // the cgroup's cpu.stat, "" when none was found
	v2      bool
}

type schedstat struct{ wait, timeslices uint64 }

func newOSReader() osReader {
	r := &linuxReader{threads: map[int]schedstat{}}
	r.cpuStat, r.v2 = findCPUStat("/proc/self/cgroup", "/proc/self/mountinfo")
	return r
}

func (r *linuxReader) read(s *harnessSample) {
	r.readSchedstat()
	if !r.noSchedstat {
		s.runqueueWait, s.timeslices, s.hasSchedstat = time.Duration(r.wait), r.timeslices, true
	}
	if r.cpuStat != "" {
		if b, err := os.ReadFile(r.cpuStat); err == nil {
			s.periods, s.throttledPeriods, s.throttled, s.hasCgroup = parseCPUStat(b, r.v2)
		}
	}
}

// readSchedstat adds every thread's new run-queue wait and timeslices.
// /proc/<pid>/task/<tid>/schedstat holds "run_ns wait_ns timeslices".
func (r *linuxReader) readSchedstat() {
	if r.noSchedstat {
		return
	}
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		r.noSchedstat = true
		return
	}
	seen := make(map[int]bool, len(ents))
	found := false
	for _, e := range ents {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/self/task/" + e.Name() + "/schedstat")
		if err != nil {
			continue
		}
		cur, ok := parseSchedstat(b)
		if !ok {
			continue
		}
		found = true
		seen[tid] = true
		prev := r.threads[tid]
		r.wait += sub(cur.wait, prev.wait)
		r.timeslices += sub(cur.timeslices, prev.timeslices)
		r.threads[tid] = cur
	}
	for tid := range r.threads {
		if !seen[tid] {
			delete(r.threads, tid)
		}
	}
	if !found {
		r.noSchedstat = true
	}
}

func parseSchedstat(b []byte) (schedstat, bool) {
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return schedstat{}, false
	}
	wait, err1 := strconv.ParseUint(f[1], 10, 64)
	slices, err2 := strconv.ParseUint(f[2], 10, 64)
	if err1 != nil || err2 != nil {
		return schedstat{}, false
	}
	return schedstat{wait: wait, timeslices: slices}, true
}

// parseCPUStat reads a cgroup cpu.stat: v2 has throttled_usec, v1
// throttled_time (ns); both have nr_periods and nr_throttled.
func parseCPUStat(b []byte, v2 bool) (periods, throttledPeriods uint64, throttled time.Duration, ok bool) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	var seen int
	for sc.Scan() {
		k, v, found := strings.Cut(sc.Text(), " ")
		if !found {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		if err != nil {
			continue
		}
		switch k {
		case "nr_periods":
			periods, seen = n, seen|1
		case "nr_throttled":
			throttledPeriods, seen = n, seen|2
		case "throttled_usec":
			if v2 {
				throttled, seen = time.Duration(n)*time.Microsecond, seen|4
			}
		case "throttled_time":
			if !v2 {
				throttled, seen = time.Duration(n), seen|4
			}
		}
	}
	return periods, throttledPeriods, throttled, seen == 7
}

// findCPUStat locates the cpu.stat of the process' cgroup: cgroup v2 (the
// "0::" line, under a cgroup2 mount) or v1 (the line naming the cpu
// controller, under the mount with that controller). It returns "" when
// neither exists or the cgroup has no CPU controller.
func findCPUStat(cgroupFile, mountinfoFile string) (path string, v2 bool) {
	cg := findCgroup(cgroupFile, mountinfoFile, "cpu")
	if cg.v1 != "" {
		if p := filepath.Join(cg.v1, "cpu.stat"); fileExists(p) {
			return p, false
		}
	}
	if cg.v2 != "" {
		if p := filepath.Join(cg.v2, "cpu.stat"); fileExists(p) {
			return p, true
		}
	}
	return "", false
}

// cgroupDirs are the directories of the process' cgroup for a
// controller: v1 (under the mount with that controller) and v2 (under the
// cgroup2 mount), "" when absent, each with the mount point it lies under
// (the top of what the process can see of the hierarchy).
type cgroupDirs struct {
	v1, v1Mount string
	v2, v2Mount string
}

// findCgroup reads /proc/self/cgroup and /proc/self/mountinfo (or the
// files given) for the cgroup directories of controller. A mount whose
// root is not "/" (a container without a cgroup namespace sees its own
// cgroup mounted there) has that root taken off the cgroup's path.
func findCgroup(cgroupFile, mountinfoFile, controller string) cgroupDirs {
	var out cgroupDirs
	cg, err := os.ReadFile(cgroupFile)
	if err != nil {
		return out
	}
	mi, err := os.ReadFile(mountinfoFile)
	if err != nil {
		return out
	}
	var v1Path, v2Path string
	for _, line := range strings.Split(string(cg), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case parts[0] == "0" && parts[1] == "":
			v2Path = parts[2]
		case hasController(parts[1], controller):
			v1Path = parts[2]
		}
	}
	var v1Root, v2Root string
	for _, line := range strings.Split(string(mi), "\n") {
		// ID parent major:minor root mountpoint options ... - fstype source superoptions
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		f, g := strings.Fields(pre), strings.Fields(post)
		if len(f) < 5 || len(g) < 1 {
			continue
		}
		switch {
		case g[0] == "cgroup2" && out.v2Mount == "":
			out.v2Mount, v2Root = unescapeMount(f[4]), unescapeMount(f[3])
		case g[0] == "cgroup" && len(g) >= 3 && hasController(g[2], controller) && out.v1Mount == "":
			out.v1Mount, v1Root = unescapeMount(f[4]), unescapeMount(f[3])
		}
	}
	under := func(mount, root, path string) string {
		if mount == "" || path == "" {
			return ""
		}
		if root != "/" && (path == root || strings.HasPrefix(path, root+"/")) {
			path = strings.TrimPrefix(path, root)
		}
		return filepath.Join(mount, path)
	}
	out.v1 = under(out.v1Mount, v1Root, v1Path)
	out.v2 = under(out.v2Mount, v2Root, v2Path)
	return out
}

// hasController reports whether a comma-separated list names c.
func hasController(list, c string) bool {
	for _, x := range strings.Split(list, ",") {
		if x == c {
			return true
		}
	}
	return false
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func fileExists(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}
