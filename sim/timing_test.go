// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"context"
	"math/rand/v2"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Timing tests compare relative effects that the model makes large
// (hundreds of milliseconds), so they hold on a loaded 2-core machine.

func randomIDs(rng *rand.Rand, n int) []int {
	ids := make([]int, n)
	for i := range ids {
		ids[i] = rng.IntN(VocabSize)
	}
	return ids
}

func TestTTFTGrowsWithPromptLength(t *testing.T) {
	cfg := DefaultConfig()
	cfg.EOSProbability = 0
	cfg.PrefillBase = 2 * time.Millisecond
	cfg.PrefillPerToken = 200 * time.Microsecond // 2000 tokens: 400 ms
	cfg.DecodeBase = 5 * time.Millisecond
	base, _ := startSim(t, cfg)
	rng := rand.New(rand.NewPCG(3, 4))

	short := stream(t, base+"/v1/completions", completionBody(randomIDs(rng, 10), 2))
	longIDs := randomIDs(rng, 2000)
	long := stream(t, base+"/v1/completions", completionBody(longIDs, 2))
	if !short.done || !long.done {
		t.Fatalf("streams failed: %v %v", short.readErr, long.readErr)
	}
	if short.ttft()+200*time.Millisecond > long.ttft() {
		t.Errorf("TTFT short prompt %v, 2000-token prompt %v: want the long one ≥ 200ms slower (model: +400ms)", short.ttft(), long.ttft())
	}
	// The same long prompt again is served from the prefix cache: only
	// the last block is prefilled.
	cached := stream(t, base+"/v1/completions", completionBody(longIDs, 2))
	if cached.usage.cached() < 1984 {
		t.Errorf("repeated prompt: cached_tokens %d, want ≥ 1984", cached.usage.cached())
	}
	if cached.ttft()*2 > long.ttft() {
		t.Errorf("TTFT of the cached prompt %v is not well below the uncached %v", cached.ttft(), long.ttft())
	}

	// Server-side TTFT is measured inside the client's interval.
	var clientTotal time.Duration
	for _, r := range []*streamResult{short, long, cached} {
		clientTotal += r.ttft()
	}
	m := scrape(t, base)
	sum := metricValue(t, m, `vllm:time_to_first_token_seconds_sum{engine="0",model_name="sim-model"}`)
	count := metricValue(t, m, `vllm:time_to_first_token_seconds_count{engine="0",model_name="sim-model"}`)
	if count != 3 || sum <= 0.4 || sum > clientTotal.Seconds() {
		t.Errorf("server TTFT sum %.3fs over %v requests; client sum %.3fs", sum, count, clientTotal.Seconds())
	}
}

func TestTTFTGrowsWithFullBatch(t *testing.T) {
	cfg := DefaultConfig()
	cfg.EOSProbability = 0
	cfg.MaxNumSeqs = 2
	cfg.PrefillBase = time.Millisecond
	cfg.PrefillPerToken = 0
	cfg.DecodeBase = 10 * time.Millisecond
	cfg.DecodePerSeq = 0
	base, _ := startSim(t, cfg)
	url := base + "/v1/chat/completions"

	alone := stream(t, url, chatBody("alone", 2))

	// Two long requests fill the batch (100 steps ≈ 1 s: on a busy
	// machine the queued request, sent once they run, must still find
	// them running; with 400 ms it sometimes came after they ended).
	var wg sync.WaitGroup
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if r := stream(t, url, chatBody("long", 100)); !r.done {
				t.Errorf("long request: %v", r.readErr)
			}
		}()
	}
	waitForMetric(t, base, `vllm:num_requests_running{engine="0",model_name="sim-model"}`, 2)
	queuedDone := make(chan *streamResult)
	go func() { queuedDone <- stream(t, url, chatBody("queued", 2)) }()
	waitForMetric(t, base, `vllm:num_requests_waiting{engine="0",model_name="sim-model"}`, 1)
	queued := <-queuedDone
	wg.Wait()
	if !queued.done {
		t.Fatalf("queued request: %v", queued.readErr)
	}
	if queued.ttft() < alone.ttft()+150*time.Millisecond {
		t.Errorf("TTFT alone %v, behind a full batch %v: want the queue time (≈ 300ms) to show", alone.ttft(), queued.ttft())
	}
	m := scrape(t, base)
	if n := metricValue(t, m, `vllm:request_queue_time_seconds_sum{engine="0",model_name="sim-model"}`); n < 0.15 {
		t.Errorf("vllm:request_queue_time_seconds_sum = %v, want the queued request's wait", n)
	}
}

func TestITLGrowsWithBatch(t *testing.T) {
	cfg := DefaultConfig()
	cfg.EOSProbability = 0
	cfg.PrefillBase = time.Millisecond
	cfg.PrefillPerToken = 0
	cfg.DecodeBase = 2 * time.Millisecond
	cfg.DecodePerSeq = 2 * time.Millisecond // 1 seq: 4ms, 16 seqs: 34ms
	base, _ := startSim(t, cfg)
	url := base + "/v1/completions"

	medianITL := func(r *streamResult) time.Duration {
		var gaps []time.Duration
		for i := 1; i < len(r.tokenAt); i++ {
			gaps = append(gaps, r.tokenAt[i].Sub(r.tokenAt[i-1]))
		}
		slices.Sort(gaps)
		return gaps[len(gaps)/2]
	}
	alone := medianITL(stream(t, url, completionBody("solo", 20, "ignore_eos", true)))

	results := make([]*streamResult, 16)
	var wg sync.WaitGroup
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = stream(t, url, completionBody("batched", 20))
		}()
	}
	wg.Wait()
	var medians []time.Duration
	for _, r := range results {
		if !r.done {
			t.Fatalf("batched request failed: %v", r.readErr)
		}
		medians = append(medians, medianITL(r))
	}
	slices.Sort(medians)
	batched := medians[len(medians)/2]
	if batched < 2*alone {
		t.Errorf("median ITL alone %v, in a batch of 16 %v: want ≥ 2x (model: 4ms vs 34ms)", alone, batched)
	}
}

func TestDecodeTimingFollowsModel(t *testing.T) {
	cfg := DefaultConfig()
	cfg.EOSProbability = 0
	cfg.PrefillBase = 0
	cfg.PrefillPerToken = 0
	cfg.DecodeBase = 3 * time.Millisecond
	cfg.DecodePerSeq = 0
	base, _ := startSim(t, cfg)
	r := stream(t, base+"/v1/completions", completionBody("x", 100))
	e2e := r.tokenAt[len(r.tokenAt)-1].Sub(r.start)
	// 100 steps of 3 ms: never faster than the model; the upper bound only
	// catches gross errors (a loaded machine adds scheduling delay, which
	// absolute deadlines keep from accumulating).
	if e2e < 300*time.Millisecond || e2e > 3*time.Second {
		t.Errorf("100 steps of 3ms took %v", e2e)
	}
}

func TestKVCapacityQueues(t *testing.T) {
	cfg := DefaultConfig()
	cfg.EOSProbability = 0
	cfg.MaxModelLen = 64
	cfg.NumKVBlocks = 4 // one sequence of 64 tokens
	cfg.DecodeBase = 5 * time.Millisecond
	base, _ := startSim(t, cfg)
	url := base + "/v1/completions"
	var wg sync.WaitGroup
	results := make([]*streamResult, 2)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = stream(t, url, completionBody("four tokens in here", 50))
		}()
	}
	waitForMetric(t, base, `vllm:num_requests_waiting{engine="0",model_name="sim-model"}`, 1)
	m := scrape(t, base)
	if v := metricValue(t, m, `vllm:num_requests_running{engine="0",model_name="sim-model"}`); v != 1 {
		t.Errorf("running %v, want 1 (the KV cache holds one sequence)", v)
	}
	if v := metricValue(t, m, `vllm:kv_cache_usage_perc{engine="0",model_name="sim-model"}`); v <= 0 || v > 1 {
		t.Errorf("kv_cache_usage_perc %v, want in (0, 1]", v)
	}
	wg.Wait()
	for _, r := range results {
		if !r.done || len(r.tokens) != 50 {
			t.Errorf("request: done %v, %d tokens", r.done, len(r.tokens))
		}
	}
	waitForMetric(t, base, `vllm:kv_cache_usage_perc{engine="0",model_name="sim-model"}`, 0)
}

func TestClientCancelFreesSequence(t *testing.T) {
	cfg := DefaultConfig()
	cfg.DecodeBase = 5 * time.Millisecond
	base, _ := startSim(t, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/completions",
		strings.NewReader(mustJSON(completionBody("x", 2000, "ignore_eos", true))))
	resp, err := testClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 512)
	if _, err := resp.Body.Read(buf); err != nil {
		t.Fatal(err)
	}
	waitForMetric(t, base, `vllm:num_requests_running{engine="0",model_name="sim-model"}`, 1)
	cancel()
	resp.Body.Close()
	waitForMetric(t, base, `vllm:num_requests_running{engine="0",model_name="sim-model"}`, 0)
	waitForMetric(t, base, `vllm:kv_cache_usage_perc{engine="0",model_name="sim-model"}`, 0)
}

var metricLine = regexp.MustCompile(`(?m)^(\S+) (\S+)$`)

// metricValue returns the value of the series written exactly as series.
func metricValue(t testing.TB, exposition, series string) float64 {
	t.Helper()
	for _, m := range metricLine.FindAllStringSubmatch(exposition, -1) {
		if m[1] == series {
			v, err := strconv.ParseFloat(m[2], 64)
			if err != nil {
				t.Fatalf("%s: %v", series, err)
			}
			return v
		}
	}
	t.Fatalf("series %s not exposed", series)
	return 0
}

// waitForMetric polls /metrics until series has value want (10 s at most).
func waitForMetric(t testing.TB, base, series string, want float64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	var last float64
	for time.Now().Before(deadline) {
		if last = metricValue(t, scrape(t, base), series); last == want {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("%s stayed at %v, want %v", series, last, want)
}
