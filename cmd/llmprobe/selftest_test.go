// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llmprobe/llmprobe/bench"
	"github.com/llmprobe/llmprobe/bench/report"
)

// TestSelftestAdviceFailingRequests: when the requests fail at the
// higher rates and the last, lowest step planned no arrival at all (2 s
// at 1 req/s plans none one time in seven), the advice is still to check
// the request shape, not to free the host's CPU (TestSelftestNothingHolds
// failed so under load).
func TestSelftestAdviceFailingRequests(t *testing.T) {
	failed := bench.CeilingStep{Rate: 4, Stage: &report.StageReport{}, Failed: true, Because: "8 of 8 requests failed (http_4xx 8)"}
	empty := bench.CeilingStep{Rate: 1, Stage: &report.StageReport{}, Because: "no request was sent"}
	got := selftestAdvice(empty, []bench.CeilingStep{failed, {Rate: 2, Stage: &report.StageReport{}, Failed: true, Because: "3 of 3 requests failed (http_4xx 3)"}, empty})
	if !strings.Contains(got, "check the request shape") || !strings.Contains(got, "8 of 8 requests failed") {
		t.Errorf("advice = %q, want the failing requests of the first step named", got)
	}
	if got := selftestAdvice(empty, []bench.CeilingStep{empty}); !strings.Contains(got, "The harness cannot keep its timing") {
		t.Errorf("advice without failing requests = %q", got)
	}
}

// TestSelftestNothingHolds runs the binary with a request shape the
// simulator refuses (prompts beyond its 8192-token context): no rate is
// honest, so selftest searches down to --min-rate, exits 1 with what to
// do, and saves nothing (it exited 0 with nothing saved, and never tried
// a rate below --start-rate).
func TestSelftestNothingHolds(t *testing.T) {
	bin := binary(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "llmprobe.yml")
	out := filepath.Join(dir, "selftest.json")
	writeTestFile(t, cfg, `workloads:
  w: {classes: [{name: c, prompt_tokens: 9000, output_tokens: 4}]}
targets:
  - {name: t, url: "http://127.0.0.1:8000/v1", model: meta-llama/Llama-3.1-8B-Instruct, workload: w, arrival: {rate: 1}}
`)
	r := runBinary(t, bin, nil, "selftest", "--config.file="+cfg, "--step.duration=2s", "--start-rate=4", "--min-rate=1", "--output="+out)
	if r.code != 1 {
		t.Errorf("exit %d, want 1", r.code)
	}
	for _, want := range []string{"4 req/s", "2 req/s", "1 req/s", "Not even 1 req/s (--min-rate)"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
		}
	}
	for _, want := range []string{"llmprobe: error: selftest: no rate from 4 down to 1 req/s was delivered honestly, so nothing was saved to " + out, "requests failed", "check the request shape"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("a result was saved (%v)", err)
	}
}
