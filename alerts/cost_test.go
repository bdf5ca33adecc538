// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package alerts_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llmprobe/llmprobe/alerts"
	"github.com/llmprobe/llmprobe/internal/promtest"
)

// costTest is a promtool test of the cost rules generated for a price of
// 2.5 per GPU-hour, GPUs selected by job, grouped by cluster: pod p of
// cluster eu1 runs on 2 GPUs and generates 200 tokens/s (vLLM); the same
// pod name in cluster us1 (another cluster's engine) on 1 GPU at 100
// tokens/s; GPUs of another job are not counted.
const costTest = `rule_files:
  - llmprobe.rules.yml
group_eval_order: [llmprobe.recording, llmprobe.slo, llmprobe.alerts]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      - series: 'DCGM_FI_DEV_POWER_USAGE{job="dcgm", cluster="eu1", gpu="0", namespace="llm", pod="p"}'
        values: '300x20'
      - series: 'DCGM_FI_DEV_POWER_USAGE{job="dcgm", cluster="eu1", gpu="1", namespace="llm", pod="p"}'
        values: '200x20'
      - series: 'DCGM_FI_DEV_POWER_USAGE{job="other", cluster="eu1", gpu="9", namespace="llm", pod="p"}'
        values: '1000x20'
      - series: 'DCGM_FI_DEV_POWER_USAGE{job="dcgm", cluster="us1", gpu="0", namespace="llm", pod="p"}'
        values: '350x20'
      - series: 'vllm:generation_tokens_total{job="vllm", cluster="eu1", namespace="llm", pod="p", model_name="a"}'
        values: '0+12000x20'
      - series: 'vllm:generation_tokens_total{job="vllm", cluster="us1", namespace="llm", pod="p", model_name="a"}'
        values: '0+6000x20'
    promql_expr_test:
      - expr: cluster_namespace_pod:llmprobe_gpu_joules_per_generated_token:ratio_rate5m
        eval_time: 10m
        exp_samples:
          - labels: 'cluster_namespace_pod:llmprobe_gpu_joules_per_generated_token:ratio_rate5m{cluster="eu1", namespace="llm", pod="p"}'
            value: 2.5
          - labels: 'cluster_namespace_pod:llmprobe_gpu_joules_per_generated_token:ratio_rate5m{cluster="us1", namespace="llm", pod="p"}'
            value: 3.5
      # 2 GPUs × 2.5 / 3600 s per hour / 200 tokens/s × 1e6; 1 × 2.5 / 3600 / 100 × 1e6.
      - expr: cluster_namespace_pod:llmprobe_gpu_cost_per_million_generated_tokens:ratio_rate5m
        eval_time: 10m
        exp_samples:
          - labels: 'cluster_namespace_pod:llmprobe_gpu_cost_per_million_generated_tokens:ratio_rate5m{cluster="eu1", namespace="llm", pod="p"}'
            value: 6.944444444444445
          - labels: 'cluster_namespace_pod:llmprobe_gpu_cost_per_million_generated_tokens:ratio_rate5m{cluster="us1", namespace="llm", pod="p"}'
            value: 6.944444444444445
`

// TestCostRulesFollowTheConfig: with a GPU price the cost per million
// generated tokens is recorded at that price, per cluster when the rules
// group by it, counting only the selected GPUs; without one (the
// committed rules) no cost series is recorded at all, rather than a cost
// of 0.
func TestCostRulesFollowTheConfig(t *testing.T) {
	cfg := alerts.DefaultConfig()
	cfg.GroupLabels = []string{"cluster"}
	cfg.Cost.GPUSelector = `job="dcgm"`
	cfg.Cost.GPUPricePerHour = 2.5
	rules, err := cfg.RulesYAML()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "llmprobe.rules.yml"), rules, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cost.yml"), []byte(costTest), 0o644); err != nil {
		t.Fatal(err)
	}
	promtest.TestRules(t, filepath.Join(dir, "cost.yml"))

	def, err := alerts.DefaultConfig().RulesYAML()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(def), "cost_per_million") {
		t.Error("the default rules (no GPU price) record a cost")
	}
	if !strings.Contains(string(def), alerts.DefaultConfig().JoulesPerTokenRecord()) {
		t.Error("the default rules lack the energy per token")
	}
}

// TestCostConfigValidate: settings that cannot produce working cost
// rules are refused, each named.
func TestCostConfigValidate(t *testing.T) {
	for field, mutate := range map[string]func(*alerts.Config){
		"cost.by":                 func(c *alerts.Config) { c.Cost.By = nil },
		"cost.by[0]":              func(c *alerts.Config) { c.Cost.By = []string{"a-b"} },
		"cost.window":             func(c *alerts.Config) { c.Cost.Window = 0 },
		"cost.gpu_price_per_hour": func(c *alerts.Config) { c.Cost.GPUPricePerHour = -1 },
		"cost.gpu_selector":       func(c *alerts.Config) { c.Cost.GPUSelector = `{job="x"}` },
		"cost.engine_selector":    func(c *alerts.Config) { c.Cost.EngineSelector = `job=` },
		"cluster_label":           func(c *alerts.Config) { c.ClusterLabel = "" },
		"trace_datasource_type":   func(c *alerts.Config) { c.TraceDatasourceType = "zipkin" },
	} {
		cfg := alerts.DefaultConfig()
		mutate(&cfg)
		err := cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), field+": ") {
			t.Errorf("%s: Validate() = %v", field, err)
		}
	}
}
