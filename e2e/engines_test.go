// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// Jobs of the model servers the simulator does not imitate: TGI and
// llama.cpp, whose metric names (servermetrics/servermetrics.go) the correlation
// dashboard's per-instance panels read.
const (
	tgiJob      = "tgi"
	llamacppJob = "llamacpp"
)

// engineLabels are the Kubernetes labels of the simulator's scrape: those
// of the pod dashboards/testdata/dcgm-exporter.prom maps GPU 0 to, so the
// energy and GPU time per token rules join the simulator's generated
// tokens with that GPU's power.
var engineLabels = map[string]string{"namespace": "llm-serving", "pod": "vllm-llama-8b-6d9f7c5b8-x2k4q"}

// histogramText renders a classic histogram of n observations of each of
// values, with the given bucket bounds.
func histogramText(b *strings.Builder, name string, bounds []float64, n int, values ...float64) {
	fmt.Fprintf(b, "# HELP %s %s\n# TYPE %s histogram\n", name, name, name)
	sum := 0.0
	for _, v := range values {
		sum += v * float64(n)
	}
	for _, le := range bounds {
		c := 0
		for _, v := range values {
			if v <= le {
				c += n
			}
		}
		fmt.Fprintf(b, "%s_bucket{le=\"%g\"} %d\n", name, le, c)
	}
	fmt.Fprintf(b, "%s_bucket{le=\"+Inf\"} %d\n%s_sum %g\n%s_count %d\n", name, n*len(values), name, sum, name, n*len(values))
}

// engineExposition serves a fixed-shape exposition whose counters and
// histograms advance by one step per scrape (render(n) for the n-th), so
// rates are positive however slowly the machine scrapes.
func engineExposition(t *testing.T, render func(b *strings.Builder, n int)) *httptest.Server {
	var scrapes atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		var b strings.Builder
		render(&b, int(scrapes.Add(1)))
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		_, _ = w.Write([]byte(b.String()))
	}))
	t.Cleanup(srv.Close)
	return srv
}

// tgiExposition is the TGI router's metrics (names from router/src:
// classic histograms, gauges, no model label).
func tgiExposition(t *testing.T) *httptest.Server {
	secs := []float64{0.01, 0.05, 0.1, 0.5, 1, 2, 5, 10}
	toks := []float64{16, 64, 256, 1024, 4096}
	return engineExposition(t, func(b *strings.Builder, n int) {
		histogramText(b, "tgi_request_duration", secs, n, 0.8, 1.6)
		histogramText(b, "tgi_request_queue_duration", secs, n, 0.02, 0.08)
		histogramText(b, "tgi_request_mean_time_per_token_duration", secs, n, 0.02, 0.03)
		histogramText(b, "tgi_request_input_length", toks, n, 200)
		histogramText(b, "tgi_request_generated_tokens", toks, n, 120)
		fmt.Fprintf(b, "# TYPE tgi_batch_current_size gauge\ntgi_batch_current_size %d\n", 3+n%2)
		fmt.Fprintf(b, "# TYPE tgi_queue_size gauge\ntgi_queue_size %d\n", n%3)
	})
}

// llamacppExposition is llama.cpp's server /metrics (its counters and
// gauges, "llamacpp:" names, no model label).
func llamacppExposition(t *testing.T) *httptest.Server {
	return engineExposition(t, func(b *strings.Builder, n int) {
		fmt.Fprintf(b, "# TYPE llamacpp:prompt_tokens_total counter\nllamacpp:prompt_tokens_total %d\n", 150*n)
		fmt.Fprintf(b, "# TYPE llamacpp:tokens_predicted_total counter\nllamacpp:tokens_predicted_total %d\n", 40*n)
		fmt.Fprintf(b, "# TYPE llamacpp:requests_processing gauge\nllamacpp:requests_processing %d\n", 1+n%2)
		fmt.Fprintf(b, "# TYPE llamacpp:requests_deferred gauge\nllamacpp:requests_deferred %d\n", n%2)
	})
}
