// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBenchFindUsage: bad combinations and values of the search flags are
// one line "llmprobe: error: ..." on standard error and exit code 2,
// before any simulator or stage starts.
func TestBenchFindUsage(t *testing.T) {
	bin := binary(t)
	tests := []usageCase{
		{[]string{"--find=fastest"}, "fastest"},
		{[]string{"--find=capacity", "--stage=1"}, "--stage cannot be combined with --find or --levels"},
		{[]string{"--levels=0.5", "--stage=1"}, "--stage cannot be combined"},
		{[]string{"--levels=0.5"}, "--levels needs the capacity"},
		{[]string{"--find=slo", "--levels=0.5"}, "--levels needs the capacity"},
		{[]string{"--find=capacity", "--capacity=10"}, "--capacity and --find=capacity are exclusive"},
		{[]string{"--capacity=10", "--stage=1"}, "--capacity is only used by --levels and --find=slo"},
		{[]string{"--capacity=-1", "--levels=0.5"}, "--capacity must be a positive number"},
		{[]string{"--capacity=ten", "--levels=0.5"}, "ten"},
		{[]string{"--find=capacity", "--levels=0.7,lots"}, `--levels "0.7,lots"`},
		{[]string{"--find=capacity", "--levels=0,0.5"}, "each level must be a fraction"},
		{[]string{"--find=capacity", "--find.factor=1"}, "--find.factor must be greater than 1"},
		{[]string{"--find=capacity", "--find.min-gain=0"}, "--find.min-gain must be a share"},
		{[]string{"--find=slo", "--slo=tpot_p99=100ms", "--find.min-requests=0"}, "--find.min-requests must be at least 1"},
		{[]string{"--find=capacity", "--find.start-rate=0"}, "--find.start-rate must be a positive number"},
		{[]string{"--find=capacity", "--find.start-rate=1e9"}, "--find.start-rate 1e+09 is above the arrival cap of 100000 requests per second"},
		{[]string{"--capacity=1e9", "--levels=0.5"}, "--capacity 1e+09 is above the arrival cap of 100000 requests per second"},
		{[]string{"--stage=1e9:2s"}, `--stage "1e9:2s": rate 1e+09 is above the arrival cap of 100000 requests per second`},
		{[]string{"--stage=100001"}, `--stage "100001": rate 100001 is above the arrival cap`},
		{[]string{"--stage=1:1s", "--stage.grace=-1s"}, "--stage.grace must not be negative"},
		{[]string{"--find=capacity", "--find.min-window=1m", "--find.max-window=10s"}, "--find.min-window must be positive and at most --find.max-window"},
		{[]string{"--find=slo", "--slo=tpot_p99=100ms", "--find.precision=1.5"}, "--find.precision must be a share"},
		{[]string{"--find=capacity", "--find.max-stages=1"}, "--find.max-stages must be at least 2"},
		{[]string{"--find=slo", "--slo=tpot_p99=soon"}, "--slo"},
		// The demo's sim-completions has no slo: block: --find=slo without --slo has nothing to judge by.
		{[]string{"--find=slo", "--target=sim-completions"}, "--find=slo needs an SLO"},
		// The demo has several targets: a search takes one.
		{[]string{"--find=capacity"}, "exactly one target"},
	}
	expectBenchUsageErrors(t, bin, tests)
}

// TestBenchLevels: --capacity with --levels parses and runs one stage per
// level against the simulator, printed and written like ordinary stages
// with the find section.
func TestBenchLevels(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two stages against a simulator")
	}
	bin := binary(t)
	out := filepath.Join(t.TempDir(), "report.json")
	r := runBinary(t, bin, nil, "bench", "--sim", "--target=sim-chat", "--capacity=20", "--levels=0.25,0.5",
		"--find.min-requests=5", "--find.min-window=1s", "--warmup=0s", "--output="+out, "--log.level=error")
	if r.code != 0 {
		t.Fatalf("exit code %d\n%s", r.code, r.stderr)
	}
	for _, want := range []string{"find levels:", "capacity: 20 req/s (given)", "level 0.25 × capacity = 5 req/s requested: stage 1, achieved ", "level 0.5 × capacity = 10 req/s requested: stage 2, achieved "} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
		}
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Stages []struct {
			RequestedRate float64 `json:"requested_rate"`
		} `json:"stages"`
		Find struct {
			Levels []struct {
				Fraction float64 `json:"fraction"`
				Stage    int     `json:"stage"`
			} `json:"levels"`
		} `json:"find"`
	}
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Stages) != 2 || rep.Stages[0].RequestedRate != 5 || rep.Stages[1].RequestedRate != 10 || len(rep.Find.Levels) != 2 {
		t.Errorf("report: %+v", rep)
	}
}
