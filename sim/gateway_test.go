// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestGatewayDelayNotSeenByEngine: the gateway's delay is in the
// client's TTFT and not in vllm:time_to_first_token_seconds.
func TestGatewayDelayNotSeenByEngine(t *testing.T) {
	const delay = 400 * time.Millisecond
	cfg := DefaultConfig()
	cfg.EOSProbability = 0
	cfg.PrefillBase, cfg.DecodeBase = time.Millisecond, 2*time.Millisecond
	cfg.ScheduleScale = 0.005 // the step after 1m comes after 0.3s
	cfg.Gateway = GatewayConfig{Steps: []GatewayStep{{After: time.Minute, Delay: delay}}}
	base, _ := startSim(t, cfg)
	waitForMetric(t, base, `llmprobe_sim_gateway_delay_seconds{model_name="sim-model"}`, delay.Seconds())
	var client time.Duration
	const n = 3
	for i := 0; i < n; i++ {
		r := stream(t, base+"/v1/chat/completions", chatBody("through the gateway", 3))
		if !r.done {
			t.Fatalf("stream: %v", r.readErr)
		}
		if r.ttft() < delay {
			t.Errorf("client TTFT %v, below the gateway's %v", r.ttft(), delay)
		}
		client += r.ttft()
	}
	m := scrape(t, base)
	server := metricValue(t, m, series("vllm:time_to_first_token_seconds_sum"))
	if c := metricValue(t, m, series("vllm:time_to_first_token_seconds_count")); c != n {
		t.Fatalf("%v TTFT observations, want %d", c, n)
	}
	// The client's TTFT holds the delay and the server's; the server's
	// is a few milliseconds here (well below the delay even on a loaded
	// machine).
	if gap := client.Seconds() - server; gap < n*delay.Seconds() {
		t.Errorf("client TTFT sum %v − server's %.3fs = %.3fs, want ≥ %v", client, server, gap, n*delay)
	}
	if server >= n*delay.Seconds() {
		t.Errorf("server TTFT sum %.3fs holds the gateway's delay (%d × %v)", server, n, delay)
	}
}

// TestGatewaySparesScrapesAndShutdown: the metrics endpoints are read
// past the gateway, and a request held by it does not hold up Shutdown.
func TestGatewaySparesScrapesAndShutdown(t *testing.T) {
	cfg := zeroConfig()
	cfg.Gateway = GatewayConfig{Delay: maxGatewayDelay}
	base, s := startSim(t, cfg)
	for _, path := range []string{"/metrics", "/dcgm/metrics"} {
		start := time.Now()
		resp, err := testClient.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if el := time.Since(start); el > maxGatewayDelay/2 {
			t.Errorf("GET %s took %v: held by the gateway", path, el)
		}
	}
	held := make(chan int, 1)
	go func() {
		resp, err := testClient.Get(base + "/health")
		if err != nil {
			held <- 0
			return
		}
		resp.Body.Close()
		held <- resp.StatusCode
	}()
	time.Sleep(100 * time.Millisecond) // let it reach the gateway
	ctx, cancel := context.WithTimeout(context.Background(), maxGatewayDelay/2)
	defer cancel()
	start := time.Now()
	if err := s.Shutdown(ctx); err != nil {
		t.Errorf("Shutdown with a request in the gateway: %v after %v", err, time.Since(start))
	}
	<-held
}

func TestGatewaySchedule(t *testing.T) {
	start := time.Now()
	g := newGatewaySchedule(GatewayConfig{Delay: 5 * time.Millisecond, Steps: []GatewayStep{
		{After: time.Minute, Delay: 300 * time.Millisecond}, {After: 2 * time.Minute, Delay: 0},
	}}, 0.5, start)
	for off, want := range map[time.Duration]time.Duration{
		0: 5 * time.Millisecond, 29 * time.Second: 5 * time.Millisecond, 30 * time.Second: 300 * time.Millisecond,
		59 * time.Second: 300 * time.Millisecond, time.Minute: 0, time.Hour: 0,
	} {
		if got := g.delayAt(start.Add(off)); got != want {
			t.Errorf("delay at %v (scale 0.5): %v, want %v", off, got, want)
		}
	}
}

func TestGatewayConfigErrors(t *testing.T) {
	if cfg, err := parseConfig([]byte("gateway: {delay: 5ms, steps: [{after: 2m, delay: 300ms}]}\n")); err != nil ||
		cfg.Gateway.Delay != 5*time.Millisecond || len(cfg.Gateway.Steps) != 1 || cfg.Gateway.Steps[0] != (GatewayStep{2 * time.Minute, 300 * time.Millisecond}) {
		t.Errorf("gateway: %v, %+v", err, cfg.Gateway)
	}
	many := "gateway:\n  steps:\n"
	for i := 0; i <= maxGatewaySteps; i++ {
		many += "    - {after: " + (time.Duration(i) * time.Second).String() + ", delay: 1ms}\n"
	}
	for doc, want := range map[string]string{
		"gateway: {delay: -1ms}\n": "line 1: gateway.delay: must be between 0 and 10s, got -1ms",
		"gateway:\n  delay: 11s\n": "line 2: gateway.delay: must be between 0 and 10s, got 11s",
		"gateway:\n  steps:\n    - {after: 1m, delay: 1ms}\n    - {after: 1m, delay: 2ms}\n": "line 4: gateway.steps[1].after: must be later than gateway.steps[0].after (1m0s), got 1m0s",
		"gateway:\n  steps:\n    - {after: -1m, delay: 1ms}\n":                               "line 3: gateway.steps[0].after: must not be negative",
		"gateway:\n  steps:\n    - {after: 1m, delay: 1h}\n":                                 "line 3: gateway.steps[0].delay: must be between 0 and 10s, got 1h0m0s",
		"gateway: {dealy: 5ms}\n":                                                            "field dealy not found",
		"gateway: {delay: 5}\n":                                                              "cannot unmarshal !!int `5` into time.Duration",
		many:                                                                                 "line 2: gateway.steps: at most 64 steps, got 65",
	} {
		_, err := parseConfig([]byte(doc))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want %q", doc, err, want)
		}
	}
}

// httpGet returns the body of a GET.
func httpGet(t *testing.T, url string) string {
	t.Helper()
	resp, err := testClient.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d, %v", url, resp.StatusCode, err)
	}
	return string(b)
}
