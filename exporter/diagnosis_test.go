// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package exporter

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/llmprobe/llmprobe/diagnosis"
	"github.com/llmprobe/llmprobe/probe"
)

// testDiagnosisStatus is testServerViewStatus with verdicts: replica a
// queueing at its KV cache's limit, the target's own drawn from it, the
// other replicas not judged yet.
func testDiagnosisStatus(now time.Time) probe.TargetStatus {
	s := testServerViewStatus()
	v := &probe.Diagnosis{Verdict: diagnosis.Verdict{Cause: diagnosis.Queueing, Kind: diagnosis.KindKV,
		Evidence: []diagnosis.Evidence{{Name: diagnosis.EvWaiting, Value: 14, Unit: "requests"}, {Name: diagnosis.EvKVUsage, Value: 0.97, Unit: "ratio"}},
		Sentence: "p99 TTFT 2.3 s: queueing at its KV cache's limit: 14 waiting, KV 97%, queue time 1.8 s of 2.1 s TTFT",
		Since:    now.Add(-5*time.Minute - 10*time.Second)}, At: now}
	s.Replicas[0].Diagnosis = v
	own := *v
	own.Named, own.Judged, own.From = 1, 1, "a"
	own.Sentence = "queueing on 1 of 1 replicas; a: " + v.Sentence
	s.Diagnosis = &own
	return s
}

// TestDiagnosisExported: every cause once per judged target and replica
// (1 for the current one), the verdict's evidence by figure, the info
// series with the kind; nothing for a view not judged yet; the status
// page's sentence at the top, "for 5m", or why there is none.
func TestDiagnosisExported(t *testing.T) {
	now := time.Now()
	plain := testServerViewStatus()
	plain.Name, plain.Discovery, plain.Server, plain.Replicas = "plain", nil, plain.Replicas[2].Server, nil
	plain.DiagnosisWhy = plain.Server.Why
	status := func() []probe.TargetStatus { return []probe.TargetStatus{testDiagnosisStatus(now), plain} }
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewStatusCollector(status))
	want := `
# HELP llmprobe_diagnosis_evidence The figures the current verdict rests on, by figure (docs/metrics.md lists them and their units: seconds, ratios 0–1, requests, tokens, reads, per request).
# TYPE llmprobe_diagnosis_evidence gauge
llmprobe_diagnosis_evidence{figure="kv_usage",replica="",target="served"} 0.97
llmprobe_diagnosis_evidence{figure="kv_usage",replica="a",target="served"} 0.97
llmprobe_diagnosis_evidence{figure="waiting",replica="",target="served"} 14
llmprobe_diagnosis_evidence{figure="waiting",replica="a",target="served"} 14
# HELP llmprobe_diagnosis_info 1 with the current cause and, for queueing, the limit the server is at (kind: batch, kv, gpu, or empty at no known limit).
# TYPE llmprobe_diagnosis_info gauge
llmprobe_diagnosis_info{cause="queueing",kind="kv",replica="",target="served"} 1
llmprobe_diagnosis_info{cause="queueing",kind="kv",replica="a",target="served"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "llmprobe_diagnosis_evidence", "llmprobe_diagnosis_info"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(NewStatusCollector(status), "llmprobe_diagnosis"); n != 2*len(diagnosis.Causes) {
		t.Errorf("llmprobe_diagnosis: %d series, want %d", n, 2*len(diagnosis.Causes))
	}
	if v := testutil.ToFloat64(gaugeOf(t, reg, "llmprobe_diagnosis", map[string]string{"target": "served", "replica": "a", "cause": "queueing"})); v != 1 {
		t.Errorf("llmprobe_diagnosis{cause=queueing} = %v", v)
	}

	srv := httptest.NewServer(NewHandler(WebOptions{Gatherer: reg, Status: status}))
	defer srv.Close()
	f := &webFixture{srv: srv}
	_, _, body := f.do(t, "GET", "/", nil)
	for _, want := range []string{
		`<li id="why-served" class="cause-queueing"><a href="#target-served">served</a>: queueing on 1 of 1 replicas; a: p99 TTFT 2.3 s: queueing at its KV cache&#39;s limit: 14 waiting, KV 97%, queue time 1.8 s of 2.1 s TTFT (for 5m)</li>`,
		`<li id="why-plain"><a href="#target-plain">plain</a>: no server view: GET http://10.1.3.3:8000/metrics: context deadline exceeded (no answer within 10s)</li>`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the status page lacks\n%s", want)
		}
	}
	if i, j := strings.Index(body, `id="why"`), strings.Index(body, `id="target-served"`); i < 0 || i > j {
		t.Errorf("the Why list is not at the top of the page (%d, %d)", i, j)
	}
}

// gaugeOf is the series of name with labels gathered from reg, as a
// collector for testutil.ToFloat64.
func gaugeOf(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			got := map[string]string{}
			for _, lp := range m.GetLabel() {
				got[lp.GetName()] = lp.GetValue()
			}
			for k, v := range labels {
				if got[k] != v {
					continue next
				}
			}
			g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "x"})
			g.Set(m.GetGauge().GetValue())
			return g
		}
	}
	t.Fatalf("no %s%v", name, labels)
	return nil
}
