// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package config

import "testing"

func TestPricingGood(t *testing.T) {
	cfg, err := Load([]byte(discoveryBase+`    url: http://h:1/v1
    pricing: {input_per_million: 0.15, cached_input_per_million: 0.075, output_per_million: 0.6}
  - name: self
    model: m
    workload: w
    arrival: {rate: 1}
    url: http://h:2/v1
    pricing: {gpu_price_per_hour: 2.5, gpus: 2, generated_tokens_per_second: 1800}
  - name: free
    model: m
    workload: w
    arrival: {rate: 1}
    url: http://h:3/v1
    pricing: {input_per_million: 0, output_per_million: 0}
`), "x.yml")
	if err != nil {
		t.Fatal(err)
	}
	p := cfg.Targets[0].Pricing
	if !p.PerToken() || *p.InputPerMillion != 0.15 || p.CachedInput() != 0.075 || *p.OutputPerMillion != 0.6 {
		t.Errorf("per token: %+v", p)
	}
	p = cfg.Targets[1].Pricing
	if p.PerToken() || p.GPUPricePerHour != 2.5 || p.GPUs != 2 || p.GeneratedTokensPerSecond != 1800 {
		t.Errorf("gpu: %+v", p)
	}
	if p := cfg.Targets[2].Pricing; !p.PerToken() || p.CachedInput() != 0 {
		t.Errorf("free: %+v", p)
	}
}

// TestPricingErrors: every mistake names the file, line and field.
func TestPricingErrors(t *testing.T) {
	tests := []struct{ name, lines, want string }{
		{"empty", "    url: http://h:1/v1\n    pricing: {}\n",
			`x.yml:11:5: targets[0].pricing: set input_per_million and output_per_million (a hosted API), or gpu_price_per_hour, gpus and generated_tokens_per_second (a self-hosted server)`},
		{"both kinds", "    url: http://h:1/v1\n    pricing: {input_per_million: 1, output_per_million: 2, gpus: 1}\n",
			`x.yml:11:5: targets[0].pricing: price per million tokens (a hosted API) or by GPU-hours (a self-hosted server), not both`},
		{"negative", "    url: http://h:1/v1\n    pricing:\n      input_per_million: -1\n      output_per_million: 2\n",
			`x.yml:12:7: targets[0].pricing.input_per_million: must be a price of 0 or more, got -1`},
		{"no output", "    url: http://h:1/v1\n    pricing:\n      input_per_million: 1\n",
			`x.yml:11:5: targets[0].pricing.output_per_million: required with a price per million tokens`},
		{"gpu without throughput", "    url: http://h:1/v1\n    pricing:\n      gpu_price_per_hour: 2\n      gpus: 1\n",
			`x.yml:11:5: targets[0].pricing.generated_tokens_per_second: must be the server's positive generation throughput over all its traffic (bench's generated_tokens_per_second), got 0`},
		{"gpus zero", "    url: http://h:1/v1\n    pricing:\n      gpu_price_per_hour: 2\n      generated_tokens_per_second: 100\n",
			`x.yml:11:5: targets[0].pricing.gpus: must be the number of GPUs serving the target (at least 1), got 0`},
		{"unknown key", "    url: http://h:1/v1\n    pricing:\n      input_per_million: 1\n      output_per_million: 1\n      per_request: 3\n",
			`x.yml:14:7: targets[0].pricing.per_request: unknown field "per_request"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load([]byte(discoveryBase+tt.lines), "x.yml")
			if err == nil {
				t.Fatal("no error")
			}
			if got := err.Error(); got != tt.want {
				t.Errorf("got\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}
