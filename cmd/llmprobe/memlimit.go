// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"math"
	"os"
	"runtime/debug"

	"github.com/alecthomas/kingpin/v2"

	"github.com/llmprobe/llmprobe/probe"
	"github.com/llmprobe/llmprobe/probe/harness"
)

// The soft memory limit. The binary runs with GOGC=400 (probe.GCPercent):
// the heap may grow to five times what is live between collections, which
// is cheap at a few MiB of live heap but lets a burst of large answers
// take a container past its memory limit before the collector runs. With
// a soft limit the collector runs harder as the heap nears it instead.
// The limit is, in order: GOMEMLIMIT when the environment sets it (the
// runtime has applied it already; it wins), else
// --runtime.gomemlimit.ratio (default 0.9, as Prometheus'
// --auto-gomemlimit.ratio) of the cgroup's memory limit (memory.max, or
// v1's memory.limit_in_bytes, the least of the cgroup and its parents),
// else none. It is read here rather than through automemlimit: the
// cgroup files are a few lines to read (harness.CgroupMemoryLimit, next to
// the CPU-throttling reader that already finds the cgroup), and no new
// dependency is needed. The answer budget (probe/budget.go) becomes a
// quarter of the limit when that is below its default.

// memoryLimit is the soft memory limit the process runs with.
type memoryLimit struct {
	bytes  int64  // 0: none
	source string // "GOMEMLIMIT" or "cgroup"
}

// memLimit is what Main set, for the daemon to log.
var memLimit memoryLimit

// addMemoryLimitFlag registers --runtime.gomemlimit.ratio.
func addMemoryLimitFlag(app *kingpin.Application) *float64 {
	return app.Flag("runtime.gomemlimit.ratio",
		"Soft memory limit (GOMEMLIMIT) as a share of the cgroup's memory limit, in (0, 1]; 0 sets none. GOMEMLIMIT in the environment wins. Without a cgroup limit there is none.").
		Default("0.9").Float64()
}

// chooseMemoryLimit decides the limit from the ratio, whether GOMEMLIMIT
// is set (and the limit the runtime took from it) and the cgroup's limit.
func chooseMemoryLimit(ratio float64, envSet bool, runtimeLimit int64, cgroup func() (int64, bool)) (memoryLimit, error) {
	if math.IsNaN(ratio) || ratio < 0 || ratio > 1 {
		return memoryLimit{}, fmt.Errorf("--runtime.gomemlimit.ratio must be from 0 to 1, got %v", ratio)
	}
	switch {
	case envSet:
		if runtimeLimit == math.MaxInt64 { // GOMEMLIMIT=off
			return memoryLimit{}, nil
		}
		return memoryLimit{bytes: runtimeLimit, source: "GOMEMLIMIT"}, nil
	case ratio == 0:
		return memoryLimit{}, nil
	}
	if n, ok := cgroup(); ok {
		return memoryLimit{bytes: max(int64(ratio*float64(n)), 1), source: "cgroup"}, nil
	}
	return memoryLimit{}, nil
}

// applyMemoryLimit sets the soft memory limit and sizes the answer
// budget from it.
func applyMemoryLimit(ratio float64) error {
	l, err := chooseMemoryLimit(ratio, os.Getenv("GOMEMLIMIT") != "", debug.SetMemoryLimit(-1), harness.CgroupMemoryLimit)
	if err != nil {
		return err
	}
	memLimit = l
	if l.bytes > 0 {
		if l.source != "GOMEMLIMIT" {
			debug.SetMemoryLimit(l.bytes)
		}
		probe.SetAnswerBudget(min(probe.DefaultAnswerBudget, l.bytes/4))
	}
	return nil
}
