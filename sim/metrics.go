// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// The simulator exposes vLLM's metric names so that dashboards and queries
// written for vLLM work against it. vLLM's names contain a colon, which
// Prometheus reserves for recording rules; that is vLLM's choice, kept here
// on purpose. `promtool check metrics` reports it ("metric names should not
// contain ':'"), and the test that runs promtool excepts exactly that
// finding for vllm: names.
//
// Bucket boundaries are vLLM's (vllm/v1/metrics/loggers.py): TTFT 22
// boundaries from 1 ms to 2560 s, inter-token latency the same 19 as
// time-per-output-token, request latencies 21 from 0.3 s to 7680 s, and
// token counts 1-2-5 steps up to max_model_len.

var (
	ttftBuckets = []float64{
		0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5,
		0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
	}
	itlBuckets = []float64{
		0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75,
		1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0,
	}
	requestLatencyBuckets = []float64{
		0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0,
		40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0,
	}
)

// buckets125 returns 1, 2, 5, 10, 20, 50, ... up to max (vLLM's
// build_1_2_5_buckets).
func buckets125(max int) []float64 {
	var b []float64
	for p := 1; ; p *= 10 {
		for _, m := range []int{1, 2, 5} {
			v := m * p
			if v > max {
				return b
			}
			b = append(b, float64(v))
		}
	}
}

// metrics holds one server's collectors, all in its own registry. vLLM's
// families are labelled as vLLM labels them: model_name (the first served
// model name) and engine (the engine core's index, "0": the simulator is
// one engine core). The simulator's own llmprobe_sim_* families carry
// model_name only.
type metrics struct {
	registry *prometheus.Registry

	prefixQueries    prometheus.Counter
	prefixHits       prometheus.Counter
	promptTokens     prometheus.Counter
	generationTokens prometheus.Counter
	preemptions      prometheus.Counter

	ttft          prometheus.Observer
	itl           prometheus.Observer
	e2e           prometheus.Observer
	queueTime     prometheus.Observer
	prefillTime   prometheus.Observer
	decodeTime    prometheus.Observer
	inferenceTime prometheus.Observer
	requestTPOT   prometheus.Observer
	reqPrompt     prometheus.Observer
	reqGeneration prometheus.Observer

	successStop   prometheus.Counter
	successLength prometheus.Counter
	faults        [numFaultKinds]prometheus.Counter
}

// engineIndex is the engine label of vLLM's families: the index of the
// engine core (data-parallel rank) that serves the request; the simulator
// is one engine core.
const engineIndex = "0"

func newMetrics(cfg *Config, e *engine) *metrics {
	model := cfg.Models[0]
	labels := prometheus.Labels{"model_name": model, "engine": engineIndex}
	simLabels := prometheus.Labels{"model_name": model}
	reg := prometheus.NewRegistry()
	m := &metrics{registry: reg}

	counter := func(name, help string) prometheus.Counter {
		c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: labels})
		reg.MustRegister(c)
		return c
	}
	histogram := func(name, help string, buckets []float64) prometheus.Observer {
		h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets, ConstLabels: labels})
		reg.MustRegister(h)
		return h
	}
	gaugeFunc := func(name, help string, f func() float64) {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: labels}, f))
	}
	simGaugeFunc := func(name, help string, f func() float64) {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: simLabels}, f))
	}

	gaugeFunc("vllm:num_requests_running", "Number of requests in model execution batches.",
		func() float64 { return float64(e.numRunning.Load()) })
	gaugeFunc("vllm:num_requests_waiting", "Number of requests waiting to be processed.",
		func() float64 { return float64(e.numWaiting.Load()) })
	gaugeFunc("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.",
		func() float64 { return float64(e.usedBlocks.Load()) / float64(cfg.NumKVBlocks) })

	simGaugeFunc("llmprobe_sim_timing_factor",
		"Factor the simulator's timing model is multiplied by now (timing_steps; 1 without them).",
		func() float64 { return e.timing.factorAt(time.Now()) })

	m.prefixQueries = counter("vllm:prefix_cache_queries_total", "Prefix cache queries, in terms of number of queried tokens.")
	m.prefixHits = counter("vllm:prefix_cache_hits_total", "Prefix cache hits, in terms of number of cached tokens.")
	m.promptTokens = counter("vllm:prompt_tokens_total", "Number of prefill tokens processed.")
	m.generationTokens = counter("vllm:generation_tokens_total", "Number of generation tokens processed.")
	m.preemptions = counter("vllm:num_preemptions_total", "Cumulative number of preemption from the engine.")

	m.ttft = histogram("vllm:time_to_first_token_seconds",
		"Histogram of time to first token in seconds.", ttftBuckets)
	m.itl = histogram("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", itlBuckets)
	m.e2e = histogram("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", requestLatencyBuckets)
	m.queueTime = histogram("vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.", requestLatencyBuckets)
	m.prefillTime = histogram("vllm:request_prefill_time_seconds", "Histogram of time spent in PREFILL phase for request.", requestLatencyBuckets)
	m.decodeTime = histogram("vllm:request_decode_time_seconds", "Histogram of time spent in DECODE phase for request.", requestLatencyBuckets)
	m.inferenceTime = histogram("vllm:request_inference_time_seconds", "Histogram of time spent in RUNNING phase for request.", requestLatencyBuckets)
	m.requestTPOT = histogram("vllm:request_time_per_output_token_seconds", "Histogram of time_per_output_token_seconds per request.", itlBuckets)
	m.reqPrompt = histogram("vllm:request_prompt_tokens", "Number of prefill tokens processed.", buckets125(cfg.MaxModelLen))
	m.reqGeneration = histogram("vllm:request_generation_tokens", "Number of generation tokens processed.", buckets125(cfg.MaxModelLen))

	success := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "vllm:request_success_total", Help: "Count of successfully processed requests.", ConstLabels: labels,
	}, []string{"finished_reason"})
	reg.MustRegister(success)
	m.successStop = success.WithLabelValues("stop")
	m.successLength = success.WithLabelValues("length")

	faults := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name:        "llmprobe_sim_faults_injected_total",
		Help:        "Faults injected by the simulator, by kind (configured at random or asked for with the X-Sim-Fault header).",
		ConstLabels: simLabels,
	}, []string{"fault"})
	reg.MustRegister(faults)
	for k := faultHTTP500; k < numFaultKinds; k++ {
		m.faults[k] = faults.WithLabelValues(k.String())
	}

	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return m
}

// observeFinished records what vLLM observes of a request when it
// finishes (vllm/v1/metrics/stats.py, update_from_finished_request), on
// the engine's instants: the queue time (queued → first scheduled), the
// prefill time (first scheduled → first token), the decode time (first
// token → last token), the inference time (first scheduled → last token)
// and the request's time per output token (decode time / (tokens − 1), 0
// for one token or none). An embedding (no output token) has a queue,
// prefill and inference time, and no decode time or time per output
// token. A request that never left the waiting queue is not observed.
func (m *metrics) observeFinished(s *seq) {
	if s.scheduledAt.IsZero() {
		return
	}
	m.queueTime.Observe(s.scheduledAt.Sub(s.queuedAt).Seconds())
	if s.firstTokenAt.IsZero() {
		return
	}
	m.prefillTime.Observe(s.firstTokenAt.Sub(s.scheduledAt).Seconds())
	m.inferenceTime.Observe(s.lastTokenAt.Sub(s.scheduledAt).Seconds())
	if s.maxTokens == 0 {
		return
	}
	decode := s.lastTokenAt.Sub(s.firstTokenAt).Seconds()
	m.decodeTime.Observe(decode)
	tpot := 0.0
	if s.generated > 1 {
		tpot = decode / float64(s.generated-1)
	}
	m.requestTPOT.Observe(tpot)
}
