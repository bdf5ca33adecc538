// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package config

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeTrace writes a Mooncake trace of the given lines into dir.
func writeTrace(t *testing.T, dir, name string, lines ...string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func traceConfig(class, arrival string) string {
	return `workloads:
  w:
    classes:
      - name: c
        ` + class + `
targets:
  - name: t
    url: http://127.0.0.1:1/v1
    model: m
    workload: w
    arrival: ` + arrival + "\n"
}

func loadTraceConfig(t *testing.T, dir, text string) (*Config, error) {
	t.Helper()
	path := filepath.Join(dir, "llmprobe.yml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return LoadFile(path)
}

// A from_trace class reads its trace at load, relative to the
// configuration's directory, and keeps the records whole.
func TestFromTraceLoads(t *testing.T) {
	dir := t.TempDir()
	writeTrace(t, dir, "trace.jsonl",
		`{"timestamp": 0, "input_length": 1000, "output_length": 10, "hash_ids": [1, 2]}`,
		`{"timestamp": 5, "input_length": 700, "output_length": 300, "hash_ids": [1, 3]}`,
		`{"timestamp": 9, "input_length": 40, "output_length": 200, "hash_ids": [4]}`)
	cfg, err := loadTraceConfig(t, dir, traceConfig("weight: 1\n        from_trace: {file: trace.jsonl, format: mooncake}", "{rate: 1}"))
	if err != nil {
		t.Fatal(err)
	}
	s := cfg.Workloads["w"].Classes[0].FromTrace.Sample()
	if s == nil || s.Records != 3 || s.Read != 3 || s.BlockSize != 512 || s.HasSessions {
		t.Fatalf("sample: %+v", s)
	}
	joint := map[[2]int]bool{}
	for _, u := range s.Sessions {
		joint[[2]int{u[0].PromptTokens, u[0].OutputTokens}] = true
	}
	if !joint[[2]int{1000, 10}] || !joint[[2]int{700, 300}] || !joint[[2]int{40, 200}] {
		t.Errorf("records not kept whole: %v", joint)
	}
	// Record 2 reuses block 1 (512 tokens) of record 1: 512 / 1740.
	if want := 512.0 / 1740; s.Reuse != want {
		t.Errorf("reuse %v, want %v", s.Reuse, want)
	}
}

// The sample is bounded by max_records, uniform, and the same at every
// load.
func TestFromTraceSampleBounded(t *testing.T) {
	dir := t.TempDir()
	var lines []string
	for i := range 5000 {
		lines = append(lines, fmt.Sprintf(`{"timestamp": %d, "input_length": %d, "output_length": %d, "hash_ids": []}`, i, i+1, 5000-i))
	}
	writeTrace(t, dir, "trace.jsonl", lines...)
	text := traceConfig("weight: 1\n        from_trace: {file: trace.jsonl, format: mooncake, max_records: 500}", "{rate: 1}")
	var first []int
	for range 2 {
		cfg, err := loadTraceConfig(t, dir, text)
		if err != nil {
			t.Fatal(err)
		}
		s := cfg.Workloads["w"].Classes[0].FromTrace.Sample()
		if s.Records != 500 || s.Read != 5000 || len(s.Sessions) != 500 {
			t.Fatalf("sample of %d records (%d units) from %d, want 500 from 5000", s.Records, len(s.Sessions), s.Read)
		}
		var got []int
		quarters := [4]int{}
		for _, u := range s.Sessions {
			r := u[0]
			if r.PromptTokens+r.OutputTokens != 5001 {
				t.Fatalf("record split: %+v", r)
			}
			got = append(got, r.Line)
			quarters[(r.PromptTokens-1)/1250]++
		}
		for q, n := range quarters {
			if n < 90 || n > 160 { // 125 expected, σ ≈ 10
				t.Errorf("quarter %d of the file: %d of 500 sampled records, want about 125", q, n)
			}
		}
		if first == nil {
			first = got
		} else if fmt.Sprint(first) != fmt.Sprint(got) {
			t.Error("two loads of the same file sampled different records")
		}
	}
}

// Problems with a from_trace class are configuration errors at their
// place: a missing file, a bad line (the trace's file:line), keys that
// the trace replaces.
func TestFromTraceErrors(t *testing.T) {
	dir := t.TempDir()
	writeTrace(t, dir, "bad.jsonl",
		`{"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [1]}`,
		`{"timestamp": 1, "output_length": 1}`)
	for _, tc := range []struct {
		name, class string
		want        []string
	}{
		{"missing", "weight: 1\n        from_trace: {file: nope.jsonl}",
			[]string{`llmprobe.yml:6:22: workloads.w.classes[0].from_trace.file: `, "nope.jsonl"}},
		{"bad line", "weight: 1\n        from_trace: {file: bad.jsonl, format: mooncake}",
			[]string{`llmprobe.yml:6:22: workloads.w.classes[0].from_trace.file: `, "bad.jsonl:2"}},
		{"format", "weight: 1\n        from_trace: {file: bad.jsonl, format: parquet}",
			[]string{`workloads.w.classes[0].from_trace.format: must be one of`}},
		{"lengths beside it", "weight: 1\n        prompt_tokens: 10\n        output_tokens: 5\n        from_trace: {file: bad.jsonl}",
			[]string{`llmprobe.yml:6:9: workloads.w.classes[0].prompt_tokens: not allowed with from_trace`, `llmprobe.yml:7:9: workloads.w.classes[0].output_tokens: not allowed with from_trace`}},
		{"max_records", "weight: 1\n        from_trace: {file: bad.jsonl, max_records: 0}",
			[]string{`workloads.w.classes[0].from_trace.max_records: must be from 1 to`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := loadTraceConfig(t, dir, traceConfig(tc.class, "{rate: 1}"))
			if err == nil {
				t.Fatal("loaded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

// trace_shape reads the trace's rate curve: records folded over the
// period, counted per bin, scaled to a mean of 1.
func TestTraceShapeCurve(t *testing.T) {
	dir := t.TempDir()
	var lines []string
	// 4 bins of 15 minutes: 10, 30, 0, 20 records.
	for bin, n := range []int{10, 30, 0, 20} {
		for i := range n {
			ms := (bin*15*60 + i*20) * 1000
			lines = append(lines, fmt.Sprintf(`{"timestamp": %d, "input_length": 5, "output_length": 1, "hash_ids": []}`, ms))
		}
	}
	writeTrace(t, dir, "day.jsonl", lines...)
	class := "weight: 1\n        prompt_tokens: 10\n        output_tokens: 5"
	cfg, err := loadTraceConfig(t, dir, traceConfig(class, "{process: trace_shape, rate: 3, trace: {file: day.jsonl, period: 1h, bin: 15m}}"))
	if err != nil {
		t.Fatal(err)
	}
	tr := cfg.Targets[0].Arrival.Trace
	want := []float64{10.0 / 15, 2, 0, 20.0 / 15}
	if got := tr.Curve(); len(got) != len(want) {
		t.Errorf("curve %v, want %v", got, want)
	} else {
		for i := range want {
			if math.Abs(got[i]-want[i]) > 1e-9 {
				t.Errorf("curve %v, want %v", got, want)
				break
			}
		}
	}
	for _, tc := range []struct{ arrival, want string }{
		{"{process: trace_shape, rate: 3}", "targets[0].arrival.trace: required with process trace_shape"},
		{"{process: poisson, rate: 3, trace: {file: day.jsonl}}", "targets[0].arrival.trace: applies only to process trace_shape"},
		{"{process: trace_shape, rate: 3, trace: {file: day.jsonl, period: 24h}}", "less than half of the period"},
		{"{process: trace_shape, rate: 3, trace: {file: none.jsonl, period: 1h}}", "none.jsonl"},
		{"{process: trace_shape, rate: 60000, trace: {file: day.jsonl, period: 1h}}", "over the limit"},
	} {
		_, err := loadTraceConfig(t, dir, traceConfig(class, tc.arrival))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("arrival %s: error %v, want %q", tc.arrival, err, tc.want)
		}
	}
}
