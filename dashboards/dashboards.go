// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

// Package dashboards generates llmprobe's Grafana dashboards with the
// Grafana Foundation SDK, from the same mixin configuration (alerts.Config)
// as the Prometheus rules.
//
// The JSON is committed under dashboards/ (`make dashboards` regenerates it
// together with the rule files) and loads in Grafana 10 and 11 through the UI
// import or file provisioning. Queries lists every panel query so tests can
// parse them with Prometheus' parser and run them against a real Prometheus.
//
// dashboards imports alerts only (the selectors and thresholds they share);
// never the probe or the exporter.
package dashboards

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"

	"github.com/llmprobe/llmprobe/alerts"
)

// Generated is one dashboard with the file it is committed as.
type Generated struct {
	// Path is relative to the module root, e.g. dashboards/llmprobe-overview.json.
	Path      string
	Dashboard dashboard.Dashboard
}

// Dashboards builds every dashboard from cfg.
func Dashboards(cfg alerts.Config) ([]Generated, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("invalid mixin config: %w", err)
	}
	builders := []struct {
		path  string
		build func(alerts.Config) (dashboard.Dashboard, error)
	}{
		{"dashboards/llmprobe-overview.json", Overview},
		{"dashboards/llmprobe-correlation.json", Correlation},
	}
	out := make([]Generated, 0, len(builders))
	for _, b := range builders {
		d, err := b.build(cfg)
		if err != nil {
			return nil, fmt.Errorf("building %s: %w", b.path, err)
		}
		out = append(out, Generated{Path: b.path, Dashboard: d})
	}
	return out, nil
}

// MarshalDashboard renders a dashboard as the committed JSON: indented,
// newline-terminated, HTML characters (<, >, &) left unescaped so PromQL
// reads naturally in diffs.
func MarshalDashboard(d dashboard.Dashboard) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(d); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Files returns every generated file of the mixin, keyed by path relative
// to the module root: the dashboards, the rule file and the
// PrometheusRule wrapper. `make dashboards` writes them; tests compare
// them with the committed copies.
func Files(cfg alerts.Config) (map[string][]byte, error) {
	ds, err := Dashboards(cfg)
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{}
	for _, g := range ds {
		b, err := MarshalDashboard(g.Dashboard)
		if err != nil {
			return nil, fmt.Errorf("rendering %s: %w", g.Path, err)
		}
		files[g.Path] = b
	}
	if files[alerts.RulesPath], err = cfg.RulesYAML(); err != nil {
		return nil, err
	}
	files[alerts.HelmRulesPath] = files[alerts.RulesPath]
	if files[alerts.PrometheusRulePath], err = cfg.PrometheusRuleYAML(); err != nil {
		return nil, err
	}
	return files, nil
}

// Query is one Prometheus query of a dashboard panel.
type Query struct {
	// DashboardUID and Dashboard identify the dashboard (uid and title).
	DashboardUID string
	Dashboard    string
	// Panel is the panel title; RefID the query's letter within it.
	Panel string
	RefID string
	// Expr is the PromQL as committed, with Grafana variables ($target,
	// $__rate_interval, ...). Expand substitutes them.
	Expr   string
	Legend string
	// Exemplar is true when the panel asks for exemplars of this query.
	Exemplar bool
	// Instant is true for instant queries (stat panels).
	Instant bool
	// Annotation is true for a dashboard annotation query (Panel is then
	// "annotation: <name>"): it returns data only while what it marks
	// happens (a reload, warm-up, saturation).
	Annotation bool
}

// Needs says what must be scraped or loaded for q to return data.
type Needs struct {
	// Server: a model server (vllm:*, sglang:*, tgi_*, llamacpp:* series).
	Server bool
	// GPU: dcgm-exporter (DCGM_* series).
	GPU bool
	// Rules: alerts/llmprobe.rules.yml loaded (reads recorded series).
	Rules bool
	// History: compares with a week ago (offset 1w); empty until a week of data exists.
	History bool
}

// The mixin's recorded series: level:llmprobe_metric:operations, and the
// per-replica llmprobe:replica_...:... ones (alerts/replica.go).
var recordedName = regexp.MustCompile(`\b([a-z_]+:llmprobe_[a-z_]+|llmprobe:[a-z_]+):[a-z0-9_]+`)

// costRecord matches the recorded energy and cost series (alerts/cost.go),
// which need both a model server and dcgm-exporter.
var costRecord = regexp.MustCompile(`\b[a-z_]+:llmprobe_(gpu|gpus|engine)_[a-z_]*:[a-z0-9_]+`)

// Needs reports what q needs to return data, read from its expression.
func (q Query) Needs() Needs {
	cost := costRecord.MatchString(q.Expr)
	return Needs{
		Server: strings.Contains(q.Expr, "vllm:") || strings.Contains(q.Expr, "sglang:") ||
			strings.Contains(q.Expr, "tgi_") || strings.Contains(q.Expr, "llamacpp:") || cost,
		GPU:     strings.Contains(q.Expr, "DCGM_") || cost,
		Rules:   recordedName.MatchString(q.Expr),
		History: strings.Contains(q.Expr, "offset 1w"),
	}
}

// Queries lists every Prometheus panel query of the dashboards generated
// from alerts.DefaultConfig, in dashboard and panel order. Trace (Tempo)
// queries are not included.
func Queries() []Query {
	qs, err := QueriesFor(alerts.DefaultConfig())
	if err != nil {
		// DefaultConfig is valid and the builders are deterministic; the
		// generator test proves both.
		panic(fmt.Sprintf("dashboards: building the default dashboards: %v", err))
	}
	return qs
}

// QueriesFor lists every Prometheus panel query of the dashboards generated
// from cfg.
func QueriesFor(cfg alerts.Config) ([]Query, error) {
	ds, err := Dashboards(cfg)
	if err != nil {
		return nil, err
	}
	var out []Query
	for _, g := range ds {
		d := g.Dashboard
		title, uid := deref(d.Title), deref(d.Uid)
		for _, a := range d.Annotations.List {
			if a.Expr == nil || a.Datasource == nil || deref(a.Datasource.Type) != "prometheus" {
				continue
			}
			out = append(out, Query{
				DashboardUID: uid,
				Dashboard:    title,
				Panel:        "annotation: " + a.Name,
				RefID:        "A",
				Expr:         *a.Expr,
				Legend:       deref(a.TitleFormat),
				Annotation:   true,
			})
		}
		for _, p := range d.Panels {
			var panels []dashboard.Panel
			switch {
			case p.Panel != nil:
				panels = append(panels, *p.Panel)
			case p.RowPanel != nil:
				panels = append(panels, p.RowPanel.Panels...)
			}
			for _, panel := range panels {
				for _, t := range panel.Targets {
					var pq *prometheus.Dataquery
					switch v := t.(type) {
					case prometheus.Dataquery:
						pq = &v
					case *prometheus.Dataquery:
						pq = v
					default:
						continue
					}
					out = append(out, Query{
						DashboardUID: uid,
						Dashboard:    title,
						Panel:        deref(panel.Title),
						RefID:        deref(pq.RefId),
						Expr:         pq.Expr,
						Legend:       deref(pq.LegendFormat),
						Exemplar:     pq.Exemplar != nil && *pq.Exemplar,
						Instant:      pq.Instant != nil && *pq.Instant,
					})
				}
			}
		}
	}
	return out, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// Vars are values for Grafana variables, keyed by name without the $.
type Vars map[string]string

// DefaultVars are representative values for every variable the dashboards
// use: all targets/models/classes/servers/nodes, a 1m rate interval and a
// 1h range. Tests start from them and override what they need.
func DefaultVars() Vars { return DefaultVarsFor(alerts.DefaultConfig()) }

// DefaultVarsFor is DefaultVars for the dashboards generated from cfg:
// every scope variable of cfg.DashboardVariables selects All as well.
func DefaultVarsFor(cfg alerts.Config) Vars {
	v := Vars{
		VarDatasource:      "prometheus",
		VarTraceDatasource: "tempo",
		VarTarget:          ".*",
		VarModel:           ".*",
		VarClass:           ".*",
		VarServerJob:       ".*",
		VarServerCluster:   ".*",
		VarServerNamespace: ".*",
		VarGPUNode:         ".*",
		"__rate_interval":  "1m",
		"__interval":       "15s",
		"__range":          "1h",
	}
	for _, name := range cfg.DashboardVariables {
		v[name] = ".*"
	}
	return v
}

// variableRef matches Grafana variable references: ${name}, ${name:format}
// and $name. References starting with a digit ($1 in label_replace) are
// regex back-references, not variables.
var variableRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(?::[A-Za-z]+)?\}|\$([A-Za-z_][A-Za-z0-9_]*)`)

// Expand substitutes Grafana variables in expr with vars, the way Grafana
// does for single values (formats are ignored: a single regex value is
// used as is). A reference to a variable vars does not define is an error.
func Expand(expr string, vars Vars) (string, error) {
	var missing []string
	out := variableRef.ReplaceAllStringFunc(expr, func(ref string) string {
		m := variableRef.FindStringSubmatch(ref)
		name := m[1]
		if name == "" {
			name = m[2]
		}
		v, ok := vars[name]
		if !ok {
			missing = append(missing, name)
			return ref
		}
		return v
	})
	if len(missing) > 0 {
		sort.Strings(missing)
		return "", fmt.Errorf("expression uses undefined variables %s", strings.Join(missing, ", "))
	}
	return out, nil
}

// Expand substitutes q's Grafana variables (see the Expand function).
func (q Query) Expand(vars Vars) (string, error) { return Expand(q.Expr, vars) }
