// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package exporter

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmprobe/llmprobe/config"
	"github.com/llmprobe/llmprobe/probe"
	"github.com/llmprobe/llmprobe/probe/wire"
)

// The per-replica families of a target with discovery (docs/metrics.md,
// "Replicas and discovery"). They carry target and replica only (no model
// or class: a replica serves the target's model, and the class split is
// in the target-level families); the join labels a dashboard needs (pod,
// namespace, node) are on llmprobe_replica_info alone, so that a pod's
// restart on another node changes one series, not every histogram.

const labelReplica = "replica"

// MaxReplicaSeries bounds the replicas of one target that get series of
// their own: twice the largest max_replicas a configuration may set (the
// engine keeps at most max_replicas live and max_replicas retired). Should
// events of more arrive anyway, those of the replicas beyond the bound
// count in the target-level families only, and in
// llmprobe_replica_series_over_limit_total.
const MaxReplicaSeries = 2 * config.MaxMaxReplicas

var (
	replicaLabels        = []string{labelTarget, labelReplica}
	replicaOutcomeLabels = []string{labelTarget, labelReplica, labelOutcome}
	replicaReasonLabels  = []string{labelTarget, labelReplica, labelReason}
)

// replicaMetrics are the families fed from the events of a replica.
type replicaMetrics struct {
	scheduled, sent *prometheus.CounterVec   // target, replica
	requests        *prometheus.CounterVec   // target, replica, outcome
	dropped         *prometheus.CounterVec   // target, replica, reason
	ttft, tpot, e2e *prometheus.HistogramVec // target, replica
	overLimit       *prometheus.CounterVec   // target

	mu    sync.RWMutex
	limit int                                  // per target; MaxReplicaSeries outside tests
	byTgt map[string]map[string]*replicaSeries // target -> replica -> series
}

// replicaSeries are the resolved series of one replica.
type replicaSeries struct {
	scheduled, sent prometheus.Counter
	requests        [len(wire.Outcomes)]prometheus.Counter
	dropped         [len(probe.DropReasons)]prometheus.Counter
	ttft, tpot, e2e histogramWithExemplar
}

func newReplicaMetrics() *replicaMetrics {
	return &replicaMetrics{
		scheduled: prometheus.NewCounterVec(counterOpts("replica_scheduled_total", "Arrivals on the replica's own open-loop timeline (a target with discovery); the target's llmprobe_requests_scheduled_total is the sum over its replicas."), replicaLabels),
		sent:      prometheus.NewCounterVec(counterOpts("replica_sent_total", "Requests handed to the HTTP client for the replica."), replicaLabels),
		requests:  prometheus.NewCounterVec(counterOpts("replica_requests_total", "Requests to the replica that ended, by outcome (warm-up included), as llmprobe_requests_total."), replicaOutcomeLabels),
		dropped:   prometheus.NewCounterVec(counterOpts("replica_dropped_total", "Arrivals of the replica that were never sent, by reason, as llmprobe_requests_dropped_total."), replicaReasonLabels),
		ttft:      prometheus.NewHistogramVec(histogramOpts("replica_ttft_seconds", "Time to first token of the replica's requests, as llmprobe_ttft_seconds (warm-up excluded), without a class label.", ttftBuckets), replicaLabels),
		tpot:      prometheus.NewHistogramVec(histogramOpts("replica_tpot_seconds", "Time per output token of the replica's successful requests with at least 2 output tokens, as llmprobe_tpot_seconds (warm-up excluded).", tokenLatencyBuckets), replicaLabels),
		e2e:       prometheus.NewHistogramVec(histogramOpts("replica_e2e_seconds", "End-to-end latency of the replica's successful requests, as llmprobe_e2e_seconds (warm-up excluded).", e2eBuckets), replicaLabels),
		overLimit: prometheus.NewCounterVec(counterOpts("replica_series_over_limit_total", "Events of replicas beyond the 8192 a target may have series for (twice the largest max_replicas: live and retired): counted in the target-level families only. Anything but 0 is a bug (the engine keeps a target within 2 × its max_replicas)."), targetLabels),
		limit:     MaxReplicaSeries,
		byTgt:     map[string]map[string]*replicaSeries{},
	}
}

func (r *replicaMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{r.scheduled, r.sent, r.requests, r.dropped, r.ttft, r.tpot, r.e2e, r.overLimit}
}

func (r *replicaMetrics) vecs() []partialDeleter {
	return []partialDeleter{r.scheduled, r.sent, r.requests, r.dropped, r.ttft, r.tpot, r.e2e}
}

// replica returns the series of a replica of target ts, creating them
// (every outcome and drop reason at 0) at its first event; nil for a
// target without discovery (replica ""), a target the configuration no
// longer has, or a replica beyond the limit.
func (m *Metrics) replica(ts *targetSeries, replica string) *replicaSeries {
	if replica == "" {
		return nil
	}
	r := m.rep
	r.mu.RLock()
	rs := r.byTgt[ts.name][replica]
	r.mu.RUnlock()
	if rs != nil {
		return rs
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if rs = r.byTgt[ts.name][replica]; rs != nil {
		return rs
	}
	// SetConfig publishes its state before it deletes the replicas of
	// removed targets under r.mu: a target gone from the state here has
	// been (or is about to be) cleaned up and must not get series again.
	if m.state.Load().targets[ts.name] == nil {
		return nil
	}
	reps := r.byTgt[ts.name]
	if len(reps) >= r.limit {
		r.overLimit.WithLabelValues(ts.name).Inc()
		return nil
	}
	if reps == nil {
		reps = map[string]*replicaSeries{}
		r.byTgt[ts.name] = reps
	}
	t := ts.name
	rs = &replicaSeries{
		scheduled: r.scheduled.WithLabelValues(t, replica),
		sent:      r.sent.WithLabelValues(t, replica),
		ttft:      r.ttft.WithLabelValues(t, replica).(histogramWithExemplar),
		tpot:      r.tpot.WithLabelValues(t, replica).(histogramWithExemplar),
		e2e:       r.e2e.WithLabelValues(t, replica).(histogramWithExemplar),
	}
	for i, o := range wire.Outcomes {
		rs.requests[i] = r.requests.WithLabelValues(t, replica, string(o))
	}
	for i, d := range probe.DropReasons {
		rs.dropped[i] = r.dropped.WithLabelValues(t, replica, string(d))
	}
	reps[replica] = rs
	return rs
}

// ReplicaRemoved implements probe.ReplicaObserver: the engine calls it once
// a vanished replica's grace period is over, and every series of that
// replica goes. The target-level series keep what the replica added.
func (m *Metrics) ReplicaRemoved(target, replica string) {
	if replica == "" {
		return
	}
	r := m.rep
	r.mu.Lock()
	defer r.mu.Unlock()
	if reps := r.byTgt[target]; reps != nil {
		delete(reps, replica)
		if len(reps) == 0 {
			delete(r.byTgt, target)
		}
	}
	m.deletePartial(prometheus.Labels{labelTarget: target, labelReplica: replica}, r.vecs()...)
}

// dropTargets deletes the replica series of targets the configuration no
// longer has; called by SetConfig after it published the new state.
func (m *Metrics) dropTargets(removed []string) {
	if len(removed) == 0 {
		return
	}
	r := m.rep
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, t := range removed {
		delete(r.byTgt, t)
		m.deletePartial(prometheus.Labels{labelTarget: t}, append(r.vecs(), r.overLimit)...)
	}
}

func (rs *replicaSeries) drop(reason probe.DropReason) {
	for i, d := range probe.DropReasons {
		if d == reason {
			rs.dropped[i].Inc()
			return
		}
	}
}

// observe counts an ended request of the replica, by the rules of the
// target-level families (Metrics.Observe).
func (rs *replicaSeries) observe(r *wire.Result, ex prometheus.Labels) {
	for i, o := range wire.Outcomes {
		if o == r.Outcome {
			rs.requests[i].Inc()
			break
		}
	}
	if r.Warmup {
		return
	}
	if r.FirstToken {
		observe(rs.ttft, seconds(r.TTFT), ex)
	}
	if r.Outcome == wire.OutcomeSuccess {
		if r.OutputTokens >= 2 {
			observe(rs.tpot, seconds(r.TPOT), ex)
		}
		observe(rs.e2e, seconds(r.E2E), ex)
	}
}

// The scrape-time families of replicas and discovery, from
// probe.TargetStatus.Replicas and .Discovery (statusCollector).
var (
	replicaInfoDesc = prometheus.NewDesc(namespace+"_replica_info",
		"1 for every replica of a target with discovery, live or retired within the grace period, with the labels to join its series on: address (host:port dialled) and, where discovery knows them, pod, namespace and node (else empty). Join with * on(target, replica) group_left(pod) llmprobe_replica_info.",
		[]string{labelTarget, labelReplica, "address", "pod", "namespace", "node"}, nil)
	replicaInflightDesc = prometheus.NewDesc(namespace+"_replica_inflight_requests",
		"Requests sent to the replica and not yet ended.", replicaLabels, nil)
	replicaRateDesc = prometheus.NewDesc(namespace+"_replica_requested_rate",
		"Requested mean rate of requests of the replica, in requests per second, as llmprobe_target_request_rate (arrivals × expected turns of the multi-turn classes), which is the sum over the replicas: the target's arrival rate with rate_per: replica, its even share with rate_per: target.", replicaLabels, nil)
	replicaSaturatedDesc = prometheus.NewDesc(namespace+"_replica_harness_saturated",
		"1 while the harness cannot deliver or time the replica's requested load, as llmprobe_harness_saturated.", replicaLabels, nil)
	replicaWarmupDesc = prometheus.NewDesc(namespace+"_replica_warmup",
		"1 while the replica is in its warm-up period (after it was discovered); its requests are kept out of the latency histograms.", replicaLabels, nil)
	replicaRetiredDesc = prometheus.NewDesc(namespace+"_replica_retired",
		"1 once discovery no longer lists the replica: it sends no more, and its series go when the grace period (discovery.grace_period) is over.", replicaLabels, nil)

	discoveryLabels          = []string{labelTarget, "mechanism"}
	discoveryReplicasDesc    = prometheus.NewDesc(namespace+"_discovery_replicas", "Replicas of the target that are probed (at most max_replicas).", discoveryLabels, nil)
	discoveryDiscoveredDesc  = prometheus.NewDesc(namespace+"_discovery_discovered_replicas", "Replicas the last successful discovery refresh listed.", discoveryLabels, nil)
	discoveryOverLimitDesc   = prometheus.NewDesc(namespace+"_discovery_replicas_over_limit", "Replicas discovery listed beyond max_replicas, which are not probed.", discoveryLabels, nil)
	discoveryRefreshesDesc   = prometheus.NewDesc(namespace+"_discovery_refreshes_total", "Discovery refresh attempts (re-resolves, file reads, watch events).", discoveryLabels, nil)
	discoveryFailuresDesc    = prometheus.NewDesc(namespace+"_discovery_refresh_failures_total", "Discovery refreshes that failed; the last known set of replicas was kept.", discoveryLabels, nil)
	discoveryLastSuccessDesc = prometheus.NewDesc(namespace+"_discovery_last_success_timestamp_seconds", "When a discovery refresh last succeeded; 0 before the first success.", discoveryLabels, nil)
	discoveryChangesDesc     = prometheus.NewDesc(namespace+"_discovery_replica_changes_total", "Replicas added to and removed from the probed set since start, by change (added, removed).", []string{labelTarget, "mechanism", "change"}, nil)
	discoveryFoldedDesc      = prometheus.NewDesc(namespace+"_discovery_replicas_folded_total", "Retired replicas whose series were removed before their grace period was over, because more than max_replicas were retired: the replica label has at most 2 × max_replicas values.", discoveryLabels, nil)
)

func describeReplicas(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{
		replicaInfoDesc, replicaInflightDesc, replicaRateDesc, replicaSaturatedDesc, replicaWarmupDesc, replicaRetiredDesc,
		discoveryReplicasDesc, discoveryDiscoveredDesc, discoveryOverLimitDesc, discoveryRefreshesDesc, discoveryFailuresDesc,
		discoveryLastSuccessDesc, discoveryChangesDesc, discoveryFoldedDesc,
	} {
		ch <- d
	}
}

// collectReplicas exports a target's replicas and discovery state. At most
// MaxReplicaSeries replicas are exported, each name once (the engine
// guarantees both; a duplicate would fail the whole scrape).
func collectReplicas(ch chan<- prometheus.Metric, s *probe.TargetStatus) {
	if d := s.Discovery; d != nil {
		t, mech := s.Name, d.Mechanism
		ch <- prometheus.MustNewConstMetric(discoveryReplicasDesc, prometheus.GaugeValue, float64(d.Replicas), t, mech)
		ch <- prometheus.MustNewConstMetric(discoveryDiscoveredDesc, prometheus.GaugeValue, float64(d.Discovered), t, mech)
		ch <- prometheus.MustNewConstMetric(discoveryOverLimitDesc, prometheus.GaugeValue, float64(d.OverLimit), t, mech)
		ch <- prometheus.MustNewConstMetric(discoveryRefreshesDesc, prometheus.CounterValue, float64(d.Refreshes), t, mech)
		ch <- prometheus.MustNewConstMetric(discoveryFailuresDesc, prometheus.CounterValue, float64(d.Failures), t, mech)
		ts := 0.0
		if !d.LastSuccess.IsZero() {
			ts = float64(d.LastSuccess.UnixNano()) / 1e9
		}
		ch <- prometheus.MustNewConstMetric(discoveryLastSuccessDesc, prometheus.GaugeValue, ts, t, mech)
		ch <- prometheus.MustNewConstMetric(discoveryChangesDesc, prometheus.CounterValue, float64(d.Added), t, mech, "added")
		ch <- prometheus.MustNewConstMetric(discoveryChangesDesc, prometheus.CounterValue, float64(d.Removed), t, mech, "removed")
		ch <- prometheus.MustNewConstMetric(discoveryFoldedDesc, prometheus.CounterValue, float64(d.Folded), t, mech)
	}
	seen := make(map[string]bool, len(s.Replicas))
	for i := range s.Replicas {
		r := &s.Replicas[i]
		if r.Name == "" || seen[r.Name] {
			continue
		}
		if len(seen) == MaxReplicaSeries {
			break
		}
		seen[r.Name] = true
		t, n := s.Name, r.Name
		ch <- prometheus.MustNewConstMetric(replicaInfoDesc, prometheus.GaugeValue, 1, t, n, r.Address, r.Labels["pod"], r.Labels["namespace"], r.Labels["node"])
		ch <- prometheus.MustNewConstMetric(replicaInflightDesc, prometheus.GaugeValue, float64(r.Inflight), t, n)
		ch <- prometheus.MustNewConstMetric(replicaRateDesc, prometheus.GaugeValue, r.RequestedRate, t, n)
		ch <- prometheus.MustNewConstMetric(replicaSaturatedDesc, prometheus.GaugeValue, boolValue(r.Saturated), t, n)
		ch <- prometheus.MustNewConstMetric(replicaWarmupDesc, prometheus.GaugeValue, boolValue(r.Warmup), t, n)
		ch <- prometheus.MustNewConstMetric(replicaRetiredDesc, prometheus.GaugeValue, boolValue(!r.Gone.IsZero()), t, n)
	}
}
