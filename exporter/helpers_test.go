// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package exporter

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/llmprobe/llmprobe/config"
	"github.com/llmprobe/llmprobe/probe"
	"github.com/llmprobe/llmprobe/probe/harness"
	"github.com/llmprobe/llmprobe/probe/wire"
	"github.com/llmprobe/llmprobe/regression"
)

// Secrets planted in the test configuration; they must never be shown.
const (
	testPassword = "hunter2-very-secret"
	testBearer   = "bearer-token-secret-xyz"
)

const testConfigYAML = `
global:
  warmup: 30s
  hit_ratio_window: 10s
  recent_requests: 3
workloads:
  mix:
    classes:
      - name: chat
        weight: 0.7
        prompt_tokens: {dist: lognormal, median: 120, p99: 2048, max: 8192}
        output_tokens: 64
        prefix: {groups: 2, tokens: 64, probability: 0.5}
      - name: agent
        weight: 0.3
        prompt_tokens: 512
        output_tokens: 32
        turns: {count: 3, think_time: 1s}
  tiny:
    classes:
      - name: ping
        prompt_tokens: 16
        output_tokens: 4
targets:
  - name: alpha
    url: http://127.0.0.1:1/v1
    model: model-a
    workload: mix
    arrival: {rate: 1}
    slo: {objective: 0.99, ttft: 500ms, tpot: 60ms}
    http_client_config:
      basic_auth: {username: probe, password: ` + testPassword + `}
  - name: beta
    url: http://127.0.0.1:2/v1
    api: completions
    model: model-b
    workload: tiny
    arrival: {process: constant, rate: 2}
    http_client_config:
      authorization: {credentials: ` + testBearer + `}
`

// alphaOnlyYAML drops target beta and class agent, and keeps alpha's model.
const alphaOnlyYAML = `
global:
  hit_ratio_window: 10s
workloads:
  mix:
    classes:
      - name: chat
        prompt_tokens: 100
        output_tokens: 64
targets:
  - name: alpha
    url: http://127.0.0.1:1/v1
    model: model-a
    workload: mix
    arrival: {rate: 1}
`

func mustConfig(t testing.TB, yml string) *config.Config {
	t.Helper()
	cfg, err := config.Load([]byte(yml), "test.yml")
	if err != nil {
		t.Fatalf("loading the test config: %v", err)
	}
	return cfg
}

const testTraceID = "4bf92f3577b34da6a3ce929d0e0e4736"

// successResult is a plain, successful 16-chunk streamed request.
// configuredMetrics returns request metrics registered with a fresh
// registry (returned too) and configured with testConfigYAML.
func configuredMetrics(tb testing.TB) (*Metrics, *prometheus.Registry) {
	tb.Helper()
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	m.SetConfig(mustConfig(tb, testConfigYAML))
	return m, reg
}

func successResult(target, model, class string) *wire.Result {
	start := time.Unix(1_700_000_000, 0)
	itls := make([]time.Duration, 15)
	for i := range itls {
		itls[i] = 20 * time.Millisecond
	}
	itls[7] = 90 * time.Millisecond // the longest gap
	return &wire.Result{
		Target:               target,
		Model:                model,
		Class:                class,
		Planned:              start.Add(-3 * time.Millisecond),
		Dispatched:           start.Add(-2 * time.Millisecond),
		Start:                start,
		ScheduleLag:          time.Millisecond,
		ClientWait:           2 * time.Millisecond,
		Outcome:              wire.OutcomeSuccess,
		StatusCode:           200,
		FirstToken:           true,
		TTFT:                 250 * time.Millisecond,
		E2E:                  620 * time.Millisecond,
		TPOT:                 (620 - 250) * time.Millisecond / 15,
		ITLs:                 itls,
		Chunks:               16,
		PromptTokens:         100,
		OutputTokens:         16,
		CachedTokens:         40,
		UsageReported:        true,
		CachedTokensReported: true,
		PlannedPromptTokens:  100,
		PlannedOutputTokens:  16,
		PrefixGroup:          -1,
		FinishReason:         "length",
		TraceID:              testTraceID,
	}
}

func gather(t testing.TB, g prometheus.Gatherer) map[string]*dto.MetricFamily {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		out[mf.GetName()] = mf
	}
	return out
}

// series returns the metric of family name whose labels include all of
// want, or nil.
func series(mfs map[string]*dto.MetricFamily, name string, want map[string]string) *dto.Metric {
	mf := mfs[name]
	if mf == nil {
		return nil
	}
	for _, m := range mf.GetMetric() {
		match := 0
		for _, lp := range m.GetLabel() {
			if v, ok := want[lp.GetName()]; ok && v == lp.GetValue() {
				match++
			}
		}
		if match == len(want) {
			return m
		}
	}
	return nil
}

// countSeries counts the series of family name whose labels include all of
// want.
func countSeries(mfs map[string]*dto.MetricFamily, name string, want map[string]string) int {
	n := 0
	for _, m := range mfs[name].GetMetric() {
		match := 0
		for _, lp := range m.GetLabel() {
			if v, ok := want[lp.GetName()]; ok && v == lp.GetValue() {
				match++
			}
		}
		if match == len(want) {
			n++
		}
	}
	return n
}

func labelValues(mfs map[string]*dto.MetricFamily, name, label string) []string {
	var vs []string
	for _, m := range mfs[name].GetMetric() {
		for _, lp := range m.GetLabel() {
			if lp.GetName() == label && !slices.Contains(vs, lp.GetValue()) {
				vs = append(vs, lp.GetValue())
			}
		}
	}
	slices.Sort(vs)
	return vs
}

// testStatus is what an engine running testConfigYAML reports.
func testStatus() []probe.TargetStatus {
	return []probe.TargetStatus{
		{
			Name: "alpha", Model: "model-a", API: wire.APIChat, URL: "http://127.0.0.1:1/v1", Workload: "mix", Process: "poisson(1/s)",
			Classes:       []probe.ClassStatus{{Name: "chat", Weight: 0.7, ReuseIntent: 0.25}, {Name: "agent", Weight: 0.3}},
			RequestedRate: 1, AchievedRate: 0.98, Scheduled: 100, Sent: 97,
			Dropped:  map[probe.DropReason]uint64{probe.DropInflightLimit: 2, probe.DropLate: 1},
			Outcomes: map[wire.Outcome]uint64{wire.OutcomeSuccess: 90, wire.OutcomeHTTPError: 5},
			Inflight: 2, MaxInflight: 64, LagP50: 300 * time.Microsecond, LagP99: 4 * time.Millisecond, Window: time.Minute,
			Since:       time.Now().Add(-time.Hour),
			Regressions: testRegressions(),
			Connections: 3, Protocol: "HTTP/2.0",
		},
		{
			Name: "beta", Model: "model-b", API: wire.APICompletions, URL: "http://127.0.0.1:2/v1", Workload: "tiny", Process: "constant(2/s)",
			Classes:       []probe.ClassStatus{{Name: "ping", Weight: 1}},
			RequestedRate: 2, AchievedRate: 1.2, Scheduled: 40, Sent: 24,
			Dropped:  map[probe.DropReason]uint64{probe.DropLate: 16},
			Outcomes: map[wire.Outcome]uint64{wire.OutcomeSuccess: 24},
			Inflight: 64, MaxInflight: 64, LagP50: 2 * time.Second, LagP99: 9 * time.Second, Window: time.Minute,
			Connections: 64,
			Saturated:   true, SaturationReason: "schedule lag p99 9s over 1m0s (max_lag 50ms)",
			Warmup: true, Since: time.Now().Add(-10 * time.Second),
			Refit: &probe.RefitStatus{
				Source: `http://prometheus:9090 {job="vllm"}`, Successes: 3, Failures: 1, Requests: 1234,
				LastSuccess: time.Now().Add(-time.Minute), Error: "no samples for vllm:request_prompt_tokens",
				Prompt: [3]float64{700, 1500, 4000}, Output: [3]float64{60, 200, 900},
			},
		},
	}
}

// testRegressions are alpha's detectors: TTFT of chat held regressed
// since a change point, the rest quiet.
func testRegressions() []probe.RegressionStatus {
	nan := math.NaN()
	quiet := regression.Result{MedianRatio: 1.02, P99Ratio: nan, BaselineRatio: nan, CurrentRatio: nan, BaselineN: 400, CurrentN: 60, P: 0.4}
	out := make([]probe.RegressionStatus, 0, len(probe.RegressionMetrics))
	for _, m := range probe.RegressionMetrics {
		r := quiet
		switch m {
		case probe.RegressionTTFT:
			r = regression.Result{Regressed: true, Test: "median", Onset: time.Unix(1700000600, 0), ChangePoint: time.Unix(1700000300, 0),
				MedianRatio: 1.45, P99Ratio: 1.3, BaselineRatio: nan, CurrentRatio: nan, BaselineN: 900, CurrentN: 240, P: 1e-9}
		case probe.RegressionErrors:
			r = regression.Result{MedianRatio: nan, P99Ratio: nan, BaselineRatio: 0.01, CurrentRatio: 0.0125, BaselineN: 1000, CurrentN: 80, P: 0.3}
		}
		out = append(out, probe.RegressionStatus{Class: "chat", Metric: m, Result: r})
	}
	return out
}

// testHarness reports inflation figures from a machine with schedstat and
// a throttled cgroup.
func testHarness() (harness.Stats, harness.Totals, bool) {
	return harness.Stats{Span: time.Minute, SchedEvents: 1000, SchedOver: 2, SchedP99: 300 * time.Microsecond,
			HasSchedstat: true, Timeslices: 5000, RunqueueWait: 40 * time.Microsecond,
			HasCgroup: true, Periods: 600, ThrottledPeriods: 3, ThrottleStall: 20 * time.Millisecond, Inflation: 20 * time.Millisecond},
		harness.Totals{
			SchedBuckets: []float64{1e-6, 1e-5, 1e-4, 1e-3, 1e-2, math.Inf(1)}, SchedCounts: []uint64{500, 300, 150, 40, 9, 1},
			WakeBuckets: []float64{1e-5, 1e-4, 1e-3, 1e-2, math.Inf(1)}, WakeCounts: []uint64{10, 6000, 300, 5, 0},
			HasSchedstat: true, RunqueueWait: 2 * time.Second, Timeslices: 100000,
			HasCgroup: true, Periods: 36000, ThrottledPeriods: 30, Throttled: 600 * time.Millisecond,
		}, true
}

func fileLoader(path string) func() (*config.Config, error) {
	return func() (*config.Config, error) { return config.LoadFile(path) }
}
