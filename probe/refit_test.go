// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package probe_test

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmprobe/llmprobe/internal/promtest"
	"github.com/llmprobe/llmprobe/probe"
	"github.com/llmprobe/llmprobe/probe/wire"
	"github.com/llmprobe/llmprobe/sim"
)

// A target with workload_from follows production: a real Prometheus
// scrapes a "production" simulator fed with 700-token prompts, and the
// follower target, probing another simulator with a 16-token workload,
// refits its lengths from the production histograms and sends ~700-token
// prompts. A target whose Prometheus is unreachable keeps its configured
// workload and counts the failures.
func TestWorkloadFromPrometheus(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Prometheus")
	}
	_, prodURL := startSim(t, func(c *sim.Config) { c.ZeroLatency = true })
	_, probedURL := startSim(t, func(c *sim.Config) { c.ZeroLatency = true })
	u, _ := url.Parse(prodURL)
	prom := promtest.Start(t, promtest.Options{
		Targets: []promtest.ScrapeTarget{{JobName: "vllm", Address: u.Host, Interval: time.Second}},
	})

	cfg := loadConfig(t, `
global: {warmup: 0s, seed: 21}
workloads:
  prod:
    classes:
      - {name: real, prompt_tokens: 700, output_tokens: 60}
  small:
    classes:
      - {name: c, prompt_tokens: 16, output_tokens: 4}
targets:
  - {name: production, url: %[1]s, model: sim-model, workload: prod, arrival: {process: constant, rate: 20}, extra_body: {ignore_eos: true}}
  - name: follower
    url: %[2]s
    model: sim-model
    workload: small
    arrival: {process: constant, rate: 10}
    extra_body: {ignore_eos: true}
    workload_from:
      prometheus: {url: %[3]s, selector: 'job="vllm"', range: 1m, refresh: 1s}
  - name: orphan
    url: %[2]s
    model: sim-model
    workload: small
    arrival: {process: constant, rate: 10}
    workload_from:
      prometheus: {url: "http://127.0.0.1:1", refresh: 1s}
`, prodURL, probedURL, prom.URL)
	rec := newRecorder()
	e := probe.NewEngine(probe.Options{Observer: rec, Logger: slog.New(slog.DiscardHandler)})
	if err := e.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	defer e.Shutdown(context.Background())

	var follower, orphan probe.TargetStatus
	deadline := time.Now().Add(30 * time.Second)
	for {
		for _, s := range e.Status() {
			switch s.Name {
			case "follower":
				follower = s
			case "orphan":
				orphan = s
			}
		}
		if follower.Refit != nil && follower.Refit.Successes > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	rf := follower.Refit
	if rf == nil || rf.Successes == 0 {
		t.Fatalf("no successful refit in 30 s: %+v", rf)
	}
	// vLLM's prompt buckets around 700 are 500 and 1000: the fit can only
	// place the median within that bucket.
	if rf.Prompt[0] < 500 || rf.Prompt[0] > 1000 || rf.Output[0] < 50 || rf.Output[0] > 100 {
		t.Errorf("fitted prompt p50 %.0f (want 500-1000), output p50 %.0f (want 50-100)", rf.Prompt[0], rf.Output[0])
	}
	if !strings.Contains(rf.Source, prom.URL) || !strings.Contains(rf.Source, `job="vllm"`) {
		t.Errorf("source %q", rf.Source)
	}

	// Requests planned after the refit follow the production lengths.
	time.Sleep(700 * time.Millisecond)
	after := 0
	for _, r := range rec.byTarget("follower") {
		if r.Planned.After(rf.LastSuccess) && r.Outcome == wire.OutcomeSuccess {
			after++
			if r.PromptTokens < 300 || r.OutputTokens < 20 {
				t.Errorf("after the refit: prompt %d, output %d tokens; want production-like", r.PromptTokens, r.OutputTokens)
				break
			}
		}
	}
	if after == 0 {
		t.Error("no follower request after the refit")
	}

	if orphan.Refit == nil || orphan.Refit.Failures == 0 || orphan.Refit.Successes != 0 || orphan.Refit.Error == "" {
		t.Errorf("unreachable Prometheus: %+v", orphan.Refit)
	}
	for _, r := range rec.byTarget("orphan") {
		if r.PlannedPromptTokens > 40 {
			t.Fatalf("a failed refit changed the workload: planned %d tokens", r.PlannedPromptTokens)
		}
	}
}

// TestWorkloadFromHostilePrometheus: a Prometheus (or a proxy before it)
// that echoes the request's credentials in its error, or redirects to
// another host, shows neither the secret on the status page nor sends it
// on.
func TestWorkloadFromHostilePrometheus(t *testing.T) {
	const secret = "prom-token-5e4d3c2b1a09f8e7"
	var elsewhere atomic.Int64
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere.Add(1)
		http.Error(w, "got "+r.Header.Get("Authorization"), http.StatusForbidden)
	}))
	defer other.Close()
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"status":"error","errorType":"bad_data","error":"denied for `+r.Header.Get("Authorization")+`"}`, http.StatusUnauthorized)
	}))
	defer echo.Close()
	redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	defer redirect.Close()
	auth := fmt.Sprintf("refresh: 1s, http_client_config: {authorization: {credentials: %s}}", secret)
	for _, s := range refitFailures(t, 15*time.Second, map[string]string{
		"echoed":     fmt.Sprintf("{prometheus: {url: %s, %s}}", echo.URL, auth),
		"redirected": fmt.Sprintf("{prometheus: {url: %s, %s}}", redirect.URL, auth),
	}) {
		if strings.Contains(s.Refit.Error, secret) {
			t.Fatalf("%s: the refit error shows the secret: %s", s.Name, s.Refit.Error)
		}
	}
	if n := elsewhere.Load(); n != 0 {
		t.Fatalf("the redirect took the Prometheus credentials to another host (%d requests)", n)
	}
}

// TestWorkloadFromLargeAnswer: a Prometheus whose answer has no end fails
// the refit once it passes 8 MiB (fit.MaxPrometheusAnswer); the daemon
// does not read on.
func TestWorkloadFromLargeAnswer(t *testing.T) {
	var written atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		item := []byte(`{"metric":{"le":"1"},"value":[1,"1"]},`)
		w.Write([]byte(`{"status":"success","data":{"resultType":"vector","result":[`))
		for written.Load() < 400<<20 {
			n, err := w.Write(item)
			written.Add(int64(n))
			if err != nil {
				return
			}
		}
	}))
	defer srv.Close()
	from := fmt.Sprintf("{prometheus: {url: %s, refresh: 1h}}", srv.URL)
	if s := refitFailures(t, 60*time.Second, map[string]string{"t": from})[0]; !strings.Contains(s.Refit.Error, "larger than 8 MiB") {
		t.Errorf("refit error %q, want the answer refused past 8 MiB", s.Refit.Error)
	}
	srv.CloseClientConnections()
	if n := written.Load(); n > 64<<20 {
		t.Errorf("the server wrote %d MiB before the refit gave up", n>>20)
	}
}

// refitFailures runs the engine over targets that probe nothing (a
// closed port, at 0.1 requests/s) and refit their workload from
// workloadFrom[name] (a workload_from value), until every target's refit
// failed at least once (at most d); it stops the engine and returns the
// targets' status.
func refitFailures(t *testing.T, d time.Duration, workloadFrom map[string]string) []probe.TargetStatus {
	t.Helper()
	yml := "global: {warmup: 0s}\nworkloads:\n  small: {classes: [{name: c, prompt_tokens: 16, output_tokens: 4}]}\ntargets:\n"
	for _, name := range slices.Sorted(maps.Keys(workloadFrom)) {
		yml += fmt.Sprintf("  - {name: %s, url: \"http://127.0.0.1:1/v1\", model: m, workload: small, arrival: {rate: 0.1}, workload_from: %s}\n", name, workloadFrom[name])
	}
	cfg := loadConfig(t, "%s", yml)
	e := probe.NewEngine(probe.Options{Observer: newRecorder(), Logger: slog.New(slog.DiscardHandler)})
	if err := e.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	defer e.Shutdown(context.Background())
	deadline := time.Now().Add(d)
	for {
		st := e.Status()
		failed := 0
		for _, s := range st {
			if s.Refit != nil && s.Refit.Failures > 0 {
				failed++
			}
		}
		if failed == len(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("refits did not fail within %v: %+v", d, st)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
