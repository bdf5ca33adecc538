// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package dashboards

import (
	"fmt"
	"strings"

	"github.com/grafana/grafana-foundation-sdk/go/dashboard"

	"github.com/llmprobe/llmprobe/alerts"
)

// engine is one model-server family whose metrics the correlation
// dashboard reads. Both label the model as model_name.
type engine struct {
	name    string
	ttft    string // histogram
	itl     string // histogram
	e2e     string // histogram
	running string // gauge
	waiting string // gauge
	kvUsage string // gauge, 0–1
	// prefix-cache hit ratio: either hits/queries counters or a gauge
	prefixHits, prefixQueries string
	prefixGauge               string
	promptTokens, genTokens   string // counters
}

var engines = []engine{
	{
		name: "vllm", ttft: "vllm:time_to_first_token_seconds", itl: "vllm:inter_token_latency_seconds",
		e2e: "vllm:e2e_request_latency_seconds", running: "vllm:num_requests_running", waiting: "vllm:num_requests_waiting",
		kvUsage: "vllm:kv_cache_usage_perc", prefixHits: "vllm:prefix_cache_hits_total", prefixQueries: "vllm:prefix_cache_queries_total",
		promptTokens: "vllm:prompt_tokens_total", genTokens: "vllm:generation_tokens_total",
	},
	{
		name: "sglang", ttft: "sglang:time_to_first_token_seconds", itl: "sglang:inter_token_latency_seconds",
		e2e: "sglang:e2e_request_latency_seconds", running: "sglang:num_running_reqs", waiting: "sglang:num_queue_reqs",
		kvUsage: "sglang:token_usage", prefixGauge: "sglang:cache_hit_rate",
		promptTokens: "sglang:prompt_tokens_total", genTokens: "sglang:generation_tokens_total",
	},
}

// serverScope narrows a model server's or a GPU's series to the selected
// server cluster and namespace (engineScope) or cluster (gpuScope): in a
// Prometheus holding several clusters, job and model alone mix them.
func serverScope(cfg alerts.Config, namespace bool) []string {
	m := []string{fmt.Sprintf(`%s=~"$%s"`, cfg.ClusterLabel, VarServerCluster)}
	if namespace {
		m = append(m, fmt.Sprintf(`namespace=~"$%s"`, VarServerNamespace))
	}
	return m
}

// engineSel selects one server's series: scope, the server job variable
// and, for vLLM and SGLang, the probe's model variable matched against
// the server's model_name (TGI and llama.cpp serve one model and do not
// label it).
func engineSel(cfg alerts.Config, byModel bool) string {
	m := append(serverScope(cfg, true), fmt.Sprintf(`job=~"$%s"`, VarServerJob))
	if byModel {
		m = append(m, fmt.Sprintf(`model_name=~"$%s"`, VarModel))
	}
	return braces(m)
}

// engineGauges are the gauges every engine exports, whose jobs, clusters
// and namespaces the server variables list.
const engineGauges = `vllm:num_requests_running|sglang:num_running_reqs|tgi_queue_size|llamacpp:requests_processing`

// eitherEngine joins one expression per engine with `or`, each tagged with
// an engine label, so one query returns data whichever server is scraped.
func eitherEngine(f func(e engine) string) string {
	var parts []string
	for _, e := range engines {
		x := f(e)
		if x == "" {
			continue
		}
		parts = append(parts, fmt.Sprintf(`label_replace(%s, "engine", %q, "", "")`, alerts.Paren(x), e.name))
	}
	return strings.Join(parts, "\nor\n")
}

func serverQuantile(serverSel string, quant float64, pick func(e engine) string) string {
	return eitherEngine(func(e engine) string {
		return alerts.HistogramQuantile(quant, pick(e), []string{"model_name"}, serverSel, rateWin)
	})
}

func probeQuantileByModel(s sels, quant float64, short string) string {
	return alerts.HistogramQuantile(quant, alerts.LatencyMetric(short), []string{"model"}, s.full, rateWin)
}

// gap is probe quantile minus server quantile, joined on model = model_name.
func gap(s sels, serverSel string, quant float64) string {
	return alerts.Paren(probeQuantileByModel(s, quant, "ttft")) + "\n- on (model)\n" +
		`label_replace(` + alerts.Paren(serverQuantile(serverSel, quant, func(e engine) string { return e.ttft })) + `, "model", "$1", "model_name", "(.*)")`
}

func versus(d *board, s sels, title, description, short string, pick func(e engine) string) {
	d.add(d.ts(title, description, "s", 12, 9,
		q{expr: probeQuantileByModel(s, 0.5, short), legend: "probe p50 {{model}}"},
		q{expr: probeQuantileByModel(s, 0.99, short), legend: "probe p99 {{model}}", exemplar: true},
		q{expr: serverQuantile(engineSel(d.cfg, true), 0.5, pick), legend: "{{engine}} p50 {{model_name}}"},
		q{expr: serverQuantile(engineSel(d.cfg, true), 0.99, pick), legend: "{{engine}} p99 {{model_name}}"},
	).OverrideByQuery("C", dashed()).OverrideByQuery("D", dashed()))
}

// Correlation builds the probe / model server / GPU correlation dashboard.
func Correlation(cfg alerts.Config) (dashboard.Dashboard, error) {
	s := panelSels(cfg)
	d := newBoard(cfg, CorrelationUID, "llmprobe / Server and GPU correlation",
		"Is it the model server, the GPU, or the path in between? llmprobe's client-side latency next to the engine's own metrics (vLLM or SGLang, matched on model = model_name; TGI and llama.cpp per instance), the GPU's (dcgm-exporter), and the energy and GPU time per generated token.")
	d.probeVars()
	serverSel := engineSel(cfg, true)
	gauges := fmt.Sprintf(`__name__=~"%s"`, engineGauges)
	scope := serverScope(cfg, true)
	d.b.WithVariable(d.hideUnlessMultiCluster(queryVar(VarServerCluster, "Server cluster",
		fmt.Sprintf("label_values(%s, %s)", braces([]string{gauges}), cfg.ClusterLabel), true)))
	d.b.WithVariable(queryVar(VarServerNamespace, "Server namespace",
		fmt.Sprintf("label_values(%s, namespace)", braces([]string{gauges, scope[0]})), true))
	d.b.WithVariable(queryVar(VarServerJob, "Server job",
		fmt.Sprintf("label_values(%s, job)", braces(append([]string{gauges}, scope...))), true))
	d.b.WithVariable(queryVar(VarGPUNode, "GPU node",
		fmt.Sprintf("label_values(DCGM_FI_DEV_GPU_UTIL%s, Hostname)", braces(serverScope(cfg, false))), true))
	d.annotations(s)
	d.statusPageLink()

	whyRow(d, cfg, s)

	d.row("Time to first token: client vs engine")
	versus(d, s, "TTFT: probe vs engine",
		"Solid: TTFT as llmprobe measures it (client side). Dashed: the engine's own TTFT histogram. The engine's figure starts when the request reaches it, "+
			"so the difference is network, TLS, gateway/load balancer and any queueing in front of the engine.",
		"ttft", func(e engine) string { return e.ttft })
	d.add(d.ts("Probe − engine TTFT gap (outside the engine)",
		"Probe TTFT quantile minus the engine's TTFT quantile for the same model. A growing gap with a flat engine TTFT points at the network, gateway or "+
			"queueing outside the engine; a flat gap with growing TTFT points at the engine (prefill, batch, KV cache). Quantiles of different populations: read as a trend.",
		"s", 12, 9,
		q{expr: gap(s, serverSel, 0.5), legend: "p50 gap {{model}}"},
		q{expr: gap(s, serverSel, 0.99), legend: "p99 gap {{model}}"},
	))

	d.row("Decode: client vs engine")
	versus(d, s, "ITL: probe vs engine",
		"Inter-token latency, client side (solid) vs the engine's histogram (dashed). Client-side ITL also includes stream buffering by proxies.",
		"itl", func(e engine) string { return e.itl })
	versus(d, s, "E2E: probe vs engine",
		"End-to-end request latency, client side (solid) vs the engine's (dashed).",
		"e2e", func(e engine) string { return e.e2e })

	d.row("Engine load")
	d.add(d.ts("Running and waiting requests",
		"Requests in the engine's running batch and waiting queue, next to llmprobe's own in-flight requests. A waiting queue explains TTFT growth inside the engine.",
		"short", 8, 8,
		q{expr: eitherEngine(func(e engine) string { return fmt.Sprintf("sum by (model_name) (%s%s)", e.running, serverSel) }), legend: "{{engine}} running {{model_name}}"},
		q{expr: eitherEngine(func(e engine) string { return fmt.Sprintf("sum by (model_name) (%s%s)", e.waiting, serverSel) }), legend: "{{engine}} waiting {{model_name}}"},
		q{expr: fmt.Sprintf("sum by (model) (llmprobe_inflight_requests%s * on (target) group_left (model) group by (target, model) (llmprobe_requests_total%s))", s.target, s.full),
			legend: "probe in flight {{model}}"},
	))
	d.add(d.ts("KV-cache usage",
		"Fraction of the engine's KV cache in use, per server instance. Near 1 the engine preempts or queues requests.",
		"percentunit", 8, 8,
		q{expr: eitherEngine(func(e engine) string {
			return fmt.Sprintf("max by (model_name, instance) (%s%s)", e.kvUsage, serverSel)
		}), legend: "{{engine}} {{instance}}"},
	).Min(0).Max(1))
	d.add(d.ts("Prefix-cache hit ratio: engine vs probe",
		"The engine's prefix-cache hit ratio over all its traffic, next to the share of llmprobe's prompt tokens the server reported as cached.",
		"percentunit", 8, 8,
		q{expr: eitherEngine(func(e engine) string {
			if e.prefixGauge != "" {
				return fmt.Sprintf("avg by (model_name) (%s%s)", e.prefixGauge, serverSel)
			}
			return fmt.Sprintf("sum by (model_name) (rate(%s%s[%s]))\n/\nsum by (model_name) (rate(%s%s[%s]))",
				e.prefixHits, serverSel, rateWin, e.prefixQueries, serverSel, rateWin)
		}), legend: "{{engine}} {{model_name}}"},
		q{expr: fmt.Sprintf("sum by (model) (rate(llmprobe_cached_prompt_tokens_total%s[%s]))\n/\nsum by (model) (rate(llmprobe_prompt_tokens_total%s[%s]))",
			s.full, rateWin, s.full, rateWin), legend: "probe {{model}}"},
	).Min(0).Max(1))
	d.add(d.ts("Engine token throughput vs probe's share",
		"Prompt and generated tokens per second the engine processes (all traffic) next to llmprobe's. The probe's share says how much of the load is synthetic.",
		"short", 24, 8,
		q{expr: eitherEngine(func(e engine) string {
			return fmt.Sprintf("sum by (model_name) (rate(%s%s[%s]))", e.promptTokens, serverSel, rateWin)
		}), legend: "{{engine}} prompt {{model_name}}"},
		q{expr: eitherEngine(func(e engine) string {
			return fmt.Sprintf("sum by (model_name) (rate(%s%s[%s]))", e.genTokens, serverSel, rateWin)
		}), legend: "{{engine}} generated {{model_name}}"},
		q{expr: fmt.Sprintf("sum by (model) (rate(llmprobe_prompt_tokens_total%s[%s]))", s.full, rateWin), legend: "probe prompt {{model}}"},
		q{expr: fmt.Sprintf("sum by (model) (rate(llmprobe_output_tokens_total%s[%s]))", s.full, rateWin), legend: "probe output {{model}}"},
	).AxisLabel("tokens/s").OverrideByQuery("C", dashed()).OverrideByQuery("D", dashed()))

	d.row("GPU (dcgm-exporter)")
	gpuSel := braces(append(serverScope(cfg, false), fmt.Sprintf(`Hostname=~"$%s"`, VarGPUNode)))
	gpu := func(title, description, metric, unit string) {
		d.add(d.ts(title, description, unit, 6, 8,
			q{expr: fmt.Sprintf("max by (Hostname, gpu, modelName) (%s%s)", metric, gpuSel), legend: "{{Hostname}} GPU {{gpu}}"},
		))
	}
	gpu("GPU utilisation", "DCGM_FI_DEV_GPU_UTIL: percent of time a kernel was running. Coarse: 100% does not mean the SMs are busy.", "DCGM_FI_DEV_GPU_UTIL", "percent")
	gpu("SM active", "DCGM_FI_PROF_SM_ACTIVE: fraction of time at least one warp was resident on an SM, averaged over SMs. The better measure of compute saturation.", "DCGM_FI_PROF_SM_ACTIVE", "percentunit")
	gpu("Framebuffer used", "DCGM_FI_DEV_FB_USED: GPU memory in use (MiB). vLLM preallocates the KV cache, so this is flat while the engine runs.", "DCGM_FI_DEV_FB_USED", "mbytes")
	gpu("Power draw", "DCGM_FI_DEV_POWER_USAGE: board power in watts; tracks real work more closely than utilisation.", "DCGM_FI_DEV_POWER_USAGE", "watt")

	replicasRow(d, cfg, serverSel, gpuSel)
	costRow(d, cfg)
	otherEnginesRow(d, cfg)

	return d.build()
}
