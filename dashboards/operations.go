// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package dashboards

import (
	"fmt"

	"github.com/grafana/grafana-foundation-sdk/go/cog/variants"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/heatmap"

	"github.com/llmprobe/llmprobe/alerts"
)

// Panels an on-call engineer reaches for first (current quantiles with
// their sample count, distributions, one replica against another) and
// those about llmprobe itself (its process, tracing and workload refits),
// with the dashboard annotations and links.

// nowRow adds stat tiles of the current quantiles per target over the
// alerts' long window, with the number of requests they rest on.
func nowRow(d *board, cfg alerts.Config, s sels) {
	w := cfg.LongWindow.String()
	d.row(fmt.Sprintf("Now: the last %s per target", w))
	tile := func(title, short string, quant float64, width uint32, slo float64) {
		p := d.stat(title,
			fmt.Sprintf("%s over the last %s (the window the alerts evaluate), per target, from summed native histograms. "+
				"Read it with n (right): a p99 of fewer than ~100 requests is close to their maximum.", title, w),
			"s", width, 4,
			q{expr: alerts.HistogramQuantile(quant, alerts.LatencyMetric(short), []string{"target"}, s.full, w), legend: "{{target}}"},
		).Decimals(3)
		if slo > 0 {
			p = p.Thresholds(thresholds(step(nil, "green"), step(ptr(slo), "red")))
		} else {
			p = p.Thresholds(thresholds(step(nil, "blue")))
		}
		d.add(p)
	}
	tile("TTFT p50", "ttft", 0.5, 5, 0)
	tile("TTFT p99", "ttft", 0.99, 5, float64(cfg.TTFT.SLO))
	tile("TPOT p99", "tpot", 0.99, 5, float64(cfg.TPOT.SLO))
	tile("E2E p99", "e2e", 0.99, 5, 0)
	d.add(d.stat("n (measured requests)",
		fmt.Sprintf("Requests whose TTFT was measured over the last %s, per target: the sample the quantiles beside rest on (warm-up excluded).", w),
		"short", 4, 4,
		q{expr: "round(" + alerts.HistogramCount(alerts.LatencyMetric("ttft"), []string{"target"}, s.full, w) + ")", legend: "{{target}}"},
	).Thresholds(thresholds(step(nil, "orange"), step(ptr(float64(cfg.MinRequests)), "green"))))
}

// reasoningPanels compare time to first token with time to first answer
// token (they part when a model reasons first), and show the share of
// output spent reasoning.
func reasoningPanels(d *board, s sels) {
	var qs []q
	for _, m := range []struct{ short, name string }{{"ttft", "TTFT"}, {"ttfa", "TTFA"}} {
		for _, quant := range []float64{0.5, 0.99} {
			qs = append(qs, q{
				expr:     alerts.HistogramQuantile(quant, alerts.LatencyMetric(m.short), []string{"target"}, s.full, rateWin),
				legend:   fmt.Sprintf("{{target}} %s p%s", m.name, alerts.FormatFloat(quant*100)),
				exemplar: m.short == "ttfa" && quant == 0.99,
			})
		}
	}
	d.add(d.ts("Time to first answer token (TTFA) vs TTFT",
		"TTFT: the first generated token, reasoning included. TTFA (dashed): the first token of the answer (content or a tool call) after any reasoning. "+
			"They coincide for models that do not reason; the gap is the time the user waits while the model thinks.",
		"s", 12, 8, qs...).OverrideByQuery("C", dashed()).OverrideByQuery("D", dashed()))
	d.add(d.ts("Reasoning share of output",
		"Reasoning tokens over all output tokens, as the server reported them (usage.completion_tokens_details.reasoning_tokens). "+
			"A rising share with flat TTFT makes TTFA and E2E grow: the model thinks longer, the engine is not slower.",
		"percentunit", 12, 8,
		q{expr: fmt.Sprintf("sum by (target) (rate(llmprobe_reasoning_tokens_total%s[%s]))\n/\nsum by (target) (rate(llmprobe_output_tokens_total%s[%s]))",
			s.full, rateWin, s.full, rateWin), legend: "{{target}}"},
	).Min(0).Max(1))
}

// heatmapPanel draws the distribution of one latency histogram over time
// from its native histogram (Grafana 10.4 and later render native
// histogram results as heatmap cells).
func heatmapPanel(d *board, s sels, short, title, description string) {
	d.add(heatmap.NewPanelBuilder().
		Id(d.id()).
		Title(title).
		Description(description).
		Datasource(promDS).
		Span(12).
		Height(8).
		Calculate(false).
		YAxis(heatmap.NewYAxisConfigBuilder().Unit("s")).
		CellValues(heatmap.NewCellValuesBuilder().Unit("reqps")).
		Color(heatmap.NewHeatmapColorOptionsBuilder().
			Mode(heatmap.HeatmapColorModeScheme).
			Scheme("Oranges").
			Scale(heatmap.HeatmapColorScaleExponential).
			Exponent(0.5).
			Steps(64)).
		ShowLegend().
		Tooltip(heatmap.NewHeatmapTooltipBuilder().Mode(common.TooltipDisplayModeSingle).YHistogram(true)).
		WithTarget(promTarget("A", q{
			expr:    fmt.Sprintf("sum(rate(%s%s[%s]))", alerts.LatencyMetric(short), s.full, rateWin),
			legend:  "{{le}}",
			heatmap: true,
		})))
}

// replicaRow compares llmprobe's replicas (scrape instances): a replica
// that sends less, waits longer or measures slower than its peers points
// at its node, not at the target.
func replicaRow(d *board, s sels) {
	d.row("Per replica (instance)")
	d.add(d.ts("Sent rate per replica",
		"Requests each llmprobe replica sent per second. Replicas of one deployment share the configured rate only if each is configured with its share: "+
			"compare with the requested rate per replica.",
		"reqps", 8, 8,
		q{expr: fmt.Sprintf("sum by (instance) (rate(llmprobe_requests_sent_total%s[%s]))", s.targetClass, rateWin), legend: "{{instance}} sent"},
		q{expr: fmt.Sprintf("sum by (instance) (llmprobe_target_request_rate%s)", s.target), legend: "{{instance}} requested"},
	).OverrideByQuery("B", dashed()))
	d.add(d.ts("TTFT p99 per replica",
		"The same targets measured from each replica. One replica slower than the rest is that replica's node or network path.",
		"s", 8, 8,
		q{expr: alerts.HistogramQuantile(0.99, alerts.LatencyMetric("ttft"), []string{"instance"}, s.full, rateWin), legend: "{{instance}}"},
	))
	d.add(d.ts("Schedule lag p99 per replica",
		"How late each replica sends against its open-loop timeline. One replica lagging is a starved replica (CPU limits, noisy node).",
		"s", 8, 8,
		q{expr: alerts.HistogramQuantile(0.99, "llmprobe_schedule_lag_seconds", []string{"instance"}, s.target, rateWin), legend: "{{instance}}"},
	))
}

// responsePanels add what the server answered besides latency: status
// codes, finish reasons, retries and anomalies.
func responsePanels(d *board, s sels) {
	d.add(d.ts("HTTP responses by status code",
		"Responses per second by status: 2xx, 3xx (a redirect llmprobe refused), the codes on-call tells apart (401/403 credentials, 404 model or path, "+
			"408/504 timeouts, 413 too long a prompt, 422 a rejected parameter, 429 rate-limited, 500/502/503 the server or its gateway), other 4xx and 5xx.",
		"reqps", 6, 8,
		q{expr: fmt.Sprintf("sum by (target, code) (rate(llmprobe_http_responses_total%s[%s]))", s.target, rateWin), legend: "{{target}} {{code}}"},
	).Stacking(common.NewStackingConfigBuilder().Mode(common.StackingModeNormal)))
	d.add(d.ts("Finish reasons",
		"How successful generations ended, per second: stop (the model finished), length (max_tokens reached: the output length llmprobe asked for), "+
			"tool_calls, content_filter, and others. A rise of length or content_filter changes what the latency measures.",
		"reqps", 6, 8,
		q{expr: fmt.Sprintf("sum by (target, reason) (rate(llmprobe_finish_reasons_total%s[%s]))", s.targetClass, rateWin), legend: "{{target}} {{reason}}"},
	).Stacking(common.NewStackingConfigBuilder().Mode(common.StackingModeNormal)))
	d.add(d.ts("Client retries",
		"Requests llmprobe re-sent because the connection failed before any byte of the response (a stale keep-alive connection). "+
			"Steady retries mean the target or a proxy closes idle connections early.",
		"reqps", 6, 8,
		q{expr: fmt.Sprintf("sum by (target) (rate(llmprobe_client_retries_total%s[%s]))", s.target, rateWin), legend: "{{target}}"},
	))
	d.add(d.ts("Server anomalies",
		"Responses that broke the API's promises but were still measured, by kind (e.g. cached tokens above prompt tokens, "+
			"more output than max_tokens). docs/metrics.md lists the kinds.",
		"reqps", 6, 8,
		q{expr: fmt.Sprintf("sum by (target, kind) (rate(llmprobe_server_anomalies_total%s[%s]))", s.target, rateWin), legend: "{{target}} {{kind}}"},
	))
}

// selfRow shows llmprobe's own process: CPU (and CPU-quota throttling),
// memory, garbage collection, tracing and workload refits.
func selfRow(d *board, s sels) {
	d.row("llmprobe itself")
	d.add(d.ts("CPU",
		"CPU seconds per second each llmprobe replica uses, and the time its cgroup's CPU quota throttled it. Throttling delays timestamps: "+
			"the harness row flags it as cpu_throttled.",
		"short", 6, 8,
		q{expr: fmt.Sprintf("sum by (instance) (rate(process_cpu_seconds_total%s[%s]))", s.all, rateWin), legend: "{{instance}} used"},
		q{expr: fmt.Sprintf("sum by (instance) (rate(llmprobe_harness_cpu_throttled_seconds_total%s[%s]))", s.all, rateWin), legend: "{{instance}} throttled"},
	).AxisLabel("cores"))
	d.add(d.ts("Memory",
		"Resident memory and Go heap in use per replica. Memory bounded by design (docs/soak.md): steady growth is a defect worth reporting.",
		"bytes", 6, 8,
		q{expr: fmt.Sprintf("sum by (instance) (process_resident_memory_bytes%s)", s.all), legend: "{{instance}} resident"},
		q{expr: fmt.Sprintf("sum by (instance) (go_memstats_heap_inuse_bytes%s)", s.all), legend: "{{instance}} heap in use"},
	))
	d.add(d.ts("Garbage collection and goroutines",
		"Share of time the Go runtime spent in stop-the-world GC pauses (left) and the goroutine count (right axis, roughly two per request in flight).",
		"percentunit", 6, 8,
		q{expr: fmt.Sprintf("sum by (instance) (rate(go_gc_duration_seconds_sum%s[%s]))", s.all, rateWin), legend: "{{instance}} GC pause share"},
		q{expr: fmt.Sprintf("sum by (instance) (go_goroutines%s)", s.all), legend: "{{instance}} goroutines"},
	).OverrideByQuery("B", rightAxis("short")))
	d.add(d.ts("Tracing",
		"Request spans exported per second and spans lost by reason (queue_full: the export queue was full; export_failed: the collector refused or was unreachable), "+
			"with the export queue's fill (right axis). Only with tracing enabled.",
		"short", 6, 8,
		q{expr: fmt.Sprintf("sum by (instance) (rate(llmprobe_trace_spans_exported_total%s[%s]))", s.all, rateWin), legend: "{{instance}} exported"},
		q{expr: fmt.Sprintf("sum by (instance, reason) (rate(llmprobe_trace_spans_dropped_total%s[%s]))", s.all, rateWin), legend: "{{instance}} dropped: {{reason}}"},
		q{expr: fmt.Sprintf("max by (instance) (llmprobe_trace_queue_spans%s / llmprobe_trace_queue_capacity_spans%s)", s.all, s.all), legend: "{{instance}} queue fill"},
	).AxisLabel("spans/s").OverrideByQuery("C", rightAxis("percentunit")))
	d.add(d.ts("Workload refits",
		"Refits of workloads fitted from production (workload_from with refit) per hour by result, and the age of the last successful one (right axis). "+
			"A growing age means the workload no longer follows production. Only for targets with refit.",
		"short", 12, 7,
		q{expr: fmt.Sprintf("sum by (target, result) (increase(llmprobe_workload_refits_total%s[1h]))", s.target), legend: "{{target}} {{result}} per hour"},
		q{expr: fmt.Sprintf("time() - max by (target) (llmprobe_workload_refit_success_timestamp_seconds%s > 0)", s.target), legend: "{{target}} age of last refit"},
	).OverrideByQuery("B", rightAxis("s")))
	d.add(d.ts("Fitted lengths",
		"Prompt and output token percentiles of the fitted workload per target: a step is a refit that changed the mix.",
		"short", 12, 7,
		q{expr: fmt.Sprintf("max by (target, kind, percentile) (llmprobe_workload_fitted_tokens%s)", s.target), legend: "{{target}} {{kind}} {{percentile}}"},
	).AxisLabel("tokens"))
}

// annotations marks config reloads, failed reloads, warm-up, harness
// saturation and changes of a target's identity (a new model, build
// fingerprint, Server or version: a deploy) on every time-series panel.
func (d *board) annotations(s sels) {
	add := func(name, color, expr, title, text string) {
		d.b.Annotation(dashboard.NewAnnotationQueryBuilder().
			Name(name).
			Datasource(promDS).
			Enable(true).
			IconColor(color).
			Expr(expr).
			Step("1m").
			TitleFormat(title).
			TextFormat(text))
	}
	add("Config reloads", "blue",
		fmt.Sprintf("changes(llmprobe_config_last_reload_success_timestamp_seconds%s[2m]) > 0", s.all),
		"config reloaded", "{{instance}} loaded a new configuration")
	add("Failed reloads", "red",
		fmt.Sprintf("min by (instance) (llmprobe_config_last_reload_successful%s) == 0", s.all),
		"config reload failed", "{{instance}} keeps its previous configuration; run llmprobe check-config")
	add("Warm-up", "purple",
		fmt.Sprintf("max by (target) (llmprobe_warmup%s) == 1", s.target),
		"warming up", "{{target}}: requests kept out of the latency histograms")
	add("Harness saturated", "orange",
		fmt.Sprintf("max by (target) (llmprobe_harness_saturated%s) == 1", s.target),
		"harness saturated", "{{target}}: latency includes llmprobe's own delay")
	add("Target identity changes", "yellow",
		fmt.Sprintf("sum by (target, what) (changes(llmprobe_target_changes_total%s[2m])) > 0", s.target),
		"target build changed", "{{target}}: its {{what}} changed (llmprobe_target_info holds the new identity); a latency shift from here is the new build's")
}

// statusPageLink links the dashboard to llmprobe's status page when the
// mixin config names its URL.
func (d *board) statusPageLink() {
	if d.cfg.StatusPageURL == "" {
		return
	}
	d.b.Link(dashboard.NewDashboardLinkBuilder("llmprobe status page").
		Type(dashboard.DashboardLinkTypeLink).
		Url(d.cfg.StatusPageURL).
		Icon("info").
		Tooltip("requested vs achieved rate, harness health and the latest requests").
		TargetBlank(true))
}

// jaegerQuery is a Jaeger data source search. The Foundation SDK has no
// Jaeger query type, so it is rendered as the JSON Grafana stores.
type jaegerQuery struct{ service string }

func (j jaegerQuery) Build() (variants.Dataquery, error) {
	return variants.UnknownDataquery{
		"refId":      "A",
		"datasource": map[string]any{"type": alerts.TraceDatasourceJaeger, "uid": "${" + VarTraceDatasource + "}"},
		"queryType":  "search",
		"service":    j.service,
		"limit":      20,
	}, nil
}
