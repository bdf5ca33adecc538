// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package dashboards_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/llmprobe/llmprobe/alerts"
	"github.com/llmprobe/llmprobe/dashboards"
	"github.com/llmprobe/llmprobe/internal/promtest"
)

// contractExposition is a registry exposing every llmprobe series of the
// metrics contract (docs/design.md) with the contract's
// names, types and labels, observed continuously while the test runs. It
// stands in for the daemon until the end-to-end test scrapes the real one;
// it lets this test prove that every panel query selects and joins the
// contract's series correctly.
type contractExposition struct {
	reg  *prometheus.Registry
	tick func(i int)
}

const (
	simTarget = "sim"
	simModel  = "meta-llama/Llama-3.1-8B-Instruct"
)

func newContractExposition() *contractExposition {
	reg := prometheus.NewRegistry()
	hist := func(name string, buckets []float64, labels ...string) *prometheus.HistogramVec {
		h := prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: name, Help: name, Buckets: buckets,
			NativeHistogramBucketFactor:     1.1,
			NativeHistogramMaxBucketNumber:  160,
			NativeHistogramMinResetDuration: time.Hour,
		}, labels)
		reg.MustRegister(h)
		return h
	}
	counter := func(name string, labels ...string) *prometheus.CounterVec {
		c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: name}, labels)
		reg.MustRegister(c)
		return c
	}
	gauge := func(name string, labels ...string) *prometheus.GaugeVec {
		g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: name}, labels)
		reg.MustRegister(g)
		return g
	}
	lat := prometheus.ExponentialBuckets(0.005, 2, 14)
	tmc := []string{"target", "model", "class"}
	ttft := hist("llmprobe_ttft_seconds", lat, tmc...)
	tpot := hist("llmprobe_tpot_seconds", lat, tmc...)
	itl := hist("llmprobe_itl_seconds", lat, tmc...)
	e2e := hist("llmprobe_e2e_seconds", lat, tmc...)
	ttfa := hist("llmprobe_ttfa_seconds", lat, tmc...)
	reasoningTok := counter("llmprobe_reasoning_tokens_total", tmc...)
	lag := hist("llmprobe_schedule_lag_seconds", lat, "target")
	wait := hist("llmprobe_client_wait_seconds", lat, "target")
	promptLen := hist("llmprobe_prompt_tokens", prometheus.ExponentialBuckets(16, 2, 10), "target", "class")
	outputLen := hist("llmprobe_output_tokens", prometheus.ExponentialBuckets(16, 2, 10), "target", "class")
	lenErr := hist("llmprobe_prompt_length_error_ratio", []float64{-0.1, -0.01, 0, 0.01, 0.1}, "target", "class")
	scheduled := counter("llmprobe_requests_scheduled_total", "target", "class")
	sent := counter("llmprobe_requests_sent_total", "target", "class")
	requests := counter("llmprobe_requests_total", "target", "model", "class", "outcome")
	dropped := counter("llmprobe_requests_dropped_total", "target", "reason")
	promptTok := counter("llmprobe_prompt_tokens_total", tmc...)
	outputTok := counter("llmprobe_output_tokens_total", tmc...)
	cachedTok := counter("llmprobe_cached_prompt_tokens_total", tmc...)
	estimated := counter("llmprobe_usage_estimated_total", tmc...)
	conversations := counter("llmprobe_conversations_total", "target", "class", "outcome")
	mismatch := counter("llmprobe_prompt_length_mismatch_total", "target", "class")
	inflight := gauge("llmprobe_inflight_requests", "target")
	rate := gauge("llmprobe_target_request_rate", "target")
	hitRatio := gauge("llmprobe_prefix_cache_hit_ratio", "target", "class")
	intent := gauge("llmprobe_prefix_reuse_target_ratio", "target", "class")
	saturated := gauge("llmprobe_harness_saturated", "target")
	reasons := gauge("llmprobe_harness_saturation_reason", "target", "reason")
	overloaded := gauge("llmprobe_target_overloaded", "target")
	inflation := gauge("llmprobe_harness_timestamp_inflation_seconds")
	sched := hist("llmprobe_harness_sched_latency_seconds", prometheus.ExponentialBuckets(1e-6, 10, 8))
	wake := hist("llmprobe_harness_wakeup_latency_seconds", prometheus.ExponentialBuckets(1e-6, 10, 8))
	runqueue := counter("llmprobe_harness_runqueue_wait_seconds_total")
	timeslices := counter("llmprobe_harness_timeslices_total")
	sloRequests := counter("llmprobe_slo_requests_total", "target", "class", "result")
	sloViolations := counter("llmprobe_slo_violations_total", "target", "class", "bound")
	sloObjective := gauge("llmprobe_slo_objective_ratio", "target", "class")
	sloWindow := gauge("llmprobe_slo_window_seconds", "target", "class")
	warmup := gauge("llmprobe_warmup", "target")
	reloadOK := gauge("llmprobe_config_last_reload_successful")
	reloadTS := gauge("llmprobe_config_last_reload_success_timestamp_seconds")
	build := gauge("llmprobe_build_info", "version", "revision", "goversion")
	finish := counter("llmprobe_finish_reasons_total", "target", "class", "reason")
	retries := counter("llmprobe_client_retries_total", "target")
	anomalies := counter("llmprobe_server_anomalies_total", "target", "kind")
	responses := counter("llmprobe_http_responses_total", "target", "code")
	throttled := counter("llmprobe_harness_cpu_throttled_seconds_total")
	spansExported := counter("llmprobe_trace_spans_exported_total")
	spansDropped := counter("llmprobe_trace_spans_dropped_total", "reason")
	traceQueue := gauge("llmprobe_trace_queue_spans")
	traceQueueCap := gauge("llmprobe_trace_queue_capacity_spans")
	refits := counter("llmprobe_workload_refits_total", "target", "result")
	refitTS := gauge("llmprobe_workload_refit_success_timestamp_seconds", "target")
	fitted := gauge("llmprobe_workload_fitted_tokens", "target", "kind", "percentile")
	identityChanges := counter("llmprobe_target_changes_total", "target", "what")
	regressed := gauge("llmprobe_regression", "target", "class", "metric")
	regEffect := gauge("llmprobe_regression_effect_ratio", "target", "class", "metric", "statistic")
	regErrors := gauge("llmprobe_regression_error_ratio", "target", "class", "window")
	regSamples := gauge("llmprobe_regression_samples", "target", "class", "metric", "window")
	// A discovery target's replicas (docs/design.md "Replicas"): r0 is
	// the vLLM pod the engine exposition and GPU 0 of the dcgm fixture
	// belong to, r1 and r2 are DNS replicas without a pod, r2 the slow one.
	tr := []string{"target", "replica"}
	repTTFT := hist("llmprobe_replica_ttft_seconds", lat, tr...)
	repTPOT := hist("llmprobe_replica_tpot_seconds", lat, tr...)
	repE2E := hist("llmprobe_replica_e2e_seconds", lat, tr...)
	repRequests := counter("llmprobe_replica_requests_total", "target", "replica", "outcome")
	repScheduled := counter("llmprobe_replica_scheduled_total", tr...)
	repSent := counter("llmprobe_replica_sent_total", tr...)
	repDropped := counter("llmprobe_replica_dropped_total", "target", "replica", "reason")
	repInfo := gauge("llmprobe_replica_info", "target", "replica", "address", "pod", "namespace", "node")
	repInflight := gauge("llmprobe_replica_inflight_requests", tr...)
	repRate := gauge("llmprobe_replica_requested_rate", tr...)
	repSaturated := gauge("llmprobe_replica_harness_saturated", tr...)
	repWarmup := gauge("llmprobe_replica_warmup", tr...)
	repRetired := gauge("llmprobe_replica_retired", tr...)
	tm := []string{"target", "mechanism"}
	discReplicas := gauge("llmprobe_discovery_replicas", tm...)
	discDiscovered := gauge("llmprobe_discovery_discovered_replicas", tm...)
	discOver := gauge("llmprobe_discovery_replicas_over_limit", tm...)
	discRefreshes := counter("llmprobe_discovery_refreshes_total", tm...)
	discFailures := counter("llmprobe_discovery_refresh_failures_total", tm...)
	discLast := gauge("llmprobe_discovery_last_success_timestamp_seconds", tm...)
	discChanges := counter("llmprobe_discovery_replica_changes_total", "target", "mechanism", "change")
	replicas := []struct{ name, address, pod, namespace, node string }{
		{engineLabels["pod"], "10.0.1.7:8000", engineLabels["pod"], engineLabels["namespace"], "gpu-node-1"},
		{"10.0.1.8:8000", "10.0.1.8:8000", "", "", ""},
		{"10.0.1.9:8000", "10.0.1.9:8000", "", "", ""},
	}
	for _, r := range replicas {
		repInfo.WithLabelValues(simTarget, r.name, r.address, r.pod, r.namespace, r.node).Set(1)
		for _, o := range []string{"success", "http_error", "timeout", "stream_error", "connect_error", "invalid_response"} {
			repRequests.WithLabelValues(simTarget, r.name, o)
		}
		repDropped.WithLabelValues(simTarget, r.name, "late")
		repRate.WithLabelValues(simTarget, r.name).Set(0.2)
		repSaturated.WithLabelValues(simTarget, r.name).Set(0)
		repWarmup.WithLabelValues(simTarget, r.name).Set(0)
		repRetired.WithLabelValues(simTarget, r.name).Set(0)
	}
	discReplicas.WithLabelValues(simTarget, "dns").Set(float64(len(replicas)))
	discDiscovered.WithLabelValues(simTarget, "dns").Set(float64(len(replicas)))
	discOver.WithLabelValues(simTarget, "dns").Set(0)
	discFailures.WithLabelValues(simTarget, "dns")
	discChanges.WithLabelValues(simTarget, "dns", "added").Add(float64(len(replicas)))
	discChanges.WithLabelValues(simTarget, "dns", "removed")
	replicaTick := func(i int) {
		for ri, r := range replicas {
			v := float64(i%10+1) / 100
			slow := 1.0
			if ri == 2 {
				slow = 3
			}
			repTTFT.WithLabelValues(simTarget, r.name).Observe((0.2 + v) * slow)
			repTPOT.WithLabelValues(simTarget, r.name).Observe(0.02 + v/10)
			repE2E.WithLabelValues(simTarget, r.name).Observe(2 + v)
			outcome := "success"
			if i%7 == ri {
				outcome = "timeout"
			}
			repRequests.WithLabelValues(simTarget, r.name, outcome).Inc()
			repScheduled.WithLabelValues(simTarget, r.name).Inc()
			repSent.WithLabelValues(simTarget, r.name).Inc()
			repInflight.WithLabelValues(simTarget, r.name).Set(float64(i % 3))
		}
		discRefreshes.WithLabelValues(simTarget, "dns").Inc()
		discLast.WithLabelValues(simTarget, "dns").SetToCurrentTime()
	}
	// llmprobe's own process, as the daemon registers it.
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	classes := []string{"chat", "agent"}
	// Every known label set starts at 0, as the contract requires.
	for _, c := range classes {
		for _, o := range []string{"success", "http_error", "timeout", "stream_error", "connect_error", "invalid_response"} {
			requests.WithLabelValues(simTarget, simModel, c, o)
		}
		for _, o := range []string{"completed", "failed"} {
			conversations.WithLabelValues(simTarget, c, o)
		}
		intent.WithLabelValues(simTarget, c).Set(0.4)
		for _, r := range []string{"good", "bad"} {
			sloRequests.WithLabelValues(simTarget, c, r)
		}
		for _, b := range []string{"ttft", "tpot", "e2e", "error"} {
			sloViolations.WithLabelValues(simTarget, c, b)
		}
		sloObjective.WithLabelValues(simTarget, c).Set(0.99)
		sloWindow.WithLabelValues(simTarget, c).Set((28 * 24 * time.Hour).Seconds())
		// The regression detector's series, as the daemon exports them
		// for every class from the start.
		for _, m := range []string{"ttft", "tpot", "e2e", "errors"} {
			regressed.WithLabelValues(simTarget, c, m)
			for _, w := range []string{"baseline", "current"} {
				regSamples.WithLabelValues(simTarget, c, m, w).Set(100)
			}
			if m != "errors" {
				regEffect.WithLabelValues(simTarget, c, m, "median").Set(1.02)
				regEffect.WithLabelValues(simTarget, c, m, "p99").Set(1.1)
			}
		}
		regErrors.WithLabelValues(simTarget, c, "baseline").Set(0.01)
		regErrors.WithLabelValues(simTarget, c, "current").Set(0.01)
	}
	for _, r := range []string{"inflight_limit", "late", "shutdown"} {
		dropped.WithLabelValues(simTarget, r)
	}
	rate.WithLabelValues(simTarget).Set(10)
	saturated.WithLabelValues(simTarget).Set(0)
	for _, r := range []string{"late_sends", "late_drops", "wakeup_latency", "sched_latency", "cpu_contention", "cpu_throttled"} {
		reasons.WithLabelValues(simTarget, r).Set(0)
	}
	overloaded.WithLabelValues(simTarget).Set(0)
	inflation.WithLabelValues().Set(0.0002)
	warmup.WithLabelValues(simTarget).Set(0)
	reloadOK.WithLabelValues().Set(1)
	reloadTS.WithLabelValues().SetToCurrentTime()
	build.WithLabelValues("test", "abc", "go1.26").Set(1)
	retries.WithLabelValues(simTarget)
	anomalies.WithLabelValues(simTarget, "cached_exceeds_prompt")
	throttled.WithLabelValues()
	spansDropped.WithLabelValues("queue_full")
	spansDropped.WithLabelValues("export_failed")
	traceQueueCap.WithLabelValues().Set(2048)
	refitTS.WithLabelValues(simTarget).SetToCurrentTime()
	for _, w := range []string{"model", "fingerprint", "server", "version"} {
		identityChanges.WithLabelValues(simTarget, w)
	}
	for _, k := range []string{"prompt", "output"} {
		for _, pc := range []string{"p50", "p99"} {
			fitted.WithLabelValues(simTarget, k, pc).Set(100)
		}
	}

	observe := func(h *prometheus.HistogramVec, v float64, trace string, lv ...string) {
		h.WithLabelValues(lv...).(prometheus.ExemplarObserver).ObserveWithExemplar(v, prometheus.Labels{"trace_id": trace})
	}
	tick := func(i int) {
		replicaTick(i)
		for ci, c := range classes {
			trace := fmt.Sprintf("%032x", i*2+ci+1)
			v := float64(i%10+1) / 100
			observe(ttft, 0.2+v, trace, simTarget, simModel, c)
			observe(tpot, 0.02+v/10, trace, simTarget, simModel, c)
			observe(itl, 0.02+v/10, trace, simTarget, simModel, c)
			observe(e2e, 2+v, trace, simTarget, simModel, c)
			observe(ttfa, 0.6+v, trace, simTarget, simModel, c)
			reasoningTok.WithLabelValues(simTarget, simModel, c).Add(60)
			lag.WithLabelValues(simTarget).Observe(0.001 + v/100)
			wait.WithLabelValues(simTarget).Observe(0.0005)
			promptLen.WithLabelValues(simTarget, c).Observe(float64(100 + i%50))
			outputLen.WithLabelValues(simTarget, c).Observe(float64(150 + i%70))
			lenErr.WithLabelValues(simTarget, c).Observe(0.005)
			scheduled.WithLabelValues(simTarget, c).Inc()
			sent.WithLabelValues(simTarget, c).Inc()
			outcome := "success"
			if i%7 == 0 {
				outcome = "http_error"
			}
			requests.WithLabelValues(simTarget, simModel, c, outcome).Inc()
			// SLO: a failed request is bad (bound error), so is every
			// fifth one, too slow to first token (and every tenth, end to end).
			switch {
			case outcome != "success":
				sloRequests.WithLabelValues(simTarget, c, "bad").Inc()
				sloViolations.WithLabelValues(simTarget, c, "error").Inc()
			case i%5 == 0:
				sloRequests.WithLabelValues(simTarget, c, "bad").Inc()
				sloViolations.WithLabelValues(simTarget, c, "ttft").Inc()
				if i%10 == 0 {
					sloViolations.WithLabelValues(simTarget, c, "e2e").Inc()
				}
			default:
				sloRequests.WithLabelValues(simTarget, c, "good").Inc()
			}
			promptTok.WithLabelValues(simTarget, simModel, c).Add(120)
			outputTok.WithLabelValues(simTarget, simModel, c).Add(180)
			cachedTok.WithLabelValues(simTarget, simModel, c).Add(48)
			if i%5 == 0 {
				estimated.WithLabelValues(simTarget, simModel, c).Inc()
				mismatch.WithLabelValues(simTarget, c).Inc()
				conversations.WithLabelValues(simTarget, c, "completed").Inc()
			}
			hitRatio.WithLabelValues(simTarget, c).Set(0.4)
		}
		if i%9 == 0 {
			dropped.WithLabelValues(simTarget, "inflight_limit").Inc()
		}
		inflight.WithLabelValues(simTarget).Set(float64(i % 4))
		sched.WithLabelValues().Observe(2e-5 * float64(1+i%5))
		wake.WithLabelValues().Observe(1e-4 * float64(1+i%3))
		runqueue.WithLabelValues().Add(0.001)
		timeslices.WithLabelValues().Add(50)
		for _, c := range classes {
			reason := "stop"
			if i%6 == 0 {
				reason = "length"
			}
			finish.WithLabelValues(simTarget, c, reason).Inc()
			code := "2xx"
			if i%7 == 0 {
				code = "503"
			}
			responses.WithLabelValues(simTarget, code).Inc()
		}
		if i%11 == 0 {
			retries.WithLabelValues(simTarget).Inc()
			anomalies.WithLabelValues(simTarget, "cached_exceeds_prompt").Inc()
			throttled.WithLabelValues().Add(0.002)
			spansDropped.WithLabelValues("queue_full").Inc()
		}
		spansExported.WithLabelValues().Add(2)
		traceQueue.WithLabelValues().Set(float64(i % 20))
		if i%50 == 0 {
			refits.WithLabelValues(simTarget, "success").Inc()
			refitTS.WithLabelValues(simTarget).SetToCurrentTime()
		}
		// What the annotations mark: a reload every 5s, and a few
		// seconds of every 10 with a failed reload, warm-up and harness
		// saturation.
		if i%50 == 0 {
			reloadTS.WithLabelValues().SetToCurrentTime()
		}
		if i%50 == 25 { // a new build every 5s
			identityChanges.WithLabelValues(simTarget, "fingerprint").Inc()
		}
		flag := 0.0
		if i%100 < 30 {
			flag = 1
		}
		reloadOK.WithLabelValues().Set(1 - flag)
		warmup.WithLabelValues(simTarget).Set(flag)
		saturated.WithLabelValues(simTarget).Set(flag)
	}
	return &contractExposition{reg: reg, tick: tick}
}

// vllmExposition exposes the vLLM metric names the simulator serves
// (classic histograms, model_name label), observed continuously.
func vllmExposition() (*prometheus.Registry, func(i int)) {
	reg := prometheus.NewRegistry()
	lb := []string{"model_name"}
	hist := func(name string) *prometheus.HistogramVec {
		h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: name, Buckets: prometheus.ExponentialBuckets(0.001, 2, 16)}, lb)
		reg.MustRegister(h)
		return h
	}
	counter := func(name string) *prometheus.CounterVec {
		c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: name}, lb)
		reg.MustRegister(c)
		return c
	}
	gauge := func(name string) *prometheus.GaugeVec {
		g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: name}, lb)
		reg.MustRegister(g)
		return g
	}
	ttft, itl, e2e := hist("vllm:time_to_first_token_seconds"), hist("vllm:inter_token_latency_seconds"), hist("vllm:e2e_request_latency_seconds")
	queries, hits := counter("vllm:prefix_cache_queries_total"), counter("vllm:prefix_cache_hits_total")
	prompt, gen := counter("vllm:prompt_tokens_total"), counter("vllm:generation_tokens_total")
	running, waiting, kv := gauge("vllm:num_requests_running"), gauge("vllm:num_requests_waiting"), gauge("vllm:kv_cache_usage_perc")
	reqPrompt, reqGen := hist("vllm:request_prompt_tokens"), hist("vllm:request_generation_tokens")
	return reg, func(i int) {
		v := float64(i%10+1) / 100
		ttft.WithLabelValues(simModel).Observe(0.1 + v)
		itl.WithLabelValues(simModel).Observe(0.015 + v/10)
		e2e.WithLabelValues(simModel).Observe(1.8 + v)
		reqPrompt.WithLabelValues(simModel).Observe(120)
		reqGen.WithLabelValues(simModel).Observe(180)
		queries.WithLabelValues(simModel).Add(240)
		hits.WithLabelValues(simModel).Add(96)
		prompt.WithLabelValues(simModel).Add(240)
		gen.WithLabelValues(simModel).Add(360)
		running.WithLabelValues(simModel).Set(float64(2 + i%3))
		waiting.WithLabelValues(simModel).Set(float64(i % 2))
		kv.WithLabelValues(simModel).Set(0.3)
	}
}

// engineLabels are the Kubernetes labels the scrape of the vLLM pod
// carries: those of the pod dashboards/testdata/dcgm-exporter.prom maps GPU
// 0 to, so the energy and cost rules join the two.
var engineLabels = map[string]string{"namespace": "llm-serving", "pod": "vllm-llama-8b-6d9f7c5b8-x2k4q"}

// tgiExposition exposes the TGI metric names servermetrics/servermetrics.go
// reads (classic histograms, no model label), observed continuously.
func tgiExposition() (*prometheus.Registry, func(i int)) {
	reg := prometheus.NewRegistry()
	hist := func(name string, buckets []float64) prometheus.Histogram {
		h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: name, Buckets: buckets})
		reg.MustRegister(h)
		return h
	}
	gauge := func(name string) prometheus.Gauge {
		g := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: name})
		reg.MustRegister(g)
		return g
	}
	secs := prometheus.ExponentialBuckets(0.001, 2, 16)
	toks := prometheus.ExponentialBuckets(1, 2, 14)
	duration, queue, perToken := hist("tgi_request_duration", secs), hist("tgi_request_queue_duration", secs), hist("tgi_request_mean_time_per_token_duration", secs)
	input, generated := hist("tgi_request_input_length", toks), hist("tgi_request_generated_tokens", toks)
	batch, queued := gauge("tgi_batch_current_size"), gauge("tgi_queue_size")
	return reg, func(i int) {
		v := float64(i%10+1) / 100
		duration.Observe(1.5 + v)
		queue.Observe(0.05 + v)
		perToken.Observe(0.02 + v/10)
		input.Observe(200)
		generated.Observe(120)
		batch.Set(float64(3 + i%2))
		queued.Set(float64(i % 3))
	}
}

// llamacppExposition exposes the llama.cpp server's metric names (no
// model label), observed continuously.
func llamacppExposition() (*prometheus.Registry, func(i int)) {
	reg := prometheus.NewRegistry()
	prompt := prometheus.NewCounter(prometheus.CounterOpts{Name: "llamacpp:prompt_tokens_total", Help: "prompt"})
	predicted := prometheus.NewCounter(prometheus.CounterOpts{Name: "llamacpp:tokens_predicted_total", Help: "predicted"})
	processing := prometheus.NewGauge(prometheus.GaugeOpts{Name: "llamacpp:requests_processing", Help: "processing"})
	deferred := prometheus.NewGauge(prometheus.GaugeOpts{Name: "llamacpp:requests_deferred", Help: "deferred"})
	reg.MustRegister(prompt, predicted, processing, deferred)
	return reg, func(i int) {
		prompt.Add(150)
		predicted.Add(40)
		processing.Set(float64(1 + i%2))
		deferred.Set(float64(i % 2))
	}
}

// TestPanelsReturnData starts a real Prometheus (native histograms,
// exemplar storage, the mixin's rule file) scraping a contract-conformant
// llmprobe exposition, the vLLM metric names and the recorded dcgm-exporter
// exposition, and asserts that every variable lists the scraped values,
// every panel query of both dashboards returns a finite value (only the
// week-ago queries cannot), every annotation query marks something, and
// every exemplar-enabled query returns exemplars carrying a trace_id.
//
// TGI and llama.cpp expositions are scraped too, and the vLLM one with the
// namespace and pod labels of the pod the fixture's GPU 0 runs, so the
// energy and GPU time per token rules join them.
//
// It runs for the committed dashboards and rules, and for a mixin
// generated for a different setup: llmprobe scraped as job="probe" with
// cluster and namespace target labels, rules grouped by cluster, a GPU
// price (so the cost per million tokens is recorded and shown).
func TestPanelsReturnData(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Prometheus")
	}
	t.Run("default", func(t *testing.T) {
		t.Parallel()
		checkPanels(t, alerts.DefaultConfig(), "llmprobe", nil, map[string][]string{
			"job": {"llmprobe"}, "cluster": nil, "namespace": nil,
		})
	})
	t.Run("job probe, cluster label", func(t *testing.T) {
		t.Parallel()
		cfg := alerts.DefaultConfig()
		cfg.Selector = `job="probe", cluster="eu1"`
		cfg.GroupLabels = []string{"cluster"}
		cfg.Cost.GPUPricePerHour = 2.5
		checkPanels(t, cfg, "probe", map[string]string{"cluster": "eu1", "namespace": "monitoring"}, map[string][]string{
			"job": {"probe"}, "cluster": {"eu1"}, "namespace": {"monitoring"},
		})
	})
}

// checkPanels runs the check of TestPanelsReturnData for the mixin
// generated from cfg, with llmprobe's exposition scraped as job with
// labels. wantVars are the values scope variables must list (instance
// is checked to list the exposition's address).
func checkPanels(t *testing.T, cfg alerts.Config, job string, labels map[string]string, wantVars map[string][]string) {
	probe := newContractExposition()
	vreg, vtick := vllmExposition()
	treg, ttick := tgiExposition()
	lreg, ltick := llamacppExposition()
	dcgm, err := os.ReadFile(filepath.Join("testdata", "dcgm-exporter.prom"))
	if err != nil {
		t.Fatal(err)
	}
	probeSrv := httptest.NewServer(promhttp.HandlerFor(probe.reg, promhttp.HandlerOpts{EnableOpenMetrics: true}))
	defer probeSrv.Close()
	vllmSrv := httptest.NewServer(promhttp.HandlerFor(vreg, promhttp.HandlerOpts{}))
	defer vllmSrv.Close()
	tgiSrv := httptest.NewServer(promhttp.HandlerFor(treg, promhttp.HandlerOpts{}))
	defer tgiSrv.Close()
	llamacppSrv := httptest.NewServer(promhttp.HandlerFor(lreg, promhttp.HandlerOpts{}))
	defer llamacppSrv.Close()
	dcgmSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		_, _ = w.Write(dcgm)
	}))
	defer dcgmSrv.Close()

	// Observe every 100ms for as long as the test runs (bounded by it).
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tk := time.NewTicker(100 * time.Millisecond)
		defer tk.Stop()
		for i := 0; ; i++ {
			probe.tick(i)
			vtick(i)
			ttick(i)
			ltick(i)
			select {
			case <-stop:
				return
			case <-tk.C:
			}
		}
	}()
	defer func() { close(stop); wg.Wait() }()

	rules, err := cfg.RulesYAML()
	if err != nil {
		t.Fatal(err)
	}
	rulesPath := filepath.Join(t.TempDir(), "llmprobe.rules.yml")
	if err := os.WriteFile(rulesPath, rules, 0o644); err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	prom := promtest.Start(t, promtest.Options{
		Targets: []promtest.ScrapeTarget{
			{JobName: job, Address: probeSrv.Listener.Addr().String(), Labels: labels},
			{JobName: "vllm", Address: vllmSrv.Listener.Addr().String(), Labels: engineLabels},
			{JobName: "tgi", Address: tgiSrv.Listener.Addr().String()},
			{JobName: "llamacpp", Address: llamacppSrv.Listener.Addr().String()},
			{JobName: "dcgm", Address: dcgmSrv.Listener.Addr().String()},
		},
		ScrapeInterval: time.Second,
		RuleFiles:      []string{rulesPath},
	})

	vars := dashboards.DefaultVarsFor(cfg)
	vars["__rate_interval"] = "10s"
	vars["__range"] = "30s"
	vars["target"] = simTarget
	vars["model"] = strings.ReplaceAll(simModel, ".", `\\.`)
	vars["server_job"] = "(vllm|tgi|llamacpp)"
	vars["gpu_node"] = "gpu-node-1"
	for name, values := range wantVars {
		if len(values) == 1 {
			vars[name] = values[0]
		}
	}
	wantVars["instance"] = []string{probeSrv.Listener.Addr().String()}

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	checkScopeVariables(ctx, t, prom, cfg, vars, wantVars)

	queries, err := dashboards.QueriesFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	checked, annotations := 0, 0
	for _, q := range queries {
		if q.Needs().History {
			continue
		}
		expr, err := q.Expand(vars)
		if err != nil {
			t.Fatal(err)
		}
		if q.Annotation {
			// An annotation marks moments: it must have had data at some
			// instant since Prometheus started, not necessarily now.
			if err := waitRange(ctx, prom, expr, started); err != nil {
				t.Errorf("%s / %s never marked anything: %v\n%s", q.Dashboard, q.Panel, err, expr)
				continue
			}
			annotations++
			continue
		}
		res, err := prom.WaitFor(ctx, expr, (*promtest.Result).HasFinite)
		if err != nil {
			t.Errorf("%s / %s / %s returned no data: %v\n%s", q.Dashboard, q.Panel, q.RefID, err, expr)
			continue
		}
		checked++
		checkReplicaPanel(t, cfg, q, res)
		if q.Exemplar {
			ex, err := prom.QueryExemplars(ctx, expr, time.Now().Add(-5*time.Minute), time.Now())
			if err != nil {
				t.Errorf("%s / %s: query_exemplars: %v", q.Dashboard, q.Panel, err)
				continue
			}
			found := false
			for _, s := range ex {
				for _, e := range s.Exemplars {
					if len(e.Labels["trace_id"]) == 32 {
						found = true
					}
				}
			}
			if !found {
				t.Errorf("%s / %s: no exemplar with a trace_id for %s", q.Dashboard, q.Panel, expr)
			}
		}
	}
	t.Logf("%d panel queries returned data, %d annotation queries marked something", checked, annotations)
	if checked < 60 {
		t.Errorf("checked %d queries, expected 60+", checked)
	}
	if annotations < 8 {
		t.Errorf("checked %d annotation queries, expected 8 (4 on each dashboard)", annotations)
	}
}

// waitRange polls a range query over [since, now] until it holds a finite
// sample.
func waitRange(ctx context.Context, prom *promtest.Server, expr string, since time.Time) error {
	for {
		res, err := prom.QueryRange(ctx, expr, since, time.Now(), time.Second)
		if err == nil && res.HasFinite() {
			return nil
		}
		select {
		case <-ctx.Done():
			if err == nil {
				err = ctx.Err()
			}
			return err
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// checkScopeVariables checks that every scope variable of the overview
// (job, cluster, ... from cfg.DashboardVariables) lists want's values, as
// Grafana's label_values would (series without the label list nothing).
func checkScopeVariables(ctx context.Context, t *testing.T, prom *promtest.Server, cfg alerts.Config, vars dashboards.Vars, want map[string][]string) {
	d, err := dashboards.Overview(cfg)
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, v := range d.Templating.List {
		if !slices.Contains(cfg.DashboardVariables, v.Name) {
			continue
		}
		expected, ok := want[v.Name]
		if !ok {
			t.Errorf("variable %s: no expected values", v.Name)
			continue
		}
		m := labelValues.FindStringSubmatch(*v.Query.String)
		if m == nil {
			t.Errorf("variable %s: %q is not label_values(selector, label)", v.Name, *v.Query.String)
			continue
		}
		sel, err := dashboards.Expand(m[1], vars)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		_, err = prom.WaitFor(ctx, fmt.Sprintf("count by (%s) (%s)", m[2], sel), func(r *promtest.Result) bool {
			got = got[:0]
			for _, s := range r.Vector {
				if l := s.Metric[m[2]]; l != "" {
					got = append(got, l)
				}
			}
			slices.Sort(got)
			return len(r.Vector) > 0 && slices.Equal(got, expected)
		})
		if err != nil {
			t.Errorf("variable %s (%s) lists %q, want %q", v.Name, *v.Query.String, got, expected)
		}
		checked++
	}
	if checked != len(cfg.DashboardVariables) {
		t.Errorf("checked %d scope variables, the config has %d", checked, len(cfg.DashboardVariables))
	}
}

// checkReplicaPanel checks what the replicas row shows of the exposition's
// three replicas: the engine and GPU series join to the one replica whose
// pod they belong to (never to the DNS replicas without one), and the
// outlier ratio singles out the slow replica (3× the others' TTFT) above
// the alert's factor.
func checkReplicaPanel(t *testing.T, cfg alerts.Config, q dashboards.Query, res *promtest.Result) {
	t.Helper()
	if !strings.Contains(q.Panel, "per replica (vLLM)") && !strings.Contains(q.Panel, "per replica (DCGM)") && q.Panel != "Outlier ratio now" {
		return
	}
	var samples []promtest.Sample
	samples = append(samples, res.Vector...)
	for _, s := range res.Matrix {
		samples = append(samples, promtest.Sample{Metric: s.Metric})
	}
	if q.Panel != "Outlier ratio now" {
		for _, s := range samples {
			if s.Metric["replica"] != engineLabels["pod"] {
				t.Errorf("%s / %s: series %v joined to replica %q, want only %q", q.Panel, q.RefID, s.Metric, s.Metric["replica"], engineLabels["pod"])
			}
		}
		return
	}
	ratios := map[string]float64{}
	for _, s := range res.Vector {
		ratios[s.Metric["replica"]] = s.Value
	}
	if len(ratios) != 3 || ratios["10.0.1.9:8000"] <= cfg.ReplicaOutlier.Factor || ratios[engineLabels["pod"]] > 1.2 || ratios["10.0.1.8:8000"] > 1.2 {
		t.Errorf("%s: ratios %v, want the slow replica 10.0.1.9:8000 above %g and the others near 1", q.Panel, ratios, cfg.ReplicaOutlier.Factor)
	}
}
