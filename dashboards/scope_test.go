// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package dashboards_test

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/grafana/grafana-foundation-sdk/go/dashboard"

	"github.com/llmprobe/llmprobe/alerts"
	"github.com/llmprobe/llmprobe/dashboards"
)

// engineSeries matches a selector of a model server's or a GPU's series:
// the metric name and its braces.
var engineSeries = regexp.MustCompile(`\b(vllm:|sglang:|tgi_|llamacpp:|DCGM_)[A-Za-z0-9_:]*(\{[^}]*\})?`)

// TestCorrelationScopesEngineSeries: in a Prometheus holding several
// clusters, every engine and GPU series the correlation dashboard reads is
// narrowed to the selected server cluster (and engine series to the
// server namespace), not only by job and model, so clusters never mix.
func TestCorrelationScopesEngineSeries(t *testing.T) {
	n := 0
	for _, q := range dashboards.Queries() {
		if q.DashboardUID != dashboards.CorrelationUID {
			continue
		}
		for _, m := range engineSeries.FindAllStringSubmatch(q.Expr, -1) {
			n++
			sel := m[2]
			if !strings.Contains(sel, `cluster=~"$server_cluster"`) {
				t.Errorf("%s / %s: %s is not narrowed to $server_cluster", q.Panel, q.RefID, m[0])
			}
			if m[1] != "DCGM_" && !strings.Contains(sel, `namespace=~"$server_namespace"`) {
				t.Errorf("%s / %s: %s is not narrowed to $server_namespace", q.Panel, q.RefID, m[0])
			}
		}
	}
	if n == 0 {
		t.Fatal("no engine series in the correlation dashboard")
	}
	d, err := dashboards.Correlation(alerts.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]dashboard.VariableModel{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v
	}
	for _, name := range []string{dashboards.VarServerCluster, dashboards.VarServerNamespace, dashboards.VarServerJob, dashboards.VarGPUNode} {
		v, ok := vars[name]
		if !ok || v.Query == nil || v.Query.String == nil {
			t.Errorf("no query variable %s", name)
			continue
		}
		if name != dashboards.VarServerCluster && !strings.Contains(*v.Query.String, `cluster=~"$server_cluster"`) {
			t.Errorf("variable %s (%s) is not narrowed by the server cluster", name, *v.Query.String)
		}
	}
}

// TestEnginePanelsOfEveryEngine: the correlation dashboard reads TGI's and
// llama.cpp's metrics (the names bench knows, servermetrics/servermetrics.go), not
// only vLLM's and SGLang's, and the server job variable lists their jobs.
func TestEnginePanelsOfEveryEngine(t *testing.T) {
	var all strings.Builder
	for _, q := range dashboards.Queries() {
		if q.DashboardUID == dashboards.CorrelationUID {
			all.WriteString(q.Expr + "\n")
		}
	}
	for _, metric := range []string{
		"tgi_queue_size", "tgi_batch_current_size", "tgi_request_queue_duration_bucket", "tgi_request_duration_bucket",
		"tgi_request_generated_tokens_sum", "tgi_request_input_length_sum",
		"llamacpp:requests_processing", "llamacpp:requests_deferred", "llamacpp:tokens_predicted_total", "llamacpp:prompt_tokens_total",
	} {
		if !strings.Contains(all.String(), metric) {
			t.Errorf("no correlation panel reads %s", metric)
		}
	}
	d, err := dashboards.Correlation(alerts.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range d.Templating.List {
		if v.Name == dashboards.VarServerJob {
			for _, m := range []string{"tgi_queue_size", "llamacpp:requests_processing"} {
				if !strings.Contains(*v.Query.String, m) {
					t.Errorf("server job variable %s does not list the jobs of %s", *v.Query.String, m)
				}
			}
		}
	}
}

// tracePanels returns the overview's panels reading traces (a Tempo or
// Jaeger data source) and the trace data source variable.
func tracePanels(t *testing.T, cfg alerts.Config) ([]dashboard.Panel, *dashboard.VariableModel) {
	t.Helper()
	d, err := dashboards.Overview(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var out []dashboard.Panel
	for _, p := range d.Panels {
		if p.Panel != nil && p.Panel.Datasource != nil {
			if typ := deref(p.Panel.Datasource.Type); typ == "tempo" || typ == "jaeger" {
				out = append(out, *p.Panel)
			}
		}
	}
	var dsVar *dashboard.VariableModel
	for i, v := range d.Templating.List {
		if v.Type == "datasource" && v.Name != dashboards.VarDatasource {
			if dsVar != nil {
				t.Errorf("more than one trace data source variable: %s and %s", dsVar.Name, v.Name)
			}
			dsVar = &d.Templating.List[i]
		}
	}
	return out, dsVar
}

// TestOneTracePanel: the overview has one trace panel, whose data source
// is the trace_datasource variable, of the type the mixin config names
// (Tempo by default, Jaeger for trace_datasource_type: jaeger), with the
// query that type understands; never a second panel that errors because
// its data source does not exist.
func TestOneTracePanel(t *testing.T) {
	for _, typ := range []string{alerts.TraceDatasourceTempo, alerts.TraceDatasourceJaeger} {
		t.Run(typ, func(t *testing.T) {
			cfg := alerts.DefaultConfig()
			cfg.TraceDatasourceType = typ
			panels, v := tracePanels(t, cfg)
			if len(panels) != 1 {
				t.Fatalf("%d trace panels, want 1", len(panels))
			}
			if v == nil || v.Name != dashboards.VarTraceDatasource {
				t.Fatalf("trace data source variable %+v", v)
			}
			if v.Query == nil || v.Query.String == nil || *v.Query.String != typ {
				t.Errorf("trace data source variable lists data sources of type %v, want %s", v.Query, typ)
			}
			p := panels[0]
			if deref(p.Datasource.Type) != typ || deref(p.Datasource.Uid) != "${"+dashboards.VarTraceDatasource+"}" {
				t.Errorf("trace panel data source %s %s", deref(p.Datasource.Type), deref(p.Datasource.Uid))
			}
			raw, err := json.Marshal(p.Targets)
			if err != nil {
				t.Fatal(err)
			}
			var targets []map[string]any
			if err := json.Unmarshal(raw, &targets); err != nil {
				t.Fatal(err)
			}
			if len(targets) != 1 {
				t.Fatalf("%d trace queries", len(targets))
			}
			tg := targets[0]
			ds, _ := tg["datasource"].(map[string]any)
			if ds["type"] != typ || ds["uid"] != "${"+dashboards.VarTraceDatasource+"}" {
				t.Errorf("query data source %v", ds)
			}
			switch typ {
			case alerts.TraceDatasourceTempo:
				if tg["queryType"] != "traceql" || !strings.Contains(tg["query"].(string), "span.llmprobe.target") {
					t.Errorf("Tempo query %v", tg)
				}
			case alerts.TraceDatasourceJaeger:
				if tg["queryType"] != "search" || tg["service"] != "llmprobe" {
					t.Errorf("Jaeger query %v", tg)
				}
			}
		})
	}
}

// TestClusterVariablesHiddenForOneCluster: the cluster variables are
// hidden unless show_multi_cluster is set, as kubernetes-mixin's
// showMultiCluster does, and shown when it is; the other variables are
// always shown.
func TestClusterVariablesHiddenForOneCluster(t *testing.T) {
	for _, show := range []bool{false, true} {
		cfg := alerts.DefaultConfig()
		cfg.ShowMultiCluster = show
		ds, err := dashboards.Dashboards(cfg)
		if err != nil {
			t.Fatal(err)
		}
		seen := 0
		for _, g := range ds {
			for _, v := range g.Dashboard.Templating.List {
				hidden := v.Hide != nil && *v.Hide == dashboard.VariableHideHideVariable
				cluster := v.Name == cfg.ClusterLabel || v.Name == dashboards.VarServerCluster
				if cluster {
					seen++
				}
				if want := cluster && !show; hidden != want {
					t.Errorf("show_multi_cluster %v: %s variable %s hidden = %v, want %v", show, g.Path, v.Name, hidden, want)
				}
			}
		}
		// cluster on both dashboards, server_cluster on the correlation one.
		if seen != 3 {
			t.Errorf("show_multi_cluster %v: %d cluster variables, want 3", show, seen)
		}
	}
}

// TestCostPanels: the correlation dashboard shows the recorded energy and
// GPU time per generated token (and the cost per million tokens only when
// a GPU price is configured), narrowed to the selected server namespace.
func TestCostPanels(t *testing.T) {
	for _, price := range []float64{0, 2.5} {
		cfg := alerts.DefaultConfig()
		cfg.Cost.GPUPricePerHour = price
		qs, err := dashboards.QueriesFor(cfg)
		if err != nil {
			t.Fatal(err)
		}
		found := map[string]bool{}
		for _, q := range qs {
			for _, rec := range []string{cfg.JoulesPerTokenRecord(), cfg.GPUHoursPerMillionTokensRecord(), cfg.CostPerMillionTokensRecord()} {
				if strings.Contains(q.Expr, rec) {
					found[rec] = true
					if q.DashboardUID != dashboards.CorrelationUID || !strings.Contains(q.Expr, `namespace=~"$server_namespace"`) {
						t.Errorf("%s / %s reads %s unscoped: %s", q.Dashboard, q.Panel, rec, q.Expr)
					}
				}
			}
		}
		if !found[cfg.JoulesPerTokenRecord()] || !found[cfg.GPUHoursPerMillionTokensRecord()] {
			t.Errorf("price %g: no panel query of the energy or GPU time per token: %v", price, found)
		}
		if found[cfg.CostPerMillionTokensRecord()] != (price > 0) {
			t.Errorf("price %g: cost query present = %v", price, found[cfg.CostPerMillionTokensRecord()])
		}
	}
	if !slices.Contains(alerts.DefaultConfig().CostLabels(), "namespace") {
		t.Fatal("the default cost labels lack namespace")
	}
}
