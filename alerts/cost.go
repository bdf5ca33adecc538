// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package alerts

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/common/model"
)

// Energy and cost per generated token, recorded from dcgm-exporter's
// power gauge and the model server's own generation-token counter.
//
// The denominator is the engine's counter, never llmprobe's: the probe
// sends a small share of a production server's traffic, and the GPU's
// power is spent on all of it, so joules or GPU-hours divided by the
// probe's tokens would overstate the cost by the inverse of that share.
// A GPU is joined to the engine using it by the labels both series carry
// (Cost.By: by default namespace and pod, which dcgm-exporter sets with
// its Kubernetes pod mapping and the scrape of the engine's pod carries).

// EngineGenerationTokenCounters are the counters of generated tokens per
// engine, as Prometheus stores them (TGI's is a histogram: its _sum).
var EngineGenerationTokenCounters = []struct{ Engine, Metric string }{
	{"vllm", "vllm:generation_tokens_total"},
	{"sglang", "sglang:generation_tokens_total"},
	{"tgi", "tgi_request_generated_tokens_sum"},
	{"llama.cpp", "llamacpp:tokens_predicted_total"},
}

// GPUPowerMetric is dcgm-exporter's board power gauge (watts).
const GPUPowerMetric = "DCGM_FI_DEV_POWER_USAGE"

// CostConfig configures the energy and cost recording rules.
type CostConfig struct {
	// GPUSelector is label matchers (without braces) of the
	// dcgm-exporter series to count, e.g. `job="dcgm-exporter"`. Empty
	// selects every GPU.
	GPUSelector string `yaml:"gpu_selector"`
	// EngineSelector is label matchers (without braces) of the engines'
	// token counters. Empty selects every engine.
	EngineSelector string `yaml:"engine_selector"`
	// By are the labels a GPU's series and its engine's series both
	// carry, which join them; the recorded series are per these labels
	// (and GroupLabels).
	By []string `yaml:"by"`
	// Window is the range power is averaged and tokens are rated over.
	Window model.Duration `yaml:"window"`
	// GPUPricePerHour is what one GPU costs per hour (in any currency;
	// the dashboards label it $). 0 leaves the cost rule out: GPU-hours
	// per million tokens are recorded either way.
	GPUPricePerHour float64 `yaml:"gpu_price_per_hour"`
}

func defaultCostConfig() CostConfig {
	return CostConfig{By: []string{"namespace", "pod"}, Window: model.Duration(5 * time.Minute)}
}

func (c Config) validateCost() []error {
	var errs []error
	if err := validateMatchers(c.Cost.GPUSelector); err != nil {
		errs = append(errs, fieldErr("cost.gpu_selector", "%v", err))
	}
	if err := validateMatchers(c.Cost.EngineSelector); err != nil {
		errs = append(errs, fieldErr("cost.engine_selector", "%v", err))
	}
	if len(c.Cost.By) == 0 {
		errs = append(errs, fieldErr("cost.by", "is empty: it must name the labels joining a GPU to its engine, e.g. [namespace, pod]"))
	}
	errs = append(errs, validateLabelList("cost.by", c.Cost.By, nil)...)
	if c.Cost.Window <= 0 {
		errs = append(errs, fieldErr("cost.window", "must be positive, got %s", c.Cost.Window))
	}
	if p := c.Cost.GPUPricePerHour; p < 0 || math.IsNaN(p) || math.IsInf(p, 0) {
		errs = append(errs, fieldErr("cost.gpu_price_per_hour", "must be 0 (no cost rule) or positive, got %g", p))
	}
	return errs
}

// CostLabels are the labels of the recorded cost series: GroupLabels,
// then Cost.By.
func (c Config) CostLabels() []string {
	out := slices.Clone(c.GroupLabels)
	for _, l := range c.Cost.By {
		if !slices.Contains(out, l) {
			out = append(out, l)
		}
	}
	return out
}

func (c Config) costRecord(metric, ops string) string {
	return strings.Join(c.CostLabels(), "_") + ":" + metric + ":" + ops
}

// GPUPowerRecord names the summed board power (watts) of the GPUs per
// CostLabels, each averaged over Cost.Window.
func (c Config) GPUPowerRecord() string {
	return c.costRecord("llmprobe_gpu_power_watts", "sum_avg_over_time"+win(c.Cost.Window))
}

// GPUCountRecord names the number of GPUs per CostLabels.
func (c Config) GPUCountRecord() string { return c.costRecord("llmprobe_gpus", "count") }

// EngineTokensRecord names the engines' generated tokens per second
// (all their traffic) per CostLabels.
func (c Config) EngineTokensRecord() string {
	return c.costRecord("llmprobe_engine_generation_tokens", "rate"+win(c.Cost.Window))
}

// JoulesPerTokenRecord names GPU energy per generated token.
func (c Config) JoulesPerTokenRecord() string {
	return c.costRecord("llmprobe_gpu_joules_per_generated_token", "ratio_rate"+win(c.Cost.Window))
}

// GPUHoursPerMillionTokensRecord names GPU-hours per million generated
// tokens.
func (c Config) GPUHoursPerMillionTokensRecord() string {
	return c.costRecord("llmprobe_gpu_hours_per_million_generated_tokens", "ratio_rate"+win(c.Cost.Window))
}

// CostPerMillionTokensRecord names the GPU cost of a million generated
// tokens at Cost.GPUPricePerHour (recorded only when it is set).
func (c Config) CostPerMillionTokensRecord() string {
	return c.costRecord("llmprobe_gpu_cost_per_million_generated_tokens", "ratio_rate"+win(c.Cost.Window))
}

func braced(sel string) string {
	if s := strings.TrimSpace(sel); s != "" {
		return "{" + s + "}"
	}
	return ""
}

// CostRules returns the energy and cost recording rules (part of the
// recording group: each reads the ones before it, in order).
func (c Config) CostRules() []Rule {
	by := byClause(c.CostLabels())
	w := win(c.Cost.Window)
	var tokens []string
	for _, e := range EngineGenerationTokenCounters {
		tokens = append(tokens, fmt.Sprintf("sum%s (rate(%s%s[%s]))", by, e.Metric, braced(c.Cost.EngineSelector), w))
	}
	// Tokens of zero (an idle engine) would make the ratios +Inf.
	perToken := "\n/\n(" + c.EngineTokensRecord() + " > 0)"
	rules := []Rule{
		{
			Record: c.GPUPowerRecord(),
			Expr:   fmt.Sprintf("sum%s (avg_over_time(%s%s[%s]))", by, GPUPowerMetric, braced(c.Cost.GPUSelector), w),
		},
		{
			Record: c.GPUCountRecord(),
			Expr:   fmt.Sprintf("count%s (%s%s)", by, GPUPowerMetric, braced(c.Cost.GPUSelector)),
		},
		{
			Record: c.EngineTokensRecord(),
			Expr:   strings.Join(tokens, "\nor\n"),
		},
		{
			// W / (tokens/s) = J per token.
			Record: c.JoulesPerTokenRecord(),
			Expr:   c.GPUPowerRecord() + perToken,
		},
		{
			// GPUs / (tokens/s) is GPU-seconds per token; × 1e6 / 3600.
			Record: c.GPUHoursPerMillionTokensRecord(),
			Expr:   c.GPUCountRecord() + " * 1e6 / 3600" + perToken,
		},
	}
	if c.Cost.GPUPricePerHour > 0 {
		rules = append(rules, Rule{
			Record: c.CostPerMillionTokensRecord(),
			Expr:   c.GPUHoursPerMillionTokensRecord() + " * " + FormatFloat(c.Cost.GPUPricePerHour),
		})
	}
	return rules
}
