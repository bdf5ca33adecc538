// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package dashboards

import (
	"fmt"

	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"

	"github.com/llmprobe/llmprobe/alerts"
)

// Dashboard UIDs (stable: links and provisioning refer to them).
const (
	OverviewUID    = "llmprobe-overview"
	CorrelationUID = "llmprobe-correlation"
)

const (
	rateWin  = "$__rate_interval"
	rangeWin = "$__range"
)

// selectors used by panels
type sels struct {
	full        string // target, model, class
	targetClass string // metrics labelled target, class
	target      string // metrics labelled target only
	all         string // only the dashboard selector and variables
}

func panelSels(cfg alerts.Config) sels {
	return sels{
		full:        cfg.DashboardMatchers(`target=~"$target"`, `model=~"$model"`, `class=~"$class"`),
		targetClass: cfg.DashboardMatchers(`target=~"$target"`, `class=~"$class"`),
		target:      cfg.DashboardMatchers(`target=~"$target"`),
		all:         cfg.DashboardMatchers(),
	}
}

func latencyPanel(d *board, s sels, short, title, description string) {
	metric := alerts.LatencyMetric(short)
	var qs []q
	for _, quant := range []float64{0.5, 0.95, 0.99} {
		qs = append(qs, q{
			expr:     alerts.HistogramQuantile(quant, metric, []string{"target"}, s.full, rateWin),
			legend:   fmt.Sprintf("{{target}} p%s", alerts.FormatFloat(quant*100)),
			exemplar: quant == 0.99,
		})
	}
	d.add(d.ts(title, description, "s", 12, 9, qs...))
}

func sloPanel(d *board, cfg alerts.Config, short, title string, la alerts.LatencyAlert) {
	rec := cfg.QuantileRecord(short)
	sel := cfg.RecordedMatchers(`quantile="0.99"`, `target=~"$target"`, `model=~"$model"`, `class=~"$class"`)
	p := d.ts(title,
		fmt.Sprintf("Exactly what the %s alerts evaluate: the recorded p99 over %s per target and class (needs alerts/llmprobe.rules.yml loaded), "+
			"the same series a week ago (dashed) and the %s SLO (dashed red). A window with fewer than %d observations does not alert.",
			short, cfg.LongWindow, humanSeconds(float64(la.SLO)), cfg.MinRequests),
		"s", 12, 8,
		q{expr: rec + sel, legend: "{{target}} {{class}}"},
		q{expr: rec + sel + " offset 1w", legend: "{{target}} {{class}} a week ago"},
	).OverrideByQuery("B", dashed())
	d.add(thresholdLine(p, float64(la.SLO)))
}

func humanSeconds(s float64) string {
	if s < 1 {
		return alerts.FormatFloat(s*1000) + "ms"
	}
	return alerts.FormatFloat(s) + "s"
}

// Overview builds the overview dashboard.
func Overview(cfg alerts.Config) (dashboard.Dashboard, error) {
	s := panelSels(cfg)
	d := newBoard(cfg, OverviewUID, "llmprobe / Overview",
		"Continuous LLM endpoint benchmarking: TTFT, TPOT, ITL and E2E as llmprobe measures them, the harness's own health, errors, SLO error budgets, tokens and prefix-cache reuse.")
	d.probeVars()
	d.b.WithVariable(traceDatasourceVar(cfg))
	d.annotations(s)
	d.statusPageLink()

	nowRow(d, cfg, s)

	d.row("Harness health: can these numbers be trusted?")
	d.add(d.stat("Harness", "1 when llmprobe cannot deliver or time the load: late sends, late drops, or timestamps inflated by CPU starvation, judged by counts with a minimum of evidence. "+
		"While SATURATED the latency below includes the harness's own delay: do not trust it, and latency and SLO alerts are inhibited. Saturation reasons says why.",
		"none", 5, 5,
		q{expr: fmt.Sprintf("max by (target) (llmprobe_harness_saturated%s)", s.target), legend: "{{target}}"},
	).Mappings(valueMap([3]string{"0", "OK", "green"}, [3]string{"1", "SATURATED: numbers not trustworthy", "red"})).
		NoValue("no data: is llmprobe scraped?"))
	d.add(d.stat("Target load", "1 when the target does not absorb the offered load: arrivals over max_inflight are dropped because requests are still running. "+
		"The numbers are right (latency alerts stay armed); the load is lighter than configured.",
		"none", 4, 5,
		q{expr: fmt.Sprintf("max by (target) (llmprobe_target_overloaded%s)", s.target), legend: "{{target}}"},
	).Mappings(valueMap([3]string{"0", "absorbed", "green"}, [3]string{"1", "OVERLOADED", "orange"})))
	d.add(d.stat("Warm-up", "1 while a target is in its warm-up period after start or reload: its requests are sent but kept out of the latency histograms.",
		"none", 3, 5,
		q{expr: fmt.Sprintf("max by (target) (llmprobe_warmup%s)", s.target), legend: "{{target}}"},
	).Mappings(valueMap([3]string{"0", "measuring", "green"}, [3]string{"1", "warming up", "blue"})))
	d.add(d.stat("Sent / scheduled", fmt.Sprintf("Requests actually sent over requests the arrival timeline scheduled, over the dashboard's time range. "+
		"Below %s requests are being dropped: the measured load is lighter than configured.", alerts.FormatFloat(cfg.AchievedRatio*100)+"%"),
		"percentunit", 4, 5,
		q{expr: fmt.Sprintf("sum by (target) (increase(llmprobe_requests_sent_total%s[%s]))\n/\nsum by (target) (increase(llmprobe_requests_scheduled_total%s[%s]))",
			s.targetClass, rangeWin, s.targetClass, rangeWin), legend: "{{target}}"},
	).Decimals(1).Thresholds(thresholds(step(nil, "red"), step(ptr(cfg.AchievedRatio), "green"))))
	d.add(d.stat("Dropped", "Scheduled requests never sent over the dashboard's time range, by target (inflight_limit, late, shutdown: see the dropped panel).",
		"short", 4, 5,
		q{expr: fmt.Sprintf("round(sum by (target) (increase(llmprobe_requests_dropped_total%s[%s])))", s.target, rangeWin), legend: "{{target}}"},
	).Thresholds(thresholds(step(nil, "green"), step(ptr(1.0), "red"))))
	d.add(d.stat("Config reload", "Whether llmprobe's last configuration reload succeeded. After a failed reload it keeps running the previous configuration.",
		"none", 4, 5,
		q{expr: fmt.Sprintf("min(llmprobe_config_last_reload_successful%s)", s.all), legend: "last reload"},
	).Mappings(valueMap([3]string{"1", "OK", "green"}, [3]string{"0", "FAILED", "red"})))

	d.add(d.ts("Saturation reasons",
		"Which rule makes the harness flag its numbers (1 while it holds): late_sends, late_drops (the arrival loop), wakeup_latency (the process wakes late), sched_latency (the Go scheduler), "+
			"cpu_contention (other processes on its CPUs), cpu_throttled (its CPU quota). docs/metrics.md explains each.",
		"none", 12, 7,
		q{expr: fmt.Sprintf("max by (target, reason) (llmprobe_harness_saturation_reason%s)", s.target), legend: "{{target}} {{reason}}"},
	))
	d.add(d.ts("Timestamp inflation",
		"How late llmprobe may timestamp stream events because its process is starved of CPU, per instance: the estimate the verdict uses, "+
			"the Go scheduler's p99 wait, the OS run-queue wait per timeslice, and the share of CPU-quota periods throttled.",
		"s", 12, 7,
		q{expr: fmt.Sprintf("max by (instance) (llmprobe_harness_timestamp_inflation_seconds%s)", s.all), legend: "{{instance}} estimate"},
		q{expr: alerts.HistogramQuantile(0.99, "llmprobe_harness_wakeup_latency_seconds", []string{"instance"}, s.all, rateWin), legend: "{{instance}} heartbeat lateness p99"},
		q{expr: alerts.HistogramQuantile(0.99, "llmprobe_harness_sched_latency_seconds", []string{"instance"}, s.all, rateWin), legend: "{{instance}} Go scheduler p99"},
		q{expr: fmt.Sprintf("sum by (instance) (rate(llmprobe_harness_runqueue_wait_seconds_total%s[%s]))\n/\nsum by (instance) (rate(llmprobe_harness_timeslices_total%s[%s]))",
			s.all, rateWin, s.all, rateWin), legend: "{{instance}} run-queue wait per timeslice"},
	))

	d.add(d.ts("Requested, scheduled and sent rate",
		"Requested: the configured rate (summed over replicas). Scheduled: arrivals the open-loop timeline produced. Sent: requests actually written. "+
			"Scheduled follows requested with Poisson/gamma noise; sent below scheduled means the harness or max_inflight is dropping requests.",
		"reqps", 8, 8,
		q{expr: fmt.Sprintf("sum by (target) (llmprobe_target_request_rate%s)", s.target), legend: "{{target}} requested"},
		q{expr: fmt.Sprintf("sum by (target) (rate(llmprobe_requests_scheduled_total%s[%s]))", s.targetClass, rateWin), legend: "{{target}} scheduled"},
		q{expr: fmt.Sprintf("sum by (target) (rate(llmprobe_requests_sent_total%s[%s]))", s.targetClass, rateWin), legend: "{{target}} sent"},
	).OverrideByQuery("A", dashed()))
	d.add(d.ts("Schedule lag and client wait p99",
		"Schedule lag: actual send instant minus planned instant. Client wait: connection acquisition before the request is written. "+
			"Both should stay in milliseconds; growth means the harness (or its connection pool) is the bottleneck, not the model server.",
		"s", 8, 8,
		q{expr: alerts.HistogramQuantile(0.99, "llmprobe_schedule_lag_seconds", []string{"target"}, s.target, rateWin), legend: "{{target}} schedule lag p99"},
		q{expr: alerts.HistogramQuantile(0.99, "llmprobe_client_wait_seconds", []string{"target"}, s.target, rateWin), legend: "{{target}} client wait p99"},
	))
	d.add(d.ts("Dropped requests and in-flight",
		"Dropped per second by reason (bars) and requests in flight (line, right axis). inflight_limit drops mean the server is slower than the arrival rate allows.",
		"reqps", 8, 8,
		q{expr: fmt.Sprintf("sum by (target, reason) (rate(llmprobe_requests_dropped_total%s[%s]))", s.target, rateWin), legend: "{{target}} dropped: {{reason}}"},
		q{expr: fmt.Sprintf("sum by (target) (llmprobe_inflight_requests%s)", s.target), legend: "{{target}} in flight"},
	).OverrideByQuery("B", rightAxis("short")).OverrideByQuery("A", []dashboard.DynamicConfigValue{
		{Id: "custom.drawStyle", Value: "bars"},
	}))

	d.row("Latency (as the client sees it; warm-up excluded)")
	latencyPanel(d, s, "ttft", "Time to first token (TTFT)",
		"Request written → first event carrying generated text (role-only deltas do not count). p50/p95/p99 per target from native histograms, classic buckets as fallback. "+
			"Exemplars on p99 link to the request's trace.")
	latencyPanel(d, s, "tpot", "Time per output token (TPOT)",
		"(E2E − TTFT) / (output tokens − 1), per request with at least 2 output tokens. Long decodes share the batch, so p99 is typically 3–5× p50.")
	latencyPanel(d, s, "itl", "Inter-token latency (ITL)",
		"Gaps between consecutive token-bearing stream events (per chunk). Spikes without TTFT change point at decode-side contention.")
	latencyPanel(d, s, "e2e", "End-to-end latency (E2E)",
		"Request written → last token-bearing event (trailing usage event and [DONE] excluded). Depends on output length: read it next to the token panels.")
	reasoningPanels(d, s)
	heatmapPanel(d, s, "ttft", "TTFT distribution",
		"Requests per second by TTFT over time, from the native histogram: a second band (bimodal TTFT) is often prefix-cache hits against misses, or two replicas.")
	heatmapPanel(d, s, "tpot", "TPOT distribution",
		"Requests per second by time per output token over time, from the native histogram: a band moving up is the batch growing.")
	sloPanel(d, cfg, "ttft", "TTFT p99: alerting view", cfg.TTFT)
	sloPanel(d, cfg, "tpot", "TPOT p99: alerting view", cfg.TPOT)

	whyRow(d, cfg, s)
	regressionRow(d, cfg, s)

	d.row("Requests and errors")
	d.add(d.ts("Completed requests by outcome",
		"Requests that ended, per second, by outcome: success, http_error, timeout, stream_error, connect_error, invalid_response.",
		"reqps", 8, 8,
		q{expr: fmt.Sprintf("sum by (target, outcome) (rate(llmprobe_requests_total%s[%s]))", s.full, rateWin), legend: "{{target}} {{outcome}}"},
	).Stacking(common.NewStackingConfigBuilder().Mode(common.StackingModeNormal)))
	errRatio := d.ts("Error ratio",
		fmt.Sprintf("Failed / completed requests, from summed counters. The dashed line is the %s threshold of LLMProbeErrorRatioHigh "+
			"(which evaluates %s and %s windows).", alerts.FormatFloat(cfg.ErrorRatio*100)+"%", cfg.LongWindow, cfg.ShortWindow),
		"percentunit", 8, 8,
		q{expr: fmt.Sprintf("sum by (target) (rate(llmprobe_requests_total%s[%s]))\n/\nsum by (target) (rate(llmprobe_requests_total%s[%s]))",
			cfg.DashboardMatchers(`target=~"$target"`, `model=~"$model"`, `class=~"$class"`, `outcome!="success"`), rateWin, s.full, rateWin), legend: "{{target}}"},
	).Min(0)
	d.add(thresholdLine(errRatio, cfg.ErrorRatio))
	d.add(d.ts("Conversations by outcome",
		"Multi-turn conversations per second that completed every turn, or failed part-way.",
		"short", 8, 8,
		q{expr: fmt.Sprintf("sum by (target, outcome) (rate(llmprobe_conversations_total%s[%s]))", s.targetClass, rateWin), legend: "{{target}} {{outcome}}"},
	))

	responsePanels(d, s)

	sloRow(d, cfg, s)

	d.row("Tokens and prefix cache")
	d.add(d.ts("Token throughput",
		"Prompt, output and cached prompt tokens per second, as the server reported them in usage (estimated where it sent none).",
		"short", 8, 8,
		q{expr: fmt.Sprintf("sum by (target) (rate(llmprobe_prompt_tokens_total%s[%s]))", s.full, rateWin), legend: "{{target}} prompt"},
		q{expr: fmt.Sprintf("sum by (target) (rate(llmprobe_output_tokens_total%s[%s]))", s.full, rateWin), legend: "{{target}} output"},
		q{expr: fmt.Sprintf("sum by (target) (rate(llmprobe_cached_prompt_tokens_total%s[%s]))", s.full, rateWin), legend: "{{target}} cached"},
	).AxisLabel("tokens/s"))
	d.add(d.ts("Prefix-cache hit ratio: observed vs intended",
		fmt.Sprintf("Observed: cached / prompt tokens from summed counters. Intended (dashed): the reuse the workload is configured for. "+
			"LLMProbePrefixCacheHitRatioLow fires below %s of the intent.", alerts.FormatFloat(cfg.PrefixHitFactor*100)+"%"),
		"percentunit", 8, 8,
		q{expr: fmt.Sprintf("sum by (target, class) (rate(llmprobe_cached_prompt_tokens_total%s[%s]))\n/\nsum by (target, class) (rate(llmprobe_prompt_tokens_total%s[%s]))",
			s.full, rateWin, s.full, rateWin), legend: "{{target}} {{class}} observed"},
		q{expr: fmt.Sprintf("max by (target, class) (llmprobe_prefix_reuse_target_ratio%s)", s.targetClass), legend: "{{target}} {{class}} intended"},
	).Min(0).Max(1).OverrideByQuery("B", dashed()))
	d.add(d.ts("Usage accounting",
		"Whether token counts can be trusted: planned vs server-reported prompt length ((reported − planned) / planned, p50 and p99), "+
			"the share of responses whose prompt length differed, and the share without server usage (token counts estimated).",
		"percentunit", 8, 8,
		q{expr: alerts.HistogramQuantile(0.5, "llmprobe_prompt_length_error_ratio", []string{"target"}, s.targetClass, rateWin), legend: "{{target}} length error p50"},
		q{expr: alerts.HistogramQuantile(0.99, "llmprobe_prompt_length_error_ratio", []string{"target"}, s.targetClass, rateWin), legend: "{{target}} length error p99"},
		q{expr: fmt.Sprintf("sum by (target) (rate(llmprobe_prompt_length_mismatch_total%s[%s]))\n/\nsum by (target) (rate(llmprobe_requests_total%s[%s]))",
			s.targetClass, rateWin, cfg.DashboardMatchers(`target=~"$target"`, `class=~"$class"`, `outcome="success"`), rateWin), legend: "{{target}} length mismatch share"},
		q{expr: fmt.Sprintf("sum by (target) (rate(llmprobe_usage_estimated_total%s[%s]))\n/\nsum by (target) (rate(llmprobe_requests_total%s[%s]))",
			s.full, rateWin, cfg.DashboardMatchers(`target=~"$target"`, `model=~"$model"`, `class=~"$class"`, `outcome="success"`), rateWin), legend: "{{target}} usage estimated share"},
	))
	d.add(d.ts("Request lengths (server-reported)",
		"Prompt and output tokens per request, p50 and p99: the heavy-tailed length mix the latencies above were measured under.",
		"short", 24, 8,
		q{expr: alerts.HistogramQuantile(0.5, "llmprobe_prompt_tokens", []string{"target"}, s.targetClass, rateWin), legend: "{{target}} prompt p50"},
		q{expr: alerts.HistogramQuantile(0.99, "llmprobe_prompt_tokens", []string{"target"}, s.targetClass, rateWin), legend: "{{target}} prompt p99"},
		q{expr: alerts.HistogramQuantile(0.5, "llmprobe_output_tokens", []string{"target"}, s.targetClass, rateWin), legend: "{{target}} output p50"},
		q{expr: alerts.HistogramQuantile(0.99, "llmprobe_output_tokens", []string{"target"}, s.targetClass, rateWin), legend: "{{target}} output p99"},
	).AxisLabel("tokens"))

	replicaRow(d, s)
	selfRow(d, s)

	d.row("Traces")
	d.add(tracesPanel(d,
		"The latest request spans of the selected targets from the trace data source: open one to see TTFT, schedule lag and the server's own spans.",
		`{ span.llmprobe.target =~ "${target:regex}" }`, 24, 8))

	return d.build()
}
