// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package exporter

import (
	"fmt"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmprobe/llmprobe/probe"
	"github.com/llmprobe/llmprobe/servermetrics"
)

// The server view (server_metrics, probe/serverview.go): what each
// target's (or replica's) serving engine said of the last read interval,
// exported from Engine.Status at scrape time. Quantiles are labelled
// percentile="p50"|"p99" (as llmprobe_workload_fitted_tokens): promtool
// refuses a quantile label on a gauge. The replica label is empty
// (absent in Prometheus) for a target's own view. A view without a window
// (not read yet, one read, a failed read) has only up, reads and info:
// no figure series, and the status page says why.

var serverLabels = []string{labelTarget, labelReplica}

func serverDesc(name, help string, extra ...string) *prometheus.Desc {
	return prometheus.NewDesc(namespace+"_server_"+name, help, append(append([]string{}, serverLabels...), extra...), nil)
}

var (
	serverUpDesc = serverDesc("up",
		"1 when the last read of the target's (or replica's) serving-engine metrics (server_metrics) succeeded and an engine was recognised, else 0; the status page says why.")
	serverReadsDesc = serverDesc("reads_total",
		"Reads of the serving engine's metrics, by outcome: ok, error, timeout, too_large, not_an_engine.", "outcome")
	serverInfoDesc = serverDesc("info",
		"1 for the engine recognised in the serving engine's metrics: vllm, sglang, tgi or llama.cpp.", "engine")
	serverTTFTDesc = serverDesc("ttft_seconds",
		"The server's own time to first token over the last read interval, percentile p50 or p99 estimated from its histogram's bucket deltas (llmprobe_server_ttft_bucket_error_seconds states the error). vLLM's and SGLang's include the queue.", "percentile")
	serverTTFTErrorDesc = serverDesc("ttft_bucket_error_seconds",
		"Half the width of the server's TTFT bucket that holds the quantile: the estimate's stated error (+Inf in the last bucket).", "percentile")
	serverITLDesc = serverDesc("itl_seconds",
		"The server's inter-token latency over the last read interval, percentile p50 or p99 from its histogram's bucket deltas.", "percentile")
	serverQueueDesc = serverDesc("queue_seconds",
		"The server's mean queue time of the requests that finished in the last read interval (_sum/_count deltas).")
	serverPrefillDesc = serverDesc("prefill_seconds",
		"The server's mean prefill time of the requests that finished in the last read interval (_sum/_count deltas).")
	serverDecodeDesc = serverDesc("decode_seconds",
		"The server's mean decode time of the requests that finished in the last read interval (_sum/_count deltas).")
	serverRunningDesc = serverDesc("requests_running",
		"Requests the server was running at the last read (summed over its engine cores).")
	serverWaitingDesc = serverDesc("requests_waiting",
		"Requests waiting in the server's queue at the last read (summed over its engine cores).")
	serverKVDesc = serverDesc("kv_cache_usage_ratio",
		"The server's KV-cache usage 0–1 at the last read (mean over its engine cores).")
	serverPreemptionsDesc = serverDesc("preemptions_per_request",
		"The server's preemptions per finished request over the last read interval (counter deltas).")
	serverPrefixDesc = serverDesc("prefix_cache_hit_ratio",
		"The server's prefix-cache hits per query (tokens) over the last read interval, all its traffic.")
	serverGPUDesc = serverDesc("gpu_utilization_ratio",
		"The GPUs' mean utilisation 0–1 over the last read interval (DCGM_FI_DEV_GPU_UTIL from global.diagnosis.prometheus), where known.")
	serverGapDesc = serverDesc("ttft_gap_seconds",
		"The path gap: the probe's TTFT quantile minus the server's over the same read interval (minus the server's mean queue time where its TTFT leaves the queue out): time spent in the gateway, proxy, network and TLS.", "percentile")
	serverGapMeanDesc = serverDesc("ttft_gap_mean_seconds",
		"The probe's mean TTFT minus the server's (from its _sum/_count) over the same read interval, minus the server's mean queue time where its TTFT leaves the queue out.")
)

var serverDescs = []*prometheus.Desc{serverUpDesc, serverReadsDesc, serverInfoDesc, serverTTFTDesc, serverTTFTErrorDesc, serverITLDesc,
	serverQueueDesc, serverPrefillDesc, serverDecodeDesc, serverRunningDesc, serverWaitingDesc, serverKVDesc, serverPreemptionsDesc,
	serverPrefixDesc, serverGPUDesc, serverGapDesc, serverGapMeanDesc}

func describeServer(ch chan<- *prometheus.Desc) {
	for _, d := range serverDescs {
		ch <- d
	}
}

// collectServer exports a target's server views: its own, and its
// replicas'.
func collectServer(ch chan<- prometheus.Metric, s *probe.TargetStatus) {
	collectServerView(ch, s.Name, "", s.Server)
	for _, r := range s.Replicas {
		collectServerView(ch, s.Name, r.Name, r.Server)
	}
}

func collectServerView(ch chan<- prometheus.Metric, target, replica string, v *probe.ServerStatus) {
	if v == nil {
		return
	}
	gauge := func(d *prometheus.Desc, val float64, extra ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, val, append([]string{target, replica}, extra...)...)
	}
	gauge(serverUpDesc, boolValue(v.Up))
	for _, o := range servermetrics.Outcomes {
		ch <- prometheus.MustNewConstMetric(serverReadsDesc, prometheus.CounterValue, float64(v.Reads[o]), target, replica, o)
	}
	if v.Engine != "" {
		gauge(serverInfoDesc, 1, v.Engine)
	}
	w := v.Window
	if w == nil {
		return
	}
	quantiles := func(h *servermetrics.Histogram, d, errD *prometheus.Desc) {
		if h == nil || h.Count <= 0 {
			return
		}
		for _, q := range []struct {
			q     float64
			label string
		}{{0.5, "p50"}, {0.99, "p99"}} {
			qq := h.Quantile(q.q)
			gauge(d, qq.Value, q.label)
			if errD != nil {
				gauge(errD, qq.Error(), q.label)
			}
		}
	}
	quantiles(w.TTFT, serverTTFTDesc, serverTTFTErrorDesc)
	quantiles(w.ITL, serverITLDesc, nil)
	for _, m := range []struct {
		d *prometheus.Desc
		m *servermetrics.Mean
	}{{serverQueueDesc, w.Queue}, {serverPrefillDesc, w.Prefill}, {serverDecodeDesc, w.Decode}} {
		if m.m != nil {
			if val, ok := m.m.Value(); ok {
				gauge(m.d, val)
			}
		}
	}
	for _, g := range []struct {
		d *prometheus.Desc
		v *float64
	}{{serverRunningDesc, w.Running}, {serverWaitingDesc, w.Waiting}, {serverKVDesc, w.KVUsage}, {serverGPUDesc, v.GPUUtil}} {
		if g.v != nil {
			gauge(g.d, *g.v)
		}
	}
	if val, ok := w.PreemptionsPerRequest(); ok {
		gauge(serverPreemptionsDesc, val)
	}
	if val, ok := w.PrefixHitRatio(); ok {
		gauge(serverPrefixDesc, val)
	}
	if g := v.Gap; g != nil {
		gauge(serverGapDesc, g.P50, "p50")
		gauge(serverGapDesc, g.P99, "p99")
		gauge(serverGapMeanDesc, g.Mean)
	}
}

// serverLines are the status page's lines of a target's server views:
// its own, then its replicas'.
func serverLines(s *probe.TargetStatus) []string {
	var out []string
	if s.Server != nil {
		out = append(out, serverLine("", s.Server))
	}
	for _, r := range s.Replicas {
		if r.Server != nil {
			out = append(out, serverLine(r.Name, r.Server))
		}
	}
	return out
}

// serverLine is one view in words: its figures, or "no server view:
// <reason>".
func serverLine(replica string, v *probe.ServerStatus) string {
	var b strings.Builder
	b.WriteString("Server view")
	if replica != "" {
		fmt.Fprintf(&b, " of %s", replica)
	}
	fmt.Fprintf(&b, " (%s, every %v): ", v.URL, v.Interval)
	w := v.Window
	if w == nil {
		fmt.Fprintf(&b, "no server view: %s", v.Why)
		return b.String()
	}
	ms := func(s float64) string { return fmt.Sprintf("%.1f ms", s*1e3) }
	var parts []string
	parts = append(parts, fmt.Sprintf("%s over %v", v.Engine, w.End.Sub(w.Start).Round(time.Second)))
	if h := w.TTFT; h != nil && h.Count > 0 {
		p50, p99 := h.Quantile(0.5), h.Quantile(0.99)
		parts = append(parts, fmt.Sprintf("TTFT p50 %s ±%s, p99 %s of %.0f requests", ms(p50.Value), ms(p50.Error()), ms(p99.Value), h.Count))
	}
	if w.Queue != nil {
		if q, ok := w.Queue.Value(); ok {
			parts = append(parts, "queue "+ms(q))
		}
	}
	if w.Running != nil && w.Waiting != nil {
		parts = append(parts, fmt.Sprintf("%.0f running, %.0f waiting", *w.Running, *w.Waiting))
	}
	if w.KVUsage != nil {
		parts = append(parts, fmt.Sprintf("KV %.0f%%", 100**w.KVUsage))
	}
	if v.GPUUtil != nil {
		parts = append(parts, fmt.Sprintf("GPU %.0f%%", 100**v.GPUUtil))
	}
	if g := v.Gap; g != nil {
		parts = append(parts, fmt.Sprintf("path gap mean %s, p50 %s (±%s), p99 %s", ms(g.Mean), ms(g.P50), ms(g.P50Error), ms(g.P99)))
	} else if v.GapWhy != "" {
		parts = append(parts, "no path gap: "+v.GapWhy)
	}
	b.WriteString(strings.Join(parts, "; "))
	if !v.Up {
		fmt.Fprintf(&b, " (the last read failed: %s)", v.Why)
	}
	return b.String()
}
