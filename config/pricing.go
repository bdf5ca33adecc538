// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package config

import "math"

// Pricing is what a target's tokens cost (docs/config.md "pricing"):
// read by `llmprobe plan` and the daemon's plan figures only, never by the
// probing. A hosted API is priced per million tokens (input, cached input,
// output); a self-hosted server by its GPU-hours, of which the probe
// takes the share its output tokens are of the server's (as bench's
// --gpu.price-per-hour prices them).
type Pricing struct {
	// InputPerMillion is the price of a million prompt tokens, and
	// CachedInputPerMillion of a million served from the provider's
	// prompt cache (unset: InputPerMillion); OutputPerMillion of a
	// million generated tokens.
	InputPerMillion       *float64 `yaml:"input_per_million,omitempty"`
	CachedInputPerMillion *float64 `yaml:"cached_input_per_million,omitempty"`
	OutputPerMillion      *float64 `yaml:"output_per_million,omitempty"`
	// GPUPricePerHour is what one of the server's GPUs costs an hour,
	// GPUs how many serve the target, and GeneratedTokensPerSecond what
	// the server generates a second over all its traffic (bench reports
	// it as generated_tokens_per_second).
	GPUPricePerHour          float64 `yaml:"gpu_price_per_hour,omitempty"`
	GPUs                     int     `yaml:"gpus,omitempty"`
	GeneratedTokensPerSecond float64 `yaml:"generated_tokens_per_second,omitempty"`
}

// UnmarshalYAML implements yaml.Unmarshaler (unknown keys are rejected).
func (p *Pricing) UnmarshalYAML(unmarshal func(any) error) error {
	type plain Pricing
	return decodePlain(unmarshal, (*plain)(p))
}

// PerToken reports whether p prices tokens (a hosted API), not GPU-hours.
func (p *Pricing) PerToken() bool {
	return p.InputPerMillion != nil || p.CachedInputPerMillion != nil || p.OutputPerMillion != nil
}

// CachedInput is the price of a million cached prompt tokens.
func (p *Pricing) CachedInput() float64 {
	if p.CachedInputPerMillion != nil {
		return *p.CachedInputPerMillion
	}
	if p.InputPerMillion != nil {
		return *p.InputPerMillion
	}
	return 0
}

func (p *Pricing) validate(errs *fieldErrors, path string) {
	price := func(field string, v float64) {
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			errs.add(path+"."+field, "must be a price of 0 or more, got %v", v)
		}
	}
	gpu := p.GPUPricePerHour != 0 || p.GPUs != 0 || p.GeneratedTokensPerSecond != 0
	if p.PerToken() {
		if gpu {
			errs.add(path, "price per million tokens (a hosted API) or by GPU-hours (a self-hosted server), not both")
			return
		}
		for _, f := range []struct {
			name string
			v    *float64
		}{{"input_per_million", p.InputPerMillion}, {"cached_input_per_million", p.CachedInputPerMillion}, {"output_per_million", p.OutputPerMillion}} {
			if f.v != nil {
				price(f.name, *f.v)
			}
		}
		if p.InputPerMillion == nil {
			errs.add(path+".input_per_million", "required with a price per million tokens")
		}
		if p.OutputPerMillion == nil {
			errs.add(path+".output_per_million", "required with a price per million tokens")
		}
		return
	}
	if !gpu {
		errs.add(path, "set input_per_million and output_per_million (a hosted API), or gpu_price_per_hour, gpus and generated_tokens_per_second (a self-hosted server)")
		return
	}
	if v := p.GPUPricePerHour; !(v > 0) || math.IsInf(v, 0) {
		errs.add(path+".gpu_price_per_hour", "must be a positive price of one GPU for an hour, got %v", v)
	}
	if p.GPUs < 1 {
		errs.add(path+".gpus", "must be the number of GPUs serving the target (at least 1), got %d", p.GPUs)
	}
	if v := p.GeneratedTokensPerSecond; !(v > 0) || math.IsInf(v, 0) {
		errs.add(path+".generated_tokens_per_second", "must be the server's positive generation throughput over all its traffic (bench's generated_tokens_per_second), got %v", v)
	}
}
