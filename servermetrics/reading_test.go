// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package servermetrics

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmprobe/llmprobe/internal/simtest"
	"github.com/llmprobe/llmprobe/sim"
)

// servePages serves pages[i] at the i-th request (the last one after).
func servePages(t *testing.T, pages ...string) string {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		i := min(int(n.Add(1))-1, len(pages)-1)
		_, _ = w.Write([]byte(pages[i]))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// readTwice reads u twice (model's series) and returns the window.
func readTwice(t *testing.T, u, model string) *Window {
	t.Helper()
	client := NewClient("test_server_metrics")
	prev := Read(context.Background(), client, u, model, 0)
	cur := Read(context.Background(), client, u, model, 0)
	if prev.Outcome != OutcomeOK || cur.Outcome != OutcomeOK {
		t.Fatalf("reads: %s %q, %s %q", prev.Outcome, prev.Err, cur.Outcome, cur.Err)
	}
	return Delta(prev, cur)
}

// vllmPage is a vLLM V1 page of two engine cores (engine="0", "1") of
// model "m" beside one series of model "other" (ignored), after k steps.
func vllmPage(k float64) string {
	var b strings.Builder
	hist := func(name string, bounds []float64, perCore func(core int) (count, sum float64, at func(ub float64) float64)) {
		fmt.Fprintf(&b, "# HELP %s h\n# TYPE %s histogram\n", name, name)
		for _, lab := range []struct {
			model string
			core  int
		}{{"m", 0}, {"m", 1}, {"other", 0}} {
			count, sum, at := perCore(lab.core)
			if lab.model == "other" {
				count, sum, at = 1000, 1000, func(float64) float64 { return 1000 }
			}
			for _, ub := range bounds {
				fmt.Fprintf(&b, "%s_bucket{engine=\"%d\",le=\"%g\",model_name=\"%s\"} %g\n", name, lab.core, ub, lab.model, at(ub))
			}
			fmt.Fprintf(&b, "%s_bucket{engine=\"%d\",le=\"+Inf\",model_name=\"%s\"} %g\n", name, lab.core, lab.model, count)
			fmt.Fprintf(&b, "%s_sum{engine=\"%d\",model_name=\"%s\"} %g\n", name, lab.core, lab.model, sum)
			fmt.Fprintf(&b, "%s_count{engine=\"%d\",model_name=\"%s\"} %g\n", name, lab.core, lab.model, count)
		}
	}
	scalar := func(name, typ string, v func(core int) float64) {
		fmt.Fprintf(&b, "# TYPE %s %s\n", name, typ)
		for core := range 2 {
			fmt.Fprintf(&b, "%s{engine=\"%d\",model_name=\"m\"} %g\n", name, core, v(core))
		}
		fmt.Fprintf(&b, "%s{engine=\"0\",model_name=\"other\"} 500\n", name)
	}
	// Each step, each core: 10 requests, TTFT 0.03 s (bucket 0.02–0.04),
	// queue 0.01 s, prefill 0.015 s, decode 0.5 s, ITL 0.02 s, prompt 300.
	per := func(v float64, bounds []float64) func(int) (float64, float64, func(float64) float64) {
		return func(int) (float64, float64, func(float64) float64) {
			n := 10 * k
			return n, n * v, func(ub float64) float64 {
				if v <= ub {
					return n
				}
				return 0
			}
		}
	}
	ttftB := []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1}
	latB := []float64{0.3, 0.5, 0.8, 1}
	hist("vllm:time_to_first_token_seconds", ttftB, per(0.03, ttftB))
	hist("vllm:request_queue_time_seconds", latB, per(0.01, latB))
	hist("vllm:request_prefill_time_seconds", latB, per(0.015, latB))
	hist("vllm:request_decode_time_seconds", latB, per(0.5, latB))
	hist("vllm:inter_token_latency_seconds", []float64{0.01, 0.025, 0.05}, per(0.02, []float64{0.01, 0.025, 0.05}))
	hist("vllm:request_prompt_tokens", []float64{100, 200, 500, 1000}, per(300, []float64{100, 200, 500, 1000}))
	scalar("vllm:num_requests_running", "gauge", func(core int) float64 { return float64(3 + core) })
	scalar("vllm:num_requests_waiting", "gauge", func(int) float64 { return 2 })
	scalar("vllm:kv_cache_usage_perc", "gauge", func(core int) float64 { return 0.5 + 0.2*float64(core) })
	scalar("vllm:num_preemptions_total", "counter", func(int) float64 { return k })
	scalar("vllm:prefix_cache_hits_total", "counter", func(int) float64 { return 100 * k })
	scalar("vllm:prefix_cache_queries_total", "counter", func(int) float64 { return 400 * k })
	fmt.Fprintf(&b, "# TYPE vllm:request_success_total counter\n")
	for core := range 2 {
		for _, r := range []string{"stop", "length"} {
			fmt.Fprintf(&b, "vllm:request_success_total{engine=\"%d\",finished_reason=\"%s\",model_name=\"m\"} %g\n", core, r, 5*k)
		}
	}
	return b.String()
}

// TestReadingVLLM: a vLLM V1 page of two engine cores and a second model
// is reduced to the target model's series summed over the cores: the
// window's deltas, means, gauges, quantiles with their buckets.
func TestReadingVLLM(t *testing.T) {
	w := readTwice(t, servePages(t, vllmPage(1), vllmPage(3)), "m")
	if len(w.Missing) != 0 || w.Engine != "vllm" || !w.TTFTIncludesQueue {
		t.Fatalf("engine %q, missing %v", w.Engine, w.Missing)
	}
	near := func(what string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 1e-9 {
			t.Errorf("%s = %g, want %g", what, got, want)
		}
	}
	// Two steps × 10 requests × 2 cores; the "other" model left out.
	near("ttft count", w.TTFT.Count, 40)
	ttftMean, _ := w.TTFT.Mean()
	near("ttft mean", ttftMean, 0.03)
	p50 := w.TTFT.Quantile(0.5)
	near("ttft p50 lower", p50.Lower, 0.02)
	near("ttft p50 upper", p50.Upper, 0.04)
	near("ttft p50", p50.Value, 0.03) // half-way into the bucket
	near("ttft p50 error", p50.Error(), 0.01)
	for what, m := range map[string]*Mean{"queue": w.Queue, "prefill": w.Prefill, "decode": w.Decode} {
		v, ok := m.Value()
		if !ok {
			t.Fatalf("%s: no mean", what)
		}
		near(what+" mean", v, map[string]float64{"queue": 0.01, "prefill": 0.015, "decode": 0.5}[what])
	}
	itl, _ := w.ITL.Mean()
	near("itl mean", itl, 0.02)
	pl, _ := w.PromptLength.Mean()
	near("prompt length mean", pl, 300)
	near("running", *w.Running, 7)
	near("waiting", *w.Waiting, 4)
	near("kv usage", *w.KVUsage, 0.6)
	near("preemptions", *w.Preemptions, 4)
	near("finished", *w.Finished, 40)
	ppr, _ := w.PreemptionsPerRequest()
	near("preemptions per request", ppr, 0.1)
	hr, _ := w.PrefixHitRatio()
	near("prefix hit ratio", hr, 0.25)
}

// TestReadingOlderVLLMNames: vLLM before 0.9/0.11 names KV usage
// gpu_cache_usage_perc, prefix caching gpu_prefix_cache_*, ITL
// time_per_output_token_seconds: each is read in place of the new name.
func TestReadingOlderVLLMNames(t *testing.T) {
	page := func(k float64) string {
		return fmt.Sprintf(`# TYPE vllm:gpu_cache_usage_perc gauge
vllm:gpu_cache_usage_perc{model_name="m"} 0.4
# TYPE vllm:gpu_prefix_cache_hits_total counter
vllm:gpu_prefix_cache_hits_total{model_name="m"} %g
# TYPE vllm:gpu_prefix_cache_queries_total counter
vllm:gpu_prefix_cache_queries_total{model_name="m"} %g
# TYPE vllm:time_per_output_token_seconds histogram
vllm:time_per_output_token_seconds_bucket{model_name="m",le="0.025"} %g
vllm:time_per_output_token_seconds_bucket{model_name="m",le="+Inf"} %g
vllm:time_per_output_token_seconds_sum{model_name="m"} %g
vllm:time_per_output_token_seconds_count{model_name="m"} %g
`, 10*k, 20*k, 5*k, 5*k, 0.02*5*k, 5*k)
	}
	w := readTwice(t, servePages(t, page(1), page(2)), "m")
	if *w.KVUsage != 0.4 || *w.PrefixHits != 10 || *w.PrefixQueries != 20 || w.ITL == nil || w.ITL.Count != 5 {
		t.Fatalf("%+v missing %v", w, w.Missing)
	}
	if got := w.Missing[FigureTTFT]; got != "not in the page: vllm:time_to_first_token_seconds" {
		t.Errorf("ttft: %q", got)
	}
}

// TestReadingOtherEngines: SGLang's series are summed over its rank
// labels, TGI's and llama.cpp's (no model label) all kept; what an
// engine does not export says so.
func TestReadingOtherEngines(t *testing.T) {
	sglang := func(k float64) string {
		var b strings.Builder
		b.WriteString("# TYPE sglang:num_queue_reqs gauge\n")
		for tp := range 2 {
			fmt.Fprintf(&b, "sglang:num_queue_reqs{engine_type=\"unified\",model_name=\"m\",pp_rank=\"0\",tp_rank=\"%d\"} 3\n", tp)
		}
		fmt.Fprintf(&b, "# TYPE sglang:time_to_first_token_seconds histogram\n")
		fmt.Fprintf(&b, "sglang:time_to_first_token_seconds_bucket{model_name=\"m\",le=\"0.1\"} %g\n", 4*k)
		fmt.Fprintf(&b, "sglang:time_to_first_token_seconds_bucket{model_name=\"m\",le=\"+Inf\"} %g\n", 4*k)
		fmt.Fprintf(&b, "sglang:time_to_first_token_seconds_sum{model_name=\"m\"} %g\n", 0.2*k)
		fmt.Fprintf(&b, "sglang:time_to_first_token_seconds_count{model_name=\"m\"} %g\n", 4*k)
		fmt.Fprintf(&b, "# TYPE sglang:num_retracted_requests_total counter\nsglang:num_retracted_requests_total{model_name=\"m\"} %g\n", k)
		return b.String()
	}
	w := readTwice(t, servePages(t, sglang(1), sglang(2)), "m")
	if w.Engine != "sglang" || *w.Waiting != 6 || w.TTFT.Count != 4 || *w.Preemptions != 1 {
		t.Fatalf("sglang: %+v missing %v", w, w.Missing)
	}
	if got := w.Missing[FigurePrefill]; got != "not exported by sglang: SGLang has no per-request prefill histogram" {
		t.Errorf("sglang prefill: %q", got)
	}

	tgi := func(k float64) string {
		return fmt.Sprintf(`# TYPE tgi_queue_size gauge
tgi_queue_size 2
# TYPE tgi_batch_current_size gauge
tgi_batch_current_size 5
# TYPE tgi_request_queue_duration histogram
tgi_request_queue_duration_bucket{le="0.5"} %g
tgi_request_queue_duration_bucket{le="+Inf"} %g
tgi_request_queue_duration_sum %g
tgi_request_queue_duration_count %g
# TYPE tgi_request_success counter
tgi_request_success %g
`, 2*k, 2*k, 0.4*k, 2*k, 2*k)
	}
	w = readTwice(t, servePages(t, tgi(1), tgi(4)), "m")
	q, _ := w.Queue.Value()
	if w.Engine != "tgi" || *w.Waiting != 2 || *w.Running != 5 || math.Abs(q-0.2) > 1e-9 || *w.Finished != 6 {
		t.Fatalf("tgi: %+v missing %v", w, w.Missing)
	}
	if got := w.Missing[FigureTTFT]; got != "not exported by tgi: TGI has no TTFT histogram" {
		t.Errorf("tgi ttft: %q", got)
	}

	llama := "# TYPE llamacpp:requests_processing gauge\nllamacpp:requests_processing 1\n# TYPE llamacpp:requests_deferred gauge\nllamacpp:requests_deferred 0\n"
	w = readTwice(t, servePages(t, llama), "m")
	if w.Engine != "llama.cpp" || *w.Running != 1 || *w.Waiting != 0 || w.TTFT != nil || w.TTFTIncludesQueue {
		t.Fatalf("llama.cpp: %+v missing %v", w, w.Missing)
	}
	if got := w.Missing[FigureKVUsage]; got != "not exported by llama.cpp" {
		t.Errorf("llama.cpp kv: %q", got)
	}
}

// TestDeltaCounterReset: an engine core restarted between two readings
// (its counter and histogram fell) counts its new values whole, as
// Prometheus' rate does, bucket by bucket; the other core its delta.
func TestDeltaCounterReset(t *testing.T) {
	page := func(c0, c1 float64) string {
		var b strings.Builder
		b.WriteString("# TYPE vllm:num_preemptions_total counter\n")
		fmt.Fprintf(&b, "vllm:num_preemptions_total{engine=\"0\",model_name=\"m\"} %g\nvllm:num_preemptions_total{engine=\"1\",model_name=\"m\"} %g\n", c0, c1)
		b.WriteString("# TYPE vllm:time_to_first_token_seconds histogram\n")
		for core, n := range []float64{c0, c1} {
			fmt.Fprintf(&b, "vllm:time_to_first_token_seconds_bucket{engine=\"%d\",model_name=\"m\",le=\"0.1\"} %g\n", core, n)
			fmt.Fprintf(&b, "vllm:time_to_first_token_seconds_bucket{engine=\"%d\",model_name=\"m\",le=\"1\"} %g\n", core, 2*n)
			fmt.Fprintf(&b, "vllm:time_to_first_token_seconds_bucket{engine=\"%d\",model_name=\"m\",le=\"+Inf\"} %g\n", core, 2*n)
			fmt.Fprintf(&b, "vllm:time_to_first_token_seconds_sum{engine=\"%d\",model_name=\"m\"} %g\n", core, n)
			fmt.Fprintf(&b, "vllm:time_to_first_token_seconds_count{engine=\"%d\",model_name=\"m\"} %g\n", core, 2*n)
		}
		return b.String()
	}
	// Core 0 goes 100 → 130 (delta 30); core 1 restarts, 100 → 7 (delta 7).
	w := readTwice(t, servePages(t, page(100, 100), page(130, 7)), "m")
	if *w.Preemptions != 37 {
		t.Errorf("preemptions %g, want 37", *w.Preemptions)
	}
	if w.TTFT.Count != 74 || w.TTFT.Sum != 37 {
		t.Errorf("ttft count %g sum %g, want 74 and 37", w.TTFT.Count, w.TTFT.Sum)
	}
	if got := fmt.Sprint(w.TTFT.Bounds, w.TTFT.Cumulative); got != "[0.1 1 +Inf] [37 74 74]" {
		t.Errorf("buckets %s", got)
	}
}

// TestReadingHostileValues: NaN or Inf in a family, a family of the
// wrong type, another model only: each figure says why it is missing,
// the others are read.
func TestReadingHostileValues(t *testing.T) {
	page := `# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="m"} NaN
# TYPE vllm:num_requests_waiting counter
vllm:num_requests_waiting_total{model_name="m"} 3
vllm:num_requests_waiting{model_name="m"} 3
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{model_name="m"} 0.5
# TYPE vllm:num_preemptions_total counter
vllm:num_preemptions_total{model_name="m"} +Inf
`
	r := Read(context.Background(), NewClient("test"), servePages(t, page), "m", 0)
	for fig, want := range map[string]string{
		FigureRunning:     "vllm:num_requests_running: the server sent NaN",
		FigureWaiting:     "vllm:num_requests_waiting is a counter, not a gauge",
		FigurePreemptions: "vllm:num_preemptions_total: the server sent +Inf",
		FigureKVUsage:     "",
	} {
		if got := r.Missing(fig); got != want {
			t.Errorf("%s: %q, want %q", fig, got, want)
		}
	}
	other := Read(context.Background(), NewClient("test"), servePages(t, vllmPage(1)), "llama", 0)
	if other.Outcome != OutcomeNotAnEngine || other.Err != `no series of model "llama" (vllm serves m, other)` {
		t.Errorf("another model: %s %q", other.Outcome, other.Err)
	}
	none := Read(context.Background(), NewClient("test"), servePages(t, "# TYPE go_goroutines gauge\ngo_goroutines 3\n"), "m", 0)
	if none.Outcome != OutcomeNotAnEngine || !strings.Contains(none.Err, "no known engine's metrics") {
		t.Errorf("no engine: %s %q", none.Outcome, none.Err)
	}
}

// TestReadOutcomes: a slow server is a timeout, a page over the size
// bound too_large, a 500 an error.
func TestReadOutcomes(t *testing.T) {
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte("# TYPE vllm:num_requests_running gauge\n"))
		w.(http.Flusher).Flush()
		select { // trickles: never ends the page
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	}))
	defer slow.Close()
	big := bytes.Repeat([]byte("junk_series 1\n"), serverMetricsMaxBytes/14+2)
	large := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(big) }))
	defer large.Close()
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "no", 500) }))
	defer failing.Close()
	for _, c := range []struct {
		url, outcome, err string
		timeout           time.Duration
	}{
		{slow.URL, OutcomeTimeout, "no answer within 200ms", 200 * time.Millisecond},
		{large.URL, OutcomeTooLarge, "body larger than", 5 * time.Second}, // 32 MiB read whole, even with -race
		{failing.URL, OutcomeError, "500 Internal Server Error", 200 * time.Millisecond},
	} {
		r := Read(context.Background(), NewClient("test"), c.url, "m", c.timeout)
		if r.Outcome != c.outcome || !strings.Contains(r.Err, c.err) {
			t.Errorf("%s: %s %q, want %s %q", c.url, r.Outcome, r.Err, c.outcome, c.err)
		}
	}
}

// TestReadingSimulator: the simulator's /metrics (vLLM's names) read
// before and after requests: its TTFT counts them, its model is the one
// read.
func TestReadingSimulator(t *testing.T) {
	_, base := simtest.Listen(t, sim.DefaultConfig())
	client := NewClient("test")
	prev := Read(context.Background(), client, base+"/metrics", "sim-model", 0)
	for range 3 {
		resp, err := http.Post(base+"/v1/completions", "application/json",
			strings.NewReader(`{"model":"sim-model","prompt":"hello there","max_tokens":4}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	cur := Read(context.Background(), client, base+"/metrics", "sim-model", 0)
	w := Delta(prev, cur)
	t.Logf("missing: %v", w.Missing)
	if w.Engine != "vllm" || w.TTFT == nil || w.TTFT.Count != 3 || w.Finished == nil || *w.Finished != 3 || w.Running == nil {
		t.Fatalf("%+v", w)
	}
	if q, ok := w.Queue.Value(); !ok || q < 0 {
		t.Errorf("queue mean %g %v", q, ok)
	}
}
