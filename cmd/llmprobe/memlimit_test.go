// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"math"
	"strings"
	"testing"
)

// TestChooseMemoryLimit: GOMEMLIMIT wins; else the ratio of the cgroup's
// limit; no cgroup limit or ratio 0, none.
func TestChooseMemoryLimit(t *testing.T) {
	cgroup := func(n int64, ok bool) func() (int64, bool) { return func() (int64, bool) { return n, ok } }
	for _, tc := range []struct {
		name         string
		ratio        float64
		envSet       bool
		runtimeLimit int64
		cgroup       func() (int64, bool)
		want         memoryLimit
		err          string
	}{
		{name: "cgroup", ratio: 0.9, runtimeLimit: math.MaxInt64, cgroup: cgroup(1<<30, true), want: memoryLimit{966367641, "cgroup"}},
		{name: "no cgroup limit", ratio: 0.9, runtimeLimit: math.MaxInt64, cgroup: cgroup(0, false)},
		{name: "disabled", ratio: 0, runtimeLimit: math.MaxInt64, cgroup: cgroup(1<<30, true)},
		{name: "GOMEMLIMIT wins", ratio: 0.9, envSet: true, runtimeLimit: 100 << 20, cgroup: cgroup(1<<30, true), want: memoryLimit{100 << 20, "GOMEMLIMIT"}},
		{name: "GOMEMLIMIT=off", ratio: 0.9, envSet: true, runtimeLimit: math.MaxInt64, cgroup: cgroup(1<<30, true)},
		{name: "ratio above 1", ratio: 1.5, cgroup: cgroup(1<<30, true), err: "from 0 to 1, got 1.5"},
		{name: "negative ratio", ratio: -0.1, cgroup: cgroup(1<<30, true), err: "from 0 to 1"},
	} {
		got, err := chooseMemoryLimit(tc.ratio, tc.envSet, tc.runtimeLimit, tc.cgroup)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: err %v, want %q", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: %+v, %v; want %+v", tc.name, got, err, tc.want)
		}
	}
}

// TestMemoryLimitFlag: a ratio out of range is a bad command line.
func TestMemoryLimitFlag(t *testing.T) {
	r := runBinary(t, binary(t), nil, "--runtime.gomemlimit.ratio=2", "check-config", "x.yml")
	if r.code != 2 || !strings.Contains(r.stderr, "llmprobe: error: --runtime.gomemlimit.ratio must be from 0 to 1, got 2") {
		t.Errorf("exit code %d, stderr:\n%s", r.code, r.stderr)
	}
}
