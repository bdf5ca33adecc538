// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/llmprobe/llmprobe/alerts"
	"github.com/llmprobe/llmprobe/dashboards"
	"github.com/llmprobe/llmprobe/internal/promtest"
)

// agentClass is the multi-turn class added to testdata/dashboards.yml when
// the binary supports conversations: short turns and think times, so that
// conversations complete within the test.
const agentClass = `      - name: agent
        weight: 0.3
        prompt_tokens: {dist: uniform, min: 200, max: 600}
        output_tokens: {dist: uniform, min: 8, max: 32}
        turns: {count: {dist: uniform, min: 2, max: 3}, think_time: 200ms, user_tokens: 32}
`

// conversationsMetric is what the conversation panel reads; only
// multi-turn classes have its series.
const conversationsMetric = "llmprobe_conversations_total"

// Job names the test Prometheus scrapes. llmprobeJob is what the mixin's
// selector (alerts.DefaultConfig().Selector) expects.
const (
	llmprobeJob = "llmprobe"
	serverJob   = "vllm"
	dcgmJob     = "dcgm"
	gpuNode     = "gpu-node-1" // Hostname in dashboards/testdata/dcgm-exporter.prom
)

// TestDashboardsAgainstRealStack is the end-to-end check of the mixin: the
// real simulator and the real daemon (probing it with three targets; a
// class with shared prefixes, a plain one and a multi-turn one; a failing
// target) are scraped by a real Prometheus 3 that also scrapes the
// recorded dcgm-exporter exposition, a TGI and a llama.cpp exposition
// (engines_test.go) and evaluates alerts/llmprobe.rules.yml; the
// simulator is scraped with the namespace and pod of the fixture's GPU 0,
// so the energy and GPU time per token rules join them. Every dashboard variable must list the values the setup implies, and
// every panel query of both dashboards, expanded as Grafana would for that
// selection, must return a finite sample — except the week-ago lines,
// which cannot have data in a test, and the conversation panel when the
// binary has no multi-turn conversations yet, each skipped with a log
// line. A few panels are also checked for the values the setup
// implies (the failing target's error ratio is 1, shared prefixes are
// served from the cache, ...), and the error-ratio alert must go pending
// for the failing target only. Tracing is off, so exemplar-enabled
// queries must return no exemplar.
func TestDashboardsAgainstRealStack(t *testing.T) {
	t.Parallel() // beside TestReplicaOutlierNamed (see there)
	binary(t)
	promtest.PrometheusBinary(t) // skip (or fail in CI) before starting anything
	root := promtest.Root(t)
	if sel := alerts.DefaultConfig().Selector; sel != `job="`+llmprobeJob+`"` {
		t.Fatalf("the mixin selects llmprobe with %s; this test scrapes it as job=%q", sel, llmprobeJob)
	}

	classes := []string{"chat", "summarize"}
	conversations := supportsConversations(t)
	fixtureVars := map[string]string{"AGENT_CLASS": ""}
	if conversations {
		fixtureVars["AGENT_CLASS"] = agentClass
		classes = append(classes, "agent")
	} else {
		t.Logf("the binary does not accept turns (multi-turn conversations): no multi-turn class, so no %s series", conversationsMetric)
	}

	_, simURL := startSim(t)
	fixtureVars["SIM_URL"] = simURL
	cfgPath := filepath.Join(t.TempDir(), "llmprobe.yml")
	writeFileAtomic(t, cfgPath, renderFixture(t, "dashboards.yml", fixtureVars))
	_, daemonURL := startDaemon(t, cfgPath)

	dcgm, err := os.ReadFile(filepath.Join(root, "dashboards", "testdata", "dcgm-exporter.prom"))
	if err != nil {
		t.Fatal(err)
	}
	dcgmSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		w.Write(dcgm)
	}))
	t.Cleanup(dcgmSrv.Close)
	tgiSrv, llamacppSrv := tgiExposition(t), llamacppExposition(t)

	started := time.Now()
	prom := promtest.Start(t, promtest.Options{
		Targets: []promtest.ScrapeTarget{
			{JobName: llmprobeJob, Address: hostPort(t, daemonURL)},
			{JobName: serverJob, Address: hostPort(t, simURL), Labels: engineLabels},
			{JobName: tgiJob, Address: hostPort(t, tgiSrv.URL)},
			{JobName: llamacppJob, Address: hostPort(t, llamacppSrv.URL)},
			{JobName: dcgmJob, Address: hostPort(t, dcgmSrv.URL)},
		},
		ScrapeInterval: time.Second,
		RuleFiles:      []string{filepath.Join(root, alerts.RulesPath)},
	})
	t.Cleanup(func() {
		if t.Failed() {
			logTargets(t, prom)
		}
	})

	targets := []string{"sim-chat", "sim-completions", "sim-errors"}
	// Variables as Grafana renders a selection for a regex matcher: a
	// multi-value selection as an alternation, a single value with its
	// regex metacharacters escaped (doubled inside a PromQL string).
	vars := dashboards.DefaultVars()
	vars[dashboards.VarTarget] = "(" + strings.Join(targets, "|") + ")"
	vars[dashboards.VarModel] = strings.ReplaceAll(simModel, ".", `\\.`)
	vars[dashboards.VarClass] = "(" + strings.Join(classes, "|") + ")"
	vars[dashboards.VarServerJob] = "(" + strings.Join([]string{serverJob, tgiJob, llamacppJob}, "|") + ")"
	vars[dashboards.VarGPUNode] = gpuNode
	vars["__rate_interval"] = "10s"
	vars["__interval"] = "1s"
	vars["__range"] = "1m"

	wait := &patience{d: 60 * time.Second}

	t.Run("variables", func(t *testing.T) {
		want := map[string][]string{
			// Scope variables: the test's Prometheus adds no cluster or
			// namespace label, so those list nothing (All selects all).
			"job":                   {llmprobeJob},
			"cluster":               nil,
			"namespace":             nil,
			"instance":              {hostPort(t, daemonURL)},
			dashboards.VarTarget:    targets,
			dashboards.VarModel:     {simModel},
			dashboards.VarClass:     classes,
			dashboards.VarServerJob: {serverJob, tgiJob, llamacppJob},
			dashboards.VarGPUNode:   {gpuNode},
			// The servers' scope: no cluster label; the simulator is
			// scraped with the namespace of the pod GPU 0 serves.
			dashboards.VarServerCluster:   nil,
			dashboards.VarServerNamespace: {engineLabels["namespace"]},
		}
		checkVariables(t, prom, wait, vars, want)
	})

	var checked, skipped int
	for _, q := range dashboards.Queries() {
		id := queryID(q)
		if q.Needs().History {
			t.Logf("skipped %s: compares with the same window a week ago (offset 1w); a test cannot have a week of history", id)
			skipped++
			continue
		}
		if why := notConfigured(q); why != "" {
			t.Logf("skipped %s: %s", id, why)
			skipped++
			continue
		}
		if q.Annotation {
			// Annotations mark reloads, warm-up and saturation, which
			// this setup does not cause: the query must evaluate.
			expr, err := q.Expand(vars)
			if err != nil {
				t.Fatalf("%s: %v", id, err)
			}
			ctx, cancel := wait.ctx()
			if _, err := prom.Query(ctx, expr, time.Time{}); err != nil {
				t.Errorf("%s does not evaluate: %v\n%s", id, err, expr)
			}
			cancel()
			skipped++
			continue
		}
		if !conversations && slices.Contains(metricName.FindAllString(q.Expr, -1), conversationsMetric) {
			t.Logf("skipped %s: %s needs multi-turn conversations, which this binary does not have yet", id, conversationsMetric)
			skipped++
			continue
		}
		expr, err := q.Expand(vars)
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		ctx, cancel := wait.ctx()
		if strings.Contains(q.Expr, "llmprobe_regression_") {
			// The regression detector has a figure once it has a
			// baseline: about 100 requests of a class, which at the
			// fixture's 2.8 req/s (sim-chat's chat) takes most of a
			// minute after the warm-up, and longer on a busy machine.
			cancel()
			ctx, cancel = context.WithTimeout(context.Background(), max(wait.d, 150*time.Second))
		}
		_, err = prom.WaitFor(ctx, expr, (*promtest.Result).HasFinite)
		cancel()
		if err != nil {
			t.Errorf("%s returned no finite sample: %v\n%s", id, err, expr)
			wait.timedOut()
			continue
		}
		checked++
	}
	t.Logf("%d panel queries returned data, all within %s of Prometheus starting; %d skipped",
		checked, time.Since(started).Round(100*time.Millisecond), skipped)
	if min := len(dashboards.Queries()) - skipped; checked < min {
		t.Errorf("%d of %d checked panel queries returned data", checked, min)
	}

	t.Run("values", func(t *testing.T) {
		checkPanelValues(t, prom, wait, vars, conversations)
	})

	t.Run("alerts", func(t *testing.T) {
		// The rules select the real series: the failing target's error
		// ratio alert goes pending (it needs 20 requests in its window,
		// about 10s at 2/s) and no healthy target's does; the daemon is
		// up and its configuration loaded, so those alerts stay silent.
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		pending := `ALERTS{alertname="LLMProbeErrorRatioHigh", alertstate="pending", target="sim-errors", model="` + simModel + `", severity="critical"}`
		if _, err := prom.WaitFor(ctx, pending, nil); err != nil {
			t.Errorf("LLMProbeErrorRatioHigh is not pending for the failing target: %v", err)
		}
		for _, silent := range []string{
			`ALERTS{alertname="LLMProbeErrorRatioHigh", target!="sim-errors"}`,
			`ALERTS{alertname=~"LLMProbeDown|LLMProbeConfigReloadFailed|LLMProbeTargetNotProbed"}`,
		} {
			res, err := prom.Query(ctx, silent, time.Time{})
			if err != nil {
				t.Errorf("%s: %v", silent, err)
			} else if !res.Empty() {
				t.Errorf("%s: %s", silent, res)
			}
		}
	})

	t.Run("native histograms", func(t *testing.T) {
		ctx, cancel := wait.ctx()
		defer cancel()
		// Prometheus negotiated the protobuf format with the daemon and
		// stored the latency histograms as native histograms.
		res, err := prom.WaitFor(ctx, `llmprobe_ttft_seconds{job="llmprobe", target="sim-chat"}`, func(r *promtest.Result) bool {
			return len(r.Vector) > 0 && r.Vector[0].Histogram != nil
		})
		if err != nil {
			t.Errorf("no native histogram sample of llmprobe_ttft_seconds: %v", err)
		} else if res.Vector[0].Histogram.Count == 0 {
			t.Errorf("llmprobe_ttft_seconds native histogram is empty: %v", res)
		}
	})

	t.Run("exemplars", func(t *testing.T) {
		ctx, cancel := wait.ctx()
		defer cancel()
		// Tracing is off (the daemon runs without OTEL_* configuration), so
		// no request has a sampled span and no exemplar may point at a
		// trace that was never exported.
		var n int
		for _, q := range dashboards.Queries() {
			if !q.Exemplar {
				continue
			}
			n++
			expr, err := q.Expand(vars)
			if err != nil {
				t.Fatal(err)
			}
			series, err := prom.QueryExemplars(ctx, expr, started.Add(-time.Minute), time.Now())
			if err != nil {
				t.Errorf("%s: query_exemplars: %v", queryID(q), err)
				continue
			}
			for _, s := range series {
				if len(s.Exemplars) > 0 {
					t.Errorf("%s: %d exemplars on %v although tracing is off, e.g. %v", queryID(q), len(s.Exemplars), s.SeriesLabels, s.Exemplars[0].Labels)
				}
			}
		}
		if n == 0 {
			t.Error("no exemplar-enabled panel query")
		}
	})
}

// patience hands out the deadlines of Prometheus queries waiting for
// data: long ones, which cover the time data needs to appear (warm-up, two
// scrapes in a rate window, a rule evaluation), until a query has timed
// out; short ones after, so that a broken setup fails quickly.
type patience struct{ d time.Duration }

func (p *patience) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), p.d)
}

func (p *patience) timedOut() { p.d = 5 * time.Second }

func queryID(q dashboards.Query) string {
	return fmt.Sprintf("%s / %s / %s", q.Dashboard, q.Panel, q.RefID)
}

func hostPort(t *testing.T, base string) string {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

// metricName matches the metric names a PromQL expression may select.
var metricName = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)

// supportsConversations reports whether the binary under test accepts
// multi-turn classes (the turns key), asking check-config about
// testdata/turns-check.yml.
func supportsConversations(t *testing.T) bool {
	t.Helper()
	code, stdout, stderr := runCommand(t, "check-config", filepath.Join("testdata", "turns-check.yml"))
	switch {
	case code == 0:
		return true
	case code == 1 && strings.Contains(stderr, `unknown field "turns"`):
		return false
	}
	t.Fatalf("check-config testdata/turns-check.yml exited %d:\n%s%s", code, stdout, stderr)
	return false
}

var labelValuesQuery = regexp.MustCompile(`^label_values\((.*), *([A-Za-z_][A-Za-z0-9_]*)\)$`)

// checkVariables evaluates every query variable of both dashboards
// (label_values(selector, label)) and compares the values with want.
func checkVariables(t *testing.T, prom *promtest.Server, wait *patience, vars dashboards.Vars, want map[string][]string) {
	gen, err := dashboards.Dashboards(alerts.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, g := range gen {
		for _, v := range g.Dashboard.Templating.List {
			if v.Type != "query" || v.Query == nil || v.Query.String == nil {
				continue
			}
			m := labelValuesQuery.FindStringSubmatch(*v.Query.String)
			if m == nil {
				t.Errorf("%s: variable %s: query %q is not label_values(selector, label)", g.Path, v.Name, *v.Query.String)
				continue
			}
			expected, ok := want[v.Name]
			if !ok {
				t.Errorf("%s: variable %s: no expected values (a new variable? add it to the test)", g.Path, v.Name)
				continue
			}
			seen[v.Name] = true
			sel, err := dashboards.Expand(m[1], vars)
			if err != nil {
				t.Fatal(err)
			}
			label := m[2]
			expected = slices.Sorted(slices.Values(expected))
			var got []string
			ctx, cancel := wait.ctx()
			_, err = prom.WaitFor(ctx, fmt.Sprintf("count by (%s) (%s)", label, sel), func(r *promtest.Result) bool {
				got = got[:0]
				for _, s := range r.Vector {
					// label_values lists nothing for series without the label.
					if v := s.Metric[label]; v != "" {
						got = append(got, v)
					}
				}
				sort.Strings(got)
				return slices.Equal(got, expected)
			})
			cancel()
			if err != nil {
				wait.timedOut()
				t.Errorf("%s: variable %s (%s) lists %q, want %q", g.Path, v.Name, *v.Query.String, got, expected)
			}
		}
	}
	for name := range want {
		if !seen[name] {
			t.Errorf("no dashboard has the variable %s", name)
		}
	}
}

// notConfigured says why q cannot return data in this test's setup, or "":
// tracing is off (no llmprobe_trace_* series), no workload is fitted
// from production (no llmprobe_workload_* series), and the server view
// (sim-chat's server_metrics) has no GPU figure.
func notConfigured(q dashboards.Query) string {
	for _, m := range metricName.FindAllString(q.Expr, -1) {
		switch {
		case strings.HasPrefix(m, "llmprobe_trace_"):
			return m + " exists only with tracing enabled, which this test leaves off"
		case strings.HasPrefix(m, "llmprobe_workload_"):
			return m + " exists only for workloads fitted from production, which this test has none of"
		case strings.HasPrefix(m, "llmprobe_replica_") || strings.HasPrefix(m, "llmprobe:replica_"):
			return m + " exists only for targets with discovery, which this test's configuration has none of"
		case m == "llmprobe_server_gpu_utilization_ratio":
			return m + " exists only with global.diagnosis.prometheus, which this test's daemon cannot be given (its Prometheus starts after it)"
		}
	}
	return ""
}

// panelValue is an expected value of one series of a panel query.
type panelValue struct {
	uid, panel, refID string
	series            map[string]string // labels the sample must have
	what              string
	ok                func(float64) bool
}

// checkPanelValues checks panels for the values the setup implies, beyond
// "some finite sample".
func checkPanelValues(t *testing.T, prom *promtest.Server, wait *patience, vars dashboards.Vars, conversations bool) {
	ov, corr := dashboards.OverviewUID, dashboards.CorrelationUID
	positive := func(v float64) bool { return v > 0 }
	checks := []panelValue{
		{ov, "Config reload", "A", nil, "1 (loaded)", func(v float64) bool { return v == 1 }},
		{ov, "Error ratio", "A", map[string]string{"target": "sim-errors"}, "1 (every request answered 500)", func(v float64) bool { return v == 1 }},
		{ov, "Error ratio", "A", map[string]string{"target": "sim-chat"}, "0 (no fault injected)", func(v float64) bool { return v == 0 }},
		{ov, "Completed requests by outcome", "A", map[string]string{"target": "sim-errors", "outcome": "http_error"}, "> 0", positive},
		{ov, "Completed requests by outcome", "A", map[string]string{"target": "sim-completions", "outcome": "success"}, "> 0", positive},
		{ov, "Prefix-cache hit ratio: observed vs intended", "A", map[string]string{"target": "sim-chat", "class": "chat"}, "> 0 (shared system prompts)", positive},
		{ov, "Prefix-cache hit ratio: observed vs intended", "B", map[string]string{"target": "sim-chat", "class": "chat"}, "> 0 (prefix configured)", positive},
		{ov, "Prefix-cache hit ratio: observed vs intended", "B", map[string]string{"target": "sim-chat", "class": "summarize"}, "0 (no prefix configured)", func(v float64) bool { return v == 0 }},
		{ov, "Time to first token (TTFT)", "C", map[string]string{"target": "sim-chat"}, "> 0", positive},
		{corr, "Prefix-cache hit ratio: engine vs probe", "A", map[string]string{"engine": "vllm"}, "> 0 (the simulator served cached prefixes)", positive},
		{corr, "TTFT: probe vs engine", "C", map[string]string{"engine": "vllm", "model_name": simModel}, "> 0", positive},
		// GPU 0 of the fixture draws 312.481 W for the simulator's pod: a
		// positive energy per token from the engine's own token counter.
		{corr, "Energy per generated token", "A", engineLabels, "> 0 (GPU 0's power over the simulator's tokens/s)", positive},
		{corr, "GPU time and cost per million generated tokens", "A", engineLabels, "> 0 (1 GPU over the simulator's tokens/s)", positive},
		{corr, "TGI: tokens per second", "B", nil, "> 0 (120 tokens per request)", positive},
		{corr, "llama.cpp: tokens per second", "B", nil, "> 0", positive},
	}
	if conversations {
		// Each arrival starts a conversation of 1 to 3 turns: the
		// requested request rate is the arrival rate times the expected
		// number of turns.
		checks = append(checks,
			panelValue{ov, "Requested, scheduled and sent rate", "A", map[string]string{"target": "sim-chat"}, "between 4 (arrivals/s) and 12 (3 turns each)", func(v float64) bool { return v > 4 && v < 12 }},
			panelValue{ov, "Conversations by outcome", "A", map[string]string{"target": "sim-chat", "outcome": "completed"}, "> 0", positive},
			panelValue{ov, "Conversations by outcome", "A", map[string]string{"target": "sim-errors", "outcome": "failed"}, "> 0 (every first turn fails)", positive},
		)
	} else {
		checks = append(checks,
			panelValue{ov, "Requested, scheduled and sent rate", "A", map[string]string{"target": "sim-chat"}, "4 (configured rate)", func(v float64) bool { return v == 4 }})
	}
	queries := dashboards.Queries()
	for _, c := range checks {
		i := slices.IndexFunc(queries, func(q dashboards.Query) bool {
			return q.DashboardUID == c.uid && q.Panel == c.panel && q.RefID == c.refID
		})
		if i < 0 {
			t.Errorf("no panel query %s / %s / %s (renamed? update the test)", c.uid, c.panel, c.refID)
			continue
		}
		expr, err := queries[i].Expand(vars)
		if err != nil {
			t.Fatal(err)
		}
		var last float64
		found := false
		ctx, cancel := wait.ctx()
		_, err = prom.WaitFor(ctx, expr, func(r *promtest.Result) bool {
			for _, s := range r.Vector {
				if labelsInclude(s.Metric, c.series) {
					last, found = s.Value, true
					return c.ok(s.Value)
				}
			}
			return false
		})
		cancel()
		if err != nil {
			wait.timedOut()
			state := "no such series"
			if found {
				state = fmt.Sprintf("last value %g", last)
			}
			t.Errorf("%s %v: want %s, %s\n%s", queryID(queries[i]), c.series, c.what, state, expr)
		}
	}
}

func labelsInclude(got, want map[string]string) bool {
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}

// logTargets logs Prometheus' view of its scrape targets, to diagnose a
// failed test.
func logTargets(t *testing.T, prom *promtest.Server) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ts, err := prom.Targets(ctx)
	if err != nil {
		t.Logf("scrape targets: %v", err)
		return
	}
	for _, tg := range ts {
		t.Logf("scrape target %s %s: %s %s", tg.ScrapePool, tg.ScrapeURL, tg.Health, tg.LastError)
	}
}
