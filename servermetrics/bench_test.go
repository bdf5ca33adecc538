// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package servermetrics

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"github.com/llmprobe/llmprobe/internal/simtest"
	"github.com/llmprobe/llmprobe/sim"
)

// BenchmarkServerViewReads measures what the daemon's server view costs
// per 64 replicas: each op is one read of the simulator's /metrics page
// (vLLM's families, Go runtime families beside them) over loopback,
// reduced to a Reading, and its Delta with the previous one, as each
// replica's reader does every interval. It reports the CPU share of a
// core that 64 replicas read every 15 s (the default interval) take, and
// the heap 64 replicas' two kept readings hold.
func BenchmarkServerViewReads(b *testing.B) {
	_, base := simtest.Listen(b, sim.DefaultConfig())
	for range 20 {
		resp, err := http.Post(base+"/v1/completions", "application/json",
			strings.NewReader(`{"model":"sim-model","prompt":"hello there","max_tokens":8}`))
		if err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
	}
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		b.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(page) }))
	defer srv.Close()
	client := NewClient("bench")
	prev := Read(context.Background(), client, srv.URL, "sim-model", 0)
	if prev.Outcome != OutcomeOK {
		b.Fatal(prev.Err)
	}
	b.SetBytes(int64(len(page)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		cur := Read(context.Background(), client, srv.URL, "sim-model", 0)
		if w := Delta(prev, cur); w.TTFT == nil {
			b.Fatal(w.Missing)
		}
		prev = cur
	}
	b.StopTimer()
	perRead := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	b.ReportMetric(100*perRead*64/15e9, "%core/64replicas@15s")

	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	kept := make([]*Reading, 128) // 64 replicas × (previous, current)
	for i := range kept {
		kept[i] = Read(context.Background(), client, srv.URL, "sim-model", 0)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(kept)
	b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/(1<<20), "MiB/64replicas")
}
