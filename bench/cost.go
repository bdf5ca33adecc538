// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package bench

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
)

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

// checkCostOptions refuses a price or count that cannot give a figure,
// before anything runs.
func checkCostOptions(opts Options) error {
	if p := opts.GPUPricePerHour; p < 0 || !Float(p).finite() {
		return fmt.Errorf("the GPU price per hour must be 0 (none) or positive, got %g", p)
	}
	if opts.GPUCount < 0 {
		return fmt.Errorf("the GPU count must not be negative, got %d", opts.GPUCount)
	}
	if opts.GPUPricePerHour > 0 && opts.GPUCount == 0 && opts.PrometheusURL == "" {
		return fmt.Errorf("a GPU price per hour needs the number of GPUs: give a GPU count, or a Prometheus URL whose dcgm-exporter series count them")
	}
	return nil
}

// stageCost computes a stage's CostStats from its target reports (GPU and
// Server set) and the options; nil when neither GPUs nor a price were
// asked for.
func stageCost(stages []*StageReport, gpu *GPUStats, opts Options) *CostStats {
	if gpu == nil && opts.GPUPricePerHour <= 0 && opts.GPUCount <= 0 {
		return nil
	}
	c := &CostStats{TokensSource: CostTokensServer, PricePerGPUHour: opts.GPUPricePerHour}
	servers := map[string]bool{}
	var server float64
	for _, s := range stages {
		if s.Server == nil || s.Server.GenerationTokensPerSec == nil || !s.Server.GenerationTokensPerSec.finite() {
			c.TokensSource = CostTokensProbe
			break
		}
		if !servers[s.Server.URL] {
			servers[s.Server.URL] = true
			server += float64(*s.Server.GenerationTokensPerSec)
		}
	}
	if c.TokensSource == CostTokensServer && len(stages) > 0 {
		c.TokensPerSec = Float(server)
	} else {
		c.TokensSource = CostTokensProbe
		var probe float64
		for _, s := range stages {
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

// writeCost writes each stage's energy and cost per token once (nothing
// when no stage has them).
func writeCost(w io.Writer, stages []*StageReport) {
	var rows []*StageReport
	for _, s := range stages {
		if s.Cost != nil && (len(rows) == 0 || rows[len(rows)-1].Stage != s.Stage) {
			rows = append(rows, s)
		}
	}
	if len(rows) == 0 {
		return
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "stage\tgen tok/s\ttokens\tpower\tGPUs\tJ/token\tGPU-h/1M tok\tcost/1M tok\t")
	for _, s := range rows {
		c := s.Cost
		gpus := "-"
		if c.GPUs > 0 {
			gpus = fmt.Sprint(c.GPUs)
		}
		fmt.Fprintf(tw, "%d\t%.0f\t%s\t%s\t%s\t%s\t%s\t%s\t\n", s.Stage, float64(c.TokensPerSec), c.TokensSource,
			fmtOpt(c.PowerWatts, "%.1f W", 1), gpus, fmtOpt(c.JoulesPerToken, "%.3g", 1),
			fmtOpt(c.GPUHoursPerMillion, "%.3g", 1), fmtOpt(c.CostPerMillion, "%.3g", 1))
	}
	_ = tw.Flush()
	var notes []string
	for _, s := range rows {
		for _, n := range s.Cost.Notes {
			notes = append(notes, fmt.Sprintf("stage %d cost: %s", s.Stage, n))
		}
	}
	for _, n := range slices.Compact(notes) {
		fmt.Fprintln(w, n)
	}
}

// writeCostMarkdown adds a stage's energy and cost per token to the
// Markdown report (nothing without them).
func writeCostMarkdown(b *strings.Builder, s *StageReport) {
	c := s.Cost
	if c == nil {
		return
	}
	fmt.Fprintf(b, "### Energy and cost per generated token\n\n")
	src := "the engine's own generation-token counter (all its traffic)"
	if c.TokensSource == CostTokensProbe {
		src = "the probe's own output tokens"
	}
	fmt.Fprintf(b, "%.0f tokens/s generated, from %s.\n\n", float64(c.TokensPerSec), src)
	for _, n := range c.Notes {
		fmt.Fprintf(b, "- %s\n", mdEscape(n))
	}
	if len(c.Notes) > 0 {
		b.WriteString("\n")
	}
	gpus := "-"
	if c.GPUs > 0 {
		gpus = fmt.Sprint(c.GPUs)
	}
	price := "-"
	if c.PricePerGPUHour > 0 {
		price = fmt.Sprintf("%g", c.PricePerGPUHour)
	}
	b.WriteString("| GPU power | GPUs | J/token | GPU-hours per 1M tokens | price per GPU-hour | cost per 1M tokens |\n|--:|--:|--:|--:|--:|--:|\n")
	fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s |\n\n", fmtOpt(c.PowerWatts, "%.1f W", 1), gpus, fmtOpt(c.JoulesPerToken, "%.3g", 1),
		fmtOpt(c.GPUHoursPerMillion, "%.3g", 1), price, fmtOpt(c.CostPerMillion, "%.3g", 1))
}
