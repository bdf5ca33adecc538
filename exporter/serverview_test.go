// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package exporter

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/llmprobe/llmprobe/probe"
	"github.com/llmprobe/llmprobe/probe/wire"
	"github.com/llmprobe/llmprobe/servermetrics"
)

func fptr(v float64) *float64 { return &v }

// testServerViewStatus is a discovery target reading each replica's
// metrics: one replica with a window (every figure), one read once, one
// whose reads fail.
func testServerViewStatus() probe.TargetStatus {
	end := time.Unix(1_700_000_000, 0)
	w := &servermetrics.Window{
		Start: end.Add(-15 * time.Second), End: end, Engine: "vllm", TTFTIncludesQueue: true,
		TTFT:  &servermetrics.Histogram{Bounds: []float64{0.02, 0.04, 0.06}, Cumulative: []float64{0, 10, 20}, Count: 20, Sum: 0.8},
		ITL:   &servermetrics.Histogram{Bounds: []float64{0.01, 0.025}, Cumulative: []float64{50, 100}, Count: 100, Sum: 1.2},
		Queue: &servermetrics.Mean{Sum: 0.1, Count: 20}, Prefill: &servermetrics.Mean{Sum: 0.3, Count: 20}, Decode: &servermetrics.Mean{Sum: 4, Count: 20},
		Running: fptr(7), Waiting: fptr(2), KVUsage: fptr(0.5), Preemptions: fptr(1), Finished: fptr(20), PrefixHits: fptr(30), PrefixQueries: fptr(120),
		Missing: map[string]string{},
	}
	ok := &probe.ServerStatus{URL: "http://10.1.3.1:8000/metrics", Engine: "vllm", Interval: 15 * time.Second, Up: true,
		Reads: map[string]uint64{servermetrics.OutcomeOK: 4}, Window: w, Probe: probe.ProbeTTFT{Count: 15, Mean: 0.09, P50: 0.085, P99: 0.2},
		Gap: &probe.PathGap{P50: 0.045, P99: 0.14, Mean: 0.05, P50Error: 0.01}, GPUUtil: fptr(0.42)}
	once := &probe.ServerStatus{URL: "http://10.1.3.2:8000/metrics", Engine: "vllm", Interval: 15 * time.Second, Up: true,
		Reads: map[string]uint64{servermetrics.OutcomeOK: 1}, Why: "one successful read: the figures need two"}
	down := &probe.ServerStatus{URL: "http://10.1.3.3:8000/metrics", Interval: 15 * time.Second,
		Reads: map[string]uint64{servermetrics.OutcomeTimeout: 3}, Why: "GET http://10.1.3.3:8000/metrics: context deadline exceeded (no answer within 10s)"}
	return probe.TargetStatus{
		Name: "served", Model: "m", API: wire.APIChat, URL: "http://{replica}/v1", Dropped: map[probe.DropReason]uint64{}, Outcomes: map[wire.Outcome]uint64{},
		Discovery: &probe.DiscoveryStatus{Mechanism: "file", Replicas: 3, Discovered: 3, MaxReplicas: 64},
		Replicas: []probe.ReplicaStatus{
			{Name: "a", Address: "10.1.3.1:8000", Server: ok},
			{Name: "b", Address: "10.1.3.2:8000", Server: once},
			{Name: "c", Address: "10.1.3.3:8000", Server: down},
		},
	}
}

// TestServerViewExported: a view with a window has every figure; one read
// once or failing has up, reads and info only; a plain target's view
// has an empty replica label.
func TestServerViewExported(t *testing.T) {
	plain := testServerViewStatus()
	plain.Name, plain.Discovery, plain.Server, plain.Replicas = "plain", nil, plain.Replicas[0].Server, nil
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewStatusCollector(func() []probe.TargetStatus { return []probe.TargetStatus{testServerViewStatus(), plain} }))
	want := `
# HELP llmprobe_server_ttft_gap_seconds The path gap: the probe's TTFT quantile minus the server's over the same read interval (minus the server's mean queue time where its TTFT leaves the queue out): time spent in the gateway, proxy, network and TLS.
# TYPE llmprobe_server_ttft_gap_seconds gauge
llmprobe_server_ttft_gap_seconds{percentile="p50",replica="",target="plain"} 0.045
llmprobe_server_ttft_gap_seconds{percentile="p50",replica="a",target="served"} 0.045
llmprobe_server_ttft_gap_seconds{percentile="p99",replica="",target="plain"} 0.14
llmprobe_server_ttft_gap_seconds{percentile="p99",replica="a",target="served"} 0.14
# HELP llmprobe_server_up 1 when the last read of the target's (or replica's) serving-engine metrics (server_metrics) succeeded and an engine was recognised, else 0; the status page says why.
# TYPE llmprobe_server_up gauge
llmprobe_server_up{replica="",target="plain"} 1
llmprobe_server_up{replica="a",target="served"} 1
llmprobe_server_up{replica="b",target="served"} 1
llmprobe_server_up{replica="c",target="served"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "llmprobe_server_up", "llmprobe_server_ttft_gap_seconds"); err != nil {
		t.Error(err)
	}
	for name, n := range map[string]int{
		"llmprobe_server_ttft_seconds": 4, "llmprobe_server_ttft_bucket_error_seconds": 4, "llmprobe_server_itl_seconds": 4,
		"llmprobe_server_queue_seconds": 2, "llmprobe_server_requests_waiting": 2, "llmprobe_server_kv_cache_usage_ratio": 2,
		"llmprobe_server_preemptions_per_request": 2, "llmprobe_server_prefix_cache_hit_ratio": 2, "llmprobe_server_gpu_utilization_ratio": 2,
		"llmprobe_server_ttft_gap_mean_seconds": 2, "llmprobe_server_info": 3, "llmprobe_server_reads_total": 4 * len(servermetrics.Outcomes),
	} {
		if got := testutil.CollectAndCount(NewStatusCollector(func() []probe.TargetStatus { return []probe.TargetStatus{testServerViewStatus(), plain} }), name); got != n {
			t.Errorf("%s: %d series, want %d", name, got, n)
		}
	}
	lines := serverLines(&probe.TargetStatus{Replicas: testServerViewStatus().Replicas})
	for i, want := range []string{
		"Server view of a (http://10.1.3.1:8000/metrics, every 15s): vllm over 15s; TTFT p50 40.0 ms ±10.0 ms, p99 59.6 ms of 20 requests; queue 5.0 ms; 7 running, 2 waiting; KV 50%; GPU 42%; path gap mean 50.0 ms, p50 45.0 ms (±10.0 ms), p99 140.0 ms",
		"Server view of b (http://10.1.3.2:8000/metrics, every 15s): no server view: one successful read: the figures need two",
		"Server view of c (http://10.1.3.3:8000/metrics, every 15s): no server view: GET http://10.1.3.3:8000/metrics: context deadline exceeded (no answer within 10s)",
	} {
		if lines[i] != want {
			t.Errorf("line %d:\n%s\nwant\n%s", i, lines[i], want)
		}
	}
}
