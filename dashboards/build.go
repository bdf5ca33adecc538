// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package dashboards

import (
	"fmt"
	"slices"
	"strings"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/variants"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/stat"
	"github.com/grafana/grafana-foundation-sdk/go/table"
	"github.com/grafana/grafana-foundation-sdk/go/tempo"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"

	"github.com/llmprobe/llmprobe/alerts"
)

// schemaVersion pins the dashboard schema to one Grafana 10.4 and 11 both
// read without migration surprises; Grafana migrates it forward on load.
const schemaVersion = 39

func ptr[T any](v T) *T { return &v }

// Datasource references resolved through the dashboard variables.
var (
	promDS = common.DataSourceRef{Type: ptr("prometheus"), Uid: ptr("${" + VarDatasource + "}")}
)

// traceDS is the trace data source of cfg's type (Tempo or Jaeger),
// picked by the trace_datasource variable.
func traceDS(cfg alerts.Config) common.DataSourceRef {
	return common.DataSourceRef{Type: ptr(cfg.TraceDatasourceType), Uid: ptr("${" + VarTraceDatasource + "}")}
}

// Dashboard variable names. Panel queries reference them as $name.
const (
	VarDatasource = "datasource"
	// VarTraceDatasource picks the data source of the one trace panel,
	// among those of the mixin's trace_datasource_type (Tempo or Jaeger).
	VarTraceDatasource = "trace_datasource"
	VarTarget          = "target"
	VarModel           = "model"
	VarClass           = "class"
	VarServerJob       = "server_job"
	// VarServerCluster and VarServerNamespace narrow the model servers'
	// and GPUs' series of the correlation dashboard (the cluster label is
	// alerts.Config.ClusterLabel).
	VarServerCluster   = "server_cluster"
	VarServerNamespace = "server_namespace"
	VarGPUNode         = "gpu_node"
)

// board accumulates one dashboard: it numbers panels and lays them out
// left to right, wrapping at 24 columns.
type board struct {
	cfg    alerts.Config
	b      *dashboard.DashboardBuilder
	nextID uint32
}

func newBoard(cfg alerts.Config, uid, title, description string) *board {
	b := dashboard.NewDashboardBuilder(title).
		Uid(uid).
		Description(description).
		Tags([]string{"llmprobe"}).
		Editable().
		Refresh("30s").
		Time("now-3h", "now").
		Timezone(common.TimeZoneBrowser).
		Tooltip(dashboard.DashboardCursorSyncCrosshair).
		Link(dashboard.NewDashboardLinkBuilder("llmprobe").
			Type(dashboard.DashboardLinkTypeDashboards).
			Tags([]string{"llmprobe"}).
			AsDropdown(false).
			IncludeVars(true).
			KeepTime(true))
	return &board{cfg: cfg, b: b}
}

func (d *board) id() uint32 {
	d.nextID++
	return d.nextID
}

func (d *board) row(title string) {
	d.b.WithRow(dashboard.NewRowBuilder(title).Id(d.id()))
}

func (d *board) add(p cog.Builder[dashboard.Panel]) { d.b.WithPanel(p) }

func (d *board) build() (dashboard.Dashboard, error) {
	out, err := d.b.Build()
	if err != nil {
		return dashboard.Dashboard{}, err
	}
	out.SchemaVersion = schemaVersion
	// The SDK places links in the controls menu, a Grafana 12 placement;
	// Grafana 10 and 11 show links only in their default place.
	for i := range out.Links {
		out.Links[i].Placement = nil
	}
	return out, nil
}

// q is one panel query before it is turned into a Grafana target.
type q struct {
	expr     string
	legend   string
	exemplar bool
	instant  bool
	// heatmap asks Grafana for buckets (format heatmap) rather than series.
	heatmap bool
}

func promTarget(refID string, x q) cog.Builder[variants.Dataquery] {
	t := prometheus.NewDataqueryBuilder().
		RefId(refID).
		Datasource(promDS).
		EditorMode(prometheus.QueryEditorModeCode).
		Expr(x.expr).
		LegendFormat(x.legend)
	switch {
	case x.heatmap:
		t = t.Range().Format(prometheus.PromQueryFormatHeatmap)
	case x.instant:
		t = t.Instant().Format(prometheus.PromQueryFormatTimeSeries)
	default:
		t = t.Range()
	}
	if x.exemplar {
		t = t.Exemplar(true)
	} else {
		t = t.Exemplar(false)
	}
	return t
}

func refID(i int) string { return string(rune('A' + i)) }

func thresholds(steps ...dashboard.Threshold) *dashboard.ThresholdsConfigBuilder {
	return dashboard.NewThresholdsConfigBuilder().Mode(dashboard.ThresholdsModeAbsolute).Steps(steps)
}

func step(value *float64, color string) dashboard.Threshold {
	return dashboard.Threshold{Value: value, Color: color}
}

// panelBuilder is what the SDK's panel builders (time series, stat,
// table) have in common of what every panel of a board sets.
type panelBuilder[B any] interface {
	Id(uint32) B
	Title(string) B
	Description(string) B
	Datasource(common.DataSourceRef) B
	Span(uint32) B
	Height(uint32) B
}

// panel sets what every panel sets: the board's next id, the title and
// description, the data source and the size.
func panel[B panelBuilder[B]](d *board, p B, ds common.DataSourceRef, title, description string, w, h uint32) B {
	return p.Id(d.id()).Title(title).Description(description).Datasource(ds).Span(w).Height(h)
}

// ts builds a time-series panel.
func (d *board) ts(title, description, unit string, w, h uint32, queries ...q) *timeseries.PanelBuilder {
	p := panel(d, timeseries.NewPanelBuilder(), promDS, title, description, w, h).
		Unit(unit).
		LineWidth(1).
		FillOpacity(10).
		ShowPoints(common.VisibilityModeNever).
		SpanNulls(common.BoolOrFloat64{Bool: ptr(false)}).
		Legend(common.NewVizLegendOptionsBuilder().
			DisplayMode(common.LegendDisplayModeTable).
			Placement(common.LegendPlacementBottom).
			ShowLegend(true).
			Calcs([]string{"mean", "max", "lastNotNull"})).
		Tooltip(common.NewVizTooltipOptionsBuilder().Mode(common.TooltipDisplayModeMulti).Sort(common.SortOrderDescending))
	for i, x := range queries {
		p = p.WithTarget(promTarget(refID(i), x))
	}
	return p
}

// stat builds a stat panel whose queries are instant.
func (d *board) stat(title, description, unit string, w, h uint32, queries ...q) *stat.PanelBuilder {
	p := panel(d, stat.NewPanelBuilder(), promDS, title, description, w, h).
		Unit(unit).
		ColorMode(common.BigValueColorModeBackground).
		GraphMode(common.BigValueGraphModeNone).
		TextMode(common.BigValueTextModeValueAndName).
		Orientation(common.VizOrientationAuto).
		ReduceOptions(common.NewReduceDataOptionsBuilder().Calcs([]string{"lastNotNull"}).Values(false))
	for i, x := range queries {
		x.instant = true
		p = p.WithTarget(promTarget(refID(i), x))
	}
	return p
}

// valueMap maps exact values to text and color.
func valueMap(pairs ...[3]string) []dashboard.ValueMapping {
	opts := map[string]dashboard.ValueMappingResult{}
	for i, p := range pairs {
		opts[p[0]] = dashboard.ValueMappingResult{Text: ptr(p[1]), Color: ptr(p[2]), Index: ptr(int32(i))}
	}
	return []dashboard.ValueMapping{{ValueMap: &dashboard.ValueMap{Type: dashboard.MappingTypeValueToText, Options: opts}}}
}

// dashedOverride draws the series of one query as a dashed line: used for
// configured intents and last week's values next to the measured ones.
func dashed() []dashboard.DynamicConfigValue {
	return []dashboard.DynamicConfigValue{
		{Id: "custom.lineStyle", Value: map[string]any{"fill": "dash", "dash": []int{10, 10}}},
		{Id: "custom.fillOpacity", Value: 0},
	}
}

// rightAxis draws the series of one query against a right-hand axis in
// unit, beside the panel's own.
func rightAxis(unit string) []dashboard.DynamicConfigValue {
	return []dashboard.DynamicConfigValue{
		{Id: "unit", Value: unit},
		{Id: "custom.axisPlacement", Value: "right"},
	}
}

// thresholdLine draws the panel's thresholds as a dashed line: the SLO or
// alert threshold next to the measured series.
func thresholdLine(p *timeseries.PanelBuilder, value float64) *timeseries.PanelBuilder {
	return p.Thresholds(thresholds(step(nil, "green"), step(ptr(value), "red"))).
		ThresholdsStyle(common.NewGraphThresholdsStyleConfigBuilder().Mode(common.GraphThresholdsStyleModeDashed))
}

// tracesPanel lists the latest request traces of the selected targets
// from the trace data source: a TraceQL search on Tempo, a search of
// service llmprobe on Jaeger (whose search cannot match a regex of
// targets), as the mixin's trace_datasource_type says. One panel, so that
// no panel errors for want of a data source of the other type.
func tracesPanel(d *board, description, traceQL string, w, h uint32) *table.PanelBuilder {
	ds := traceDS(d.cfg)
	title := "Recent probe requests (traces)"
	var query cog.Builder[variants.Dataquery]
	switch d.cfg.TraceDatasourceType {
	case alerts.TraceDatasourceJaeger:
		description += " Jaeger's search lists the latest traces of service llmprobe (OTEL_SERVICE_NAME), of every target."
		query = jaegerQuery{service: "llmprobe"}
	default:
		query = tempo.NewDataqueryBuilder().
			RefId("A").
			Datasource(ds).
			QueryType("traceql").
			Query(traceQL).
			Limit(20).
			TableType(tempo.SearchTableTypeTraces)
	}
	return panel(d, table.NewPanelBuilder(), ds, title, description, w, h).
		WithTarget(query).
		Footer(common.NewTableFooterOptionsBuilder().Show(false).Reducer([]string{}))
}

// variables

func datasourceVar() *dashboard.DatasourceVariableBuilder {
	return dashboard.NewDatasourceVariableBuilder(VarDatasource).
		Label("Data source").
		Type("prometheus")
}

func traceDatasourceVar(cfg alerts.Config) *dashboard.DatasourceVariableBuilder {
	name := map[string]string{alerts.TraceDatasourceTempo: "Tempo", alerts.TraceDatasourceJaeger: "Jaeger"}[cfg.TraceDatasourceType]
	return dashboard.NewDatasourceVariableBuilder(VarTraceDatasource).
		Label("Trace data source").
		Description(name + " data source holding llmprobe's request spans (the mixin's trace_datasource_type picks Tempo or Jaeger). " +
			"Exemplar links come from the Prometheus data source's exemplar settings (see docs/dashboards.md).").
		Type(cfg.TraceDatasourceType)
}

// hideUnlessMultiCluster hides a cluster variable unless the mixin's
// show_multi_cluster is set (kubernetes-mixin's showMultiCluster): with
// one cluster it has one value or none, and its All selects everything.
func (d *board) hideUnlessMultiCluster(v *dashboard.QueryVariableBuilder) *dashboard.QueryVariableBuilder {
	if !d.cfg.ShowMultiCluster {
		v = v.Hide(dashboard.VariableHideHideVariable)
	}
	return v
}

func queryVar(name, label, query string, multi bool) *dashboard.QueryVariableBuilder {
	v := dashboard.NewQueryVariableBuilder(name).
		Label(label).
		Datasource(promDS).
		Query(dashboard.StringOrMap{String: ptr(query)}).
		Definition(query).
		Refresh(dashboard.VariableRefreshOnTimeRangeChanged).
		Sort(dashboard.VariableSortAlphabeticalAsc)
	if multi {
		v = v.Multi(true).IncludeAll(true).AllValue(".*").
			Current(dashboard.VariableOption{
				Selected: ptr(true),
				Text:     dashboard.StringOrArrayOfString{ArrayOfString: []string{"All"}},
				Value:    dashboard.StringOrArrayOfString{ArrayOfString: []string{"$__all"}},
			})
	}
	return v
}

func (d *board) probeVars() {
	d.b.WithVariable(datasourceVar())
	// The scope variables (job, cluster, namespace, instance by default)
	// list the values llmprobe_build_info has, each narrowed by the ones
	// before it; target, model and class are narrowed by all of them.
	var chain []string
	if s := strings.TrimSpace(d.cfg.DashboardSelector); s != "" {
		chain = append(chain, s)
	}
	for _, v := range d.cfg.DashboardVariables {
		qv := queryVar(v, variableLabel(v), fmt.Sprintf("label_values(llmprobe_build_info%s, %s)", braces(chain), v), true)
		if v == d.cfg.ClusterLabel {
			qv = d.hideUnlessMultiCluster(qv)
		}
		d.b.WithVariable(qv)
		chain = append(chain, fmt.Sprintf(`%s=~"$%s"`, v, v))
	}
	d.b.WithVariable(queryVar(VarTarget, "Target",
		fmt.Sprintf("label_values(llmprobe_target_request_rate%s, target)", braces(chain)), true))
	d.b.WithVariable(queryVar(VarModel, "Model",
		fmt.Sprintf(`label_values(llmprobe_requests_total%s, model)`, braces(append(slices.Clone(chain), `target=~"$target"`))), true))
	d.b.WithVariable(queryVar(VarClass, "Class",
		fmt.Sprintf(`label_values(llmprobe_requests_scheduled_total%s, class)`, braces(append(slices.Clone(chain), `target=~"$target"`))), true))
}

// braces renders matchers in braces, or nothing when there are none.
func braces(matchers []string) string {
	if len(matchers) == 0 {
		return ""
	}
	return "{" + strings.Join(matchers, ", ") + "}"
}

// variableLabel is the label a scope variable shows: "Job" for job.
func variableLabel(name string) string {
	words := strings.Split(name, "_")
	for i, w := range words {
		if w != "" {
			words[i] = strings.ToUpper(w[:1]) + w[1:]
		}
	}
	return strings.Join(words, " ")
}
