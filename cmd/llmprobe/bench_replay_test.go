// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBenchReplayUsage: a missing or bad trace, a bad format or time
// scale, and --replay with --stage, --find, --concurrency or --dataset
// are one line "llmprobe: error: ..." and exit code 2, before the
// simulator starts or any request is sent.
func TestBenchReplayUsage(t *testing.T) {
	bin := binary(t)
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.jsonl")
	bad := filepath.Join(dir, "bad.jsonl")
	if err := os.WriteFile(bad, []byte("{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 2, \"hash_ids\": [1]}\n{\"timestamp\": 5, \"input_length\": \"x\"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	fixture := filepath.Join(moduleRoot(t), "tracefile", "testdata", "mooncake.jsonl")
	tests := []usageCase{
		{[]string{"--replay=" + missing}, "--replay \"" + missing + "\": no such file or directory"},
		{[]string{"--replay=" + dir}, "is a directory, want a trace file"},
		{[]string{"--replay=" + bad}, "--replay: " + bad + ":2: input_length"},
		{[]string{"--replay=" + fixture, "--replay.format=parquet"}, "enum value must be one of auto,mooncake"},
		{[]string{"--replay=" + fixture, "--replay.format=azure"}, "--replay: " + fixture},
		{[]string{"--replay=" + fixture, "--time-scale=0"}, "--time-scale must be a positive factor"},
		{[]string{"--replay=" + fixture, "--time-scale=-2"}, "--time-scale must be a positive factor"},
		{[]string{"--replay=" + fixture, "--replay.start=-1s"}, "--replay.start must not be negative"},
		{[]string{"--replay=" + fixture, "--replay.start=1h"}, "no record at or after --replay.start=1h0m0s"},
		{[]string{"--replay=" + fixture, "--stage=1:1s"}, "--replay cannot be combined with --stage"},
		{[]string{"--replay=" + fixture, "--target=sim-chat", "--find=capacity"}, "--replay cannot be combined with --find"},
		{[]string{"--replay=" + fixture, "--concurrency=4"}, "--replay cannot be combined with --concurrency"},
		{[]string{"--replay=" + fixture, "--dataset=" + fixture}, "--replay cannot be combined with --dataset"},
		{[]string{"--stage=1:1s", "--time-scale=2"}, "--time-scale needs --replay=FILE"},
	}
	expectBenchUsageErrors(t, bin, tests)
}

// TestBenchReplay: bench --sim --replay of the Mooncake fixture, its
// first 40 records 100 times as fast, prints the replay and its schedule
// lag, writes it in the JSON and Markdown reports, and one --requests
// line per record with its trace line.
func TestBenchReplay(t *testing.T) {
	bin := binary(t)
	dir := t.TempDir()
	js, md, reqs := filepath.Join(dir, "r.json"), filepath.Join(dir, "r.md"), filepath.Join(dir, "r.jsonl")
	fixture := filepath.Join(moduleRoot(t), "tracefile", "testdata", "mooncake.jsonl")
	r := runBinary(t, bin, nil, "bench", "--sim", "--sim.zero-latency", "--target=sim-chat", "--replay="+fixture, "--time-scale=100",
		"--max-requests=40", "--warmup=0s", "--output="+js, "--output="+md, "--requests="+reqs, "--log.level=error")
	if r.code != 0 {
		t.Fatalf("exit code %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{"stage 1 sim-chat replay: " + fixture + " (mooncake, 512-token blocks): 40 records from 0s", "ended by --max-requests", "time scale 100", "schedule lag p50"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
		}
	}
	var rep struct {
		Stages []struct {
			Sent   int `json:"sent"`
			Replay *struct {
				File    string  `json:"file"`
				Records int     `json:"records"`
				Scale   float64 `json:"time_scale"`
			} `json:"replay"`
		} `json:"stages"`
	}
	data, err := os.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Stages) != 1 || rep.Stages[0].Replay == nil || rep.Stages[0].Replay.Records != 40 || rep.Stages[0].Replay.Scale != 100 || rep.Stages[0].Replay.File != fixture {
		t.Fatalf("JSON report: %s", data)
	}
	if m, err := os.ReadFile(md); err != nil || !strings.Contains(string(m), "Replay: ") {
		t.Errorf("Markdown report lacks the replay (%v):\n%s", err, m)
	}
	f, err := os.Open(reqs)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	lines := map[int]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var rec struct {
			TraceLine int `json:"trace_line"`
		}
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatal(err)
		}
		lines[rec.TraceLine] = true
	}
	if len(lines) != rep.Stages[0].Sent || !lines[1] {
		t.Errorf("request lines for %d trace lines (line 1: %v), %d sent", len(lines), lines[1], rep.Stages[0].Sent)
	}
}
