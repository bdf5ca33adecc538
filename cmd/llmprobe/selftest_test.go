// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/llmprobe/llmprobe/bench/report"
)

// TestSelftestSearchesDown: when the start rate is not honest, the
// search halves the rate until one is, then bisects between it and the
// lowest bad one; when none down to --min-rate is, it reports no good
// rate (the search is exercised on a host whose rates above 30 req/s
// are not honest).
func TestSelftestSearchesDown(t *testing.T) {
	run := func(o selftestOptions, limit float64) (rates []float64, good, bad *selftestStep) {
		t.Helper()
		measure := func(rate float64) (selftestStep, error) {
			return selftestStep{rate: rate, stage: &report.StageReport{}, good: rate <= limit, because: "too fast"}, nil
		}
		good, bad, err := searchCeiling(context.Background(), &o, measure, func(st selftestStep) { rates = append(rates, st.rate) })
		if err != nil {
			t.Fatal(err)
		}
		return rates, good, bad
	}
	rates, good, bad := run(selftestOptions{startRate: 250, minRate: 1, maxRate: 20000, bisections: 3}, 30)
	if want := []float64{250, 125, 62.5, 31.25, 15.625, 22, 26, 29}; !slices.Equal(rates, want) {
		t.Errorf("rates measured %v, want %v", rates, want)
	}
	if good == nil || good.rate != 29 || bad == nil || bad.rate != 31.25 {
		t.Errorf("good %+v, bad %+v; want 29 and 31.25", good, bad)
	}

	// Upward, as before: doubling, then bisecting.
	rates, good, _ = run(selftestOptions{startRate: 20, minRate: 1, maxRate: 20000, bisections: 1}, 50)
	if want := []float64{20, 40, 80, 57}; !slices.Equal(rates, want) || good.rate != 40 {
		t.Errorf("rates measured %v (good %v), want %v", rates, good.rate, want)
	}

	// Nothing holds: down to the floor, which is measured itself.
	rates, good, bad = run(selftestOptions{startRate: 250, minRate: 5, maxRate: 20000, bisections: 3}, 0)
	if want := []float64{250, 125, 62.5, 31.25, 15.625, 7.8125, 5}; !slices.Equal(rates, want) || good != nil || bad.rate != 5 {
		t.Errorf("rates measured %v (good %v, bad %v), want %v and no good rate", rates, good, bad, want)
	}

	// Low rates bisect to a tenth, and stop when no rate is left between.
	rates, good, _ = run(selftestOptions{startRate: 4, minRate: 1, maxRate: 8, bisections: 5}, 1.3)
	if want := []float64{4, 2, 1, 1.4, 1.2, 1.3}; !slices.Equal(rates, want) || good.rate != 1.3 {
		t.Errorf("rates measured %v (good %v), want %v", rates, good.rate, want)
	}
}

// TestSelftestAdviceFailingRequests: when the requests fail at the
// higher rates and the last, lowest step planned no arrival at all (2 s
// at 1 req/s plans none one time in seven), the advice is still to check
// the request shape, not to free the host's CPU (TestSelftestNothingHolds
// failed so under load).
func TestSelftestAdviceFailingRequests(t *testing.T) {
	failed := selftestStep{rate: 4, stage: &report.StageReport{}, failed: true, because: "8 of 8 requests failed (http_4xx 8)"}
	empty := selftestStep{rate: 1, stage: &report.StageReport{}, because: "no request was sent"}
	got := selftestAdvice(empty, []selftestStep{failed, {rate: 2, stage: &report.StageReport{}, failed: true, because: "3 of 3 requests failed (http_4xx 3)"}, empty})
	if !strings.Contains(got, "check the request shape") || !strings.Contains(got, "8 of 8 requests failed") {
		t.Errorf("advice = %q, want the failing requests of the first step named", got)
	}
	if got := selftestAdvice(empty, []selftestStep{empty}); !strings.Contains(got, "The harness cannot keep its timing") {
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
