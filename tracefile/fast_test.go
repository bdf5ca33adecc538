// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package tracefile

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// TestFastMooncake: the fast path takes the fixture's lines and agrees
// with the full parser; every unusual line is left to the full parser.
func TestFastMooncake(t *testing.T) {
	raw, err := os.ReadFile("testdata/mooncake.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
	lines = append(lines, `  {"hash_ids":[],"output_length":0,"input_length":0,"timestamp":0}  `, `{"timestamp": 1, "input_length": 2, "output_length": 3}`)
	for _, l := range lines {
		var fast, full Record
		st, ok := fastMooncake([]byte(l), &fast)
		if !ok {
			t.Fatalf("fast path refused %s", l)
		}
		st2, _, err := parseMooncakeJSON([]byte(l), &full)
		if err != nil || st != st2 || fast.PromptTokens != full.PromptTokens || fast.OutputTokens != full.OutputTokens ||
			!slices.Equal(fast.HashIDs, full.HashIDs) || (fast.HashIDs == nil) != (full.HashIDs == nil) {
			t.Fatalf("%s: fast %+v %v, full %+v %v %v", l, fast, st, full, st2, err)
		}
	}
	for _, l := range []string{
		`{}`, `[]`, `{"timestamp": -0, "input_length": 2, "output_length": 3}`,
		`{"timestamp": 1.0, "input_length": 2, "output_length": 3}`,
		`{"timestamp": 1, "input_length": 2e3, "output_length": 3}`,
		`{"timestamp": 1, "input_length": 02, "output_length": 3}`,
		`{"timestamp": 1, "timestamp": 2, "input_length": 2, "output_length": 3}`,
		`{"time\u0073tamp": 1, "input_length": 2, "output_length": 3}`,
		`{"timestamp": 1, "input_length": 2, "output_length": 3, "session_id": "a"}`,
		`{"timestamp": 1, "input_length": 2, "output_length": 3} x`,
		`{"timestamp": 1, "input_length": 2, "output_length": 3,}`,
		`{"timestamp": 1, "input_length": 2}`,
		`{"timestamp": 1, "input_length": 2, "output_length": 3, "hash_ids": [1,]}`,
		`{"timestamp": 1, "input_length": 2, "output_length": 3, "hash_ids": [1 2]}`,
		`{"timestamp": 1, "input_length": 2, "output_length": 3, "hash_ids": null}`,
		`{"timestamp": 1, "input_length": 2, "output_length": 3, "hash_ids": [18446744073709551615]}`,
		`{"timestamp": 1, "input_length": 2147483648, "output_length": 3}`,
		`{"timestamp": 1, "input_length": 2, "output_length": 3`,
	} {
		var rec Record
		if _, ok := fastMooncake([]byte(l), &rec); ok {
			t.Errorf("fast path took %s", l)
		}
	}
}
