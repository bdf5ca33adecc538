// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestBenchUsageBeforeSending: every bad bench flag, value or combination
// is a usage error (exit code 2, one line naming the flag, nothing on
// standard output) before anything is sent: the simulator the
// configuration names counts no request, not even the preflight's. Those
// that need the configuration (a target, the server metrics' URLs, an SLO
// to search for) are found once it is loaded, before the preflight.
func TestBenchUsageBeforeSending(t *testing.T) {
	bin := binary(t)
	url, requests := countingSim(t)
	cfg := "--config.file=" + benchConfig(t, url)
	missing := filepath.Join(t.TempDir(), "missing.yml")
	trace := filepath.Join(moduleRoot(t), "tracefile", "testdata", "mooncake.jsonl")
	expectUsageErrors(t, bin, []string{"bench", cfg}, []usageCase{
		{[]string{"--stage=1", "--stage.duration=-1s"}, "--stage.duration must be positive, got -1s"},
		{[]string{"--concurrency=2", "--stage.duration=0s"}, "--stage.duration must be positive, got 0s"},
		{[]string{"--stage=1:5"}, `--stage "1:5": missing unit in duration "5"`},
		{[]string{"--stage=1:-2s"}, `--stage "1:-2s": duration must be positive`},
		{[]string{"--find=cap"}, "--find: enum value must be one of capacity,slo, got 'cap'"},
		{[]string{"--stage=1:1s", "--stage.duration=long"}, `--stage.duration: time: invalid duration "long"`},
		{[]string{"--stage=1:1s", "--max-requests=lots"}, "--max-requests: "},
		{[]string{"--stage=1:1s", "--warmup=-1s"}, "--warmup must not be negative, got -1s"},
		{[]string{"--stage=1:1s", "--target=nope"}, `--target "nope": the configuration has no such target (its targets: down)`},
		{[]string{"--stage=1:1s", "--server-metrics=ftp://x"}, `--server-metrics: server metrics "ftp://x"`},
		{[]string{"--stage=1:1s", "--server-metrics=" + url + "/metrics," + url + "/metrics"}, "--server-metrics: server metrics: 2 URLs for 1 targets"},
		{[]string{"--find=slo"}, "--find=slo needs an SLO"},
		{[]string{"--find=slo", "--no-preflight"}, "--find=slo needs an SLO"},
		{[]string{"--stage=1:1s", "--find.factor=3"}, "--find.factor applies only to --find or --levels"},
		{[]string{"--stage=1:1s", "--find.start-rate=5"}, "--find.start-rate applies only to --find or --levels"},
		{[]string{"--stage=1:1s", "--sim.zero-latency"}, "--sim.zero-latency needs --sim"},
		{[]string{"--stage=1:1s", "--sim.config.file=" + missing}, "--sim.config.file needs --sim"},
		{[]string{"--stage=1:1s", "--gpu.selector=Hostname=\"a\""}, "--gpu.selector needs --prometheus.url"},
		{[]string{"--stage=1:1s", "--prometheus.url=localhost:9090"}, `--prometheus.url "localhost:9090": want an http or https URL`},
		{[]string{"--replay=" + trace, "--stage.duration=10s"}, "--stage.duration does not apply to --replay"},
		{[]string{"--find=capacity", "--stop-when-saturated"}, "--stop-when-saturated stops a list of --stage; a search stops by its own rules"},
		{[]string{"--replay=" + trace, "--stop-when-saturated"}, "--stop-when-saturated stops a list of --stage"},
	})
	if n := requests.Load(); n != 0 {
		t.Errorf("the simulator was sent %d requests by command lines that are usage errors", n)
	}
}

// TestBenchHelpPreflight: the preflight's flag is a positive one,
// --[no-]preflight (default on), never --[no-]no-preflight, and no bench
// flag reads as a double negation.
func TestBenchHelpPreflight(t *testing.T) {
	r := runBinary(t, binary(t), nil, "bench", "--help")
	if r.code != 0 {
		t.Fatalf("bench --help: exit code %d: %s", r.code, r.stderr)
	}
	if !strings.Contains(r.stdout, "--[no-]preflight") || strings.Contains(r.stdout, "[no-]no-") {
		t.Errorf("bench --help has no --[no-]preflight, or a --[no-]no- flag:\n%s", r.stdout)
	}
}
