// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package bench_test

import (
	"fmt"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/llmprobe/llmprobe/bench"
)

// TestOneDropCount: a stage whose target does not absorb its load
// (max_inflight drops most arrivals) says how many were dropped once:
// the verdict's reason gives the stage's own counts, those of the table
// and the JSON, not those of the verdict's sliding window.
func TestOneDropCount(t *testing.T) {
	if testing.Short() {
		t.Skip("a stage against a simulator")
	}
	cfg := serverConfig(t, fmt.Sprintf(`  - {name: sim, url: %s, model: sim-model, workload: w, arrival: {process: poisson, rate: 1}, max_inflight: 4, tokenize: "off", extra_body: {ignore_eos: true}}
`, listenSim(t)))
	run := runFigures(t, cfg, bench.Options{Stages: []bench.Stage{{Rate: 120, Duration: 3 * time.Second}}, Warmup: 0, Grace: 10 * time.Second})
	s := run.rep.Stages[0]
	overload, total := s.Dropped["inflight_limit"], dropped(s)
	re := regexp.MustCompile(`target overloaded: (\d+) of (\d+) scheduled requests`)
	m := re.FindStringSubmatch(run.text)
	if m == nil {
		t.Fatalf("no overload verdict in the text (dropped %v of %d scheduled)", s.Dropped, s.Scheduled)
	}
	if m[1] != strconv.Itoa(overload) || m[2] != strconv.Itoa(s.Scheduled) {
		t.Errorf("the verdict says %s of %s scheduled were dropped; the stage dropped %d of %d", m[1], m[2], overload, s.Scheduled)
	}
	row := regexp.MustCompile(`(?m)^\s+1\s+sim\s+\S+\s+\S+\s+(\d+)\s+(\d+)\s`).FindStringSubmatch(run.text)
	if row == nil || row[2] != strconv.Itoa(total) || row[1] != strconv.Itoa(s.Sent) {
		t.Errorf("the table's row %q; sent %d, dropped %d", row, s.Sent, total)
	}
	if s.Scheduled != s.Sent+total {
		t.Errorf("scheduled %d, sent %d + dropped %d", s.Scheduled, s.Sent, total)
	}
}
