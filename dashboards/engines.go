// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package dashboards

import (
	"fmt"
	"strings"

	"github.com/llmprobe/llmprobe/alerts"
)

// otherEnginesRow shows TGI's and llama.cpp's own metrics (the names
// bench/servermetrics.go reads). Neither labels the model (a server
// serves one), so they are per server instance, narrowed by the server
// cluster, namespace and job, and not joined to the probe's model.
func otherEnginesRow(d *board, cfg alerts.Config) {
	sel := engineSel(cfg, false)
	byInstance := []string{"instance"}
	tgiQuantile := func(quant float64, metric string) string {
		return alerts.HistogramQuantile(quant, metric, byInstance, sel, rateWin)
	}
	sumBy := func(metric string) string { return fmt.Sprintf("sum by (instance) (%s%s)", metric, sel) }
	rateBy := func(metric string) string {
		return fmt.Sprintf("sum by (instance) (rate(%s%s[%s]))", metric, sel, rateWin)
	}

	d.row("TGI and llama.cpp (per server instance: neither labels the model)")
	d.add(d.ts("TGI: request and queue latency",
		"Text Generation Inference's own histograms: the whole request (tgi_request_duration), the time it waited in TGI's queue (tgi_request_queue_duration) "+
			"and the mean time per generated token (tgi_request_mean_time_per_token_duration). TGI has no TTFT histogram: compare its queue time with the probe's TTFT.",
		"s", 8, 8,
		q{expr: tgiQuantile(0.5, "tgi_request_duration"), legend: "request p50 {{instance}}"},
		q{expr: tgiQuantile(0.99, "tgi_request_duration"), legend: "request p99 {{instance}}"},
		q{expr: tgiQuantile(0.99, "tgi_request_queue_duration"), legend: "queue p99 {{instance}}"},
		q{expr: tgiQuantile(0.5, "tgi_request_mean_time_per_token_duration"), legend: "per token p50 {{instance}}"},
	))
	d.add(d.ts("TGI: batch and queue",
		"Requests in TGI's current batch (tgi_batch_current_size) and waiting in its queue (tgi_queue_size). A growing queue explains TTFT growth inside the engine.",
		"short", 8, 8,
		q{expr: sumBy("tgi_batch_current_size"), legend: "batch {{instance}}"},
		q{expr: sumBy("tgi_queue_size"), legend: "queue {{instance}}"},
	))
	d.add(d.ts("TGI: tokens per second",
		"Prompt tokens of the requests TGI validated (tgi_request_input_length, on arrival) and tokens it generated (tgi_request_generated_tokens, per successful request), for all its traffic.",
		"short", 8, 8,
		q{expr: rateBy("tgi_request_input_length_sum"), legend: "prompt {{instance}}"},
		q{expr: rateBy("tgi_request_generated_tokens_sum"), legend: "generated {{instance}}"},
	).AxisLabel("tokens/s"))
	d.add(d.ts("llama.cpp: slots",
		"Requests llama.cpp's server is processing (llamacpp:requests_processing, busy slots) and those deferred for want of a free slot (llamacpp:requests_deferred).",
		"short", 12, 8,
		q{expr: sumBy("llamacpp:requests_processing"), legend: "processing {{instance}}"},
		q{expr: sumBy("llamacpp:requests_deferred"), legend: "deferred {{instance}}"},
	))
	d.add(d.ts("llama.cpp: tokens per second",
		"Prompt tokens llama.cpp computed (llamacpp:prompt_tokens_total: those its slot cache already held are not counted) and tokens it generated (llamacpp:tokens_predicted_total), for all its traffic.",
		"short", 12, 8,
		q{expr: rateBy("llamacpp:prompt_tokens_total"), legend: "prompt computed {{instance}}"},
		q{expr: rateBy("llamacpp:tokens_predicted_total"), legend: "generated {{instance}}"},
	).AxisLabel("tokens/s"))
}

// costRow shows the recorded energy, GPU time and (with a GPU price) cost
// per generated token, per the labels joining a GPU to its engine.
func costRow(d *board, cfg alerts.Config) {
	var m, legend []string
	for _, l := range cfg.CostLabels() {
		switch l {
		case cfg.ClusterLabel:
			m = append(m, fmt.Sprintf(`%s=~"$%s"`, l, VarServerCluster))
		case "namespace":
			m = append(m, fmt.Sprintf(`namespace=~"$%s"`, VarServerNamespace))
		}
		legend = append(legend, "{{"+l+"}}")
	}
	sel := braces(m)
	lg := strings.Join(legend, " / ")
	w := cfg.Cost.Window.String()
	honest := "The tokens are the engine's own generation counter (vllm:generation_tokens_total, sglang:generation_tokens_total, " +
		"tgi_request_generated_tokens, llamacpp:tokens_predicted_total) for all its traffic, never llmprobe's: the probe sends a small share " +
		"of the load and the GPUs' power and time are spent on all of it, so dividing by the probe's tokens would overstate the cost by " +
		"the inverse of that share. Idle power counts too: at low load the figure is high. A GPU is matched to its engine by " +
		strings.Join(cfg.CostLabels(), ", ") + " (dcgm-exporter's pod mapping); needs alerts/llmprobe.rules.yml loaded."

	d.row("Energy and cost per generated token (all of the engine's traffic)")
	d.add(d.ts("Energy per generated token",
		fmt.Sprintf("Joules per generated token: the GPUs' board power (DCGM_FI_DEV_POWER_USAGE averaged over %s, watts = joules/s) "+
			"divided by the tokens per second the engine generated over the same %s, next to those tokens per second (right axis). %s", w, w, honest),
		"joule", 12, 8,
		q{expr: cfg.JoulesPerTokenRecord() + sel, legend: "J/token " + lg},
		q{expr: cfg.EngineTokensRecord() + sel, legend: "generated tokens/s " + lg},
	).OverrideByQuery("B", append(rightAxis("short"), dashed()...)))
	queries := []q{{expr: cfg.GPUHoursPerMillionTokensRecord() + sel, legend: "GPU-hours per 1M tokens " + lg}}
	priced := "Set the mixin's cost.gpu_price_per_hour to see the cost at your price."
	if cfg.Cost.GPUPricePerHour > 0 {
		queries = append(queries, q{expr: cfg.CostPerMillionTokensRecord() + sel, legend: "cost per 1M tokens " + lg})
		priced = fmt.Sprintf("Cost (right axis) at the mixin's cost.gpu_price_per_hour of %s per GPU-hour.", alerts.FormatFloat(cfg.Cost.GPUPricePerHour))
	}
	p := d.ts("GPU time and cost per million generated tokens",
		fmt.Sprintf("GPU-hours per million generated tokens: the number of GPUs divided by the tokens per second the engine generated over %s, "+
			"× 10⁶ / 3600. %s %s", w, priced, honest),
		"h", 12, 8, queries...)
	if cfg.Cost.GPUPricePerHour > 0 {
		p = p.OverrideByQuery("B", rightAxis("currencyUSD"))
	}
	d.add(p)
}
