// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package exporter

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmprobe/llmprobe/diagnosis"
	"github.com/llmprobe/llmprobe/probe"
)

// The diagnosis (docs/design.md "Diagnosis"): each target's (and
// replica's) latest verdict from Engine.Status, at scrape time. Bounded:
// the cause label takes the values of diagnosis.Causes, every one present
// (1 for the current cause, 0 for the others) once a verdict exists; the
// figure label those of diagnosis.EvidenceNames, only the current
// verdict's; kind those of diagnosis.Kinds. The replica label is empty
// (absent in Prometheus) for a target's own verdict, as the server view's.
// The sentence is in no label: the status page carries it.

var (
	diagnosisDesc = prometheus.NewDesc(namespace+"_diagnosis",
		"1 for the cause the diagnosis names for the target (or replica) over the last 2 minutes, 0 for the others: harness, path, queueing, prefill, decode, kv_pressure, prefix_cache, deploy, none, unknown (docs/runbook.md \"Why is it slow?\").",
		[]string{labelTarget, labelReplica, "cause"}, nil)
	diagnosisEvidenceDesc = prometheus.NewDesc(namespace+"_diagnosis_evidence",
		"The figures the current verdict rests on, by figure (docs/metrics.md lists them and their units: seconds, ratios 0–1, requests, tokens, reads, per request).",
		[]string{labelTarget, labelReplica, "figure"}, nil)
	diagnosisInfoDesc = prometheus.NewDesc(namespace+"_diagnosis_info",
		"1 with the current cause and, for queueing, the limit the server is at (kind: batch, kv, gpu, or empty at no known limit).",
		[]string{labelTarget, labelReplica, "cause", "kind"}, nil)
)

var diagnosisDescs = []*prometheus.Desc{diagnosisDesc, diagnosisEvidenceDesc, diagnosisInfoDesc}

func describeDiagnosis(ch chan<- *prometheus.Desc) {
	for _, d := range diagnosisDescs {
		ch <- d
	}
}

// collectDiagnosis exports a target's verdicts: its own, its replicas'.
func collectDiagnosis(ch chan<- prometheus.Metric, s *probe.TargetStatus) {
	collectVerdict(ch, s.Name, "", s.Diagnosis)
	for _, r := range s.Replicas {
		if r.Gone.IsZero() {
			collectVerdict(ch, s.Name, r.Name, r.Diagnosis)
		}
	}
}

func collectVerdict(ch chan<- prometheus.Metric, target, replica string, d *probe.Diagnosis) {
	if d == nil {
		return
	}
	for _, c := range diagnosis.Causes {
		ch <- prometheus.MustNewConstMetric(diagnosisDesc, prometheus.GaugeValue, boolValue(c == d.Cause), target, replica, string(c))
	}
	for _, e := range d.Evidence {
		ch <- prometheus.MustNewConstMetric(diagnosisEvidenceDesc, prometheus.GaugeValue, e.Value, target, replica, e.Name)
	}
	ch <- prometheus.MustNewConstMetric(diagnosisInfoDesc, prometheus.GaugeValue, 1, target, replica, string(d.Cause), d.Kind)
}

// whyLine is the status page's sentence of a target: its verdict's, with
// how long the cause has been named, or why there is none ("" for a
// target without server_metrics).
func whyLine(s *probe.TargetStatus, now time.Time) string {
	if d := s.Diagnosis; d != nil {
		for_ := ""
		if !d.Since.IsZero() {
			if age := now.Sub(d.Since).Round(time.Minute); age >= time.Minute {
				for_ = fmt.Sprintf(" (for %s)", shortDuration(age))
			}
		}
		return d.Sentence + for_
	}
	if s.DiagnosisWhy != "" {
		return "no server view: " + s.DiagnosisWhy
	}
	return ""
}

// shortDuration writes d (whole minutes) as "5m" or "2h5m".
func shortDuration(d time.Duration) string {
	h, m := int(d.Hours()), int(d.Minutes())%60
	if h == 0 {
		return fmt.Sprintf("%dm", m)
	}
	if m == 0 {
		return fmt.Sprintf("%dh", h)
	}
	return fmt.Sprintf("%dh%dm", h, m)
}
