// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package dashboards_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/plugins"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/llmprobe/llmprobe/alerts"
	"github.com/llmprobe/llmprobe/dashboards"
	"github.com/llmprobe/llmprobe/internal/promtest"
)

// TestGeneratedFilesUpToDate fails when any committed file of the mixin
// differs from what the generator produces.
func TestGeneratedFilesUpToDate(t *testing.T) {
	files, err := dashboards.Files(alerts.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	root := promtest.Root(t)
	var paths []string
	for p := range files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		got, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			t.Errorf("%v: run `make dashboards`", err)
			continue
		}
		if !bytes.Equal(got, files[p]) {
			t.Errorf("%s differs from the generator: run `make dashboards` and commit the result", p)
		}
	}
	// No stale dashboard JSON left behind by a renamed dashboard.
	committed, err := filepath.Glob(filepath.Join(root, "dashboards", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range committed {
		rel := filepath.ToSlash(strings.TrimPrefix(c, root+string(filepath.Separator)))
		if _, ok := files[rel]; !ok {
			t.Errorf("%s is not generated any more: delete it", rel)
		}
	}
}

// committedDashboards returns each generated dashboard with its committed
// JSON (TestGeneratedFilesUpToDate proves the two are the same dashboard).
func committedDashboards(t *testing.T) map[string]generated {
	t.Helper()
	root := promtest.Root(t)
	gen, err := dashboards.Dashboards(alerts.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]generated{}
	for _, g := range gen {
		b, err := os.ReadFile(filepath.Join(root, g.Path))
		if err != nil {
			t.Fatal(err)
		}
		out[g.Path] = generated{d: g.Dashboard, raw: b}
	}
	return out
}

type generated struct {
	d   dashboard.Dashboard
	raw []byte
}

// grafanaBuiltins are variables Grafana defines itself.
var grafanaBuiltins = map[string]bool{
	"__rate_interval": true, "__interval": true, "__range": true, "__interval_ms": true,
	"__range_s": true, "__range_ms": true, "__dashboard": true, "__from": true, "__to": true,
	"__all": true, // the "All" option's value in a variable's current selection
}

var varRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(?::[A-Za-z]+)?\}|\$([A-Za-z_][A-Za-z0-9_]*)`)

// TestDashboardJSON checks the committed JSON is a dashboard Grafana 10/11
// loads through import or file provisioning: the SDK's strict schema
// decoder accepts it; no instance-specific id; a stable uid; every panel has
// a unique id, a data source through a variable, and a place on the 24-column
// grid that overlaps no other; every variable a query uses is defined.
func TestDashboardJSON(t *testing.T) {
	plugins.RegisterDefaultPlugins()
	for path, g := range committedDashboards(t) {
		t.Run(filepath.Base(path), func(t *testing.T) {
			raw, d := g.raw, g.d
			var strict dashboard.Dashboard
			// The SDK returns a typed nil BuildErrors on success.
			if err := strict.UnmarshalJSONStrict(raw); err != nil {
				if be, ok := err.(cog.BuildErrors); !ok || len(be) > 0 {
					t.Fatalf("strict schema decoding: %v", err)
				}
			}
			var generic map[string]any
			if err := json.Unmarshal(raw, &generic); err != nil {
				t.Fatal(err)
			}
			if _, ok := generic["id"]; ok {
				t.Error("dashboard has an id: provisioning and import must assign it")
			}
			if d.Uid == nil || !strings.HasPrefix(*d.Uid, "llmprobe-") || len(*d.Uid) > 40 {
				t.Errorf("uid = %v, want a stable llmprobe-* uid of at most 40 characters", d.Uid)
			}
			if d.SchemaVersion != 39 {
				t.Errorf("schemaVersion = %d, want 39", d.SchemaVersion)
			}
			defined := map[string]bool{}
			for _, v := range d.Templating.List {
				defined[v.Name] = true
			}
			for _, want := range []string{"datasource", "target", "model", "class"} {
				if !defined[want] {
					t.Errorf("variable $%s missing", want)
				}
			}

			ids := map[uint32]bool{}
			type cell struct{ x, y uint32 }
			occupied := map[cell]string{}
			for _, p := range d.Panels {
				var id *uint32
				var title string
				var grid *dashboard.GridPos
				var panel *dashboard.Panel
				switch {
				case p.Panel != nil:
					panel = p.Panel
					id, grid, title = p.Panel.Id, p.Panel.GridPos, deref(p.Panel.Title)
				case p.RowPanel != nil:
					id, grid, title = &p.RowPanel.Id, p.RowPanel.GridPos, deref(p.RowPanel.Title)
					if p.RowPanel.Collapsed {
						t.Errorf("row %q is collapsed: its panels would hide", title)
					}
				}
				if id == nil || *id == 0 || ids[*id] {
					t.Errorf("panel %q: missing or duplicate id", title)
				} else {
					ids[*id] = true
				}
				if grid == nil || grid.W == 0 || grid.H == 0 || grid.X+grid.W > 24 {
					t.Errorf("panel %q: bad gridPos %+v", title, grid)
					continue
				}
				for x := grid.X; x < grid.X+grid.W; x++ {
					for y := grid.Y; y < grid.Y+grid.H; y++ {
						if other, ok := occupied[cell{x, y}]; ok {
							t.Errorf("panel %q overlaps %q at (%d,%d)", title, other, x, y)
						}
						occupied[cell{x, y}] = title
					}
				}
				if panel == nil {
					continue
				}
				if title == "" || deref(panel.Description) == "" {
					t.Errorf("panel %q: every panel needs a title and a description", title)
				}
				if panel.Datasource == nil || panel.Datasource.Uid == nil || !strings.HasPrefix(*panel.Datasource.Uid, "${") {
					t.Errorf("panel %q: data source must come from a variable, got %+v", title, panel.Datasource)
				}
				if len(panel.Targets) == 0 {
					t.Errorf("panel %q has no query", title)
				}
			}
			for _, m := range varRef.FindAllStringSubmatch(string(raw), -1) {
				name := m[1] + m[2]
				if !defined[name] && !grafanaBuiltins[name] {
					t.Errorf("reference to undefined variable $%s", name)
				}
			}
		})
	}
}

// TestQueries checks the Queries API the end-to-end tests iterate.
func TestQueries(t *testing.T) {
	qs := dashboards.Queries()
	if len(qs) < 40 {
		t.Fatalf("Queries() returned %d queries, expected every panel query (40+)", len(qs))
	}
	seen := map[string]bool{}
	var exemplarPanels []string
	dashboardsSeen := map[string]bool{}
	for _, q := range qs {
		key := q.DashboardUID + "/" + q.Panel + "/" + q.RefID
		if seen[key] {
			t.Errorf("duplicate query %s", key)
		}
		seen[key] = true
		dashboardsSeen[q.DashboardUID] = true
		if q.Dashboard == "" || q.Panel == "" || q.RefID == "" || q.Expr == "" {
			t.Errorf("incomplete query %+v", q)
		}
		if q.Exemplar {
			exemplarPanels = append(exemplarPanels, q.Panel)
		}
	}
	if !dashboardsSeen[dashboards.OverviewUID] || !dashboardsSeen[dashboards.CorrelationUID] {
		t.Errorf("queries cover dashboards %v, want both", dashboardsSeen)
	}
	for _, p := range []string{"Time to first token (TTFT)", "Time per output token (TPOT)", "Inter-token latency (ITL)", "End-to-end latency (E2E)",
		"TTFT: probe vs engine", "ITL: probe vs engine", "E2E: probe vs engine"} {
		if !slices.Contains(exemplarPanels, p) {
			t.Errorf("latency panel %q has no exemplar query", p)
		}
	}
	var server, gpu, rules, history int
	for _, q := range qs {
		n := q.Needs()
		if n.Server {
			server++
		}
		if n.GPU {
			gpu++
		}
		if n.Rules {
			rules++
		}
		if n.History {
			history++
			if !n.Rules {
				t.Errorf("%s/%s: week-ago query is expected to read a recorded series", q.Panel, q.RefID)
			}
		}
	}
	// rules: the two alerting-view panels (this week and a week ago), the
	// error budget and the four burn rates of the SLO row, and the three
	// energy and GPU time queries (which need a GPU too: gpu is the four
	// GPU panels and those three), and the replica outlier ratio (a time
	// series and a stat); gpu also counts the replicas row's utilisation
	// and power per replica.
	if server == 0 || gpu != 9 || rules != 14 || history != 2 {
		t.Errorf("Needs: server=%d gpu=%d rules=%d history=%d; want server>0, gpu=9, rules=14, history=2", server, gpu, rules, history)
	}
}

func TestExpand(t *testing.T) {
	got, err := dashboards.Expand(`rate(x{target=~"$target", a="${model}", b=~"${class:regex}"}[$__rate_interval]) and label_replace(y, "m", "$1", "n", "(.*)")`,
		dashboards.Vars{"target": "sim", "model": "m", "class": ".*", "__rate_interval": "10s"})
	if err != nil {
		t.Fatal(err)
	}
	want := `rate(x{target=~"sim", a="m", b=~".*"}[10s]) and label_replace(y, "m", "$1", "n", "(.*)")`
	if got != want {
		t.Errorf("Expand =\n%s\nwant\n%s", got, want)
	}
	if _, err := dashboards.Expand(`x{a="$nope", b="$other"}`, dashboards.Vars{}); err == nil || err.Error() != "expression uses undefined variables nope, other" {
		t.Errorf("Expand with undefined variables: err = %v", err)
	}
	for _, q := range dashboards.Queries() {
		if _, err := q.Expand(dashboards.DefaultVars()); err != nil {
			t.Errorf("%s/%s: %v", q.Panel, q.RefID, err)
		}
	}
}

var labelValues = regexp.MustCompile(`^label_values\((.*), *([A-Za-z_][A-Za-z0-9_]*)\)$`)

// TestQueriesParse runs every panel query and every variable query's
// selector, with variables substituted by representative values, through
// Prometheus' own parser: each becomes a recording rule of a temporary file
// checked by `promtool check rules`.
func TestQueriesParse(t *testing.T) {
	var rules alerts.RuleGroup
	rules.Name = "dashboard-queries"
	vars := dashboards.DefaultVars()
	// A multi-value selection renders as an alternation with regex
	// metacharacters escaped the way Grafana's Prometheus data source does
	// (a doubled backslash, valid inside a PromQL string); check that too.
	multi := dashboards.DefaultVars()
	multi["target"], multi["model"], multi["class"] = "(a|b)", `(meta-llama/Llama-3\\.1-8B-Instruct|m2)`, "(chat|agent)"
	for i, q := range dashboards.Queries() {
		for j, v := range []dashboards.Vars{vars, multi} {
			expr, err := q.Expand(v)
			if err != nil {
				t.Fatal(err)
			}
			rules.Rules = append(rules.Rules, alerts.Rule{Record: fmt.Sprintf("dashboard:query_%d_%d:expr", i, j), Expr: expr})
		}
	}
	gen, err := dashboards.Dashboards(alerts.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	nvar := 0
	for _, g := range gen {
		for _, v := range g.Dashboard.Templating.List {
			if v.Type != "query" || v.Query == nil || v.Query.String == nil {
				continue
			}
			m := labelValues.FindStringSubmatch(*v.Query.String)
			if m == nil {
				t.Errorf("variable %s: query %q is not label_values(selector, label)", v.Name, *v.Query.String)
				continue
			}
			expr, err := dashboards.Expand(m[1], vars)
			if err != nil {
				t.Fatal(err)
			}
			rules.Rules = append(rules.Rules, alerts.Rule{Record: fmt.Sprintf("dashboard:variable_%d:expr", nvar), Expr: expr})
			nvar++
		}
	}
	if nvar < 5 {
		t.Errorf("checked %d variable queries, want at least 5", nvar)
	}
	b, err := yamlRuleFile(rules)
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "queries.yml")
	if err := os.WriteFile(f, b, 0o644); err != nil {
		t.Fatal(err)
	}
	out := promtest.CheckRules(t, f)
	if want := fmt.Sprintf("SUCCESS: %d rules found", len(rules.Rules)); !strings.Contains(out, want) {
		t.Errorf("promtool output lacks %q:\n%s", want, out)
	}
}

// TestQueriesParseRejectsBroken makes sure the parse check above can fail:
// a dashboard expression with a syntax error is reported.
func TestQueriesParseRejectsBroken(t *testing.T) {
	b, err := yamlRuleFile(alerts.RuleGroup{Name: "broken", Rules: []alerts.Rule{
		{Record: "dashboard:query_0:expr", Expr: `histogram_quantile(0.99, sum by (le) (rate(x_bucket[1m]))`},
	}})
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "broken.yml")
	if err := os.WriteFile(f, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := promtest.RunPromtool(t, "", "check", "rules", f); err == nil {
		t.Fatalf("promtool accepted an unbalanced expression:\n%s", out)
	}
}

func yamlRuleFile(g alerts.RuleGroup) ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteString("groups:\n  - name: " + g.Name + "\n    rules:\n")
	for _, r := range g.Rules {
		e, err := json.Marshal(r.Expr) // a JSON string is a valid YAML scalar
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(&buf, "      - record: %s\n        expr: %s\n", r.Record, e)
	}
	return buf.Bytes(), nil
}

// TestDCGMFixture checks the recorded dcgm-exporter exposition parses and
// carries what the GPU panels select on.
func TestDCGMFixture(t *testing.T) {
	f, err := os.Open(filepath.Join("testdata", "dcgm-exporter.prom"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(f)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_POWER_USAGE"} {
		mf, ok := mfs[name]
		if !ok {
			t.Errorf("%s missing", name)
			continue
		}
		if len(mf.GetMetric()) < 2 {
			t.Errorf("%s: want a series per GPU (2), got %d", name, len(mf.GetMetric()))
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			for _, l := range []string{"gpu", "UUID", "device", "modelName", "Hostname"} {
				if labels[l] == "" {
					t.Errorf("%s: series without %s label: %v", name, l, labels)
				}
			}
		}
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
