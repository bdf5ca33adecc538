// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package exporter

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/llmprobe/llmprobe/probe"
	"github.com/llmprobe/llmprobe/probe/wire"
)

// Replicas of alpha in these tests; beta is a plain target (replica "").
const (
	replicaA = "vllm-0"
	replicaB = "10.0.0.2:8000"
)

// replicaResult is successResult from a replica.
func replicaResult(target, model, class, replica string) *wire.Result {
	r := successResult(target, model, class)
	r.Replica = replica
	return r
}

// feedReplicas sends alpha's two replicas and the plain target beta a
// known mix of events: replica A 3 scheduled, 2 sent, 1 dropped late, 2
// ended (a success and a timeout); replica B 2 scheduled, 2 sent, 2 ended
// (a warm-up success and a success); beta 1 of each.
func feedReplicas(m *Metrics) {
	for range 3 {
		m.Scheduled("alpha", replicaA, "chat")
	}
	m.Sent("alpha", replicaA, "chat")
	m.Sent("alpha", replicaA, "chat")
	m.Dropped("alpha", replicaA, "chat", probe.DropLate)
	m.Observe(replicaResult("alpha", "model-a", "chat", replicaA))
	timeout := replicaResult("alpha", "model-a", "chat", replicaA)
	timeout.Outcome, timeout.StatusCode, timeout.FirstToken = wire.OutcomeTimeout, 0, false
	m.Observe(timeout)

	m.Scheduled("alpha", replicaB, "agent")
	m.Scheduled("alpha", replicaB, "chat")
	m.Sent("alpha", replicaB, "agent")
	m.Sent("alpha", replicaB, "chat")
	warm := replicaResult("alpha", "model-a", "agent", replicaB)
	warm.Warmup = true
	m.Observe(warm)
	slow := replicaResult("alpha", "model-a", "chat", replicaB)
	slow.TTFT = 2 * time.Second
	m.Observe(slow)

	m.Scheduled("beta", "", "ping")
	m.Sent("beta", "", "ping")
	m.Dropped("beta", "", "ping", probe.DropInflightLimit)
	m.Observe(successResult("beta", "model-b", "ping"))
}

// TestReplicaMetrics: the events of a replica count in the replica's
// families and, as every event, in the target's; a plain target's
// events make no replica series.
func TestReplicaMetrics(t *testing.T) {
	m, reg := configuredMetrics(t)
	feedReplicas(m)

	counters := `
# HELP llmprobe_replica_scheduled_total Arrivals on the replica's own open-loop timeline (a target with discovery); the target's llmprobe_requests_scheduled_total is the sum over its replicas.
# TYPE llmprobe_replica_scheduled_total counter
llmprobe_replica_scheduled_total{replica="10.0.0.2:8000",target="alpha"} 2
llmprobe_replica_scheduled_total{replica="vllm-0",target="alpha"} 3
# HELP llmprobe_replica_sent_total Requests handed to the HTTP client for the replica.
# TYPE llmprobe_replica_sent_total counter
llmprobe_replica_sent_total{replica="10.0.0.2:8000",target="alpha"} 2
llmprobe_replica_sent_total{replica="vllm-0",target="alpha"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(counters), "llmprobe_replica_scheduled_total", "llmprobe_replica_sent_total"); err != nil {
		t.Error(err)
	}
	mfs := gather(t, reg)
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"llmprobe_replica_requests_total", map[string]string{"replica": replicaA, "outcome": "success"}, 1},
		{"llmprobe_replica_requests_total", map[string]string{"replica": replicaA, "outcome": "timeout"}, 1},
		{"llmprobe_replica_requests_total", map[string]string{"replica": replicaA, "outcome": "http_error"}, 0},
		{"llmprobe_replica_requests_total", map[string]string{"replica": replicaB, "outcome": "success"}, 2}, // warm-up included
		{"llmprobe_replica_dropped_total", map[string]string{"replica": replicaA, "reason": "late"}, 1},
		{"llmprobe_replica_dropped_total", map[string]string{"replica": replicaA, "reason": "inflight_limit"}, 0},
		{"llmprobe_replica_dropped_total", map[string]string{"replica": replicaB, "reason": "late"}, 0},
		// The target's figures are the sums over its replicas.
		{"llmprobe_requests_scheduled_total", map[string]string{"target": "alpha", "class": "chat"}, 4},
		{"llmprobe_requests_scheduled_total", map[string]string{"target": "alpha", "class": "agent"}, 1},
		{"llmprobe_requests_sent_total", map[string]string{"target": "alpha", "class": "chat"}, 3},
		{"llmprobe_requests_dropped_total", map[string]string{"target": "alpha", "reason": "late"}, 1},
		{"llmprobe_requests_total", map[string]string{"target": "alpha", "class": "chat", "outcome": "success"}, 2},
		{"llmprobe_requests_total", map[string]string{"target": "alpha", "class": "chat", "outcome": "timeout"}, 1},
		{"llmprobe_requests_total", map[string]string{"target": "beta", "outcome": "success"}, 1},
		{"llmprobe_requests_dropped_total", map[string]string{"target": "beta", "reason": "inflight_limit"}, 1},
	} {
		s := series(mfs, c.name, c.labels)
		if s == nil {
			t.Errorf("%s%v missing", c.name, c.labels)
			continue
		}
		if got := s.GetCounter().GetValue(); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	// Every outcome and drop reason of a replica exists from its first event.
	if n := countSeries(mfs, "llmprobe_replica_requests_total", map[string]string{"replica": replicaB}); n != len(wire.Outcomes) {
		t.Errorf("replica B has %d requests_total series, want %d", n, len(wire.Outcomes))
	}
	if n := countSeries(mfs, "llmprobe_replica_dropped_total", map[string]string{"replica": replicaB}); n != len(probe.DropReasons) {
		t.Errorf("replica B has %d dropped_total series, want %d", n, len(probe.DropReasons))
	}

	// Histograms: the target-level inclusion rules (warm-up out; TPOT and
	// E2E successes only), no class label.
	for _, c := range []struct {
		name, replica string
		count         uint64
		sum           float64
	}{
		{"llmprobe_replica_ttft_seconds", replicaA, 1, 0.25},
		{"llmprobe_replica_ttft_seconds", replicaB, 1, 2}, // the warm-up request left out
		{"llmprobe_replica_e2e_seconds", replicaA, 1, 0.62},
		{"llmprobe_replica_tpot_seconds", replicaB, 1, (0.62 - 0.25) / 15},
	} {
		h := series(mfs, c.name, map[string]string{"target": "alpha", "replica": c.replica}).GetHistogram()
		if h.GetSampleCount() != c.count || fmt.Sprintf("%.6f", h.GetSampleSum()) != fmt.Sprintf("%.6f", c.sum) {
			t.Errorf("%s{replica=%s}: count %d sum %v, want %d and %v", c.name, c.replica, h.GetSampleCount(), h.GetSampleSum(), c.count, c.sum)
		}
	}
	for _, name := range []string{"llmprobe_replica_ttft_seconds", "llmprobe_replica_tpot_seconds", "llmprobe_replica_e2e_seconds"} {
		labels := labelNames(mfs, name)
		if !slices.Equal(labels, []string{"replica", "target"}) {
			t.Errorf("%s has labels %v, want replica and target", name, labels)
		}
	}
	// Same buckets, classic and native, as the target-level histograms.
	for _, pair := range [][2]string{
		{"llmprobe_replica_ttft_seconds", "llmprobe_ttft_seconds"},
		{"llmprobe_replica_tpot_seconds", "llmprobe_tpot_seconds"},
		{"llmprobe_replica_e2e_seconds", "llmprobe_e2e_seconds"},
	} {
		rep := series(mfs, pair[0], map[string]string{"replica": replicaA}).GetHistogram()
		tgt := series(mfs, pair[1], map[string]string{"target": "alpha", "class": "chat"}).GetHistogram()
		if !slices.Equal(bounds(rep), bounds(tgt)) {
			t.Errorf("%s buckets %v, %s %v", pair[0], bounds(rep), pair[1], bounds(tgt))
		}
		if rep.Schema == nil || rep.GetSchema() != tgt.GetSchema() || rep.GetZeroThreshold() != tgt.GetZeroThreshold() {
			t.Errorf("%s native schema %v, %s %v", pair[0], rep.Schema, pair[1], tgt.Schema)
		}
	}
	// The exemplar of a traced request.
	exemplar := false
	for _, b := range series(mfs, "llmprobe_replica_ttft_seconds", map[string]string{"replica": replicaA}).GetHistogram().GetBucket() {
		exemplar = exemplar || b.GetExemplar() != nil
	}
	if !exemplar {
		t.Error("replica TTFT carries no trace exemplar")
	}

	// The plain target has no replica series at all.
	for name := range mfs {
		if strings.HasPrefix(name, "llmprobe_replica_") {
			if n := countSeries(mfs, name, map[string]string{"target": "beta"}); n != 0 {
				t.Errorf("%s has %d series of the plain target beta", name, n)
			}
			if n := countSeries(mfs, name, map[string]string{"replica": ""}); n != 0 && name != "llmprobe_replica_series_over_limit_total" {
				t.Errorf("%s has %d series with an empty replica", name, n)
			}
		}
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}

func bounds(h *dto.Histogram) []float64 {
	var out []float64
	for _, b := range h.GetBucket() {
		out = append(out, b.GetUpperBound())
	}
	return out
}

func labelNames(mfs map[string]*dto.MetricFamily, name string) []string {
	var out []string
	for _, m := range mfs[name].GetMetric() {
		for _, lp := range m.GetLabel() {
			if !slices.Contains(out, lp.GetName()) {
				out = append(out, lp.GetName())
			}
		}
	}
	slices.Sort(out)
	return out
}

// replicaFamilies are the event-fed per-replica families.
var replicaFamilies = []string{
	"llmprobe_replica_scheduled_total", "llmprobe_replica_sent_total", "llmprobe_replica_requests_total",
	"llmprobe_replica_dropped_total", "llmprobe_replica_ttft_seconds", "llmprobe_replica_tpot_seconds", "llmprobe_replica_e2e_seconds",
}

// TestReplicaRemoved: once the engine says a replica's grace period is
// over, every series of that replica goes, and nothing else: its peer's
// and the target's series keep their values. A replica that returns
// later starts again from 0.
func TestReplicaRemoved(t *testing.T) {
	m, reg := configuredMetrics(t)
	feedReplicas(m)
	var _ probe.ReplicaObserver = m
	before := gather(t, reg)
	for _, name := range replicaFamilies {
		if countSeries(before, name, map[string]string{"replica": replicaA}) == 0 {
			t.Fatalf("%s has no series of replica A before removal", name)
		}
	}

	probe.Observers{m}.ReplicaRemoved("alpha", replicaA) // as the engine forwards it
	after := gather(t, reg)
	for _, name := range replicaFamilies {
		if n := countSeries(after, name, map[string]string{"replica": replicaA}); n != 0 {
			t.Errorf("%s keeps %d series of the removed replica", name, n)
		}
		if a, b := countSeries(after, name, map[string]string{"replica": replicaB}), countSeries(before, name, map[string]string{"replica": replicaB}); a != b || a == 0 {
			t.Errorf("%s: replica B has %d series after, %d before", name, a, b)
		}
	}
	// Target-level families untouched, values and all.
	for name, mf := range before {
		if strings.HasPrefix(name, "llmprobe_replica_") {
			continue
		}
		if got := after[name]; got == nil || got.String() != mf.String() {
			t.Errorf("%s changed with the replica's removal", name)
		}
	}

	// Removing an unknown replica, or a target's plain "", is harmless.
	m.ReplicaRemoved("alpha", "no-such")
	m.ReplicaRemoved("beta", "")
	m.ReplicaRemoved("no-such", replicaB)
	if n := countSeries(gather(t, reg), "llmprobe_replica_requests_total", map[string]string{"replica": replicaB}); n != len(wire.Outcomes) {
		t.Errorf("replica B has %d requests series after unrelated removals", n)
	}

	m.Sent("alpha", replicaA, "chat")
	back := gather(t, reg)
	if got := series(back, "llmprobe_replica_sent_total", map[string]string{"replica": replicaA}).GetCounter().GetValue(); got != 1 {
		t.Errorf("a returning replica's sent = %v, want 1 (a fresh series)", got)
	}
}

// TestReplicaSeriesLimit: beyond the exporter's own bound on a target's
// replicas, events count in the target's series and the over-limit
// counter, never in new replica series.
func TestReplicaSeriesLimit(t *testing.T) {
	m, reg := configuredMetrics(t)
	if m.rep.limit != MaxReplicaSeries || MaxReplicaSeries != 8192 {
		t.Fatalf("limit %d, MaxReplicaSeries %d; want both 8192 (twice the largest max_replicas: live and retired)", m.rep.limit, MaxReplicaSeries)
	}
	m.rep.limit = 3
	for i := range 5 {
		m.Sent("alpha", fmt.Sprintf("10.0.0.%d:8000", i), "chat")
	}
	m.Sent("alpha", "10.0.0.0:8000", "chat") // a known one still counts
	mfs := gather(t, reg)
	if got := labelValues(mfs, "llmprobe_replica_sent_total", "replica"); !slices.Equal(got, []string{"10.0.0.0:8000", "10.0.0.1:8000", "10.0.0.2:8000"}) {
		t.Errorf("replicas with series %v, want the first 3", got)
	}
	if got := series(mfs, "llmprobe_replica_sent_total", map[string]string{"replica": "10.0.0.0:8000"}).GetCounter().GetValue(); got != 2 {
		t.Errorf("replica 0 sent %v, want 2", got)
	}
	if got := series(mfs, "llmprobe_replica_series_over_limit_total", map[string]string{"target": "alpha"}).GetCounter().GetValue(); got != 2 {
		t.Errorf("over-limit events %v, want 2", got)
	}
	if got := series(mfs, "llmprobe_requests_sent_total", map[string]string{"target": "alpha", "class": "chat"}).GetCounter().GetValue(); got != 6 {
		t.Errorf("alpha sent %v, want 6 (every replica's)", got)
	}
	// Room again once a replica is removed.
	m.ReplicaRemoved("alpha", "10.0.0.1:8000")
	m.Sent("alpha", "10.0.0.4:8000", "chat")
	if got := labelValues(gather(t, reg), "llmprobe_replica_sent_total", "replica"); !slices.Equal(got, []string{"10.0.0.0:8000", "10.0.0.2:8000", "10.0.0.4:8000"}) {
		t.Errorf("replicas with series %v after a removal", got)
	}
}

// TestReplicaSeriesGoWithTheirTarget: a reload that removes a target
// deletes its replicas' series, and late events of those replicas do not
// bring them back; an unknown class or model is ignored for replicas too.
func TestReplicaSeriesGoWithTheirTarget(t *testing.T) {
	m, reg := configuredMetrics(t)
	m.Sent("beta", "b-0", "ping")
	m.Sent("alpha", replicaA, "chat")
	m.Sent("alpha", "x", "no-such-class")
	m.Observe(replicaResult("alpha", "other-model", "chat", "y"))
	mfs := gather(t, reg)
	if got := labelValues(mfs, "llmprobe_replica_sent_total", "replica"); !slices.Equal(got, []string{"b-0", replicaA}) {
		t.Fatalf("replicas %v, want b-0 and %s (events of unknown classes or models ignored)", got, replicaA)
	}

	m.SetConfig(mustConfig(t, alphaOnlyYAML))
	m.Sent("beta", "b-0", "ping")
	m.Observe(replicaResult("beta", "model-b", "ping", "b-0"))
	mfs = gather(t, reg)
	for _, name := range replicaFamilies {
		if n := countSeries(mfs, name, map[string]string{"target": "beta"}); n != 0 {
			t.Errorf("%s keeps %d series of the removed target", name, n)
		}
	}
	if got := series(mfs, "llmprobe_replica_sent_total", map[string]string{"target": "alpha", "replica": replicaA}).GetCounter().GetValue(); got != 1 {
		t.Errorf("alpha's replica sent %v after the reload, want 1 (kept)", got)
	}
}

// TestReplicaEventsConcurrent runs replica events against removals and
// reloads, for the race detector: bounded, no timing.
func TestReplicaEventsConcurrent(t *testing.T) {
	m, reg := configuredMetrics(t)
	full, small := mustConfig(t, testConfigYAML), mustConfig(t, alphaOnlyYAML)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 500 {
				rep := fmt.Sprintf("r-%d", (w+i)%8)
				m.Scheduled("alpha", rep, "chat")
				m.Sent("alpha", rep, "chat")
				m.Observe(replicaResult("alpha", "model-a", "chat", rep))
				m.Dropped("beta", rep, "ping", probe.DropLate)
			}
		})
	}
	wg.Go(func() {
		for i := range 200 {
			m.ReplicaRemoved("alpha", fmt.Sprintf("r-%d", i%8))
			if i%20 == 0 {
				m.SetConfig(small)
				m.SetConfig(full)
			}
		}
	})
	wg.Wait()
	mfs := gather(t, reg)
	if got := series(mfs, "llmprobe_requests_sent_total", map[string]string{"target": "alpha", "class": "chat"}).GetCounter().GetValue(); got != 4*500 {
		t.Errorf("alpha sent %v, want %d: every event counts for the target", got, 4*500)
	}
	if n := countSeries(mfs, "llmprobe_replica_sent_total", map[string]string{"target": "alpha"}); n > 8 {
		t.Errorf("%d replica series, want at most 8", n)
	}
}

// testPoolStatus is what an engine reports for a target with discovery:
// three replicas (a pod with its join labels, a bare address, one retired
// within the grace period) found by Kubernetes discovery.
func testPoolStatus() probe.TargetStatus {
	since := time.Now().Add(-time.Hour)
	return probe.TargetStatus{
		Name: "pool", Model: "model-a", API: wire.APIChat, URL: "http://vllm.prod.svc:8000/v1", Workload: "mix", Process: "poisson(0.6/s)",
		RequestedRate: 0.4, AchievedRate: 0.39, Scheduled: 50, Sent: 49, Inflight: 3, MaxInflight: 128, Since: since,
		Dropped:  map[probe.DropReason]uint64{probe.DropLate: 1},
		Outcomes: map[wire.Outcome]uint64{wire.OutcomeSuccess: 46},
		Discovery: &probe.DiscoveryStatus{
			Mechanism: "kubernetes", Replicas: 2, Discovered: 5, OverLimit: 3, MaxReplicas: 2,
			Refreshes: 12, Failures: 2, LastSuccess: time.Unix(1_700_000_100, 500_000_000),
			LastError: "listing EndpointSlices: forbidden", Added: 3, Removed: 1, Folded: 4,
		},
		Replicas: []probe.ReplicaStatus{
			{
				Name: "vllm-0", Address: "10.1.2.3:8000", Since: since,
				Labels:        map[string]string{"pod": "vllm-0", "namespace": "prod", "node": "gpu-node-7"},
				RequestedRate: 0.2, AchievedRate: 0.21, Scheduled: 30, Sent: 30, Inflight: 2, MaxInflight: 64,
				Saturated: true, SaturationReason: "schedule lag p99 2s over 1m0s (max_lag 50ms)", SaturationReasons: nil,
			},
			{
				Name: "10.1.2.4:8000", Address: "10.1.2.4:8000", Since: since,
				RequestedRate: 0.2, AchievedRate: 0.18, Scheduled: 19, Sent: 18, Inflight: 1, MaxInflight: 64, Warmup: true,
			},
			{
				Name: "vllm-2", Address: "10.1.2.5:8000", Since: since, Gone: time.Unix(1_700_000_050, 0),
				Labels: map[string]string{"pod": "vllm-2", "namespace": "prod"},
			},
		},
	}
}

// TestStatusCollectorReplicas: a target with discovery gets its replicas'
// and its discovery's series; the target-level gauges stay one series
// for the target (the engine's sums); a plain target gets none.
func TestStatusCollectorReplicas(t *testing.T) {
	statuses := append(testStatus(), testPoolStatus())
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewStatusCollector(func() []probe.TargetStatus { return statuses }))

	want := `
# HELP llmprobe_replica_info 1 for every replica of a target with discovery, live or retired within the grace period, with the labels to join its series on: address (host:port dialled) and, where discovery knows them, pod, namespace and node (else empty). Join with * on(target, replica) group_left(pod) llmprobe_replica_info.
# TYPE llmprobe_replica_info gauge
llmprobe_replica_info{address="10.1.2.3:8000",namespace="prod",node="gpu-node-7",pod="vllm-0",replica="vllm-0",target="pool"} 1
llmprobe_replica_info{address="10.1.2.4:8000",namespace="",node="",pod="",replica="10.1.2.4:8000",target="pool"} 1
llmprobe_replica_info{address="10.1.2.5:8000",namespace="prod",node="",pod="vllm-2",replica="vllm-2",target="pool"} 1
# HELP llmprobe_replica_inflight_requests Requests sent to the replica and not yet ended.
# TYPE llmprobe_replica_inflight_requests gauge
llmprobe_replica_inflight_requests{replica="10.1.2.4:8000",target="pool"} 1
llmprobe_replica_inflight_requests{replica="vllm-0",target="pool"} 2
llmprobe_replica_inflight_requests{replica="vllm-2",target="pool"} 0
# HELP llmprobe_replica_requested_rate Requested mean rate of requests of the replica, in requests per second, as llmprobe_target_request_rate (arrivals × expected turns of the multi-turn classes), which is the sum over the replicas: the target's arrival rate with rate_per: replica, its even share with rate_per: target.
# TYPE llmprobe_replica_requested_rate gauge
llmprobe_replica_requested_rate{replica="10.1.2.4:8000",target="pool"} 0.2
llmprobe_replica_requested_rate{replica="vllm-0",target="pool"} 0.2
llmprobe_replica_requested_rate{replica="vllm-2",target="pool"} 0
# HELP llmprobe_replica_harness_saturated 1 while the harness cannot deliver or time the replica's requested load, as llmprobe_harness_saturated.
# TYPE llmprobe_replica_harness_saturated gauge
llmprobe_replica_harness_saturated{replica="10.1.2.4:8000",target="pool"} 0
llmprobe_replica_harness_saturated{replica="vllm-0",target="pool"} 1
llmprobe_replica_harness_saturated{replica="vllm-2",target="pool"} 0
# HELP llmprobe_replica_warmup 1 while the replica is in its warm-up period (after it was discovered); its requests are kept out of the latency histograms.
# TYPE llmprobe_replica_warmup gauge
llmprobe_replica_warmup{replica="10.1.2.4:8000",target="pool"} 1
llmprobe_replica_warmup{replica="vllm-0",target="pool"} 0
llmprobe_replica_warmup{replica="vllm-2",target="pool"} 0
# HELP llmprobe_replica_retired 1 once discovery no longer lists the replica: it sends no more, and its series go when the grace period (discovery.grace_period) is over.
# TYPE llmprobe_replica_retired gauge
llmprobe_replica_retired{replica="10.1.2.4:8000",target="pool"} 0
llmprobe_replica_retired{replica="vllm-0",target="pool"} 0
llmprobe_replica_retired{replica="vllm-2",target="pool"} 1
# HELP llmprobe_discovery_replicas Replicas of the target that are probed (at most max_replicas).
# TYPE llmprobe_discovery_replicas gauge
llmprobe_discovery_replicas{mechanism="kubernetes",target="pool"} 2
# HELP llmprobe_discovery_discovered_replicas Replicas the last successful discovery refresh listed.
# TYPE llmprobe_discovery_discovered_replicas gauge
llmprobe_discovery_discovered_replicas{mechanism="kubernetes",target="pool"} 5
# HELP llmprobe_discovery_replicas_over_limit Replicas discovery listed beyond max_replicas, which are not probed.
# TYPE llmprobe_discovery_replicas_over_limit gauge
llmprobe_discovery_replicas_over_limit{mechanism="kubernetes",target="pool"} 3
# HELP llmprobe_discovery_refreshes_total Discovery refresh attempts (re-resolves, file reads, watch events).
# TYPE llmprobe_discovery_refreshes_total counter
llmprobe_discovery_refreshes_total{mechanism="kubernetes",target="pool"} 12
# HELP llmprobe_discovery_refresh_failures_total Discovery refreshes that failed; the last known set of replicas was kept.
# TYPE llmprobe_discovery_refresh_failures_total counter
llmprobe_discovery_refresh_failures_total{mechanism="kubernetes",target="pool"} 2
# HELP llmprobe_discovery_last_success_timestamp_seconds When a discovery refresh last succeeded; 0 before the first success.
# TYPE llmprobe_discovery_last_success_timestamp_seconds gauge
llmprobe_discovery_last_success_timestamp_seconds{mechanism="kubernetes",target="pool"} 1.7000001005e+09
# HELP llmprobe_discovery_replica_changes_total Replicas added to and removed from the probed set since start, by change (added, removed).
# TYPE llmprobe_discovery_replica_changes_total counter
llmprobe_discovery_replica_changes_total{change="added",mechanism="kubernetes",target="pool"} 3
llmprobe_discovery_replica_changes_total{change="removed",mechanism="kubernetes",target="pool"} 1
# HELP llmprobe_discovery_replicas_folded_total Retired replicas whose series were removed before their grace period was over, because more than max_replicas were retired: the replica label has at most 2 × max_replicas values.
# TYPE llmprobe_discovery_replicas_folded_total counter
llmprobe_discovery_replicas_folded_total{mechanism="kubernetes",target="pool"} 4
`
	families := []string{
		"llmprobe_replica_info", "llmprobe_replica_inflight_requests", "llmprobe_replica_requested_rate", "llmprobe_replica_harness_saturated",
		"llmprobe_replica_warmup", "llmprobe_replica_retired", "llmprobe_discovery_replicas", "llmprobe_discovery_discovered_replicas",
		"llmprobe_discovery_replicas_over_limit", "llmprobe_discovery_refreshes_total", "llmprobe_discovery_refresh_failures_total",
		"llmprobe_discovery_last_success_timestamp_seconds", "llmprobe_discovery_replica_changes_total", "llmprobe_discovery_replicas_folded_total",
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), families...); err != nil {
		t.Error(err)
	}

	// The target-level gauges: one series per target, the engine's sums.
	mfs := gather(t, reg)
	for _, c := range []struct {
		name string
		want float64
	}{{"llmprobe_inflight_requests", 3}, {"llmprobe_target_request_rate", 0.4}, {"llmprobe_harness_saturated", 0}} {
		if n := countSeries(mfs, c.name, map[string]string{"target": "pool"}); n != 1 {
			t.Errorf("%s has %d series of pool, want 1", c.name, n)
		}
		if got := series(mfs, c.name, map[string]string{"target": "pool"}).GetGauge().GetValue(); got != c.want {
			t.Errorf("%s{target=pool} = %v, want %v", c.name, got, c.want)
		}
	}

	// Before the first success the timestamp is 0; a duplicate replica
	// name (an engine bug) is exported once rather than failing the scrape.
	p := testPoolStatus()
	p.Discovery.LastSuccess = time.Time{}
	p.Replicas = append(p.Replicas, p.Replicas[0])
	statuses = []probe.TargetStatus{p}
	mfs = gather(t, reg)
	if got := series(mfs, "llmprobe_discovery_last_success_timestamp_seconds", nil).GetGauge().GetValue(); got != 0 {
		t.Errorf("last success before any = %v, want 0", got)
	}
	if n := countSeries(mfs, "llmprobe_replica_info", nil); n != 3 {
		t.Errorf("%d replica_info series, want 3", n)
	}

	// The plain targets (alpha, beta) have none of these series; a pool
	// the engine no longer runs loses them at the next scrape.
	statuses = testStatus()
	mfs = gather(t, reg)
	for _, name := range families {
		if mfs[name] != nil {
			t.Errorf("%s exported for targets without discovery", name)
		}
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}

// TestStatusPageReplicas: a target with discovery shows its discovery
// line and a row per replica; a plain target shows neither.
func TestStatusPageReplicas(t *testing.T) {
	pool := testPoolStatus()
	pool.Replicas[1].Name = `<b>evil</b>:8000` // names come from discovery: escaped
	statuses := append(testStatus(), pool)
	f := newWebFixture(t, func(o *WebOptions) {
		o.Status = func() []probe.TargetStatus { return statuses }
	})
	_, page := fetch(t, "GET", f.srv.URL+"/", nil, "")
	sec := page[strings.Index(page, `id="target-pool"`):]

	line := between(sec, `id="discovery-pool"`, "</p>")
	for _, want := range []string{"kubernetes discovery", "2 probed of 5 discovered", "3 over the limit</strong> of 2", "last success", "12 refreshes, 2 failed", "the last refresh failed", "listing EndpointSlices: forbidden"} {
		if !strings.Contains(line, want) {
			t.Errorf("the discovery line lacks %q:\n%s", want, line)
		}
	}
	table := between(sec, `id="replicas-pool"`, "</table>")
	rows := strings.Split(table, "<tr")
	if len(rows) != 1+1+3 { // before, header, three replicas
		t.Fatalf("%d rows in the replica table, want a header and 3:\n%s", len(rows)-1, table)
	}
	for i, want := range [][]string{
		{"vllm-0", "10.1.2.3:8000", ">vllm-0<", "0.2/s", "0.21/s", "2 / 64", "<strong>saturated</strong>", `title="schedule lag p99 2s over 1m0s (max_lag 50ms)"`, "<td>–</td>"},
		{"&lt;b&gt;evil&lt;/b&gt;:8000", "10.1.2.4:8000", "<td class=\"mono\">–</td>", "0.18/s", "1 / 64", ">warm-up<"},
		{"vllm-2", "10.1.2.5:8000", `class="retired"`, "0 / 0", ">ok<", "since "},
	} {
		for _, w := range want {
			if !strings.Contains(rows[2+i], w) {
				t.Errorf("replica row %d lacks %q:\n%s", i, w, rows[2+i])
			}
		}
	}
	if strings.Contains(page, "<b>evil</b>") {
		t.Error("a replica name is not escaped")
	}
	plain := page[:strings.Index(page, `id="target-pool"`)]
	if strings.Contains(plain, `id="discovery-`) || strings.Contains(plain, `id="replicas-`) {
		t.Error("a target without discovery shows a discovery line or replica table")
	}
}

// BenchmarkObserveReplica measures the hot path of a target with 64
// replicas: a replica's result counts in the target's series and its
// own (compare BenchmarkObserve/exemplar), and its scheduling events.
func BenchmarkObserveReplica(b *testing.B) {
	results := func() []*wire.Result {
		rs := make([]*wire.Result, 64)
		for i := range rs {
			rs[i] = replicaResult("alpha", "model-a", "chat", fmt.Sprintf("10.0.0.%d:8000", i))
		}
		return rs
	}
	b.Run("observe", func(b *testing.B) {
		m, _ := configuredMetrics(b)
		rs := results()
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			m.Observe(rs[i%len(rs)])
			i++
		}
	})
	b.Run("observe-parallel", func(b *testing.B) {
		m, _ := configuredMetrics(b)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			rs, i := results(), 0
			for pb.Next() {
				m.Observe(rs[i%len(rs)])
				i++
			}
		})
	})
	b.Run("events", func(b *testing.B) {
		m, _ := configuredMetrics(b)
		rs := results()
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			rep := rs[i%len(rs)].Replica
			m.Scheduled("alpha", rep, "chat")
			m.Sent("alpha", rep, "chat")
			i++
		}
	})
}
