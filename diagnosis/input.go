// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package diagnosis

import (
	"math"
	"time"
)

// Interval is what one read interval (the server_metrics interval, 15 s
// by default) saw, for one target or replica. Every figure is a scalar
// that merges over a window: a sum and a count ([Mean]), a counter's
// delta over the interval, or a gauge at the interval's end.
type Interval struct {
	// End is when the interval ended (the server's read). Intervals are
	// added in order of End.
	End time.Time
	// Probe is what the probe's own requests that ended in the interval
	// measured (warm-up excluded).
	Probe ProbeFigures
	// Server is what the engine said of itself over the interval; nil
	// when there is no server view (Why says why).
	Server *ServerFigures
	// Why says why Server is nil ("not read yet", "connection refused",
	// "no vLLM/SGLang/TGI/llama.cpp family", ...); shown in the unknown
	// verdict's sentence, so it must hold nothing secret.
	Why string
	// GPUUtil is the GPUs' utilization over the interval, 0–1 (dcgm's
	// DCGM_FI_DEV_GPU_UTIL / 100); nil when unknown.
	GPUUtil *float64
	// Saturated is the harness' verdict at the interval's end: when it
	// held, the probe's figures cannot be judged (harness wins).
	Saturated bool
	// Identity is the target's identity key at the interval's end (model
	// build, server version); a change from one non-empty key to another
	// is a deploy. Empty: not known yet (never a change).
	Identity string
	// ReuseIntent is the probe's intended prefix reuse: the share of its
	// prompt tokens it sends as a shared prefix (0 when none).
	ReuseIntent float64
}

// MaxProbeSample is how many of an interval's probe TTFT values the judge
// keeps for the window's p99 (the first ones): at 1 req/s an interval of
// 15 s has 15, and 8 intervals of the recent window then hold 120.
const MaxProbeSample = 64

// ProbeFigures are the probe's own requests that ended in one interval.
type ProbeFigures struct {
	// Requests is how many ended (successes and failures); Failed how many
	// of them failed.
	Requests, Failed int
	// TTFT is the time to first token, seconds, of every request that had
	// one.
	TTFT Mean
	// TTFTSample holds the interval's TTFT values, seconds, for the
	// window's p99 (evidence only); the judge keeps the first
	// MaxProbeSample.
	TTFTSample []float64
	// TPOT is the time per output token, seconds, of the successes with
	// at least two output tokens.
	TPOT Mean
	// PromptTokens and CachedTokens are the sums of the usage the server
	// reported for the probe's requests (prompt_tokens and
	// prompt_tokens_details.cached_tokens): their ratio is the probe's
	// observed prefix hit ratio.
	PromptTokens, CachedTokens float64
}

// ServerFigures are what the engine said of itself over one interval:
// the deltas of its histograms' sums and counts, its counters' deltas and
// its gauges at the read, for the target's model, summed over its engines
// and ranks. A figure the engine does not export is NaN (a gauge or a
// counter) or a Mean with Count 0 — absent, never zero.
type ServerFigures struct {
	// Engine names the engine ("vllm", "sglang", "tgi", "llamacpp").
	Engine string
	// TTFTIncludesQueue says the engine's TTFT runs from the request's
	// arrival, its queue time included (vLLM's
	// vllm:time_to_first_token_seconds, SGLang's); false for an engine
	// whose TTFT leaves the queue out (llm-d-inference-sim), whose queue
	// time the path gap then subtracts too, so queueing is never called
	// path.
	TTFTIncludesQueue bool
	// TTFT, Queue, Prefill, Decode and ITL are the deltas of the engine's
	// histograms' _sum and _count, seconds (vLLM:
	// time_to_first_token_seconds, request_queue_time_seconds,
	// request_prefill_time_seconds, request_decode_time_seconds,
	// inter_token_latency_seconds). vLLM observes queue, prefill and
	// decode when a request finishes, TTFT at its first token.
	TTFT, Queue, Prefill, Decode, ITL Mean
	// PromptLen is the delta of the prompt-length histogram's sum and
	// count, tokens (vllm:request_prompt_tokens).
	PromptLen Mean
	// Running, Waiting and KVUsage are gauges at the read
	// (vllm:num_requests_running, vllm:num_requests_waiting,
	// vllm:kv_cache_usage_perc, 0–1); NaN when not exported.
	Running, Waiting, KVUsage float64
	// Preemptions and Finished are counter deltas
	// (vllm:num_preemptions_total, vllm:request_success_total over every
	// finished_reason); NaN when not exported.
	Preemptions, Finished float64
	// PrefixHits and PrefixQueries are counter deltas, tokens
	// (vllm:prefix_cache_hits_total, vllm:prefix_cache_queries_total);
	// NaN when not exported.
	PrefixHits, PrefixQueries float64
}

// Mean is a sum and a count: a mean that merges over a window by adding.
// A Count of 0 is no figure.
type Mean struct{ Sum, Count float64 }

// Value is Sum/Count, NaN when Count is not positive.
func (m Mean) Value() float64 {
	if !(m.Count > 0) {
		return math.NaN()
	}
	return m.Sum / m.Count
}

// Plus is the mean of both.
func (m Mean) Plus(o Mean) Mean { return Mean{m.Sum + o.Sum, m.Count + o.Count} }

// maxFigure is the largest figure taken (a sum, a count, a gauge, a
// delta): beyond it a figure is absent, so that the window's sums of at
// most MaxRecent intervals and the history's cannot overflow to ±Inf.
// 1e12 is 30 000 years in seconds and a trillion requests or tokens in
// 15 s.
const maxFigure = 1e12

// clean is m when it is a figure (finite, sum and count not negative and
// at most maxFigure), else the empty Mean.
func (m Mean) clean() Mean {
	if !finite(m.Sum) || !finite(m.Count) || m.Sum < 0 || m.Count < 0 || m.Sum > maxFigure || m.Count > maxFigure {
		return Mean{}
	}
	return m
}

// finite reports whether v is neither NaN nor ±Inf.
func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// gauge is v when it is a figure (finite, not negative, at most
// maxFigure), else NaN.
func gauge(v float64) float64 {
	if !finite(v) || v < 0 || v > maxFigure {
		return math.NaN()
	}
	return v
}

// ratio is gauge(v) capped at 1: a ratio above 1 is not one.
func ratio(v float64) float64 {
	if v = gauge(v); v > 1 {
		return math.NaN()
	}
	return v
}
