// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmprobe/llmprobe/alerts"
	"github.com/llmprobe/llmprobe/diagnosis"
	"github.com/llmprobe/llmprobe/exporter"
	"github.com/llmprobe/llmprobe/probe"
)

// scrapeLabels are the labels Prometheus (or the user's relabelling) adds
// to every series: a selector may use them beside the exporter's own.
var scrapeLabels = []string{"job", "instance", "cluster", "namespace"}

var (
	descRE     = regexp.MustCompile(`fqName: "([^"]+)".*variableLabels: \{([^}]*)\}`)
	selectorRE = regexp.MustCompile(`(llmprobe_(?:server|diagnosis)\w*)\{([^}]*)\}`)
	matcherRE  = regexp.MustCompile(`(\w+)\s*(?:=~|!~|!=|=)\s*("[^"]*"|%q)`)
	groupingRE = regexp.MustCompile(`(?:by|without)\s*\(([^)]*)\)\s*\(\s*\(?\s*(llmprobe_(?:server|diagnosis)\w*)`)
)

// TestDiagnosisNamesMatchTheExporter: every llmprobe_server_* and
// llmprobe_diagnosis* series the shipped rules and dashboards select is
// one the exporter describes, with only its labels (and the scrape's),
// and every figure, cause, kind and percentile they name is a value the
// daemon exports: the figures of diagnosis.EvidenceNames, the causes of
// diagnosis.Causes, the kinds of diagnosis.Kinds. The parts were built in
// parallel and drifted (quantile for percentile, ttft_p99 for
// probe_ttft_p99): this holds them together.
func TestDiagnosisNamesMatchTheExporter(t *testing.T) {
	labels := map[string][]string{}
	rec := descRecorder{make(chan *prometheus.Desc, 4096)}
	exporter.NewMetrics(rec)
	rec.MustRegister(exporter.NewStatusCollector(func() []probe.TargetStatus { return nil }))
	ch := rec.ch
	close(ch)
	for d := range ch {
		m := descRE.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("unreadable descriptor %s", d)
		}
		labels[m[1]] = strings.Split(m[2], ",")
	}
	if len(labels[alerts.DiagnosisEvidenceMetric]) == 0 || len(labels[alerts.ServerTTFTMetric]) == 0 {
		t.Fatalf("the exporter describes no %s or %s: %v", alerts.DiagnosisEvidenceMetric, alerts.ServerTTFTMetric, labels)
	}
	causes := make([]string, len(diagnosis.Causes))
	for i, c := range diagnosis.Causes {
		causes[i] = string(c)
	}
	if !slices.Equal(causes, alerts.DiagnosisCauses) {
		t.Errorf("alerts.DiagnosisCauses %v, the daemon's %v", alerts.DiagnosisCauses, causes)
	}
	values := map[string][]string{
		"figure":     diagnosis.EvidenceNames,
		"cause":      causes,
		"kind":       diagnosis.Kinds,
		"percentile": {"p50", "p99"},
	}
	for _, f := range alerts.EvidenceFigures() {
		if !slices.Contains(diagnosis.EvidenceNames, f) {
			t.Errorf("the alerts render evidence figure %q, which the daemon does not export", f)
		}
	}
	for _, file := range []string{"../../alerts/llmprobe.rules.yml", "../../dashboards/llmprobe-overview.json", "../../dashboards/llmprobe-correlation.json"} {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		text := strings.ReplaceAll(strings.ReplaceAll(string(b), `\\\"`, `"`), `\"`, `"`)
		n := 0
		for _, m := range selectorRE.FindAllStringSubmatch(text, -1) {
			n++
			have, ok := labels[m[1]]
			if !ok {
				t.Errorf("%s selects %s, which the exporter does not export", file, m[1])
				continue
			}
			for _, mm := range matcherRE.FindAllStringSubmatch(m[2], -1) {
				name, val := mm[1], strings.Trim(mm[2], `"`)
				if !slices.Contains(have, name) && !slices.Contains(scrapeLabels, name) {
					t.Errorf("%s selects %s{%s=...}: the exporter's labels are %v", file, m[1], name, have)
				}
				if vs, ok := values[name]; ok && mm[2] != "%q" && !strings.Contains(val, "$") && !slices.Contains(vs, val) {
					t.Errorf("%s selects %s{%s=%q}: the daemon exports %v", file, m[1], name, val, vs)
				}
			}
		}
		for _, m := range groupingRE.FindAllStringSubmatch(text, -1) {
			have := labels[m[2]]
			for _, l := range strings.Split(m[1], ",") {
				if l = strings.TrimSpace(l); l != "" && !slices.Contains(have, l) && !slices.Contains(scrapeLabels, l) {
					t.Errorf("%s groups %s by %s: the exporter's labels are %v", file, m[2], l, have)
				}
			}
		}
		if n == 0 {
			t.Errorf("%s selects no server view or diagnosis series: the check is broken", file)
		}
	}
}

// descRecorder is a Registerer that keeps its collectors' descriptors.
type descRecorder struct{ ch chan *prometheus.Desc }

func (r descRecorder) Register(c prometheus.Collector) error { c.Describe(r.ch); return nil }

func (r descRecorder) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		c.Describe(r.ch)
	}
}

func (r descRecorder) Unregister(prometheus.Collector) bool { return true }
