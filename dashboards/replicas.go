// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package dashboards

import (
	"fmt"
	"strings"

	"github.com/grafana/grafana-foundation-sdk/go/common"

	"github.com/llmprobe/llmprobe/alerts"
)

// ReplicasRowTitle is the title of the correlation dashboard's row of the
// replicas a discovery target probes (docs/design.md "Replicas").
const ReplicasRowTitle = "Replicas (discovery): which one is slow, and why?"

// replicaJoin returns one llmprobe_replica_info series per replica of
// the selected targets, labelled namespace, pod and replica, to join a
// model server's or a GPU's series to the replica probing it:
// `<server series> * on (namespace, pod) group_left (replica) <replicaJoin>`.
//
// The pod is taken from the replica label, which is the pod's name
// wherever discovery knows one (a DNS or file replica is its address and
// joins nothing): when Prometheus scrapes llmprobe with Kubernetes target
// labels of its own (a ServiceMonitor adds llmprobe's namespace and pod),
// the replica's pod and namespace labels arrive as exported_pod and
// exported_namespace, and replicas without a pod would all carry
// llmprobe's. The namespace is exported_namespace when present, else
// namespace, so the join works with and without honor_labels. The max
// merges targets that probe the same pods.
func replicaJoin(cfg alerts.Config) string {
	info := alerts.ReplicaInfoMetric + cfg.DashboardMatchers(`target=~"$target"`)
	return "max by (namespace, pod, replica) (\n" +
		`  label_replace(label_replace(` + info + `, "pod", "$1", "replica", "(.+)"), "namespace", "$1", "exported_namespace", "(.+)")` + "\n" +
		")"
}

// joinReplica puts the replica's label on a server or GPU expression
// labelled namespace and pod.
func joinReplica(cfg alerts.Config, expr string) string {
	return alerts.Paren(expr) + "\n* on (namespace, pod) group_left (replica)\n" + replicaJoin(cfg)
}

// replicasRow adds the per-replica row: llmprobe's view of each replica
// (TTFT, TPOT, errors, the outlier ratio LLMProbeReplicaOutlier reads)
// and, joined by pod, the replica's own engine and GPU series.
func replicasRow(d *board, cfg alerts.Config, serverSel, gpuSel string) {
	ro := cfg.ReplicaOutlier
	target := cfg.DashboardMatchers(`target=~"$target"`)
	by := []string{"target", "replica"}
	k := ro.Factor
	d.row(ReplicasRowTitle)

	ratio := alerts.ReplicaRatioRecord + cfg.RecordedMatchers(`target=~"$target"`)
	d.add(thresholdLine(d.ts("TTFT p50 / median of peers",
		fmt.Sprintf("What LLMProbeReplicaOutlier evaluates (needs alerts/llmprobe.rules.yml loaded): each replica's median TTFT over %s divided by the median "+
			"of its target's replicas with at least %d requests in that window. 1 is typical; the alert names a replica above %s× (dashed red) for %s, "+
			"with at least %d replicas with evidence, unless its harness was saturated, it was warming up or it is retired.",
			ro.Window, ro.MinRequests, alerts.FormatFloat(k), ro.For, ro.MinReplicas),
		"suffix:×", 12, 8,
		q{expr: ratio, legend: "{{target}} {{replica}}"},
	).Min(0), k))
	d.add(d.stat("Outlier ratio now",
		fmt.Sprintf("The current ratio per replica: green below %s×, orange from %s×, red from %s× (the alert's threshold). "+
			"The alert's description names the pod, namespace and node of a red one.", alerts.FormatFloat(1+(k-1)/2), alerts.FormatFloat(1+(k-1)/2), alerts.FormatFloat(k)),
		"suffix:×", 12, 8,
		q{expr: ratio, legend: "{{replica}}"},
	).Decimals(2).
		Thresholds(thresholds(step(nil, "green"), step(ptr(1+(k-1)/2), "orange"), step(ptr(k), "red"))).
		TextMode(common.BigValueTextModeValueAndName))

	quantile := func(metric string, quant float64) string {
		return alerts.HistogramQuantile(quant, metric, by, target, rateWin)
	}
	d.add(d.ts("TTFT p50 and p99 per replica",
		"Time to first token of each replica as llmprobe measures it (solid p50, dashed p99; warm-up excluded). A replica far above the others is the outlier; "+
			"all of them rising together is the model, the load or the path in front of them.",
		"s", 8, 8,
		q{expr: quantile(alerts.ReplicaTTFTMetric, 0.5), legend: "p50 {{target}} {{replica}}"},
		q{expr: quantile(alerts.ReplicaTTFTMetric, 0.99), legend: "p99 {{target}} {{replica}}"},
	).OverrideByQuery("B", dashed()))
	d.add(d.ts("TPOT p50 per replica",
		"Time per output token of each replica (successful requests with at least 2 output tokens). A slow decode on one replica: its GPU, its batch size, its KV cache.",
		"s", 8, 8,
		q{expr: quantile(alerts.ReplicaTPOTMetric, 0.5), legend: "{{target}} {{replica}}"},
	))
	failed := cfg.DashboardMatchers(`target=~"$target"`, `outcome!="success"`)
	d.add(d.ts("Error ratio per replica",
		"Share of each replica's completed requests with an outcome other than success. One replica failing while its peers do not: restart or drain it.",
		"percentunit", 8, 8,
		q{expr: fmt.Sprintf("sum by (target, replica) (rate(%s%s[%s]))\n/\nsum by (target, replica) (rate(%s%s[%s]))",
			alerts.ReplicaRequestsMetric, failed, rateWin, alerts.ReplicaRequestsMetric, target, rateWin), legend: "{{target}} {{replica}}"},
	).Min(0))

	// The replica's own server and GPU, joined by pod.
	vllm := engines[0]
	d.add(d.ts("Engine queue per replica (vLLM)",
		"The vLLM engine of each replica's pod, joined to the replica by namespace and pod (llmprobe_replica_info; DNS and file replicas without a pod are not shown): "+
			"running batch (solid) and waiting queue (dashed). A queue on the slow replica only: the router sends it more, or it serves slower.",
		"short", 8, 8,
		q{expr: joinReplica(cfg, fmt.Sprintf("max by (namespace, pod) (%s%s)", vllm.running, serverSel)), legend: "running {{replica}}"},
		q{expr: joinReplica(cfg, fmt.Sprintf("max by (namespace, pod) (%s%s)", vllm.waiting, serverSel)), legend: "waiting {{replica}}"},
	).OverrideByQuery("B", dashed()))
	d.add(d.ts("KV-cache usage per replica (vLLM)",
		"vllm:kv_cache_usage_perc of each replica's pod. Near 1 the engine preempts and queues: a replica with a full cache answers slowly.",
		"percentunit", 8, 8,
		q{expr: joinReplica(cfg, fmt.Sprintf("max by (namespace, pod) (%s%s)", vllm.kvUsage, serverSel)), legend: "{{replica}}"},
	).Min(0).Max(1))
	gpu := strings.TrimSuffix(gpuSel, "}")
	if gpu == "" {
		gpu = "{"
	} else {
		gpu += ", "
	}
	gpu += `pod!=""}`
	d.add(d.ts("GPU utilisation and power per replica (DCGM)",
		"dcgm-exporter's series of the GPUs of each replica's pod (its Kubernetes pod mapping labels them namespace and pod): utilisation (solid, left) "+
			"and power (dashed, right). Low utilisation and power while requests wait: a throttled, stuck or failing GPU (check XID errors and clocks).",
		"percent", 8, 8,
		q{expr: joinReplica(cfg, "max by (namespace, pod) (DCGM_FI_DEV_GPU_UTIL"+gpu+")"), legend: "util {{replica}}"},
		q{expr: joinReplica(cfg, "sum by (namespace, pod) (DCGM_FI_DEV_POWER_USAGE"+gpu+")"), legend: "power {{replica}}"},
	).OverrideByQuery("B", append(dashed(), rightAxis("watt")...)))
}
