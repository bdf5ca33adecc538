// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"bytes"
	"errors"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// exerciseMetrics sends a mix of requests so that every series has data.
func exerciseMetrics(t *testing.T, base string) (prompt, completion int) {
	t.Helper()
	for i := 0; i < 3; i++ {
		r := stream(t, base+"/v1/chat/completions", chatBody(strings.Repeat("shared prefix words ", 10)+"question", 5))
		prompt += r.usage.PromptTokens
		completion += r.usage.CompletionTokens
	}
	r := stream(t, base+"/v1/completions", completionBody("plain completion", 7))
	prompt += r.usage.PromptTokens
	completion += r.usage.CompletionTokens
	stream(t, base+"/v1/chat/completions", chatBody("x", 2), FaultHeader, "http_503")
	return prompt, completion
}

// colonLint is promtool's finding for vLLM's colon names, the one finding
// this exposition has on purpose (see metrics.go).
var colonLint = regexp.MustCompile(`^vllm:[a-z0-9_]+ metric names should not contain ':'$`)

func TestMetricsPromtool(t *testing.T) {
	promtool := requireTool(t, "PROMTOOL", "promtool")
	base, _ := startSim(t, zeroConfig())
	exerciseMetrics(t, base)
	exposition := scrape(t, base)

	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(exposition)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !(errors.As(err, &exit) && exit.ExitCode() == 3) { // 3: lint findings
		t.Fatalf("promtool check metrics: %v\n%s", err, out.String())
	}
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		if line != "" && !colonLint.MatchString(line) {
			t.Errorf("promtool: %q", line)
		}
	}
}

func TestMetricsLintInProcess(t *testing.T) {
	base, s := startSim(t, zeroConfig())
	exerciseMetrics(t, base)
	problems, err := testutil.GatherAndLint(s.Registry())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		if strings.HasPrefix(p.Metric, "vllm:") && p.Text == "metric names should not contain ':'" {
			continue
		}
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

func TestMetricsAccounting(t *testing.T) {
	base, _ := startSim(t, zeroConfig())
	prompt, completion := exerciseMetrics(t, base)
	m := scrape(t, base)
	const l = `{engine="0",model_name="sim-model"}`
	for series, want := range map[string]float64{
		"vllm:prompt_tokens_total" + l:                                                           float64(prompt),
		"vllm:generation_tokens_total" + l:                                                       float64(completion),
		"vllm:request_prompt_tokens_sum" + l:                                                     float64(prompt),
		"vllm:request_generation_tokens_sum" + l:                                                 float64(completion),
		"vllm:request_generation_tokens_count" + l:                                               4,
		"vllm:e2e_request_latency_seconds_count" + l:                                             4,
		"vllm:time_to_first_token_seconds_count" + l:                                             4,
		"vllm:inter_token_latency_seconds_count" + l:                                             float64(completion - 4),
		"vllm:prefix_cache_queries_total" + l:                                                    float64(prompt),
		"vllm:num_requests_running" + l:                                                          0,
		"vllm:num_requests_waiting" + l:                                                          0,
		"vllm:kv_cache_usage_perc" + l:                                                           0,
		`vllm:request_success_total{engine="0",finished_reason="length",model_name="sim-model"}`: 4,
		`llmprobe_sim_faults_injected_total{fault="http_503",model_name="sim-model"}`:            1,
	} {
		if got := metricValue(t, m, series); got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
	// The repeated chat prompt hit the prefix cache.
	if hits := metricValue(t, m, "vllm:prefix_cache_hits_total"+l); hits <= 0 {
		t.Errorf("vllm:prefix_cache_hits_total = %v, want > 0", hits)
	}
	// vLLM's bucket layouts.
	for _, want := range []string{
		`vllm:time_to_first_token_seconds_bucket{engine="0",model_name="sim-model",le="0.001"}`,
		`vllm:time_to_first_token_seconds_bucket{engine="0",model_name="sim-model",le="2560"}`,
		`vllm:inter_token_latency_seconds_bucket{engine="0",model_name="sim-model",le="80"}`,
		`vllm:e2e_request_latency_seconds_bucket{engine="0",model_name="sim-model",le="7680"}`,
		`vllm:request_prompt_tokens_bucket{engine="0",model_name="sim-model",le="5000"}`,
	} {
		if !strings.Contains(m, want+" ") {
			t.Errorf("bucket %s not exposed", want)
		}
	}
	if strings.Contains(m, `le="10000"`) {
		t.Error("token-count buckets go beyond max_model_len")
	}
}
