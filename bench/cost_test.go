// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package bench_test

import (
	"bytes"
	"context"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/llmprobe/llmprobe/bench"
	"github.com/llmprobe/llmprobe/bench/report"
	"github.com/llmprobe/llmprobe/internal/promtest"
	"github.com/llmprobe/llmprobe/servermetrics"
	"github.com/llmprobe/llmprobe/sim"
)

// TestCostPerTokenFromPrometheus: a real Prometheus scrapes the recorded
// dcgm-exporter exposition (gpu-node-1: 312.481 W and 61.207 W); each
// stage's energy per generated token is those GPUs' power over the tokens
// per second the engine's own counter (the simulator's, scraped by
// --server-metrics) says it generated in the stage, its GPU time and cost
// per million tokens the two GPUs at the price over the same tokens; the
// cells are in the text, the JSON and the Markdown. Without the server's
// count the probe's own tokens are used and the report says what that
// assumes; --gpu.count overrides the GPUs found.
func TestCostPerTokenFromPrometheus(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Prometheus")
	}
	fixture, err := os.ReadFile(filepath.Join("..", "dashboards", "testdata", "dcgm-exporter.prom"))
	if err != nil {
		t.Fatal(err)
	}
	dcgm := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		_, _ = w.Write(fixture)
	}))
	defer dcgm.Close()
	prom := promtest.Start(t, promtest.Options{
		Targets:        []promtest.ScrapeTarget{{JobName: "dcgm", Address: dcgm.Listener.Addr().String()}},
		ScrapeInterval: 500 * time.Millisecond,
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := prom.WaitFor(ctx, `count(DCGM_FI_DEV_POWER_USAGE) == 2`, func(r *promtest.Result) bool { return !r.Empty() }); err != nil {
		t.Fatal(err)
	}
	const power = 312.481 + 61.207 // the fixture's two GPUs

	rs := startRecordingSim(t, sim.DefaultConfig())
	cfg := serverConfig(t, simTarget("sim", rs.url))
	near := func(what string, got *servermetrics.Float, want float64) {
		t.Helper()
		if got == nil {
			t.Errorf("%s: missing, want %g", what, want)
			return
		}
		t.Logf("%s = %g (want %g)", what, *got, want)
		if math.Abs(float64(*got)-want) > 1e-9*math.Max(1, math.Abs(want)) {
			t.Errorf("%s = %g, want %g", what, *got, want)
		}
	}

	rep, err := bench.Run(context.Background(), bench.Options{
		Config: cfg, Stages: []bench.Stage{{Rate: 5, Duration: 2500 * time.Millisecond}},
		Warmup: 500 * time.Millisecond, PrometheusURL: prom.URL, GPUSelector: `Hostname="gpu-node-1"`,
		ServerMetrics: []string{rs.url + "/metrics"}, ServerMetricsInterval: 500 * time.Millisecond,
		GPUPricePerHour: 2.5,
	})
	if err != nil {
		t.Fatal(err)
	}
	text := logReport(t, rep)
	s := rep.Stages[0]
	c := s.Cost
	if c == nil || s.Server == nil || s.Server.GenerationTokensPerSec == nil {
		t.Fatalf("cost %+v, server %+v", c, s.Server)
	}
	tps := float64(*s.Server.GenerationTokensPerSec)
	if c.TokensSource != servermetrics.CostTokensServer || float64(c.TokensPerSec) != tps || !(tps > 0) {
		t.Errorf("tokens %s %g/s, want the server's %g/s", c.TokensSource, c.TokensPerSec, tps)
	}
	if c.GPUs != 2 || c.PricePerGPUHour != 2.5 || len(c.Notes) != 0 {
		t.Errorf("GPUs %d, price %g, notes %q", c.GPUs, c.PricePerGPUHour, c.Notes)
	}
	near("GPU power", c.PowerWatts, power)
	near("J/token", c.JoulesPerToken, power/tps)
	near("GPU-hours per 1M tokens", c.GPUHoursPerMillion, 2/tps*1e6/3600)
	near("cost per 1M tokens", c.CostPerMillion, 2.5*2/tps*1e6/3600)
	for _, want := range []string{"J/token", "GPU-h/1M tok", "cost/1M tok", "373.7 W", "server"} {
		if !strings.Contains(text, want) {
			t.Errorf("the text lacks %q", want)
		}
	}
	var js, md bytes.Buffer
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	if err := rep.WriteMarkdown(&md, report.MarkdownOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"joules_per_generated_token"`, `"gpu_hours_per_million_generated_tokens"`, `"cost_per_million_generated_tokens"`, `"tokens_source": "server"`} {
		if !strings.Contains(js.String(), want) {
			t.Errorf("the JSON lacks %s", want)
		}
	}
	for _, want := range []string{"### Energy and cost per generated token", "| 373.7 W | 2 |", "engine's own generation-token counter"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("the Markdown lacks %q", want)
		}
	}

	// Without the server's count: the probe's served tokens, said so;
	// --gpu.count overrides the GPUs Prometheus found.
	rep, err = bench.Run(context.Background(), bench.Options{
		Config: cfg, Stages: []bench.Stage{{Rate: 5, Duration: 2 * time.Second}},
		Warmup: 500 * time.Millisecond, PrometheusURL: prom.URL, GPUSelector: `Hostname="gpu-node-1"`,
		GPUCount: 8, GPUPricePerHour: 2,
	})
	if err != nil {
		t.Fatal(err)
	}
	text = logReport(t, rep)
	s = rep.Stages[0]
	c = s.Cost
	if c == nil || c.TokensSource != servermetrics.CostTokensProbe || float64(c.TokensPerSec) != s.ServedOutputTokensPerSec || c.GPUs != 8 {
		t.Fatalf("cost %+v, served %g tok/s", c, s.ServedOutputTokensPerSec)
	}
	near("J/token (probe's tokens)", c.JoulesPerToken, power/s.ServedOutputTokensPerSec)
	near("cost per 1M tokens (8 GPUs)", c.CostPerMillion, 2*8/s.ServedOutputTokensPerSec*1e6/3600)
	if !strings.Contains(text, "probe's own output tokens: right only if the GPUs served nothing but this bench") {
		t.Error("the text does not say the tokens are the probe's")
	}

	// A price without any way to count the GPUs is refused before the run.
	if _, err := bench.Run(context.Background(), bench.Options{Config: cfg, Stages: []bench.Stage{{Rate: 1, Duration: time.Second}},
		GPUPricePerHour: 2}); err == nil || !strings.Contains(err.Error(), "number of GPUs") {
		t.Errorf("price without GPU count: %v", err)
	}
}
