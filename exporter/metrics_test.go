// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package exporter

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	versioncollector "github.com/prometheus/client_golang/prometheus/collectors/version"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/llmprobe/llmprobe/config"
	"github.com/llmprobe/llmprobe/internal/promtest"
	"github.com/llmprobe/llmprobe/plan"
	"github.com/llmprobe/llmprobe/probe"
	"github.com/llmprobe/llmprobe/probe/wire"
)

var update = flag.Bool("update", false, "rewrite testdata/catalogue.txt from the current metrics")

// fullRegistry registers everything the daemon exports from this package
// (and llmprobe_build_info, which the daemon adds), configured with
// testConfigYAML, with one observation so that the
// data-dependent hit ratio appears too.
func fullRegistry(t testing.TB) (*prometheus.Registry, *Metrics) {
	t.Helper()
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	withPool := func() []probe.TargetStatus {
		return append(testStatus(), testPoolStatus(), testDiagnosisStatus(time.Unix(1_700_000_000, 0)))
	}
	reg.MustRegister(NewStatusCollector(withPool), NewHarnessCollector(testHarness))
	NewReloader(fileLoader("unused.yml"), nil, reg)
	reg.MustRegister(versioncollector.NewCollector("llmprobe")) // as the daemon does
	m.SetConfig(mustConfig(t, testConfigYAML))
	m.Observe(successResult("alpha", "model-a", "chat"))
	// A replica's events, and one of a replica past the (lowered) bound,
	// so that every per-replica family appears.
	m.rep.limit = 1
	m.Dropped("alpha", replicaA, "chat", probe.DropLate)
	m.Observe(replicaResult("alpha", "model-a", "chat", replicaA))
	m.Sent("alpha", replicaB, "chat")
	// The plan figures (plan.go), a few steps each.
	pl := NewPlanner(context.Background(), nil, plan.Options{Trials: 4})
	pl.SetConfig(mustConfig(t, testConfigYAML))
	if err := pl.wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	reg.MustRegister(pl)
	return reg, m
}

// catalogue renders the metric names, types and label names, one metric
// per line, sorted.
func catalogue(mfs map[string]*dto.MetricFamily) string {
	var lines []string
	for name, mf := range mfs {
		var labels []string
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if !slices.Contains(labels, lp.GetName()) {
					labels = append(labels, lp.GetName())
				}
			}
		}
		slices.Sort(labels)
		lines = append(lines, fmt.Sprintf("%s %s {%s}", name, strings.ToLower(mf.GetType().String()), strings.Join(labels, ",")))
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n") + "\n"
}

// TestMetricCatalogue pins the names, types and labels that dashboards,
// alerts and docs/metrics.md rely on. Run with -update after an intended
// change, and update those too.
func TestMetricCatalogue(t *testing.T) {
	reg, _ := fullRegistry(t)
	got := catalogue(gather(t, reg))
	const file = "testdata/catalogue.txt"
	if *update {
		if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("metric catalogue changed; dashboards, alerts and docs/metrics.md depend on it.\n--- want (%s)\n%s--- got\n%s(rerun with -update if intended)", file, want, got)
	}
	// The contract: every metric is prefixed, none carries instance.
	for _, line := range strings.Split(strings.TrimSpace(got), "\n") {
		if !strings.HasPrefix(line, "llmprobe_") {
			t.Errorf("metric without the llmprobe_ prefix: %s", line)
		}
		if strings.Contains(line, "instance") {
			t.Errorf("metric with an instance label: %s", line)
		}
	}
}

func TestLint(t *testing.T) {
	reg, _ := fullRegistry(t)
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

// TestPromtoolCheckMetrics runs the real `promtool check metrics` over the
// text exposition.
func TestPromtoolCheckMetrics(t *testing.T) {
	bin := promtest.Promtool(t)
	reg, _ := fullRegistry(t)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "check", "metrics")
	cmd.Stdin = &buf
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool check metrics: %v\n%s", err, out)
	}
}

func TestSetConfigInitialisesEverySeries(t *testing.T) {
	_, reg := configuredMetrics(t)
	mfs := gather(t, reg)

	// targets × their classes × outcomes.
	if got, want := countSeries(mfs, "llmprobe_requests_total", nil), (2+1)*len(wire.Outcomes); got != want {
		t.Errorf("requests_total has %d series, want %d", got, want)
	}
	for _, o := range wire.Outcomes {
		s := series(mfs, "llmprobe_requests_total", map[string]string{"target": "beta", "model": "model-b", "class": "ping", "outcome": string(o)})
		if s == nil || s.GetCounter().GetValue() != 0 {
			t.Errorf("requests_total{beta,ping,%s} = %v, want 0", o, s)
		}
	}
	if got, want := countSeries(mfs, "llmprobe_requests_dropped_total", nil), 2*len(probe.DropReasons); got != want {
		t.Errorf("requests_dropped_total has %d series, want %d", got, want)
	}
	for _, name := range []string{"llmprobe_ttft_seconds", "llmprobe_tpot_seconds", "llmprobe_itl_seconds", "llmprobe_e2e_seconds",
		"llmprobe_prompt_tokens_total", "llmprobe_output_tokens_total", "llmprobe_cached_prompt_tokens_total", "llmprobe_usage_estimated_total",
		"llmprobe_requests_scheduled_total", "llmprobe_requests_sent_total", "llmprobe_prompt_tokens", "llmprobe_output_tokens",
		"llmprobe_prompt_length_error_ratio", "llmprobe_prompt_length_mismatch_total"} {
		if got := countSeries(mfs, name, nil); got != 3 {
			t.Errorf("%s has %d series, want 3 (alpha/chat, alpha/agent, beta/ping)", name, got)
		}
	}
	for _, name := range []string{"llmprobe_schedule_lag_seconds", "llmprobe_client_wait_seconds"} {
		if got := labelValues(mfs, name, "target"); !slices.Equal(got, []string{"alpha", "beta"}) {
			t.Errorf("%s targets = %v", name, got)
		}
	}
	if mfs["llmprobe_prefix_cache_hit_ratio"] != nil {
		t.Error("prefix_cache_hit_ratio exported before any request reported cached tokens")
	}
}

func TestObserveSuccess(t *testing.T) {
	m, reg := configuredMetrics(t)
	for range 3 {
		m.Scheduled("alpha", "", "chat")
	}
	m.Sent("alpha", "", "chat")
	m.Sent("alpha", "", "chat")
	m.Dropped("alpha", "", "chat", probe.DropInflightLimit)
	r := successResult("alpha", "model-a", "chat")
	r.PromptTokens = 110 // 10% over the plan: a mismatch
	m.Observe(r)
	m.Observe(successResult("alpha", "model-a", "chat"))
	mfs := gather(t, reg)

	alphaChat := map[string]string{"target": "alpha", "class": "chat"}
	counters := map[string]float64{
		"llmprobe_requests_scheduled_total":     3,
		"llmprobe_requests_sent_total":          2,
		"llmprobe_prompt_tokens_total":          210,
		"llmprobe_output_tokens_total":          32,
		"llmprobe_cached_prompt_tokens_total":   80,
		"llmprobe_usage_estimated_total":        0,
		"llmprobe_prompt_length_mismatch_total": 1,
	}
	for name, want := range counters {
		if got := series(mfs, name, alphaChat).GetCounter().GetValue(); got != want {
			t.Errorf("%s{alpha,chat} = %v, want %v", name, got, want)
		}
	}
	if got := series(mfs, "llmprobe_requests_total", map[string]string{"target": "alpha", "model": "model-a", "class": "chat", "outcome": "success"}).GetCounter().GetValue(); got != 2 {
		t.Errorf("requests_total{success} = %v, want 2", got)
	}
	if got := series(mfs, "llmprobe_requests_dropped_total", map[string]string{"target": "alpha", "reason": "inflight_limit"}).GetCounter().GetValue(); got != 1 {
		t.Errorf("requests_dropped_total{inflight_limit} = %v, want 1", got)
	}
	// The other class of the same target is untouched.
	if got := series(mfs, "llmprobe_requests_sent_total", map[string]string{"target": "alpha", "class": "agent"}).GetCounter().GetValue(); got != 0 {
		t.Errorf("requests_sent_total{alpha,agent} = %v, want 0", got)
	}

	hist := func(name string, labels map[string]string) *dto.Histogram {
		t.Helper()
		s := series(mfs, name, labels)
		if s == nil {
			t.Fatalf("%s%v missing", name, labels)
		}
		return s.GetHistogram()
	}
	wantCounts := map[string]uint64{
		"llmprobe_ttft_seconds":              2,
		"llmprobe_tpot_seconds":              2,
		"llmprobe_itl_seconds":               30,
		"llmprobe_e2e_seconds":               2,
		"llmprobe_prompt_tokens":             2,
		"llmprobe_output_tokens":             2,
		"llmprobe_prompt_length_error_ratio": 2,
	}
	for name, want := range wantCounts {
		if got := hist(name, alphaChat).GetSampleCount(); got != want {
			t.Errorf("%s count = %d, want %d", name, got, want)
		}
	}
	if got := hist("llmprobe_ttft_seconds", alphaChat).GetSampleSum(); !near(got, 0.5) {
		t.Errorf("ttft sum = %v, want 0.5", got)
	}
	if got := hist("llmprobe_prompt_length_error_ratio", alphaChat).GetSampleSum(); !near(got, 0.1) {
		t.Errorf("prompt_length_error_ratio sum = %v, want 0.1", got)
	}
	lag := hist("llmprobe_schedule_lag_seconds", map[string]string{"target": "alpha"})
	if lag.GetSampleCount() != 2 || !near(lag.GetSampleSum(), 0.002) {
		t.Errorf("schedule_lag count/sum = %d/%v, want 2/0.002", lag.GetSampleCount(), lag.GetSampleSum())
	}
	if cw := hist("llmprobe_client_wait_seconds", map[string]string{"target": "alpha"}); cw.GetSampleCount() != 2 {
		t.Errorf("client_wait count = %d, want 2", cw.GetSampleCount())
	}

	// Classic and native buckets side by side.
	ttft := hist("llmprobe_ttft_seconds", alphaChat)
	if len(ttft.GetBucket()) != len(ttftBuckets) {
		t.Errorf("ttft has %d classic buckets, want %d", len(ttft.GetBucket()), len(ttftBuckets))
	}
	if ttft.Schema == nil || len(ttft.GetPositiveSpan()) == 0 || len(ttft.GetPositiveDelta()) == 0 {
		t.Errorf("ttft has no native histogram (schema %v, spans %v)", ttft.Schema, ttft.GetPositiveSpan())
	}
	if s := ttft.GetSchema(); s != 3 {
		t.Errorf("ttft native schema = %d, want 3 (bucket factor 1.1)", s)
	}
	// Exemplars: classic bucket exemplars carry the trace id.
	found := false
	for _, b := range ttft.GetBucket() {
		if ex := b.GetExemplar(); ex != nil {
			for _, lp := range ex.GetLabel() {
				found = found || (lp.GetName() == "trace_id" && lp.GetValue() == testTraceID)
			}
		}
	}
	if !found {
		t.Error("ttft carries no trace_id exemplar")
	}
	// The hit ratio appears once cached tokens were reported: 80/210.
	if got := series(mfs, "llmprobe_prefix_cache_hit_ratio", alphaChat).GetGauge().GetValue(); !near(got, 80.0/210) {
		t.Errorf("prefix_cache_hit_ratio = %v, want 80/210", got)
	}
}

func near(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }

func TestObserveRules(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(r *wire.Result)
		// Expected sample counts of ttft, itl, tpot, e2e, and whether the
		// token counters moved.
		ttft, itl, tpot, e2e uint64
		tokens               bool
	}{
		{"success", func(r *wire.Result) {}, 1, 15, 1, 1, true},
		{"warm-up counts but stays out of latency", func(r *wire.Result) { r.Warmup = true }, 0, 0, 0, 0, true},
		{"stream broke after tokens", func(r *wire.Result) {
			r.Outcome, r.ErrorType, r.UsageReported, r.CachedTokensReported = wire.OutcomeStreamError, "connection_reset", false, false
		}, 1, 15, 0, 0, true},
		{"single output token has no TPOT", func(r *wire.Result) {
			r.OutputTokens, r.ITLs, r.Chunks = 1, nil, 1
		}, 1, 0, 0, 1, true},
		{"refused connection", func(r *wire.Result) {
			*r = wire.Result{Target: r.Target, Model: r.Model, Class: r.Class, Outcome: wire.OutcomeConnectError, ErrorType: "connection_refused",
				ScheduleLag: time.Millisecond, PromptTokens: 100, PlannedPromptTokens: 100, PrefixGroup: -1}
		}, 0, 0, 0, 0, false},
		{"http error", func(r *wire.Result) {
			*r = wire.Result{Target: r.Target, Model: r.Model, Class: r.Class, Start: r.Start, Outcome: wire.OutcomeHTTPError, StatusCode: 503,
				E2E: 5 * time.Millisecond, PromptTokens: 100, PlannedPromptTokens: 100, PrefixGroup: -1}
		}, 0, 0, 0, 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, reg := configuredMetrics(t)
			r := successResult("alpha", "model-a", "chat")
			tc.mutate(r)
			m.Observe(r)
			mfs := gather(t, reg)
			l := map[string]string{"target": "alpha", "class": "chat"}
			for name, want := range map[string]uint64{"llmprobe_ttft_seconds": tc.ttft, "llmprobe_itl_seconds": tc.itl, "llmprobe_tpot_seconds": tc.tpot, "llmprobe_e2e_seconds": tc.e2e} {
				if got := series(mfs, name, l).GetHistogram().GetSampleCount(); got != want {
					t.Errorf("%s count = %d, want %d", name, got, want)
				}
			}
			if got := series(mfs, "llmprobe_requests_total", map[string]string{"target": "alpha", "class": "chat", "outcome": string(r.Outcome)}).GetCounter().GetValue(); got != 1 {
				t.Errorf("requests_total{%s} = %v, want 1", r.Outcome, got)
			}
			if got := series(mfs, "llmprobe_schedule_lag_seconds", map[string]string{"target": "alpha"}).GetHistogram().GetSampleCount(); got != 1 {
				t.Errorf("schedule_lag count = %d, want 1 (every sent request)", got)
			}
			moved := series(mfs, "llmprobe_prompt_tokens_total", l).GetCounter().GetValue() > 0
			if moved != tc.tokens {
				t.Errorf("prompt_tokens_total moved = %v, want %v", moved, tc.tokens)
			}
			estimated := series(mfs, "llmprobe_usage_estimated_total", l).GetCounter().GetValue()
			if want := tc.tokens && !r.UsageReported; (estimated == 1) != want {
				t.Errorf("usage_estimated_total = %v, want estimated=%v", estimated, want)
			}
		})
	}
}

func TestUnknownAndRemovedSeriesStayGone(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)

	// Before any configuration, everything is ignored.
	m.Observe(successResult("alpha", "model-a", "chat"))
	if n := countSeries(gather(t, reg), "llmprobe_requests_total", nil); n != 0 {
		t.Fatalf("%d series before SetConfig", n)
	}

	m.SetConfig(mustConfig(t, testConfigYAML))
	for range 5 {
		m.Sent("alpha", "", "chat")
		m.Observe(successResult("alpha", "model-a", "chat"))
	}
	// Unknown target, unknown class, wrong model: ignored, no new series.
	m.Observe(successResult("gamma", "model-a", "chat"))
	m.Observe(successResult("alpha", "model-a", "nope"))
	m.Observe(successResult("alpha", "other-model", "chat"))
	m.Scheduled("gamma", "", "chat")
	m.Dropped("gamma", "", "chat", probe.DropLate)
	m.Dropped("alpha", "", "chat", probe.DropReason("made_up"))
	mfs := gather(t, reg)
	if got := labelValues(mfs, "llmprobe_requests_total", "target"); !slices.Equal(got, []string{"alpha", "beta"}) {
		t.Errorf("targets = %v, want [alpha beta]", got)
	}
	if got := labelValues(mfs, "llmprobe_requests_total", "model"); !slices.Equal(got, []string{"model-a", "model-b"}) {
		t.Errorf("models = %v", got)
	}
	if got := series(mfs, "llmprobe_requests_total", map[string]string{"target": "alpha", "class": "chat", "outcome": "success"}).GetCounter().GetValue(); got != 5 {
		t.Errorf("alpha/chat successes = %v, want 5", got)
	}

	// Reload without beta and without class agent.
	m.SetConfig(mustConfig(t, alphaOnlyYAML))
	// Late events of the removed target and class (in flight during the reload).
	m.Observe(successResult("beta", "model-b", "ping"))
	m.Scheduled("beta", "", "ping")
	m.Dropped("beta", "", "ping", probe.DropShutdown)
	m.Observe(successResult("alpha", "model-a", "agent"))
	m.Sent("alpha", "", "agent")
	mfs = gather(t, reg)
	for name, mf := range mfs {
		for _, s := range mf.GetMetric() {
			for _, lp := range s.GetLabel() {
				if (lp.GetName() == "target" && lp.GetValue() == "beta") || (lp.GetName() == "class" && lp.GetValue() == "agent") {
					t.Errorf("%s still has a removed series: %v", name, s.GetLabel())
				}
			}
		}
	}
	if got := series(mfs, "llmprobe_requests_sent_total", map[string]string{"target": "alpha", "class": "chat"}).GetCounter().GetValue(); got != 5 {
		t.Errorf("alpha/chat sent after reload = %v, want 5 (kept)", got)
	}
	// The hit-ratio window of a kept series survives the reload.
	if _, ok := m.HitRatio("alpha", "chat"); !ok {
		t.Error("alpha/chat hit ratio lost across a reload")
	}
}

func TestModelChangeReplacesModelSeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	m.SetConfig(mustConfig(t, alphaOnlyYAML))
	m.Scheduled("alpha", "", "chat")
	m.Observe(successResult("alpha", "model-a", "chat"))

	m.SetConfig(mustConfig(t, strings.Replace(alphaOnlyYAML, "model: model-a", "model: model-a2", 1)))
	m.Observe(successResult("alpha", "model-a", "chat")) // in flight with the old model: dropped
	mfs := gather(t, reg)
	if got := labelValues(mfs, "llmprobe_ttft_seconds", "model"); !slices.Equal(got, []string{"model-a2"}) {
		t.Errorf("ttft models = %v, want [model-a2]", got)
	}
	if got := series(mfs, "llmprobe_requests_total", map[string]string{"model": "model-a2", "outcome": "success"}).GetCounter().GetValue(); got != 0 {
		t.Errorf("requests_total{model-a2} = %v, want 0", got)
	}
	// Series without a model label keep counting.
	if got := series(mfs, "llmprobe_requests_scheduled_total", map[string]string{"target": "alpha"}).GetCounter().GetValue(); got != 1 {
		t.Errorf("requests_scheduled_total = %v, want 1 (kept)", got)
	}
}

func TestHitRatioWindow(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	t0 := time.Unix(1_700_000_000, 0)
	now := t0
	m.now = func() time.Time { return now }
	m.SetConfig(mustConfig(t, testConfigYAML)) // hit_ratio_window: 10s

	obs := func(cached, prompt int) {
		r := successResult("alpha", "model-a", "chat")
		r.CachedTokens, r.PromptTokens, r.PlannedPromptTokens = cached, prompt, prompt
		m.Observe(r)
	}
	check := func(what string, want float64, wantOK bool) {
		t.Helper()
		got, ok := m.HitRatio("alpha", "chat")
		if ok != wantOK || (ok && !near(got, want)) {
			t.Errorf("%s: hit ratio = %v (ok %v), want %v (ok %v)", what, got, ok, want, wantOK)
		}
		s := series(gather(t, reg), "llmprobe_prefix_cache_hit_ratio", map[string]string{"target": "alpha", "class": "chat"})
		if (s != nil) != wantOK || (s != nil && !near(s.GetGauge().GetValue(), want)) {
			t.Errorf("%s: exported hit ratio = %v, want %v (present %v)", what, s, want, wantOK)
		}
	}

	check("empty window", 0, false)
	obs(40, 100)
	now = t0.Add(5 * time.Second)
	obs(0, 100)
	// A request whose server reports usage but not cached tokens says
	// nothing about the cache.
	r := successResult("alpha", "model-a", "chat")
	r.CachedTokensReported, r.CachedTokens = false, 0
	m.Observe(r)
	check("both in window", 40.0/200, true)

	now = t0.Add(9*time.Second + 900*time.Millisecond)
	check("first still in window", 40.0/200, true)
	now = t0.Add(10*time.Second + 100*time.Millisecond)
	check("first slid out", 0, true)
	obs(100, 100)
	check("new data", 100.0/200, true)
	now = t0.Add(30 * time.Second)
	check("window empty again", 0, false)

	// Other classes never saw data.
	if _, ok := m.HitRatio("alpha", "agent"); ok {
		t.Error("alpha/agent reports a hit ratio without data")
	}
	if _, ok := m.HitRatio("nope", "chat"); ok {
		t.Error("unknown target reports a hit ratio")
	}
}

func TestRatioWindowLongWindowIsBounded(t *testing.T) {
	w := newRatioWindow(24 * time.Hour)
	if len(w.buckets) != maxRatioBuckets {
		t.Errorf("a 24h window has %d buckets, want %d", len(w.buckets), maxRatioBuckets)
	}
	t0 := time.Unix(1_700_000_000, 0)
	w.add(t0, 1, 4)
	if r, ok := w.ratio(t0.Add(23 * time.Hour)); !ok || r != 0.25 {
		t.Errorf("ratio 23h later = %v (%v), want 0.25", r, ok)
	}
	if _, ok := w.ratio(t0.Add(25 * time.Hour)); ok {
		t.Error("data older than the window still counted")
	}
}

// TestHostileResults feeds values a broken or hostile server could cause;
// nothing may panic and counters never go backwards.
func TestHostileResults(t *testing.T) {
	m, reg := configuredMetrics(t)
	r := successResult("alpha", "model-a", "chat")
	r.PromptTokens, r.OutputTokens, r.CachedTokens = -5, -1, -100
	r.TTFT, r.E2E, r.ScheduleLag = -time.Second, -time.Second, -time.Millisecond
	r.TraceID = strings.Repeat("\xff", 200)
	r.Outcome = "made_up"
	m.Observe(r)
	r2 := successResult("alpha", "model-a", "chat")
	r2.TraceID = strings.Repeat("a", 500) // too long for an exemplar: observed without one
	r2.PlannedPromptTokens = 0
	m.Observe(r2)
	m.Observe(nil)
	mfs := gather(t, reg)
	l := map[string]string{"target": "alpha", "class": "chat"}
	if got := series(mfs, "llmprobe_prompt_tokens_total", l).GetCounter().GetValue(); got != 100 {
		t.Errorf("prompt_tokens_total = %v, want 100 (negative counts ignored)", got)
	}
	if got := series(mfs, "llmprobe_ttft_seconds", l).GetHistogram().GetSampleCount(); got != 2 {
		t.Errorf("ttft count = %d, want 2", got)
	}
	if got := series(mfs, "llmprobe_prompt_length_error_ratio", l).GetHistogram().GetSampleCount(); got != 0 {
		t.Errorf("prompt_length_error_ratio count = %d, want 0 (no usable plan)", got)
	}
}

func TestValidTraceID(t *testing.T) {
	for id, want := range map[string]bool{
		testTraceID:              true,
		"":                       false,
		"xyz":                    false,
		strings.Repeat("a", 64):  true,
		strings.Repeat("a", 65):  false,
		"4bf92f35-77b34da6a3ce9": false,
	} {
		if got := validTraceID(id); got != want {
			t.Errorf("validTraceID(%q) = %v, want %v", id, got, want)
		}
	}
}

func TestConcurrentObserveAndSetConfig(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	full, small := mustConfig(t, testConfigYAML), mustConfig(t, alphaOnlyYAML)
	m.SetConfig(full)
	done := make(chan struct{})
	for range 4 {
		go func() {
			defer func() { done <- struct{}{} }()
			for range 2000 {
				m.Scheduled("alpha", "", "chat")
				m.Observe(successResult("alpha", "model-a", "chat"))
				m.Observe(successResult("beta", "model-b", "ping"))
			}
		}()
	}
	for i := range 50 {
		if i%2 == 0 {
			m.SetConfig(small)
		} else {
			m.SetConfig(full)
		}
		if _, err := reg.Gather(); err != nil {
			t.Error(err)
		}
	}
	for range 4 {
		<-done
	}
	m.SetConfig(small)
	if n := countSeries(gather(t, reg), "llmprobe_requests_total", map[string]string{"target": "beta"}); n != 0 {
		t.Errorf("beta has %d series after the final reload", n)
	}
}

// BenchmarkObserve measures the hot path: one 16-chunk streamed result
// (TTFT, 15 ITLs, TPOT, E2E, lag, tokens, hit ratio), with and without a
// trace_id exemplar.
func BenchmarkObserve(b *testing.B) {
	for _, bc := range []struct {
		name    string
		traceID string
	}{{"exemplar", testTraceID}, {"no-exemplar", ""}} {
		b.Run(bc.name, func(b *testing.B) {
			m, _ := configuredMetrics(b)
			r := successResult("alpha", "model-a", "chat")
			r.TraceID = bc.traceID
			b.ReportAllocs()
			for b.Loop() {
				m.Observe(r)
			}
		})
	}
	b.Run("exemplar-parallel", func(b *testing.B) {
		m, _ := configuredMetrics(b)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			r := successResult("alpha", "model-a", "chat")
			for pb.Next() {
				m.Observe(r)
			}
		})
	})
	b.Run("events", func(b *testing.B) {
		m, _ := configuredMetrics(b)
		b.ReportAllocs()
		for b.Loop() {
			m.Scheduled("alpha", "", "chat")
			m.Sent("alpha", "", "chat")
		}
	})
}

// BenchmarkSetConfig measures a reload of the two-target test config: the
// window in which events of a newly started target would be ignored when
// the engine is applied first.
func BenchmarkSetConfig(b *testing.B) {
	m := NewMetrics(prometheus.NewRegistry())
	full, small := mustConfig(b, testConfigYAML), mustConfig(b, alphaOnlyYAML)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if i%2 == 0 {
			m.SetConfig(full)
		} else {
			m.SetConfig(small)
		}
		i++
	}
}

// readCatalogue reads testdata/catalogue.txt: every exported metric's
// name -> "type {labels}".
func readCatalogue(t *testing.T) map[string]string {
	t.Helper()
	cat, err := os.ReadFile("testdata/catalogue.txt")
	if err != nil {
		t.Fatal(err)
	}
	exported := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(cat)), "\n") {
		name, rest, _ := strings.Cut(line, " ")
		exported[name] = rest
	}
	return exported
}

// TestDesignContractTable: every metric of the contract table in
// docs/design.md is exported with the type and (at least) the labels the
// table names, so the contract dashboards and alerts are written against
// cannot drift from the code.
func TestDesignContractTable(t *testing.T) {
	design, err := os.ReadFile("../docs/design.md")
	if err != nil {
		t.Fatal(err)
	}
	exported := readCatalogue(t)
	rows := 0
	for _, line := range strings.Split(string(design), "\n") {
		if !strings.HasPrefix(line, "| llmprobe_") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) != 3 {
			t.Errorf("docs/design.md: contract row %q has %d cells, want 3", line, len(cells))
			continue
		}
		rows++
		name := strings.TrimSpace(cells[0])
		typ, _, _ := strings.Cut(strings.TrimSpace(cells[1]), " ")
		got, ok := exported[name]
		if !ok {
			t.Errorf("docs/design.md names %s, which llmprobe does not export", name)
			continue
		}
		if !strings.HasPrefix(got, typ+" ") {
			t.Errorf("%s: docs/design.md says %s, llmprobe exports %s", name, typ, got)
		}
		_, labels, _ := strings.Cut(strings.TrimSuffix(got, "}"), "{")
		have := strings.Split(labels, ",")
		for _, l := range strings.Split(cells[2], ",") {
			if l = strings.TrimSpace(l); l != "" && !slices.Contains(have, l) {
				t.Errorf("%s: docs/design.md names label %s, llmprobe exports %s", name, l, got)
			}
		}
	}
	if rows < 20 {
		t.Errorf("found %d contract rows in docs/design.md, want the whole table", rows)
	}
}

// TestEveryMetricIsDocumented: docs/metrics.md has a table row for every
// metric llmprobe exports.
func TestEveryMetricIsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range slices.Sorted(maps.Keys(readCatalogue(t))) {
		if !strings.Contains(string(doc), "`"+name+"`") {
			t.Errorf("docs/metrics.md does not document %s", name)
		}
	}
}

// TestObserveReasoning: TTFA is observed for requests whose answer began
// (warm-up excluded, with the trace exemplar), reasoning tokens for those
// whose server reported them.
func TestObserveReasoning(t *testing.T) {
	m, reg := configuredMetrics(t)
	thinking := successResult("alpha", "model-a", "chat")
	thinking.FirstAnswer, thinking.TTFA = true, 1200*time.Millisecond
	thinking.ReasoningTokens, thinking.ReasoningReported = 9, true
	m.Observe(thinking)
	truncated := successResult("alpha", "model-a", "chat") // max_tokens ran out while thinking
	truncated.ReasoningTokens, truncated.ReasoningReported = 16, true
	m.Observe(truncated)
	warm := successResult("alpha", "model-a", "chat")
	warm.Warmup, warm.FirstAnswer, warm.TTFA = true, true, time.Second
	m.Observe(warm)
	mfs := gather(t, reg)
	lbl := map[string]string{"target": "alpha", "model": "model-a", "class": "chat"}
	h := series(mfs, "llmprobe_ttfa_seconds", lbl).GetHistogram()
	if h.GetSampleCount() != 1 || h.GetSampleSum() != 1.2 {
		t.Errorf("ttfa count %d sum %v, want 1 and 1.2 (warm-up and a request without an answer excluded)", h.GetSampleCount(), h.GetSampleSum())
	}
	exemplar := false
	for _, b := range h.GetBucket() {
		exemplar = exemplar || b.GetExemplar() != nil
	}
	if !exemplar {
		t.Error("ttfa carries no trace exemplar")
	}
	if got := series(mfs, "llmprobe_reasoning_tokens_total", lbl).GetCounter().GetValue(); got != 9+16+0 {
		t.Errorf("reasoning tokens = %v, want 25 (warm-up requests count tokens, unreported ones do not)", got)
	}
}

// TestClassModels: a class that names a model or LoRA adapter gets series
// with that model label; results naming another model are not counted;
// a reload that changes a class's model deletes its old series.
func TestClassModels(t *testing.T) {
	cfgFor := func(adapter string) *config.Config {
		return mustConfig(t, `
workloads:
  w:
    classes:
      - {name: base, weight: 0.6, prompt_tokens: 16, output_tokens: 4}
      - {name: sql, weight: 0.4, prompt_tokens: 16, output_tokens: 4, model: `+adapter+`}
targets:
  - {name: alpha, url: "http://127.0.0.1:1/v1", model: llama-8b, workload: w, arrival: {rate: 1}}
`)
	}
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	m.SetConfig(cfgFor("sql-lora"))
	m.Observe(successResult("alpha", "llama-8b", "base"))
	m.Observe(successResult("alpha", "sql-lora", "sql"))
	m.Observe(successResult("alpha", "llama-8b", "sql")) // not what the class sends
	mfs := gather(t, reg)
	for _, tc := range []struct {
		model, class string
		want         float64
	}{{"llama-8b", "base", 1}, {"sql-lora", "sql", 1}} {
		lbl := map[string]string{"target": "alpha", "model": tc.model, "class": tc.class, "outcome": "success"}
		if got := series(mfs, "llmprobe_requests_total", lbl).GetCounter().GetValue(); got != tc.want {
			t.Errorf("requests{model=%s, class=%s} = %v, want %v", tc.model, tc.class, got, tc.want)
		}
	}
	if n := countSeries(mfs, "llmprobe_ttft_seconds", map[string]string{"class": "sql", "model": "llama-8b"}); n != 0 {
		t.Errorf("%d ttft series of class sql under the base model", n)
	}

	m.SetConfig(cfgFor("sql-lora-v2"))
	mfs = gather(t, reg)
	if n := countSeries(mfs, "llmprobe_requests_total", map[string]string{"model": "sql-lora"}); n != 0 {
		t.Errorf("%d series of the replaced adapter remain", n)
	}
	if n := countSeries(mfs, "llmprobe_requests_total", map[string]string{"model": "sql-lora-v2", "class": "sql"}); n == 0 {
		t.Error("no series for the new adapter")
	}
	if n := countSeries(mfs, "llmprobe_requests_total", map[string]string{"model": "llama-8b", "class": "base"}); n == 0 {
		t.Error("the base class lost its series")
	}
}
