// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package dashboards

import (
	"fmt"
	"strings"

	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/statetimeline"

	"github.com/llmprobe/llmprobe/alerts"
)

// WhyRowTitle is the title of the row that shows the daemon's diagnosis
// (docs/design.md "Diagnosis") and the server's own view of the targets
// with server_metrics, on both dashboards.
const WhyRowTitle = "Why is it slow? The cause, its evidence and the server's view"

// causeColors are the colors of the causes, in alerts.DiagnosisCauses'
// order: the server's own causes warm, the path blue, no cause green, no
// evidence grey.
var causeColors = map[string]string{
	"harness":      "purple",
	"path":         "blue",
	"queueing":     "red",
	"prefill":      "orange",
	"decode":       "yellow",
	"kv_pressure":  "dark-red",
	"prefix_cache": "light-blue",
	"deploy":       "dark-purple",
	"none":         "green",
	"unknown":      "text",
}

// causeIndex is the PromQL of the current cause per target and replica as
// a number: the 1-based position of its cause in alerts.DiagnosisCauses
// (causeMappings names and colors it). One series per target (replica ""
// is the target's own verdict) and per replica read on its own.
func causeIndex(sel string) string {
	terms := make([]string, len(alerts.DiagnosisCauses))
	base := strings.TrimSuffix(sel, "}")
	if base != "{" {
		base += ", "
	}
	for i, c := range alerts.DiagnosisCauses {
		terms[i] = fmt.Sprintf(`(%s%scause=%q} == 1) * %d`, alerts.DiagnosisMetric, base, c, i+1)
	}
	return "max by (target, replica) (\n  " + strings.Join(terms, "\n  or ") + "\n)"
}

func causeMappings() [][3]string {
	out := make([][3]string, len(alerts.DiagnosisCauses))
	for i, c := range alerts.DiagnosisCauses {
		out[i] = [3]string{fmt.Sprint(i + 1), c, causeColors[c]}
	}
	return out
}

// whyRow adds the Why row: the cause per target and replica over time and
// now, its evidence, and the server view beside the probe's (TTFT, the
// path gap, queue/prefill/decode, ITL, running and waiting, KV cache,
// GPU, preemptions and prefix-cache hits).
func whyRow(d *board, cfg alerts.Config, s sels) {
	d.row(WhyRowTitle)
	sel := s.target
	byTR := func(metric string) string { return fmt.Sprintf("max by (target, replica) (%s%s)", metric, sel) }
	// The server view's quantiles are labelled percentile="p50"|"p99"
	// (promtool refuses a quantile label on a gauge).
	byTRQ := func(metric string) string {
		return fmt.Sprintf("max by (target, replica, percentile) (%s%s)", metric, sel)
	}
	const who = "{{target}} {{replica}}"

	d.add(panel(d, statetimeline.NewPanelBuilder(), promDS, "Cause",
		"The cause llmprobe names each minute for each target (and each replica whose engine it reads on its own), from the rules in docs/design.md \"Diagnosis\": "+
			"harness (llmprobe's own numbers cannot be judged), path (gateway, proxy, network, TLS), queueing, prefill, decode, kv_pressure, prefix_cache, deploy, "+
			"none (nothing wrong seen) or unknown (not enough evidence: no server_metrics, reads failing, too few requests). "+
			"The alerts' descriptions name the same cause; docs/runbook.md has a section per cause with its prescription.",
		12, 7).
		WithTarget(promTarget("A", q{expr: causeIndex(sel), legend: who})).
		Mappings(valueMap(causeMappings()...)).
		ShowValue(common.VisibilityModeAuto).
		MergeValues(true).
		RowHeight(0.8))
	d.add(d.stat("Server view",
		"Whether llmprobe read the target's (or the replica's) engine metrics at its last read and recognised an engine (llmprobe_server_up). "+
			"No data: the target has no server_metrics. Not read: the status page says why (connection refused, not an engine, too large, timed out).",
		"none", 4, 7,
		q{expr: byTR(alerts.ServerUpMetric), legend: who},
	).Mappings(valueMap([3]string{"1", "read", "green"}, [3]string{"0", "not read", "orange"})).
		NoValue("no server_metrics"))
	d.add(d.stat("Evidence now",
		"The figures the current verdict rests on (llmprobe_diagnosis_evidence; docs/metrics.md lists them and their units): waiting and running requests, KV-cache and GPU use, "+
			"the queue's share of the server's TTFT, the probe's p99 and mean TTFT and the server's mean, the mean path gap, the recent and history means of what grew, "+
			"preemptions per request, prefix-cache hit ratios.",
		"none", 8, 7,
		q{expr: fmt.Sprintf("max by (target, replica, figure) (%s%s)", alerts.DiagnosisEvidenceMetric, sel), legend: "{{target}} {{replica}} {{figure}}"},
	).Decimals(3).ColorMode(common.BigValueColorModeNone).TextMode(common.BigValueTextModeValueAndName))

	d.add(d.ts("TTFT: probe vs server",
		"Solid: the probe's TTFT p50 and p99 per target. Dashed: the server's own TTFT p50 and p99 over the last read interval (from its histogram's bucket deltas, "+
			"summed over its engines, the target's model only). The server's figure starts when the request reaches the engine: what lies between is the path gap beside.",
		"s", 12, 8,
		q{expr: alerts.HistogramQuantile(0.5, alerts.LatencyMetric("ttft"), []string{"target"}, s.full, rateWin), legend: "probe p50 {{target}}"},
		q{expr: alerts.HistogramQuantile(0.99, alerts.LatencyMetric("ttft"), []string{"target"}, s.full, rateWin), legend: "probe p99 {{target}}"},
		q{expr: byTRQ(alerts.ServerTTFTMetric), legend: "server {{percentile}} " + who},
	).OverrideByQuery("C", dashed()))
	d.add(d.ts("Path gap: probe TTFT − server TTFT",
		"The probe's TTFT minus the server's over the same window: p50 and p99, and the mean from the sums (where the engine's TTFT leaves its queue out, "+
			"its queue time is subtracted too). Dashed: half the width of the server's bucket holding the quantile, the error of its figure. "+
			"A gap that is most of the TTFT, or grows while the server's TTFT does not, is the gateway, proxy, network or TLS: cause path.",
		"s", 12, 8,
		q{expr: byTRQ(alerts.ServerGapMetric), legend: "gap {{percentile}} " + who},
		q{expr: byTR(alerts.ServerGapMeanMetric), legend: "gap mean " + who},
		q{expr: byTRQ(alerts.ServerTTFTErrorMetric), legend: "bucket error {{percentile}} " + who},
	).OverrideByQuery("C", dashed()))

	d.add(d.ts("Server queue, prefill and decode (means)",
		"Where the server's time goes per request, as means over the last read interval from its histograms' _sum and _count (vLLM's buckets for these start at 0.3 s): "+
			"waiting in its queue, prefill (up to the first token) and decode. Queue time most of the TTFT: queueing. Prefill growing alone: prefill (longer prompts).",
		"s", 8, 8,
		q{expr: byTR(alerts.ServerQueueMetric), legend: "queue " + who},
		q{expr: byTR(alerts.ServerPrefillMetric), legend: "prefill " + who},
		q{expr: byTR(alerts.ServerDecodeMetric), legend: "decode " + who},
	))
	d.add(d.ts("Server ITL p50 and p99",
		"The server's own inter-token latency over the last read interval, from its histogram's bucket deltas. Growing with the running batch, KV not full: decode.",
		"s", 8, 8,
		q{expr: byTRQ(alerts.ServerITLMetric), legend: "{{percentile}} " + who},
	))
	d.add(d.ts("Server running and waiting",
		"Requests in the server's running batch (solid) and waiting queue (dashed) at its last read, all its traffic (the probe's is a small share). "+
			"Waiting in most reads with running flat at its maximum: queueing at the batch limit (max_num_seqs).",
		"short", 8, 8,
		q{expr: byTR(alerts.ServerRunningMetric), legend: "running " + who},
		q{expr: byTR(alerts.ServerWaitingMetric), legend: "waiting " + who},
	).OverrideByQuery("B", dashed()))

	d.add(d.ts("KV cache and GPU",
		"The server's KV-cache usage at its last read (solid) and its GPU utilization where known (dashed: dcgm-exporter's, through diagnosis.prometheus). "+
			"KV at 90% or more with requests waiting: queueing at the KV limit; GPU at 95% or more: at the GPU's; high p99 with the GPU under 60%: the length mix or prefill skew.",
		"percentunit", 8, 8,
		q{expr: byTR(alerts.ServerKVUsageMetric), legend: "KV " + who},
		q{expr: byTR(alerts.ServerGPUUtilMetric), legend: "GPU " + who},
	).Min(0).Max(1).OverrideByQuery("B", dashed()))
	d.add(d.ts("Preemptions per request",
		"Preemptions the server made per request it finished, over the last read interval (vllm:num_preemptions_total). Rising: the KV cache runs out and "+
			"running requests are evicted and recomputed: kv_pressure.",
		"short", 8, 8,
		q{expr: byTR(alerts.ServerPreemptionsMetric), legend: who},
	).Min(0))
	d.add(d.ts("Prefix-cache hit ratio: server vs intended",
		"The server's prefix-cache hit ratio over all its traffic (solid), next to the reuse the probe's workload intends (dashed). "+
			"Falling below where it was: affinity or eviction lost (prefix_cache).",
		"percentunit", 8, 8,
		q{expr: byTR(alerts.ServerPrefixHitMetric), legend: "server " + who},
		q{expr: fmt.Sprintf("max by (target) (llmprobe_prefix_reuse_target_ratio%s)", s.targetClass), legend: "intended {{target}}"},
	).Min(0).Max(1).OverrideByQuery("B", dashed()))
}
