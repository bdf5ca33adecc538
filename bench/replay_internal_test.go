// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package bench

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkReplayNext is the arrival loop's cost of a replay's next
// record (replayTimeline.Next): reading and parsing one Mooncake line of
// ~2,000 prompt tokens in 5 hash ids and placing it on the timeline.
func BenchmarkReplayNext(b *testing.B) {
	path := filepath.Join(b.TempDir(), "trace.jsonl")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriter(f)
	const n = 200000
	for i := range n {
		fmt.Fprintf(w, `{"timestamp": %d, "input_length": %d, "output_length": %d, "hash_ids": [%d, %d, %d, %d, %d]}`+"\n",
			2*i, 2000+i%1000, 8+i%500, i%7, 10+i%50, 100+i, 300000+i, 600000+i)
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	f.Close()
	rp, err := OpenReplay(context.Background(), ReplayOptions{Path: path})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; {
		b.StopTimer()
		tl, err := rp.run(1).open("t")
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		for ; i < b.N; i++ {
			if _, _, err := tl.Next(); err != nil {
				break
			}
		}
	}
}
