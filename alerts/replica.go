// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package alerts

import (
	"fmt"
	"time"

	"github.com/prometheus/common/model"
)

// Replicas (docs/design.md "Replicas"): a target with a discovery block
// probes every replica it finds and exports per-replica series with a
// `replica` label. The rules here name the one replica that is much slower
// than its peers, and say when discovery itself stops working.

// The per-replica and discovery series of the metrics contract the rules
// and the dashboards read (docs/metrics.md).
const (
	ReplicaTTFTMetric       = "llmprobe_replica_ttft_seconds"
	ReplicaTPOTMetric       = "llmprobe_replica_tpot_seconds"
	ReplicaE2EMetric        = "llmprobe_replica_e2e_seconds"
	ReplicaRequestsMetric   = "llmprobe_replica_requests_total"
	ReplicaInfoMetric       = "llmprobe_replica_info"
	ReplicaInflightMetric   = "llmprobe_replica_inflight_requests"
	ReplicaSaturatedMetric  = "llmprobe_replica_harness_saturated"
	ReplicaWarmupMetric     = "llmprobe_replica_warmup"
	ReplicaRetiredMetric    = "llmprobe_replica_retired"
	DiscoveryReplicasMetric = "llmprobe_discovery_replicas"
	DiscoveryOverLimit      = "llmprobe_discovery_replicas_over_limit"
	DiscoveryRefreshes      = "llmprobe_discovery_refreshes_total"
	DiscoveryFailures       = "llmprobe_discovery_refresh_failures_total"
	DiscoveryLastSuccess    = "llmprobe_discovery_last_success_timestamp_seconds"
)

// Alert names of the replica rules.
const (
	AlertReplicaOutlier             = "LLMProbeReplicaOutlier"
	AlertDiscoveryFailing           = "LLMProbeDiscoveryFailing"
	AlertDiscoveryReplicasOverLimit = "LLMProbeDiscoveryReplicasOverLimit"
)

// Recorded series of the replica rules (names fixed by the discovery API).
const (
	// ReplicaP50Record is each replica's median TTFT over
	// ReplicaOutlier.Window, labelled target and replica.
	ReplicaP50Record = "llmprobe:replica_ttft_seconds:p50"
	// ReplicaCountRecord is the number of TTFT observations of each
	// replica over the window: the evidence its p50 rests on.
	ReplicaCountRecord = "llmprobe:replica_ttft_seconds:count"
	// ReplicaRatioRecord is a replica's p50 divided by the median of the
	// p50s of the target's replicas with evidence (at least
	// ReplicaOutlier.MinRequests observations): 1 is typical, the alert
	// fires above ReplicaOutlier.Factor.
	ReplicaRatioRecord = "llmprobe:replica_ttft_seconds:p50_ratio"
	// ReplicaEvidenceRecord is, per target, how many of its replicas have
	// evidence (the peers the median is taken over).
	ReplicaEvidenceRecord = "llmprobe:replica_ttft_seconds:replicas_with_evidence"
)

// ReplicaOutlierAlert configures LLMProbeReplicaOutlier: the replica's p50
// TTFT over Window is above Factor × the median of its target's replicas'
// p50s, with at least MinRequests observations of its own, at least
// MinReplicas replicas with that much evidence, its harness neither
// saturated nor warming up within Window, and not retired (discovery no
// longer lists it; its series stay for the grace period), for For. The defaults are
// measured in alerts/outlier_sim_test.go (docs/runbook.md gives the
// figures).
type ReplicaOutlierAlert struct {
	Window      model.Duration `yaml:"window"`
	Factor      float64        `yaml:"factor"`
	MinRequests int            `yaml:"min_requests"`
	MinReplicas int            `yaml:"min_replicas"`
	For         model.Duration `yaml:"for"`
}

// DiscoveryAlerts configures the discovery alerts.
type DiscoveryAlerts struct {
	// FailingAfter: LLMProbeDiscoveryFailing fires when a target's
	// discovery has had failed refreshes within this long and no
	// successful one for this long (the last known set of replicas is
	// still probed, but no longer follows the service). Keep it several
	// refresh intervals long: 15m is 3 of file_sd's default 5m and 30 of
	// DNS' 30s.
	FailingAfter model.Duration `yaml:"failing_after"`
	FailingFor   model.Duration `yaml:"failing_for"`
	// OverLimitFor is how long discovery must list more replicas than
	// max_replicas before LLMProbeDiscoveryReplicasOverLimit fires.
	OverLimitFor model.Duration `yaml:"over_limit_for"`
}

func defaultReplicaOutlier() ReplicaOutlierAlert {
	return ReplicaOutlierAlert{
		Window:      model.Duration(10 * time.Minute),
		Factor:      2,
		MinRequests: 40,
		MinReplicas: 3,
		For:         model.Duration(5 * time.Minute),
	}
}

func defaultDiscoveryAlerts() DiscoveryAlerts {
	return DiscoveryAlerts{
		FailingAfter: model.Duration(15 * time.Minute),
		FailingFor:   model.Duration(5 * time.Minute),
		OverLimitFor: model.Duration(15 * time.Minute),
	}
}

func (c Config) validateReplicas() []error {
	var errs []error
	r := c.ReplicaOutlier
	if r.Window <= 0 {
		errs = append(errs, fieldErr("replica_outlier.window", "must be positive, got %s", r.Window))
	}
	if r.Factor <= 1 {
		errs = append(errs, fieldErr("replica_outlier.factor", "must be above 1, got %g", r.Factor))
	}
	if r.MinRequests < 1 {
		errs = append(errs, fieldErr("replica_outlier.min_requests", "must be at least 1, got %d", r.MinRequests))
	}
	if r.MinReplicas < 3 {
		errs = append(errs, fieldErr("replica_outlier.min_replicas", "must be at least 3 (with 2 the median cannot tell which one is slow), got %d", r.MinReplicas))
	}
	if r.For < 0 {
		errs = append(errs, fieldErr("replica_outlier.for", "must not be negative, got %s", r.For))
	}
	d := c.Discovery
	if d.FailingAfter <= 0 {
		errs = append(errs, fieldErr("discovery.failing_after", "must be positive, got %s", d.FailingAfter))
	}
	if d.FailingFor < 0 {
		errs = append(errs, fieldErr("discovery.failing_for", "must not be negative, got %s", d.FailingFor))
	}
	if d.OverLimitFor < 0 {
		errs = append(errs, fieldErr("discovery.over_limit_for", "must not be negative, got %s", d.OverLimitFor))
	}
	return errs
}

// byTargetReplica are the labels of the per-replica recorded series.
var byTargetReplica = []string{"target", "replica"}

// replicaEvidence is the selector of the replicas whose window holds
// enough observations.
func (c Config) replicaEvidence() string {
	return ReplicaCountRecord + " >= " + fmt.Sprint(c.ReplicaOutlier.MinRequests)
}

// ReplicaRecordingRules returns the per-replica recording rules; they are
// part of the llmprobe.recording group (after the rules they read).
func (c Config) ReplicaRecordingRules() []Rule {
	sel := c.Matchers()
	w := win(c.ReplicaOutlier.Window)
	return []Rule{
		{
			Record: ReplicaP50Record,
			Expr:   HistogramQuantile(0.5, ReplicaTTFTMetric, c.grouped(byTargetReplica...), sel, w),
		},
		{
			Record: ReplicaCountRecord,
			Expr:   HistogramCount(ReplicaTTFTMetric, c.grouped(byTargetReplica...), sel, w),
		},
		{
			Record: ReplicaEvidenceRecord,
			Expr:   "count" + c.by("target") + " (" + c.replicaEvidence() + ")",
		},
		{
			Record: ReplicaRatioRecord,
			Expr: ReplicaP50Record + "\n" +
				"/ " + c.on("target") + " group_left ()\n" +
				"quantile" + c.by("target") + " (0.5,\n" +
				"  " + ReplicaP50Record + "\n" +
				"  and " + c.on("target", "replica") + "\n" +
				"  " + c.replicaEvidence() + "\n" +
				")",
		},
	}
}

// replicaInfoQuery is the template expression of the alert's replica's
// llmprobe_replica_info series.
func (c Config) replicaInfoQuery() string {
	return c.seriesQuery(ReplicaInfoMetric, c.selectorWith(""), byTargetReplica, "")
}

// ReplicaAlerts returns LLMProbeReplicaOutlier and the discovery alerts.
func (c Config) ReplicaAlerts() []Rule {
	r := c.ReplicaOutlier
	sel := c.Matchers()
	w := win(r.Window)
	k := FormatFloat(r.Factor)
	info := "{{ with " + c.replicaInfoQuery() + " | query }}{{ with . | first }}" +
		"{{ with .Labels.pod }} (pod {{ . }}{{ end }}{{ with .Labels.namespace }} in namespace {{ . }}{{ end }}{{ with .Labels.node }} on node {{ . }}{{ end }}{{ if .Labels.pod }}){{ end }}" +
		"{{ with .Labels.address }}, address {{ . }}{{ end }}{{ end }}{{ end }}"
	p50 := "{{ with " + c.seriesQuery(ReplicaP50Record, "", byTargetReplica, "") + " | query }}{{ . | first | value | humanizeDuration }}{{ end }}"
	count := "{{ with " + c.seriesQuery(ReplicaCountRecord, "", byTargetReplica, "") + " | query }}{{ . | first | value | printf \"%.0f\" }}{{ end }}"
	peers := "{{ with " + c.seriesQuery(ReplicaEvidenceRecord, "", []string{"target"}, "") + " | query }}{{ . | first | value | printf \"%.0f\" }}{{ end }}"
	flag := func(metric string) string {
		return "max" + c.by(byTargetReplica...) + " (max_over_time(" + metric + sel + "[" + w + "])) > 0"
	}
	outlier := Rule{
		Alert: AlertReplicaOutlier,
		Expr: ReplicaRatioRecord + " > " + k + "\n" +
			"and " + c.on("target", "replica") + "\n" +
			c.replicaEvidence() + "\n" +
			"and " + c.on("target") + "\n" +
			ReplicaEvidenceRecord + " >= " + fmt.Sprint(r.MinReplicas) + "\n" +
			"unless " + c.on("target", "replica") + "\n" +
			flag(ReplicaSaturatedMetric) + "\n" +
			"unless " + c.on("target", "replica") + "\n" +
			flag(ReplicaWarmupMetric) + "\n" +
			"unless " + c.on("target", "replica") + "\n" +
			"max" + c.by(byTargetReplica...) + " (" + ReplicaRetiredMetric + sel + ") > 0",
		For:    win(r.For),
		Labels: labels("warning", "replica"),
		Annotations: c.annotations(AlertReplicaOutlier,
			"Replica {{ $labels.replica }} of {{ $labels.target }} is {{ $value | printf \"%.1f\" }}× slower than its peers (median TTFT).",
			"The median time to first token of replica {{ $labels.replica }}"+info+" of target {{ $labels.target }} is "+p50+
				" over the last "+w+", {{ $value | printf \"%.1f\" }}× the median of the "+peers+" replicas with at least "+
				fmt.Sprint(r.MinRequests)+" requests in that window (threshold "+k+"×; this replica has "+count+"). "+
				"Compare its own engine (vllm:) and GPU (DCGM) series on the Replicas row of the correlation dashboard."+c.diagnosisText(true)),
	}
	d := c.Discovery
	fa := win(d.FailingAfter)
	failing := Rule{
		Alert: AlertDiscoveryFailing,
		Expr: "time() - " + DiscoveryLastSuccess + sel + " > " + seconds(d.FailingAfter) + "\n" +
			"and\n" +
			"increase(" + DiscoveryFailures + sel + "[" + fa + "]) > 0",
		For:    win(d.FailingFor),
		Labels: labels("warning", "discovery"),
		Annotations: c.annotations(AlertDiscoveryFailing,
			"{{ $labels.mechanism }} discovery of {{ $labels.target }} keeps failing: its replica set is stale.",
			"The {{ $labels.mechanism }} discovery of target {{ $labels.target }} on llmprobe {{ $labels.instance }} has not refreshed successfully "+
				"since {{ with "+c.seriesQuery(DiscoveryLastSuccess, c.selectorWith(""), []string{"job", "instance", "target", "mechanism"}, " > 0")+
				" | query }}{{ . | first | value | humanizeTimestamp }}{{ else }}llmprobe started{{ end }}, and its refreshes failed within the last "+fa+". llmprobe keeps probing the last known replicas, "+
				"so replicas added since are not probed and removed ones time out. The daemon's log and the status page say why."),
	}
	overLimit := Rule{
		Alert:  AlertDiscoveryReplicasOverLimit,
		Expr:   DiscoveryOverLimit + sel + " > 0",
		For:    win(d.OverLimitFor),
		Labels: labels("warning", "discovery"),
		Annotations: c.annotations(AlertDiscoveryReplicasOverLimit,
			"{{ $labels.target }} has {{ $value }} replicas beyond max_replicas that are not probed.",
			"The {{ $labels.mechanism }} discovery of target {{ $labels.target }} on llmprobe {{ $labels.instance }} lists {{ $value }} more replicas "+
				"than the target's max_replicas; those are not probed (the replica label stays bounded). Raise max_replicas, "+
				"or narrow the discovery (a service or selector that matches only the model servers)."),
	}
	return []Rule{outlier, failing, overLimit}
}
