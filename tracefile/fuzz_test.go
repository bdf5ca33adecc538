// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package tracefile

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// FuzzReader: whatever the bytes (plain, gzip, zstd), Open-time errors
// and line errors are errors, never panics; a record's counts are
// non-negative and at most MaxTokens, its lines rise, its hash ids are at
// most MaxHashIDs, its names at most MaxNameBytes; reading stops at the
// first error and stays stopped.
func FuzzReader(f *testing.F) {
	files, err := filepath.Glob("testdata/*.*") // the fixtures, not testdata/fuzz
	if err != nil {
		f.Fatal(err)
	}
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		if len(b) > 2048 && filepath.Ext(p) != ".gz" && filepath.Ext(p) != ".zst" {
			b = b[:2048]
		}
		f.Add(b)
	}
	f.Add([]byte(`{"timestamp": 1e308, "input_length": 1e308, "output_length": 0}`))
	// The bounds of a record: at them, and one over.
	f.Add([]byte(`{"timestamp": 0, "input_length": 4194304, "output_length": 4194304}` + "\n" + `{"timestamp": 0, "input_length": 4194305, "output_length": 1}`))
	f.Add([]byte(`{"timestamp": 0, "input_length": 1, "output_length": 2147483647, "session_id": 7}`))
	f.Add([]byte(`{"usage": {"prompt_tokens": 4194304.4, "completion_tokens": 1e12}}`))
	f.Add([]byte("Timestamp,Model,Request tokens,Response tokens\n1,m,4194305,1\n"))
	f.Add([]byte(`{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": ["a,\"]", [1, 2], {"b": 3}, 4]}`))
	f.Add([]byte("Timestamp,Model,Request tokens,Response tokens\n\"1,2\",\"\"\"\",3,4\n"))
	f.Add([]byte("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,1,1\n0001-01-01 00:00:00,1,1\n"))
	f.Add([]byte{0x28, 0xb5, 0x2f, 0xfd, 0, 0, 0, 0})
	f.Add([]byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		// The Mooncake fast path agrees with the full parser on every line
		// it accepts.
		for _, line := range bytes.Split(data, []byte("\n")) {
			var fast, full Record
			st, ok := fastMooncake(line, &fast)
			if !ok {
				continue
			}
			st2, ok2, err := parseMooncakeJSON(line, &full)
			if err != nil || !ok2 || st != st2 || fast.PromptTokens != full.PromptTokens || fast.OutputTokens != full.OutputTokens ||
				!slices.Equal(fast.HashIDs, full.HashIDs) || (fast.HashIDs == nil) != (full.HashIDs == nil) || full.Session != "" {
				t.Fatalf("%q: fast path %+v %v, full parser %+v %v %v", line, fast, st, full, st2, err)
			}
		}
		for _, format := range Formats {
			r, err := NewReader(bytes.NewReader(data), "fuzz", Options{Format: format})
			if err != nil {
				continue
			}
			last := 0
			for i := 0; ; i++ {
				rec, err := r.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					var le *LineError
					if errors.As(err, &le) && (le.File != "fuzz" || le.Line < 1) {
						t.Fatalf("%s: line error %+v", format, le)
					}
					if _, again := r.Next(); again != err {
						t.Fatalf("%s: after %v, Next returned %v", format, err, again)
					}
					break
				}
				if rec.Line <= last || rec.PromptTokens < 0 || rec.OutputTokens < 0 || rec.Turn < 0 ||
					rec.PromptTokens > MaxTokens || rec.OutputTokens > MaxTokens || len(rec.HashIDs) > MaxHashIDs ||
					len(rec.Session) > MaxNameBytes || len(rec.Model) > MaxNameBytes {
					t.Fatalf("%s: record %+v after line %d", format, rec, last)
				}
				last = rec.Line
				if i > 100_000 {
					t.Fatalf("%s: %d records from %d bytes", format, i, len(data))
				}
			}
			r.Close()
		}
	})
}
