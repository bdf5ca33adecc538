// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"math"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func ptr[T any](v T) *T { return &v }

// burst is background traffic at rate for the first d, then none.
func burst(rate float64, d time.Duration, prompt, output LengthDist, prefix *PrefixMix) []BackgroundStep {
	return []BackgroundStep{
		{After: 0, Rate: ptr(rate), PromptTokens: &prompt, OutputTokens: &output, Prefix: prefix},
		{After: d, Rate: ptr(0.0)},
	}
}

// waitBackgroundDone waits until the background traffic has reached its
// last step (rate 0: every arrival before it is injected) and the engine
// has finished every request injected; it returns the exposition then.
func waitBackgroundDone(t *testing.T, base string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		m := scrape(t, base)
		injected := metricValue(t, m, `llmprobe_sim_background_requests_total{model_name="sim-model"}`)
		rate := metricValue(t, m, `llmprobe_sim_background_rate{model_name="sim-model"}`)
		done := metricValue(t, m, `vllm:request_success_total{engine="0",finished_reason="stop",model_name="sim-model"}`)
		if rate == 0 && injected > 0 && done == injected && metricValue(t, m, series("vllm:num_requests_running")) == 0 {
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("background traffic not done: rate %v, %v injected, %v finished", rate, injected, done)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestBackgroundCount: background traffic at rate r for d brings
// r·d ± 3σ requests (σ = √(r·d), Poisson) into the engine, every one of
// them counted in vLLM's families as a finished request would be, none
// dropped; a seed repeats it exactly.
func TestBackgroundCount(t *testing.T) {
	const rate, d = 200.0, time.Second
	want := rate * d.Seconds()
	sigma := math.Sqrt(want)
	counts := map[uint64]float64{}
	for _, seed := range []uint64{1, 2, 3, 1} {
		cfg := zeroConfig()
		cfg.Seed = seed
		cfg.Background = burst(rate, d, LengthDist{Dist: DistFixed, Value: 50}, LengthDist{Dist: DistFixed, Value: 5}, nil)
		base, _ := startSim(t, cfg)
		m := waitBackgroundDone(t, base)
		n := metricValue(t, m, `llmprobe_sim_background_requests_total{model_name="sim-model"}`)
		if math.Abs(n-want) > 3*sigma {
			t.Errorf("seed %d: %v requests at %v/s for %v, want %v ± %.0f", seed, n, rate, d, want, 3*sigma)
		}
		if prev, ok := counts[seed]; ok && prev != n {
			t.Errorf("seed %d: %v requests, then %v: the seed does not repeat the traffic", seed, prev, n)
		}
		counts[seed] = n
		for name, v := range map[string]float64{
			"vllm:prompt_tokens_total":                         50 * n,
			"vllm:generation_tokens_total":                     5 * n,
			"vllm:request_prompt_tokens_count":                 n,
			"vllm:request_generation_tokens_sum":               5 * n,
			"vllm:e2e_request_latency_seconds_count":           n,
			"vllm:time_to_first_token_seconds_count":           n,
			"vllm:inter_token_latency_seconds_count":           4 * n,
			"vllm:request_queue_time_seconds_count":            n,
			"vllm:request_decode_time_seconds_count":           n,
			"vllm:request_prefill_time_seconds_count":          n,
			"vllm:request_inference_time_seconds_count":        n,
			"vllm:request_time_per_output_token_seconds_count": n,
			"vllm:prefix_cache_queries_total":                  50 * n,
		} {
			if got := metricValue(t, m, series(name)); got != v {
				t.Errorf("seed %d: %s = %v, want %v", seed, name, got, v)
			}
		}
		if got := metricValue(t, m, `llmprobe_sim_background_dropped_total{model_name="sim-model"}`); got != 0 {
			t.Errorf("seed %d: %v dropped", seed, got)
		}
	}
	if counts[1] == counts[2] && counts[2] == counts[3] {
		t.Errorf("three seeds gave the same count %v", counts[1])
	}
}

// TestBackgroundPrefixMix: prompts that share a prefix hit the prefix
// cache for it; prompts of their own do not.
func TestBackgroundPrefixMix(t *testing.T) {
	for _, tc := range []struct {
		name   string
		prefix *PrefixMix
		hits   func(n float64) float64
	}{
		// Every prompt starts with the one 256-token prefix: each hits
		// it but the first.
		{"shared", &PrefixMix{Share: 1, Count: 1, Tokens: 256}, func(n float64) float64 { return 256 * (n - 1) }},
		{"none", nil, func(float64) float64 { return 0 }},
		{"share 0", &PrefixMix{Share: 0}, func(float64) float64 { return 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := zeroConfig()
			cfg.Seed = 5
			cfg.Background = burst(100, 500*time.Millisecond, LengthDist{Dist: DistFixed, Value: 300}, LengthDist{Dist: DistFixed, Value: 2}, tc.prefix)
			base, _ := startSim(t, cfg)
			m := waitBackgroundDone(t, base)
			n := metricValue(t, m, series("vllm:request_prompt_tokens_count"))
			if q := metricValue(t, m, series("vllm:prefix_cache_queries_total")); q != 300*n {
				t.Errorf("queries %v, want %v", q, 300*n)
			}
			if h := metricValue(t, m, series("vllm:prefix_cache_hits_total")); h != tc.hits(n) {
				t.Errorf("hits %v over %v requests, want %v", h, n, tc.hits(n))
			}
		})
	}
}

// TestBackgroundPrefixRaisesShortPrompts: a prefixed prompt has at least
// one token of its own.
func TestBackgroundPrefixRaisesShortPrompts(t *testing.T) {
	cfg := zeroConfig()
	cfg.Seed = 9
	cfg.Background = burst(100, 300*time.Millisecond, LengthDist{Dist: DistFixed, Value: 10}, LengthDist{Dist: DistFixed, Value: 1}, &PrefixMix{Share: 1, Count: 3, Tokens: 64})
	base, _ := startSim(t, cfg)
	m := waitBackgroundDone(t, base)
	n := metricValue(t, m, series("vllm:request_prompt_tokens_count"))
	if got := metricValue(t, m, series("vllm:request_prompt_tokens_sum")); got != 65*n {
		t.Errorf("prompt tokens %v over %v requests, want 65 each", got, n)
	}
}

// TestBackgroundSteps: a step changes the traffic at its instant (scaled
// by schedule_scale), keeping what it does not set.
func TestBackgroundSteps(t *testing.T) {
	cfg := zeroConfig()
	cfg.ScheduleScale = 0.01 // 30s → 0.3s, 1m → 0.6s
	cfg.Background = []BackgroundStep{
		{After: 0, Rate: ptr(20.0), PromptTokens: &LengthDist{Dist: DistFixed, Value: 8}, OutputTokens: &LengthDist{Dist: DistFixed, Value: 2}},
		{After: 30 * time.Second, Rate: ptr(50.0)},
		{After: time.Minute, PromptTokens: &LengthDist{Dist: DistFixed, Value: 100}},
		{After: 90 * time.Second, Rate: ptr(0.0)},
	}
	start := time.Now()
	base, _ := startSim(t, cfg)
	waitForMetric(t, base, `llmprobe_sim_background_rate{model_name="sim-model"}`, 50)
	if el := time.Since(start); el < 300*time.Millisecond {
		t.Errorf("rate 50 in force after %v, want ≥ 300ms", el)
	}
	m := waitBackgroundDone(t, base)
	// Every prompt is 8 or 100 tokens: the 100-token ones came after
	// 0.6 s at 50/s (≈ 15), the rate the step before set.
	n := metricValue(t, m, series("vllm:request_prompt_tokens_count"))
	sum := metricValue(t, m, series("vllm:request_prompt_tokens_sum"))
	long := (sum - 8*n) / 92
	if long != math.Trunc(long) || long < 1 || long >= n {
		t.Errorf("%v prompts summing %v tokens: want some (not all) of 100 tokens and the rest of 8", n, sum)
	}
}

func TestBackgroundNotInRequestLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "requests.jsonl")
	cfg := zeroConfig()
	cfg.RequestLog = path
	cfg.Background = burst(100, 200*time.Millisecond, LengthDist{Dist: DistFixed, Value: 8}, LengthDist{Dist: DistFixed, Value: 2}, nil)
	base, s := startSim(t, cfg)
	waitBackgroundDone(t, base)
	stream(t, base+"/v1/completions", completionBody("one request", 2))
	if err := s.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Count(string(b), "\n"); lines != 1 {
		t.Errorf("%d request-log lines, want 1 (the HTTP request; background traffic is not logged)", lines)
	}
}

func TestLengthDistSample(t *testing.T) {
	rng := mrand.New(mrand.NewPCG(1, 2))
	const n = 100000
	draw := func(d LengthDist, limit int) []int {
		out := make([]int, n)
		for i := range out {
			out[i] = d.sample(rng, limit)
		}
		slices.Sort(out)
		return out
	}
	if got := draw(LengthDist{Dist: DistFixed, Value: 77}, 1000); got[0] != 77 || got[n-1] != 77 {
		t.Errorf("fixed 77: from %d to %d", got[0], got[n-1])
	}
	u := draw(LengthDist{Dist: DistUniform, Min: 10, Max: 20}, 1000)
	if u[0] != 10 || u[n-1] != 20 || u[n/2] < 14 || u[n/2] > 16 {
		t.Errorf("uniform [10, 20]: min %d, median %d, max %d", u[0], u[n/2], u[n-1])
	}
	// Log-normal: the sample's median and 99th percentile within 3% of
	// the parameters (with 10^5 draws their standard errors are < 1%).
	l := draw(LengthDist{Dist: DistLognormal, Median: 500, P99: 4000}, 100000)
	if med, p99 := float64(l[n/2]), float64(l[n*99/100]); math.Abs(med/500-1) > 0.03 || math.Abs(p99/4000-1) > 0.03 {
		t.Errorf("lognormal median 500, p99 4000: sample median %v, p99 %v", med, p99)
	}
	// Cut to the limit, and to at least 1.
	c := draw(LengthDist{Dist: DistLognormal, Median: 500, P99: 4000}, 600)
	if c[0] < 1 || c[n-1] != 600 {
		t.Errorf("lognormal cut to 600: from %d to %d", c[0], c[n-1])
	}
	if got := draw(LengthDist{Dist: DistLognormal, Median: 1, P99: 1}, 10); got[0] != 1 || got[n-1] != 1 {
		t.Errorf("lognormal median = p99 = 1: from %d to %d", got[0], got[n-1])
	}
}

func TestBackgroundYAML(t *testing.T) {
	cfg, err := parseConfig([]byte(`
background:
  - after: 0s
    rate: 12
    prompt_tokens: {dist: lognormal, median: 600, p99: 3000}
    output_tokens: 100
    prefix: {share: 0.5, count: 4, tokens: 256}
  - after: 2m
    output_tokens: {dist: uniform, min: 10, max: 20}
    max_in_flight: 64
  - after: 3m
    rate: 0
`))
	if err != nil {
		t.Fatal(err)
	}
	states := mergeBackground(cfg.Background, 1)
	want := []backgroundState{
		{0, 12, LengthDist{Dist: DistLognormal, Median: 600, P99: 3000}, LengthDist{Dist: DistFixed, Value: 100}, PrefixMix{0.5, 4, 256}, maxBackgroundInFlight},
		{2 * time.Minute, 12, LengthDist{Dist: DistLognormal, Median: 600, P99: 3000}, LengthDist{Dist: DistUniform, Min: 10, Max: 20}, PrefixMix{0.5, 4, 256}, 64},
		{3 * time.Minute, 0, LengthDist{Dist: DistLognormal, Median: 600, P99: 3000}, LengthDist{Dist: DistUniform, Min: 10, Max: 20}, PrefixMix{0.5, 4, 256}, 64},
	}
	if !slices.Equal(states, want) {
		t.Errorf("states\n%+v\nwant\n%+v", states, want)
	}
	if got := mergeBackground(cfg.Background, 0.5)[1].after; got != time.Minute {
		t.Errorf("scaled 2m by 0.5: %v", got)
	}
	if cfg, err := parseConfig([]byte("background: []\n")); err != nil || cfg.Background != nil {
		t.Errorf("empty background: %v, %+v", err, cfg.Background)
	}
}

func TestBackgroundConfigErrors(t *testing.T) {
	const ok = "  - {after: 0s, rate: 5, prompt_tokens: 100, output_tokens: 10}\n"
	tooMany := "background:\n" + ok
	for i := 1; i <= maxBackgroundSteps; i++ {
		tooMany += "  - {after: " + time.Duration(i*int(time.Second)).String() + ", rate: 1}\n"
	}
	for doc, want := range map[string]string{
		"background:\n  - {after: 0s, rate: 5, prompt_tokens: 100}\n":                                                                                "line 2: background[0].output_tokens: the first step must set it",
		"background:\n  - {after: 0s, prompt_tokens: 100, output_tokens: 10}\n":                                                                      "line 2: background[0].rate: the first step must set it",
		"background:\n  - {after: 0s, rate: 1001, prompt_tokens: 100, output_tokens: 10}\n":                                                          "line 2: background[0].rate: must be between 0 and 1000 requests per second, got 1001",
		"background:\n  - {after: 0s, rate: -1, prompt_tokens: 100, output_tokens: 10}\n":                                                            "background[0].rate: must be between 0 and 1000",
		"background:\n" + ok + "  - {after: 0s, rate: 1}\n":                                                                                          "line 3: background[1].after: must be later than background[0].after (0s), got 0s",
		"background:\n" + ok + "  - {after: 1m}\n":                                                                                                   "line 3: background[1]: changes nothing",
		"background:\n  - {after: -1s, rate: 5, prompt_tokens: 100, output_tokens: 10}\n":                                                            "background[0].after: must not be negative, got -1s",
		"background:\n  - after: 0s\n    rate: 5\n    prompt_tokens: 8192\n    output_tokens: 10\n":                                                  "line 4: background[0].prompt_tokens.value: must be between 1 and 8191 tokens, got 8192",
		"background:\n  - after: 0s\n    rate: 5\n    prompt_tokens: {dist: normal, value: 5}\n    output_tokens: 10\n":                              `line 4: background[0].prompt_tokens.dist: must be fixed, uniform or lognormal, got "normal"`,
		"background:\n  - after: 0s\n    rate: 5\n    prompt_tokens: {dist: lognormal, median: 500, p99: 100}\n    output_tokens: 10\n":              "line 4: background[0].prompt_tokens.p99: must be at least median (500), got 100",
		"background:\n  - after: 0s\n    rate: 5\n    prompt_tokens: 100\n    output_tokens: {dist: uniform, min: 20, max: 10}\n":                    "line 5: background[0].output_tokens.max: must be at least min (20), got 10",
		"background:\n  - after: 0s\n    rate: 5\n    prompt_tokens: {dist: uniform, value: 5, min: 1, max: 9}\n    output_tokens: 10\n":             "line 4: background[0].prompt_tokens.value: is not a parameter of uniform (it takes min and max)",
		"background:\n  - after: 0s\n    rate: 5\n    prompt_tokens: {dist: lognormal, median: 500}\n    output_tokens: 10\n":                        "line 4: background[0].prompt_tokens.p99: must be between 1 and 8191 tokens, got 0",
		"background:\n  - after: 0s\n    rate: 5\n    prompt_tokens: {dist: fixed, vaule: 5}\n    output_tokens: 10\n":                               `line 4: unknown key "vaule" in a length distribution`,
		"background:\n  - after: 0s\n    rate: 5\n    prompt_tokens: many\n    output_tokens: 10\n":                                                  `line 4: a length is an integer or a mapping {dist: fixed|uniform|lognormal, ...}, got "many"`,
		"background:\n  - after: 0s\n    rate: 5\n    prompt_tokens: {dist: fixed, value: 1.5}\n    output_tokens: 10\n":                             `line 4: value: expected an integer number of tokens, got "1.5"`,
		"background:\n  - after: 0s\n    rate: 5\n    prompt_tokens: 100\n    output_tokens: 10\n    prefix: {share: 1.5, count: 2, tokens: 10}\n":   "line 6: background[0].prefix.share: must be between 0 and 1, got 1.5",
		"background:\n  - after: 0s\n    rate: 5\n    prompt_tokens: 100\n    output_tokens: 10\n    prefix: {share: 0.5, tokens: 10}\n":             "line 6: background[0].prefix.count: must be between 1 and 1000000, got 0",
		"background:\n  - after: 0s\n    rate: 5\n    prompt_tokens: 100\n    output_tokens: 10\n    prefix: {share: 0.5, count: 2, tokens: 8191}\n": "line 6: background[0].prefix.tokens: must be between 1 and max_model_len − 2 (8190), got 8191",
		"background:\n  - after: 0s\n    rate: 5\n    prompt_tokens: 100\n    output_tokens: 10\n    prefix: {share: 0.5, cuont: 2}\n":               "field cuont not found",
		"background:\n  - {after: 0s, rate: 5, prompt_tokens: 100, output_tokens: 10, burst: 3}\n":                                                   "field burst not found",
		"background:\n  - {after: 0s, rate: 5, prompt_tokens: 100, output_tokens: 10, max_in_flight: 0}\n":                                           "line 2: background[0].max_in_flight: must be between 1 and 10000, got 0",
		"background:\n" + ok + "  - {after: 1m, max_in_flight: 10001}\n":                                                                             "line 3: background[1].max_in_flight: must be between 1 and 10000, got 10001",
		"background: {after: 0s}\n": "cannot unmarshal !!map into []sim.BackgroundStep",
		tooMany:                     "line 1: background: at most 64 steps, got 65",
	} {
		_, err := parseConfig([]byte(doc))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want %q", doc, err, want)
		}
	}
}

// TestBackgroundMaxInFlight: with max_in_flight, the background requests
// waiting or running never exceed it (the clients' or the gateway's
// concurrency limit: a rate past capacity makes a queue of that size, not
// one that grows for ever); the arrivals beyond it are dropped and
// counted, and every arrival is either submitted or dropped.
func TestBackgroundMaxInFlight(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Seed = 7
	cfg.MaxNumSeqs = 2
	cfg.DecodeBase = 20 * time.Millisecond
	cfg.Background = []BackgroundStep{
		{After: 0, Rate: ptr(100.0), PromptTokens: &LengthDist{Dist: DistFixed, Value: 20},
			OutputTokens: &LengthDist{Dist: DistFixed, Value: 10}, MaxInFlight: ptr(6)},
		{After: 500 * time.Millisecond, Rate: ptr(0.0)},
	}
	base, _ := startSim(t, cfg)
	deadline := time.Now().Add(400 * time.Millisecond)
	for time.Now().Before(deadline) {
		m := scrape(t, base)
		if n := metricValue(t, m, series("vllm:num_requests_running")) + metricValue(t, m, series("vllm:num_requests_waiting")); n > 6 {
			t.Fatalf("%v requests in the engine, max_in_flight 6", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	m := waitBackgroundDone(t, base)
	injected := metricValue(t, m, `llmprobe_sim_background_requests_total{model_name="sim-model"}`)
	dropped := metricValue(t, m, `llmprobe_sim_background_dropped_total{model_name="sim-model"}`)
	// 0.5 s of arrivals at 100/s; each request takes 10 steps of about
	// 20 ms, two at a time: about 5 served, 6 held, the rest dropped.
	if dropped < 20 || injected > 20 {
		t.Errorf("%v submitted, %v dropped: want at most 20 submitted, the rest dropped", injected, dropped)
	}
	cfg.ScheduleScale = 1
	arrivals := 0.0
	b := newBackground(nil, &cfg, time.Time{}, backgroundSeed(serverSeeds(cfg.Seed)))
	b.generate(func(*backgroundState, time.Duration) bool { return true }, func(st *backgroundState, at time.Duration) bool {
		b.draw(st)
		arrivals++
		return true
	})
	if injected+dropped != arrivals {
		t.Errorf("%v submitted + %v dropped, want the %v arrivals", injected, dropped, arrivals)
	}
}
