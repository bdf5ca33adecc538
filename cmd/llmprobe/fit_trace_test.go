// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llmprobe/llmprobe/config"
)

// handMooncake is fit's hand-computed fixture (fit/trace_test.go): with
// blocks of 4 tokens its hash_ids reuse 24 of 40 prompt tokens.
const handMooncake = `{"timestamp": 0, "input_length": 8, "output_length": 10, "hash_ids": [1, 2], "session_id": "s1"}
{"timestamp": 1000, "input_length": 10, "output_length": 5, "hash_ids": [1, 2, 3], "session_id": "s1"}
{"timestamp": 2000, "input_length": 6, "output_length": 20, "hash_ids": [1, 4], "session_id": "s1"}
{"timestamp": 5400000, "input_length": 4, "output_length": 40, "hash_ids": [5], "session_id": "s2"}
{"timestamp": 7140000, "input_length": 12, "output_length": 30, "hash_ids": [1, 2, 3], "session_id": "s3"}
`

// TestFitCommandTrace fits a trace through Main both ways: the marginal
// tables with the implied prefix, and --trace.mirror, whose from_trace
// class, loaded by config, sees the same reuse fit reports.
func TestFitCommandTrace(t *testing.T) {
	dir := t.TempDir()
	trace := filepath.Join(dir, "trace.jsonl")
	if err := os.WriteFile(trace, []byte(handMooncake), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "workload.yml")
	svg := filepath.Join(dir, "joint.svg")
	if code := Main([]string{"fit", "--trace=" + trace, "--trace.block-size=4", "--output=" + out, "--plot=" + svg}); code != 0 {
		t.Fatalf("fit exited %d", code)
	}
	if code := Main([]string{"check-config", out}); code != 0 {
		t.Fatalf("check-config exited %d", code)
	}
	cfg, err := config.LoadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	cl := cfg.Workloads["fitted"].Classes[0]
	if p := cl.Prefix; p == nil || p.Groups != 1 || p.Tokens != 8 || p.Probability != 0.6 || cl.FromTrace != nil {
		t.Errorf("class prefix %+v, from_trace %+v; want {1 8 0.6} and none", cl.Prefix, cl.FromTrace)
	}
	data, _ := os.ReadFile(out)
	if !bytes.Contains(data, []byte("lose this joint structure")) || !bytes.Contains(data, []byte("Spearman: -0.400")) {
		t.Errorf("header lacks the joint structure or the note:\n%s", data)
	}
	if s, err := os.ReadFile(svg); err != nil || !bytes.Contains(s, []byte(`class="cell"`)) {
		t.Errorf("plot without the 2-D histogram (%v)", err)
	}

	// --trace.mirror: the configuration names the trace relative to
	// itself, and config's own reading of it agrees with fit.
	mirror := filepath.Join(dir, "mirror.yml")
	var stdout bytes.Buffer
	f := &fitFlags{trace: trace, traceFormat: "auto", traceBlockSize: 4, traceMirror: true, output: mirror,
		workloadName: "fitted", targetURL: "http://127.0.0.1:8000/v1", rate: 0.5}
	if err := runFit(context.Background(), slog.New(slog.DiscardHandler), f, &stdout, io.Discard); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stdout.String(), "60.0% of prompt tokens") {
		t.Errorf("summary:\n%s", stdout.String())
	}
	cfg, err = config.LoadFile(mirror)
	if err != nil {
		t.Fatal(err)
	}
	cl = cfg.Workloads["fitted"].Classes[0]
	if cl.FromTrace == nil || cl.FromTrace.File != "trace.jsonl" || cl.FromTrace.Format != "mooncake" || cl.FromTrace.BlockSize != 4 {
		t.Fatalf("from_trace %+v", cl.FromTrace)
	}
	if s := cl.FromTrace.Sample(); s == nil || s.Records != 5 || math.Abs(s.Reuse-0.6) > 1e-9 {
		t.Errorf("config's sample %+v, want 5 records reusing 0.6", s)
	}
	a := cfg.Targets[0].Arrival
	if a.Process != config.ProcessTraceShape || a.Trace == nil || len(a.Trace.Curve()) != config.TraceShapeBins || a.Rate != 0.5 {
		t.Errorf("arrival %+v", a)
	}

	for _, c := range []struct {
		mod  func(*fitFlags)
		want string
	}{
		{func(f *fitFlags) { f.accessLog = trace }, "exactly one source"},
		{func(f *fitFlags) { f.by = "model" }, "--by applies to"},
		{func(f *fitFlags) { f.trace, f.accessLog = "", sampleAccessLog }, "--trace.mirror needs --trace"},
		{func(f *fitFlags) { f.traceBlockSize = 0 }, "--trace.block-size"},
		{func(f *fitFlags) { f.traceCacheBlocks = -1 }, "cache blocks"},
		{func(f *fitFlags) { f.trace = filepath.Join(dir, "missing.jsonl") }, "missing.jsonl"},
	} {
		g := *f
		g.output = filepath.Join(dir, "never.yml")
		c.mod(&g)
		if err := runFit(context.Background(), slog.New(slog.DiscardHandler), &g, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("err = %v, want it to contain %q", err, c.want)
		}
	}
}
