// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package probe_test

import (
	"bytes"
	"context"
	"flag"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	"github.com/llmprobe/llmprobe/config"
	"github.com/llmprobe/llmprobe/exporter"
	"github.com/llmprobe/llmprobe/internal/simtest"
	"github.com/llmprobe/llmprobe/probe"
	"github.com/llmprobe/llmprobe/probe/wire"
	"github.com/llmprobe/llmprobe/sim"
)

var updateExposition = flag.Bool("update-exposition", false, "rewrite testdata/golden/exposition.txt from the current code")

// expositionArrivals is the number of arrivals each target may have.
const expositionArrivals = 6

// TestExpositionGolden pins the metrics exposition of a fixed-seed run: the
// engine, wired to exporter.Metrics as the daemon wires it, probes the
// in-process simulator (zero latency, no early stops) on one target per
// API. Each target runs in an engine of its own whose arrival hook lets
// exactly expositionArrivals arrivals through, one at a time, each once
// every earlier one has ended (a conversation with all its turns), so that
// the simulator sees the same requests in the same order on every run.
// The exposition is then scraped with every family, HELP and TYPE line
// and label set, and every value that does not depend on timing (request,
// token, outcome and conversation counts, histogram counts); time-dependent
// values (bucket distributions, sums, lags, rates, timestamps, the
// harness' own figures) are replaced by "T". Run with -update-exposition
// only after an intended change of the metrics.
func TestExpositionGolden(t *testing.T) {
	simCfg := sim.DefaultConfig()
	simCfg.Seed = 1
	simCfg.ZeroLatency = true
	simCfg.EOSProbability = 0
	simCfg.ReasoningTokens = 2
	simCfg.Adapters = []sim.AdapterConfig{{Name: "vision-lora"}}
	base := simtest.Start(t, simCfg).URL()
	cfg := loadConfig(t, `
global: {warmup: 0s, late_after: 1h, seed: 11, saturation: {max_lag: 1h}}
workloads:
  chatty:
    classes:
      - name: talk
        weight: 0.6
        prompt_tokens: {dist: uniform, min: 16, max: 200}
        output_tokens: {dist: uniform, min: 2, max: 12}
        prefix: {groups: 2, tokens: 16, probability: 0.7}
        turns: {count: {dist: uniform, min: 1, max: 3}, think_time: 0s, user_tokens: 12}
        sampling: {temperature: 0.7, top_p: 0.9}
        slo: {objective: 0.9, ttft: 1h, tpot: 1h}
      - name: look
        weight: 0.4
        prompt_tokens: 40
        output_tokens: 6
        model: vision-lora
        images: {count: 1, width: 32, format: png}
  agent:
    classes:
      - name: act
        prompt_tokens: {dist: uniform, min: 20, max: 80}
        output_tokens: 8
        tools: [{type: function, function: {name: lookup, parameters: {type: object}}}]
        tool_choice: required
  plain:
    classes:
      - {name: ping, prompt_tokens: {dist: uniform, min: 8, max: 64}, output_tokens: {dist: uniform, min: 1, max: 9}}
  embed:
    classes:
      - {name: batch, prompt_tokens: 24, output_tokens: 1, batch_size: 3}
targets:
  - {name: chat, url: "%[1]s", api: chat, model: sim-model, workload: chatty, tokenize: off, arrival: {process: constant, rate: 50}, max_inflight: 100, slo: {objective: 0.99, ttft: 1h, tpot: 1h}}
  - {name: claude, url: "%[1]s", api: messages, model: sim-model, workload: chatty, tokenize: off, arrival: {process: constant, rate: 50}, max_inflight: 100}
  - {name: resp, url: "%[1]s", api: responses, model: sim-model, workload: agent, tokenize: off, arrival: {process: constant, rate: 50}, max_inflight: 100}
  - {name: comp, url: "%[1]s", api: completions, model: sim-model, workload: plain, tokenize: off, arrival: {process: constant, rate: 50}, max_inflight: 100}
  - {name: emb, url: "%[1]s", api: embeddings, model: sim-model, workload: embed, tokenize: off, arrival: {process: constant, rate: 50}, max_inflight: 100}
`, base)

	reg := prometheus.NewRegistry()
	metrics := exporter.NewMetrics(reg)
	reloader := exporter.NewReloader(func() (*config.Config, error) { return cfg, nil }, slog.New(slog.DiscardHandler), reg, exporter.Infallible(metrics.SetConfig))
	if err := reloader.Reload(); err != nil {
		t.Fatal(err)
	}
	g := &gate{Observer: metrics}
	g.cond = sync.NewCond(&g.mu)
	release := make(chan struct{})
	var engines []*probe.Engine
	var statuses []func() []probe.TargetStatus
	stop := func() {
		select {
		case <-release:
		default:
			close(release)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, e := range engines {
			if err := e.Shutdown(ctx); err != nil {
				t.Errorf("Shutdown: %v", err)
			}
		}
		engines = nil
	}
	defer stop()
	reg.MustRegister(exporter.NewStatusCollector(func() []probe.TargetStatus {
		var out []probe.TargetStatus
		for _, s := range statuses {
			out = append(out, s()...)
		}
		return out
	}))

	for _, tg := range cfg.Targets {
		e := probe.NewEngine(probe.Options{Observer: g, Logger: slog.New(slog.DiscardHandler)})
		if len(engines) == 0 {
			reg.MustRegister(exporter.NewHarnessCollector(e.Harness))
		}
		engines = append(engines, e)
		statuses = append(statuses, e.Status)
		base, arrivals := g.ended(), 0
		probe.SetArrivalHook(e, func(time.Time) {
			arrivals++
			if arrivals > expositionArrivals {
				<-release
				return
			}
			if !g.wait(base+arrivals-1, 30*time.Second) {
				t.Errorf("%s: arrival %d: the earlier ones did not end within 30s", tg.Name, arrivals)
			}
		})
		one := *cfg
		one.Targets = []*config.Target{tg}
		if err := e.Apply(&one); err != nil {
			t.Fatal(err)
		}
		if !g.wait(base+expositionArrivals, 60*time.Second) {
			t.Fatalf("%s: %d of %d arrivals ended within 60s", tg.Name, g.ended()-base, expositionArrivals)
		}
	}

	// A request's result is observed before the runner counts it out of
	// flight: wait until no engine has one in flight, or the gauge may
	// still say 1 (it did in a hogged make test).
	for _, status := range statuses {
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			inflight := int64(0)
			for _, st := range status() {
				inflight += st.Inflight
			}
			if inflight == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d requests still in flight 30s after their results", inflight)
			}
		}
	}

	var buf bytes.Buffer
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if _, err := expfmt.MetricFamilyToText(&buf, mf); err != nil {
			t.Fatal(err)
		}
	}
	stop()
	got := normaliseExposition(buf.String())

	const golden = "testdata/golden/exposition.txt"
	if *updateExposition {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update-exposition to create it)", err)
	}
	if got != string(want) {
		gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
		for i := range min(len(gl), len(wl)) {
			if gl[i] != wl[i] {
				t.Fatalf("%s differs at line %d:\n got: %s\nwant: %s", golden, i+1, gl[i], wl[i])
			}
		}
		t.Fatalf("%s: %d lines, want %d", golden, len(gl), len(wl))
	}
}

// timed are the samples whose values depend on timing: histogram buckets
// and sums, and the gauges and counters of durations, rates, timestamps
// and the harness' judgement of itself, and the open connections (a
// version poll beside a request has one of its own).
var timed = regexp.MustCompile(`^(\w+_bucket|\w+_sum|llmprobe_harness_\w+|\w+_timestamp_seconds|llmprobe_target_achieved_rate|llmprobe_target_connections|\w+_lag_seconds\w*)(\{.*\})? `)

// normaliseExposition replaces the values of timed samples by T.
func normaliseExposition(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "#") {
			continue
		}
		if m := timed.FindStringSubmatchIndex(l); m != nil {
			lines[i] = l[:m[1]] + "T"
		}
	}
	return strings.Join(lines, "\n")
}

// gate is an Observer that forwards to another and counts the arrivals
// that ended: a single request once observed, a conversation once it
// ended.
type gate struct {
	probe.Observer
	mu   sync.Mutex
	cond *sync.Cond
	done int
}

func (g *gate) Observe(r *wire.Result) {
	g.Observer.Observe(r)
	if r.ConversationID == "" {
		g.end()
	}
}

func (g *gate) ConversationEnded(target, replica, class string, o probe.ConversationOutcome) {
	g.Observer.ConversationEnded(target, replica, class, o)
	g.end()
}

func (g *gate) end() {
	g.mu.Lock()
	g.done++
	g.mu.Unlock()
	g.cond.Broadcast()
}

func (g *gate) ended() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.done
}

// wait waits until n arrivals ended, at most d.
func (g *gate) wait(n int, d time.Duration) bool {
	timer := time.AfterFunc(d, g.cond.Broadcast)
	defer timer.Stop()
	deadline := time.Now().Add(d)
	g.mu.Lock()
	defer g.mu.Unlock()
	for g.done < n {
		if time.Now().After(deadline) {
			return false
		}
		g.cond.Wait()
	}
	return true
}
