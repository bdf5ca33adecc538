// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package servermetrics

import "fmt"

// Energy and cost per generated token, per stage: the GPUs' power
// (dcgm-exporter through --prometheus.url, averaged over the stage's
// measured window) and their number (the GPUs found, or --gpu.count)
// over the tokens generated per second of that window. The tokens are the
// engine's own count when every target's server metrics give it
// (--server-metrics: all the engine's traffic, which the power is spent
// on), else the probe's served output tokens, which are right only when
// the selected GPUs served nothing but this bench.

// Token sources of CostStats.
const (
	CostTokensServer = "server"
	CostTokensProbe  = "probe"
)

// CostStats is one stage's energy and cost per generated token, the same
// for every target of the stage (like GPUStats). A figure that cannot be
// computed is null and Notes say why.
type CostStats struct {
	// TokensPerSec are the tokens generated per second over the stage's
	// measured window, summed over its targets (over distinct servers
	// when TokensSource is "server").
	TokensSource string `json:"tokens_source"`
	TokensPerSec Float  `json:"generated_tokens_per_second"`
	// PowerWatts is the selected GPUs' summed average power.
	PowerWatts *Float `json:"gpu_power_watts,omitempty"`
	// GPUs is --gpu.count, else the number of GPUs Prometheus reported.
	GPUs int `json:"gpus,omitempty"`
	// JoulesPerToken is PowerWatts / TokensPerSec.
	JoulesPerToken *Float `json:"joules_per_generated_token,omitempty"`
	// GPUHoursPerMillion is GPUs / TokensPerSec × 10⁶ / 3600.
	GPUHoursPerMillion *Float `json:"gpu_hours_per_million_generated_tokens,omitempty"`
	// PricePerGPUHour is --gpu.price-per-hour; CostPerMillion is
	// GPUHoursPerMillion × it.
	PricePerGPUHour float64  `json:"gpu_price_per_hour,omitempty"`
	CostPerMillion  *Float   `json:"cost_per_million_generated_tokens,omitempty"`
	Notes           []string `json:"notes,omitempty"`
}

// CostOptions are what a stage's cost is figured with.
type CostOptions struct {
	// GPUPricePerHour is what one GPU costs per hour (0: no cost).
	GPUPricePerHour float64
	// GPUCount is the number of GPUs serving the targets (0: those
	// Prometheus reports).
	GPUCount int
	// Prometheus says a Prometheus is asked for the GPUs' figures
	// (QueryGPU), which count them.
	Prometheus bool
}

// Check refuses a price or count that cannot give a figure, before
// anything runs.
func (opts CostOptions) Check() error {
	if p := opts.GPUPricePerHour; p < 0 || !Float(p).finite() {
		return fmt.Errorf("the GPU price per hour must be 0 (none) or positive, got %g", p)
	}
	if opts.GPUCount < 0 {
		return fmt.Errorf("the GPU count must not be negative, got %d", opts.GPUCount)
	}
	if opts.GPUPricePerHour > 0 && opts.GPUCount == 0 && !opts.Prometheus {
		return fmt.Errorf("a GPU price per hour needs the number of GPUs: give a GPU count, or a Prometheus URL whose dcgm-exporter series count them")
	}
	return nil
}

// CostTarget is what a stage's cost reads of one of its targets: its
// server's figures (nil without) and the output tokens per second the
// probe was served in the stage's measured window.
type CostTarget struct {
	Server                   *Stats
	ServedOutputTokensPerSec float64
}

// StageCost computes a stage's CostStats from its targets and GPUs and
// the options; nil when neither GPUs nor a price were asked for.
func StageCost(targets []CostTarget, gpu *GPUStats, opts CostOptions) *CostStats {
	if gpu == nil && opts.GPUPricePerHour <= 0 && opts.GPUCount <= 0 {
		return nil
	}
	c := &CostStats{TokensSource: CostTokensServer, PricePerGPUHour: opts.GPUPricePerHour}
	servers := map[string]bool{}
	var server float64
	for _, s := range targets {
		if s.Server == nil || s.Server.GenerationTokensPerSec == nil || !s.Server.GenerationTokensPerSec.finite() {
			c.TokensSource = CostTokensProbe
			break
		}
		if !servers[s.Server.URL] {
			servers[s.Server.URL] = true
			server += float64(*s.Server.GenerationTokensPerSec)
		}
	}
	if c.TokensSource == CostTokensServer && len(targets) > 0 {
		c.TokensPerSec = Float(server)
	} else {
		c.TokensSource = CostTokensProbe
		var probe float64
		for _, s := range targets {
			probe += s.ServedOutputTokensPerSec
		}
		c.TokensPerSec = Float(probe)
		c.Notes = append(c.Notes, "tokens are the probe's own output tokens: right only if the GPUs served nothing but this bench "+
			"(--server-metrics for every target counts the engine's tokens of all its traffic)")
	}

	if gpu != nil {
		var sum float64
		missing := len(gpu.Devices) == 0
		for _, d := range gpu.Devices {
			if d.PowerWatts == nil || !d.PowerWatts.finite() {
				missing = true
				break
			}
			sum += float64(*d.PowerWatts)
		}
		if missing {
			c.Notes = append(c.Notes, "no energy per token: Prometheus gave no finite "+GPUMetrics.Power+" for every selected GPU")
		} else {
			c.PowerWatts = ptr(sum)
		}
	}
	switch {
	case opts.GPUCount > 0:
		c.GPUs = opts.GPUCount
	case gpu != nil && len(gpu.Devices) > 0:
		c.GPUs = len(gpu.Devices)
	default:
		c.Notes = append(c.Notes, "no GPU time per token: no GPU found (--gpu.count, or --prometheus.url with --gpu.selector)")
	}

	tps := float64(c.TokensPerSec)
	if !(tps > 0) {
		c.Notes = append(c.Notes, "no figure per token: no token was generated in the stage's measured window")
		return c
	}
	if c.PowerWatts != nil {
		c.JoulesPerToken = ptr(float64(*c.PowerWatts) / tps)
	}
	if c.GPUs > 0 {
		c.GPUHoursPerMillion = ptr(float64(c.GPUs) / tps * 1e6 / 3600)
		if opts.GPUPricePerHour > 0 {
			c.CostPerMillion = ptr(float64(*c.GPUHoursPerMillion) * opts.GPUPricePerHour)
		}
	}
	return c
}
