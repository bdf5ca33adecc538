// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// vllmLabels are the labels of every vllm: series but
// vllm:request_success_total's and vllm:lora_requests_info's.
const vllmLabels = `{engine="0",model_name="sim-model"}`

// counterValue reads a counter.
func counterValue(c prometheus.Counter) float64 { return testutil.ToFloat64(c) }

// series returns name written with vLLM's labels.
func series(name string) string { return name + vllmLabels }

func TestVLLMFamiliesLabelled(t *testing.T) {
	base, s := startSim(t, zeroConfig())
	exerciseMetrics(t, base)
	mfs, err := s.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, mf := range mfs {
		name := mf.GetName()
		if !strings.HasPrefix(name, "vllm:") {
			continue
		}
		seen[name] = true
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["engine"] != "0" || labels["model_name"] != "sim-model" {
				t.Errorf("%s has labels %v, want engine=\"0\" and model_name=\"sim-model\"", name, labels)
			}
		}
	}
	for _, want := range []string{
		"vllm:request_queue_time_seconds", "vllm:request_prefill_time_seconds", "vllm:request_decode_time_seconds",
		"vllm:request_inference_time_seconds", "vllm:request_time_per_output_token_seconds", "vllm:num_preemptions_total",
		"vllm:time_to_first_token_seconds", "vllm:inter_token_latency_seconds", "vllm:e2e_request_latency_seconds",
	} {
		if !seen[want] {
			t.Errorf("%s not exposed", want)
		}
	}
}

// TestFinishedRequestIntervals checks vLLM's intervals on the engine's
// instants: inference = prefill + decode, the request's time per output
// token = decode / (tokens − 1), queue + prefill within the TTFT, all
// observed once per finished request; and that a response sent whole has
// its inter-token latencies observed by the engine.
func TestFinishedRequestIntervals(t *testing.T) {
	cfg := DefaultConfig()
	cfg.EOSProbability = 0
	cfg.MaxNumSeqs = 1 // the requests queue behind each other
	cfg.PrefillBase = 2 * time.Millisecond
	cfg.PrefillPerToken = 100 * time.Microsecond
	cfg.DecodeBase = 3 * time.Millisecond
	cfg.DecodePerSeq = 0
	base, _ := startSim(t, cfg)
	url := base + "/v1/completions"
	const tokens = 10
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := completionBody(strings.Repeat("interval words ", 5+i), tokens)
			if i == 3 {
				body["stream"] = false
				delete(body, "stream_options")
				resp := post(t, url, body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					t.Errorf("non-streamed request: status %d", resp.StatusCode)
				}
				return
			}
			if r := stream(t, url, body); !r.done || len(r.tokens) != tokens {
				t.Errorf("stream: done %v, %d tokens", r.done, len(r.tokens))
			}
		}()
	}
	wg.Wait()
	m := scrape(t, base)
	v := func(name string) float64 { return metricValue(t, m, series(name)) }
	for _, h := range []string{"request_queue_time", "request_prefill_time", "request_decode_time", "request_inference_time", "request_time_per_output_token", "e2e_request_latency", "time_to_first_token"} {
		if n := v("vllm:" + h + "_seconds_count"); n != 4 {
			t.Errorf("vllm:%s_seconds_count = %v, want 4 (once per finished request)", h, n)
		}
	}
	queue, prefill := v("vllm:request_queue_time_seconds_sum"), v("vllm:request_prefill_time_seconds_sum")
	decode, inference := v("vllm:request_decode_time_seconds_sum"), v("vllm:request_inference_time_seconds_sum")
	tpot, ttft := v("vllm:request_time_per_output_token_seconds_sum"), v("vllm:time_to_first_token_seconds_sum")
	if math.Abs(inference-(prefill+decode)) > 1e-9 {
		t.Errorf("inference %v ≠ prefill %v + decode %v", inference, prefill, decode)
	}
	if math.Abs(tpot-decode/(tokens-1)) > 1e-9 {
		t.Errorf("time per output token sum %v, want decode %v / %d", tpot, decode, tokens-1)
	}
	if decode <= 0 || prefill <= 0 {
		t.Errorf("decode %v, prefill %v: want both > 0", decode, prefill)
	}
	// TTFT runs from the handler's arrival to the first flush, around
	// the engine's queue and prefill; the difference is parsing and the
	// handler's wake-up (a generous bound: a loaded machine).
	if gap := ttft - (queue + prefill); gap < 0 || gap > 4*0.25 {
		t.Errorf("TTFT %v − (queue %v + prefill %v) = %v, want in [0, 1s]", ttft, queue, prefill, gap)
	}
	// With one sequence at a time, three of the four waited.
	if queue <= 0 {
		t.Errorf("queue time sum %v, want > 0 (max_num_seqs 1)", queue)
	}
	// 3 streams timed at their flushes, one whole response by the engine.
	if n := v("vllm:inter_token_latency_seconds_count"); n != 4*(tokens-1) {
		t.Errorf("vllm:inter_token_latency_seconds_count = %v, want %d", n, 4*(tokens-1))
	}
	if n := v("vllm:num_preemptions_total"); n != 0 {
		t.Errorf("vllm:num_preemptions_total = %v under kv_allocation reserve", n)
	}
}

// testSeq is a sequence submitted straight to an engine: prompt tokens
// of ids derived from id, max tokens generated without early stop.
func testSeq(id, prompt, maxTokens, blockSize int) *seq {
	s := &seq{promptTokens: prompt, maxTokens: maxTokens, ignoreEOS: true, seed: uint64(id), notify: make(chan struct{}, 1)}
	s.hasher = newBlockHasher(blockSize, nil)
	for i := 0; i < prompt; i++ {
		s.hasher.add((id*7919 + i) % VocabSize)
	}
	s.queuedAt = time.Now()
	return s
}

// waitSeq waits until the engine publishes the end of s.
func waitSeq(t *testing.T, s *seq) (generated, finish int) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		if g, f := s.load(); f != finishNone {
			return g, f
		}
		select {
		case <-s.notify:
		case <-deadline:
			t.Fatal("sequence did not finish")
		}
	}
}

// TestPreemptionRecompute runs three sequences that together outgrow
// the KV cache under kv_allocation on_demand, submitted before the
// engine starts so that the run is the same every time: the most
// recently admitted is preempted, never the first; every sequence ends
// with all its tokens; the counters count each prompt once and every
// preemption; the cache is whole again at the end.
func TestPreemptionRecompute(t *testing.T) {
	cfg := zeroConfig()
	cfg.KVAllocation = KVAllocationOnDemand
	cfg.BlockSize = 4
	cfg.MaxModelLen = 64
	cfg.NumKVBlocks = 16 // one 64-token sequence; three of 48 need 36
	e := newEngine(&cfg, nil, time.Now())
	e.metrics = newMetrics(&cfg, e)
	seqs := []*seq{testSeq(1, 8, 40, 4), testSeq(2, 8, 40, 4), testSeq(3, 8, 40, 4)}
	for _, s := range seqs {
		e.numWaiting.Add(1)
		e.submitCh <- s
	}
	e.start()
	defer e.stop()
	for i, s := range seqs {
		if g, f := waitSeq(t, s); g != 40 || f != finishLength {
			t.Errorf("sequence %d: %d tokens, finish %d; want 40, length", i, g, f)
		}
	}
	e.stop()
	if seqs[0].preemptions != 0 {
		t.Errorf("the first admitted was preempted %d times", seqs[0].preemptions)
	}
	if seqs[2].preemptions == 0 {
		t.Error("the last admitted was never preempted")
	}
	total := 0
	for _, s := range seqs {
		total += s.preemptions
		if s.cachedTokens != 0 {
			t.Errorf("cached tokens %d: a recomputation's hit counted as the request's", s.cachedTokens)
		}
	}
	m := e.metrics
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"vllm:num_preemptions_total", counterValue(m.preemptions), float64(total)},
		{"vllm:prompt_tokens_total", counterValue(m.promptTokens), 24},
		{"vllm:prefix_cache_queries_total", counterValue(m.prefixQueries), 24},
		{"vllm:generation_tokens_total", counterValue(m.generationTokens), 120},
	} {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	c := e.cache
	if c.used != 0 || c.blank+c.lruLen != c.total || e.usedBlocks.Load() != 0 || e.numWaiting.Load() != 0 {
		t.Errorf("after the run: %d blocks used, %d blank + %d cached of %d, gauge %d, %d waiting",
			c.used, c.blank, c.lruLen, c.total, e.usedBlocks.Load(), e.numWaiting.Load())
	}
}

// TestPreemptedStreamsComplete: requests preempted mid-stream under
// kv_allocation on_demand still stream all their tokens, the same words
// as without preemption, with their usage; the KV usage gauge stays in
// [0, 1] and returns to 0.
func TestPreemptedStreamsComplete(t *testing.T) {
	cfg := DefaultConfig()
	cfg.EOSProbability = 0
	cfg.KVAllocation = KVAllocationOnDemand
	cfg.MaxModelLen = 256
	cfg.NumKVBlocks = 16 // 256 tokens; two 200-token sequences need 26 blocks
	cfg.PrefillBase, cfg.PrefillPerToken = time.Millisecond, 0
	cfg.DecodeBase, cfg.DecodePerSeq = 2*time.Millisecond, 0
	base, _ := startSim(t, cfg)
	refBase, _ := startSim(t, zeroConfig())
	url := base + "/v1/completions"
	body := func(i int) map[string]any {
		return completionBody(strings.Repeat("preempt ", i+1), 200, "temperature", 0, "ignore_eos", true)
	}

	results := make([]*streamResult, 3)
	var wg sync.WaitGroup
	run := func(i int) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = stream(t, url, body(i))
		}()
	}
	run(0)
	// The others arrive while the first runs (200 steps of 2 ms), so
	// together they outgrow the cache.
	waitForMetric(t, base, series("vllm:num_requests_running"), 1)
	run(1)
	run(2)
	wg.Wait()
	for i, r := range results {
		ref := stream(t, refBase+"/v1/completions", body(i))
		if !r.done || len(r.tokens) != 200 || r.text() != ref.text() || r.usage == nil || r.usage.CompletionTokens != 200 || r.usage.PromptTokens != ref.usage.PromptTokens {
			t.Errorf("request %d: done %v, %d tokens, usage %+v; same words as unpreempted: %v", i, r.done, len(r.tokens), r.usage, r.text() == ref.text())
		}
	}
	m := scrape(t, base)
	if n := metricValue(t, m, series("vllm:num_preemptions_total")); n < 1 {
		t.Errorf("vllm:num_preemptions_total = %v, want ≥ 1", n)
	}
	if n := metricValue(t, m, series("vllm:generation_tokens_total")); n != 600 {
		t.Errorf("vllm:generation_tokens_total = %v, want 600 (tokens are not generated twice)", n)
	}
	waitForMetric(t, base, series("vllm:kv_cache_usage_perc"), 0)
	waitForMetric(t, base, series("vllm:num_requests_waiting"), 0)
}

func TestKVAllocationConfig(t *testing.T) {
	c := DefaultConfig()
	c.KVAllocation = "lazy"
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), `kv_allocation: must be "reserve" or "on_demand", got "lazy"`) {
		t.Errorf("kv_allocation lazy: %v", err)
	}
	c.KVAllocation = ""
	if err := c.Validate(); err != nil {
		t.Errorf("empty kv_allocation (reserve): %v", err)
	}
	cfg, err := parseConfig([]byte("kv_allocation: on_demand\n"))
	if err != nil || cfg.KVAllocation != KVAllocationOnDemand {
		t.Errorf("kv_allocation: on_demand: %v, %q", err, cfg.KVAllocation)
	}
	if _, err := parseConfig([]byte("max_num_seqs: 4\nkv_allocation: later\n")); err == nil || !strings.Contains(err.Error(), "line 2: kv_allocation:") {
		t.Errorf("positioned error: %v", err)
	}
}
