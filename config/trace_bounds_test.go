// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package config

import (
	"compress/gzip"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llmprobe/llmprobe/tracefile"
)

// writeIDsTrace writes, gzipped, a Mooncake trace of n records of ids
// hash ids each (all 7: a few bytes compressed), with session (a JSON
// value, "" for none) and without hash_ids when ids is 0.
func writeIDsTrace(t *testing.T, dir, name string, n, ids, prompt int, session string) {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	zw := gzip.NewWriter(f)
	list := ""
	if ids > 0 {
		list = `, "hash_ids": [` + strings.Repeat("7,", ids-1) + "7]"
	}
	if session != "" {
		session = `, "session_id": ` + session
	}
	for i := range n {
		fmt.Fprintf(zw, `{"timestamp": %d, "input_length": %d, "output_length": 1%s%s}`+"\n", i, prompt, session, list)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestFromTraceHashIDBounds: what a from_trace sample holds is bounded,
// and a trace beyond it is a configuration error naming the trace's line:
// a session's turn without hash_ids whose history would take more than
// tracefile.MaxHashIDs synthesised blocks, and a sample whose records
// hold more than MaxTraceHashIDs ids, given or synthesised. The bound is
// on what the sample keeps, not on what the file holds.
func TestFromTraceHashIDBounds(t *testing.T) {
	dir := t.TempDir()
	perRecord := tracefile.MaxHashIDs
	over := MaxTraceHashIDs/perRecord + 1 // records that hold more than the bound
	writeIDsTrace(t, dir, "turns.jsonl.gz", 3, 0, perRecord+1, `"s1"`)
	writeIDsTrace(t, dir, "ids.jsonl.gz", over, perRecord, 100, "")
	writeIDsTrace(t, dir, "at.jsonl.gz", over-1, perRecord, 100, "")
	writeIDsTrace(t, dir, "synth.jsonl.gz", over, 0, perRecord, `"s1"`)
	writeTrace(t, dir, "turns.jsonl",
		`{"planned":"2026-03-02T10:00:00Z","prompt_tokens":10,"output_tokens":1,"conversation":"c","turn":1}`,
		fmt.Sprintf(`{"planned":"2026-03-02T10:00:01Z","prompt_tokens":%d,"output_tokens":1,"conversation":"c","turn":2}`, perRecord+1))
	for _, tc := range []struct {
		name, class string
		want        []string // nil: loads
		records     int
	}{
		{"session turn without hash_ids", "from_trace: {file: turns.jsonl.gz, block_size: 1}", []string{
			`llmprobe.yml:6:22: workloads.w.classes[0].from_trace.file: `,
			fmt.Sprintf("turns.jsonl.gz:1: input_length: a session's turn of %d tokens without hash_ids takes %d blocks of block_size 1 for its history, more than the %d a record may have: raise block_size",
				perRecord+1, perRecord+1, perRecord)}, 0},
		{"llmprobe turn", "from_trace: {file: turns.jsonl, block_size: 1}", []string{
			fmt.Sprintf("turns.jsonl:2: prompt_tokens: a session's turn of %d tokens without hash_ids", perRecord+1)}, 0},
		{"turns in larger blocks", "from_trace: {file: turns.jsonl.gz, block_size: 2}", nil, 3},
		{"hash ids of a sample", "from_trace: {file: ids.jsonl.gz}", []string{
			fmt.Sprintf("ids.jsonl.gz:%d: hash_ids: the sample's records hold %d hash ids with this one's, more than the %d (%d MiB) a from_trace sample may: lower max_records (100000)",
				over, over*perRecord, MaxTraceHashIDs, MaxTraceHashIDs*8>>20)}, 0},
		{"synthesised ids of a sample", "from_trace: {file: synth.jsonl.gz, block_size: 1}", []string{
			fmt.Sprintf("synth.jsonl.gz:%d: input_length: the sample's records hold %d hash ids with this one's", over, over*perRecord),
			"lower max_records (100000), or raise block_size (1)"}, 0},
		{"at the bound", "from_trace: {file: at.jsonl.gz}", nil, over - 1},
		{"a smaller sample", fmt.Sprintf("from_trace: {file: ids.jsonl.gz, max_records: %d}", over/2), nil, over / 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := loadTraceConfig(t, dir, traceConfig("weight: 1\n        "+tc.class, "{rate: 1}"))
			if tc.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				if s := cfg.Workloads["w"].Classes[0].FromTrace.Sample(); s.Records != tc.records {
					t.Errorf("sample of %d records, want %d", s.Records, tc.records)
				}
				return
			}
			if err == nil {
				t.Fatal("loaded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\ndoes not contain %q", err, w)
				}
			}
		})
	}
}
