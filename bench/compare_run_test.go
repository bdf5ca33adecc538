// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package bench_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llmprobe/llmprobe/bench/report"
)

// TestCompareRealRun: a real run's JSON report keeps at most MaxSamples
// samples per metric (as many as the quantiles rest on below that), reads
// back, and compared with itself shows no real change; a file that is
// not a report is an error naming it.
func TestCompareRealRun(t *testing.T) {
	sw := runSweep(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "run.json")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := sw.rep.WriteJSON(f); err != nil {
		t.Fatal(err)
	}
	f.Close()
	rep, err := report.ReadReport(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range rep.Stages {
		if s.Samples == nil || len(s.Samples.TTFT) != s.TTFT.Count || len(s.Samples.TPOT) != s.TPOT.Count || len(s.Samples.E2E) != s.E2E.Count {
			t.Fatalf("stage %d: samples %+v for counts %d %d %d", s.Stage, s.Samples, s.TTFT.Count, s.TPOT.Count, s.E2E.Count)
		}
	}
	cs, unmatched := report.Compare(rep, rep)
	if len(cs) != 6*len(rep.Stages) || len(unmatched) != 0 {
		t.Fatalf("%d comparisons, unmatched %v", len(cs), unmatched)
	}
	trusted := map[string]bool{}
	for _, s := range rep.Stages {
		// Named with the requested rate, then the achieved ones.
		trusted[fmt.Sprintf("%d %s @%g/s (sent %.3g → %.3g/s)", s.Stage, s.Target, s.RequestedRate, s.AchievedRate, s.AchievedRate)] = s.Trusted
	}
	for _, c := range cs {
		want := report.VerdictNoChange
		if ok, found := trusted[c.Stage]; !found {
			t.Errorf("stage %q is none of the report's", c.Stage)
		} else if !ok { // a busy machine: the stage gets no verdict
			want = report.VerdictUntrusted
		}
		if c.Verdict != want || c.Delta != 0 {
			t.Errorf("%s %s against itself: %s, Δ %v", c.Stage, c.Metric, c.Verdict, c.Delta)
		}
	}
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte("{\"stages\": 3}"), 0o644)
	if _, err := report.ReadReport(bad); err == nil || !strings.Contains(err.Error(), bad) || strings.Contains(err.Error(), "\n") {
		t.Errorf("bad file: %v", err)
	}
	empty := filepath.Join(dir, "empty.json")
	os.WriteFile(empty, []byte("{}"), 0o644)
	if _, err := report.ReadReport(empty); err == nil {
		t.Error("a report without stages was read")
	}
}
