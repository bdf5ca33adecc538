// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package exporter

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmprobe/llmprobe/probe"
)

// The targets' identities (probe/identity.go), read from the engine's
// status at every scrape like the other status gauges: a removed target's
// series go with it, and a changed identity replaces its info series (one
// per target: the current identity).
var (
	targetInfoDesc = prometheus.NewDesc(namespace+"_target_info",
		"1 for each target, labelled with its current identity as the target says it: model (the model its successful responses name), fingerprint (their system_fingerprint), server (their HTTP Server header), version (its version endpoint's answer); a label is empty while unknown. A new value replaces the old after 16 responses (2 version polls) in a row carried it.",
		[]string{labelTarget, labelModel, "fingerprint", "server", "version"}, nil)
	targetChangesDesc = prometheus.NewDesc(namespace+"_target_changes_total",
		"Changes of a target's identity, by what changed: model, fingerprint, server, version. The first value learned is not a change.",
		[]string{labelTarget, "what"}, nil)
	targetLastChangeDesc = prometheus.NewDesc(namespace+"_target_last_change_timestamp_seconds",
		"When the target's identity last changed (any of llmprobe_target_changes_total's what); 0 before any change.",
		targetLabels, nil)
)

func describeIdentity(ch chan<- *prometheus.Desc) {
	ch <- targetInfoDesc
	ch <- targetChangesDesc
	ch <- targetLastChangeDesc
}

func collectIdentity(ch chan<- prometheus.Metric, target string, id probe.IdentityStatus) {
	c := id.Current
	ch <- prometheus.MustNewConstMetric(targetInfoDesc, prometheus.GaugeValue, 1, target, c.Model, c.Fingerprint, c.Server, c.Version)
	for _, what := range probe.IdentityParts {
		ch <- prometheus.MustNewConstMetric(targetChangesDesc, prometheus.CounterValue, float64(id.Changes[what]), target, what)
	}
	ts := 0.0
	if !id.LastChange.IsZero() {
		ts = float64(id.LastChange.UnixNano()) / 1e9
	}
	ch <- prometheus.MustNewConstMetric(targetLastChangeDesc, prometheus.GaugeValue, ts, target)
}
