// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestBenchLoadUsage: bad values and combinations of --dataset,
// --max-requests, --num-prompts, --percentiles and --concurrency are one
// line "llmprobe: error: ..." and exit code 2, before any stage runs.
func TestBenchLoadUsage(t *testing.T) {
	bin := binary(t)
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.jsonl")
	if err := os.WriteFile(bad, []byte("{\"prompt\": \"a\"}\n{\"prompt\": 7}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.json")
	tests := []usageCase{
		{[]string{"--stage=1:1s", "--percentiles=0,50"}, "each percentile must be a number in (0, 100]"},
		{[]string{"--stage=1:1s", "--percentiles=50,90,50"}, "percentile 50 is given twice"},
		{[]string{"--stage=1:1s", "--percentiles=p50,p9x"}, "--percentiles"},
		{[]string{"--concurrency=0"}, "--concurrency \"0\": each level must be a whole number"},
		{[]string{"--concurrency=1,x"}, "--concurrency \"1,x\""},
		{[]string{"--target=sim-chat", "--find=capacity", "--concurrency=4"}, "--concurrency cannot be combined with --find"},
		{[]string{"--target=sim-chat", "--find=capacity", "--max-requests=10"}, "--max-requests (--num-prompts) cannot be combined with --find"},
		{[]string{"--stage=1:1s", "--max-requests=3", "--num-prompts=4"}, "--max-requests=3 and --num-prompts=4 disagree"},
		{[]string{"--stage=1:1s", "--max-requests=-1"}, "--max-requests must be positive"},
		{[]string{"--stage=1:1s", "--dataset.output-lengths=workload"}, "--dataset.output-lengths needs --dataset"},
		{[]string{"--stage=1:1s", "--dataset=x", "--dataset.output-lengths=answers"}, "answers"},
		{[]string{"--stage=1:1s", "--dataset=" + missing}, "--dataset: open " + missing},
		{[]string{"--stage=1:1s", "--dataset=" + bad}, "--dataset: " + bad + ":2: "},
		{[]string{}, "required flag(s) '--stage' not provided (or --concurrency"},
		{[]string{"--concurrency=2", "--plot=x.svg"}, "closed-loop levels (--concurrency) are not drawn"},
	}
	expectBenchUsageErrors(t, bin, tests)
}

// TestBenchDatasetNumPrompts: bench --dataset=ShareGPT --num-prompts=6
// --percentiles=50,90,99 against the simulator ends its 1-minute stage
// after 6 requests, prints p90 and the dataset, and writes both in the
// JSON report.
func TestBenchDatasetNumPrompts(t *testing.T) {
	bin := binary(t)
	out := filepath.Join(t.TempDir(), "r.json")
	fixture := filepath.Join(moduleRoot(t), "bench", "testdata", "sharegpt-small.json")
	began := time.Now()
	r := runBinary(t, bin, nil, "bench", "--sim", "--target=sim-chat", "--dataset="+fixture, "--num-prompts=6",
		"--stage=20:1m", "--warmup=0s", "--percentiles=50,90,99", "--output="+out, "--log.level=error")
	if r.code != 0 {
		t.Fatalf("exit code %d\n%s", r.code, r.stderr)
	}
	if took := time.Since(began); took > 40*time.Second {
		t.Errorf("the 1-minute stage with --num-prompts=6 took %v", took)
	}
	for _, want := range []string{"p90", "dataset: " + fixture + " (sharegpt): 12 prompts"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
		}
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Percentiles []float64 `json:"percentiles"`
		Stages      []struct {
			Sent int `json:"sent"`
			TTFT struct {
				Percentiles map[string]float64 `json:"percentiles"`
			} `json:"ttft_seconds"`
		} `json:"stages"`
		Dataset struct {
			Prompts int            `json:"prompts"`
			Sent    map[string]int `json:"sent"`
		} `json:"dataset"`
	}
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Stages) != 1 || rep.Stages[0].Sent < 6 || rep.Stages[0].Sent > 9 || rep.Dataset.Prompts != 12 || rep.Dataset.Sent["sim-chat"] != rep.Stages[0].Sent {
		t.Errorf("report: %+v", rep)
	}
	if _, ok := rep.Stages[0].TTFT.Percentiles["p90"]; !ok {
		t.Errorf("no TTFT p90 in the JSON: %+v", rep.Stages[0].TTFT)
	}
}

// TestBenchConcurrencySweep: --concurrency=1,2 runs two closed-loop
// levels of --stage.duration, printed and written as closed-loop, with no
// open-loop stage.
func TestBenchConcurrencySweep(t *testing.T) {
	bin := binary(t)
	dir := t.TempDir()
	md := filepath.Join(dir, "r.md")
	r := runBinary(t, bin, nil, "bench", "--sim", "--target=sim-chat", "--concurrency=1,2", "--stage.duration=2s",
		"--warmup=0s", "--output="+md, "--log.level=error")
	if r.code != 0 {
		t.Fatalf("exit code %d\n%s", r.code, r.stderr)
	}
	for _, want := range []string{"CLOSED-LOOP levels (concurrency sweep), not open-loop stages", "hides queueing"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "trusted") {
		t.Errorf("stdout has an open-loop stage table:\n%s", r.stdout)
	}
	data, err := os.ReadFile(md)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## Closed-loop levels (not open-loop stages)", "| 1 | sim-chat | 1 |", "| 2 | sim-chat | 2 |", "0 stages"} {
		if !strings.Contains(string(data), want) {
			t.Errorf("Markdown lacks %q:\n%s", want, data)
		}
	}
}

// TestBenchFindStageDuration: with --find, a given --stage.duration is
// every stage's measured window (the rules say so), no longer ignored.
func TestBenchFindStageDuration(t *testing.T) {
	bin := binary(t)
	out := filepath.Join(t.TempDir(), "r.json")
	r := runBinary(t, bin, nil, "bench", "--sim", "--target=sim-chat", "--find=capacity", "--find.start-rate=4",
		"--find.max-stages=2", "--find.min-requests=5", "--stage.duration=3s", "--warmup=0s", "--output="+out, "--log.level=error")
	if r.code != 0 {
		t.Fatalf("exit code %d\n%s", r.code, r.stderr)
	}
	if !strings.Contains(r.stdout, "a measured window of --stage.duration 3s") {
		t.Errorf("the rules do not say the window is --stage.duration:\n%s", r.stdout)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Stages []struct {
			Duration time.Duration `json:"duration_ns"`
		} `json:"stages"`
	}
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Stages) == 0 {
		t.Fatal("no stage")
	}
	for i, s := range rep.Stages {
		if s.Duration < 3*time.Second || s.Duration > 4*time.Second {
			t.Errorf("stage %d lasted %v, want --stage.duration's 3s", i+1, s.Duration)
		}
	}
}
