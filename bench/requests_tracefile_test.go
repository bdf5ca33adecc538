// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package bench_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"testing"

	"github.com/llmprobe/llmprobe/bench/report"
	"github.com/llmprobe/llmprobe/tracefile"
)

// TestRequestLogIsATrace: what `bench --requests` writes against the
// simulator reads back as an llmprobe trace (package tracefile), detected
// by its content, line for line: planned offsets, token counts,
// conversations and turns.
func TestRequestLogIsATrace(t *testing.T) {
	sw := runSweep(t)
	r, err := tracefile.NewReader(bytes.NewReader(sw.requests), "requests.jsonl", tracefile.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.Format() != tracefile.LLMProbe {
		t.Fatalf("detected as %s, want llmprobe", r.Format())
	}
	sc := bufio.NewScanner(bytes.NewReader(sw.requests))
	sc.Buffer(nil, 1<<20)
	n := 0
	var first report.RequestRecord
	for sc.Scan() {
		n++
		var want report.RequestRecord
		if err := json.Unmarshal(sc.Bytes(), &want); err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			first = want
		}
		got, err := r.Next()
		if err != nil {
			t.Fatalf("line %d: %v", n, err)
		}
		if got.Line != n || got.Offset != want.Planned.Sub(first.Planned) || got.PromptTokens != want.PromptTokens ||
			got.OutputTokens != want.OutputTokens || got.Session != want.Conversation || got.Turn != want.Turn {
			t.Fatalf("line %d read as %+v, want %+v", n, got, want)
		}
	}
	if _, err := r.Next(); !errors.Is(err, io.EOF) || n != sw.lines || n == 0 {
		t.Errorf("after %d of %d lines: %v, want io.EOF", n, sw.lines, err)
	}
}
