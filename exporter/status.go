// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package exporter

import (
	"slices"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmprobe/llmprobe/probe"
	"github.com/llmprobe/llmprobe/probe/harness"
)

var (
	inflightDesc = prometheus.NewDesc(namespace+"_inflight_requests",
		"Requests sent and not yet ended.", targetLabels, nil)
	targetRateDesc = prometheus.NewDesc(namespace+"_target_request_rate",
		"Requested mean rate of requests of this process, in requests per second: arrivals × expected turns of the multi-turn classes (its share when replicas split a target; the sum over its replicas for a target with discovery).", targetLabels, nil)
	saturatedDesc = prometheus.NewDesc(namespace+"_harness_saturated",
		"1 while the harness cannot deliver or time the requested load (late sends, late drops, or timestamps inflated by CPU starvation, judged by counts over the saturation window): this target's numbers are not trustworthy. llmprobe_harness_saturation_reason says why.", targetLabels, nil)
	saturationReasonDesc = prometheus.NewDesc(namespace+"_harness_saturation_reason",
		"1 for each reason the harness is saturated: late_sends, late_drops, sched_latency, cpu_contention, cpu_throttled; 0 otherwise.", []string{labelTarget, labelReason}, nil)
	overloadedDesc = prometheus.NewDesc(namespace+"_target_overloaded",
		"1 while the target does not absorb the offered load: over the saturation window, enough arrivals were dropped because max_inflight requests were still running. The measurements are right; the load is not delivered. It never inhibits the latency alerts.", targetLabels, nil)
	connectionsDesc = prometheus.NewDesc(namespace+"_target_connections",
		"Connections open to the target: its HTTP client's pool, in use and idle. On HTTP/1.1 one per concurrent stream; on HTTP/2 streams share a connection up to the server's SETTINGS_MAX_CONCURRENT_STREAMS, and more are opened past it.", targetLabels, nil)
	protocolDesc = prometheus.NewDesc(namespace+"_target_http_protocol_info",
		"1 for the HTTP protocol the target's last response came over (HTTP/1.1, HTTP/2.0, HTTP/1.0, other); absent before the first response.", []string{labelTarget, "protocol"}, nil)
	warmupDesc = prometheus.NewDesc(namespace+"_warmup",
		"1 while the target is in its warm-up period (after start or a config change); its requests are kept out of the latency histograms.", targetLabels, nil)
	reuseTargetDesc = prometheus.NewDesc(namespace+"_prefix_reuse_target_ratio",
		"Configured intent: the fraction of prompt tokens the workload class shares as prefixes a prefix cache could serve.", targetClassLabels, nil)
	refitsDesc = prometheus.NewDesc(namespace+"_workload_refits_total",
		"Refits of a target's length distributions from the served model's histograms (workload_from), by result; a failed refit keeps the previous distributions.", []string{labelTarget, "result"}, nil)
	refitTimeDesc = prometheus.NewDesc(namespace+"_workload_refit_success_timestamp_seconds",
		"When the target's length distributions were last refitted successfully (workload_from); 0 before the first success.", targetLabels, nil)
	fittedTokensDesc = prometheus.NewDesc(namespace+"_workload_fitted_tokens",
		"Percentiles (p50, p90, p99) of the length distributions a target currently draws from, as last refitted from the served model's histograms (workload_from).", []string{labelTarget, "kind", "percentile"}, nil)
)

// statusCollector exports the engine's point-in-time gauges at scrape
// time, so the series of a removed target disappear with it.
type statusCollector struct {
	status func() []probe.TargetStatus
}

// NewStatusCollector returns a collector of the gauges that describe the
// engine's state (llmprobe_inflight_requests, _target_request_rate,
// _harness_saturated, _warmup, _target_connections,
// _target_http_protocol_info, _prefix_reuse_target_ratio, _target_info,
// _target_changes_total, _target_last_change_timestamp_seconds, and for a
// target with discovery llmprobe_replica_info, _replica_inflight_requests,
// _replica_requested_rate, _replica_harness_saturated, _replica_warmup,
// _replica_retired and the llmprobe_discovery_* families), read from
// status (typically (*probe.Engine).Status) at every scrape.
func NewStatusCollector(status func() []probe.TargetStatus) prometheus.Collector {
	return statusCollector{status: status}
}

// Describe implements prometheus.Collector.
func (c statusCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- inflightDesc
	ch <- targetRateDesc
	ch <- saturatedDesc
	ch <- saturationReasonDesc
	ch <- overloadedDesc
	ch <- warmupDesc
	ch <- connectionsDesc
	ch <- protocolDesc
	ch <- reuseTargetDesc
	ch <- refitsDesc
	ch <- refitTimeDesc
	ch <- fittedTokensDesc
	describeIdentity(ch)
	describeRegression(ch)
	describeReplicas(ch)
	describeServer(ch)
	describeDiagnosis(ch)
}

// Collect implements prometheus.Collector.
func (c statusCollector) Collect(ch chan<- prometheus.Metric) {
	if c.status == nil {
		return
	}
	for _, s := range c.status() {
		ch <- prometheus.MustNewConstMetric(inflightDesc, prometheus.GaugeValue, float64(s.Inflight), s.Name)
		ch <- prometheus.MustNewConstMetric(targetRateDesc, prometheus.GaugeValue, s.RequestedRate, s.Name)
		ch <- prometheus.MustNewConstMetric(saturatedDesc, prometheus.GaugeValue, boolValue(s.Saturated), s.Name)
		for _, r := range harness.SaturationReasons {
			ch <- prometheus.MustNewConstMetric(saturationReasonDesc, prometheus.GaugeValue, boolValue(slices.Contains(s.SaturationReasons, r)), s.Name, string(r))
		}
		ch <- prometheus.MustNewConstMetric(overloadedDesc, prometheus.GaugeValue, boolValue(s.Overloaded), s.Name)
		ch <- prometheus.MustNewConstMetric(warmupDesc, prometheus.GaugeValue, boolValue(s.Warmup), s.Name)
		ch <- prometheus.MustNewConstMetric(connectionsDesc, prometheus.GaugeValue, float64(s.Connections), s.Name)
		if s.Protocol != "" {
			ch <- prometheus.MustNewConstMetric(protocolDesc, prometheus.GaugeValue, 1, s.Name, s.Protocol)
		}
		for _, cl := range s.Classes {
			ch <- prometheus.MustNewConstMetric(reuseTargetDesc, prometheus.GaugeValue, cl.ReuseIntent, s.Name, cl.Name)
		}
		if rf := s.Refit; rf != nil {
			collectRefit(ch, s.Name, rf)
		}
		collectIdentity(ch, s.Name, s.Identity)
		collectRegression(ch, s.Name, s.Regressions)
		collectReplicas(ch, &s)
		collectServer(ch, &s)
		collectDiagnosis(ch, &s)
	}
}

func collectRefit(ch chan<- prometheus.Metric, target string, rf *probe.RefitStatus) {
	ch <- prometheus.MustNewConstMetric(refitsDesc, prometheus.CounterValue, float64(rf.Successes), target, "success")
	ch <- prometheus.MustNewConstMetric(refitsDesc, prometheus.CounterValue, float64(rf.Failures), target, "failure")
	ts := 0.0
	if !rf.LastSuccess.IsZero() {
		ts = float64(rf.LastSuccess.UnixNano()) / 1e9
	}
	ch <- prometheus.MustNewConstMetric(refitTimeDesc, prometheus.GaugeValue, ts, target)
	if rf.Successes == 0 {
		return
	}
	for i, q := range probe.RefitQuantiles {
		qs := "p" + strconv.FormatFloat(100*q, 'g', -1, 64)
		ch <- prometheus.MustNewConstMetric(fittedTokensDesc, prometheus.GaugeValue, rf.Prompt[i], target, "prompt", qs)
		ch <- prometheus.MustNewConstMetric(fittedTokensDesc, prometheus.GaugeValue, rf.Output[i], target, "output", qs)
	}
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
