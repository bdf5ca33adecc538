// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"

	"github.com/llmprobe/llmprobe/alerts"
	"github.com/llmprobe/llmprobe/internal/promtest"
)

// TestReplicaOutlierNamed runs the daemon over two discovery targets of 8
// simulators each, found by file_sd: in "mixed" one simulator is 3× slower
// than its peers, in "alike" none is. A real Prometheus evaluating the
// shipped rules (the outlier's window and evidence scaled to the test's
// rate: 2 req/s per replica over a 60 s window holds what 0.2 req/s does
// over 10 minutes) fires LLMProbeReplicaOutlier naming the slow replica
// and its pod, and names no other replica of either target. The test waits
// for the alert, never for a fixed time; if the harness flags its own
// numbers meanwhile, it fails with that reason.
func TestReplicaOutlierNamed(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 16 simulators, the daemon and Prometheus for about a minute")
	}
	// Beside TestDashboardsAgainstRealStack, after the serial tests (the
	// CPU-starvation and regression tests want the machine to
	// themselves): both wait on conditions, never for a fixed time.
	t.Parallel()
	dir := t.TempDir()
	fast := filepath.Join(dir, "fast.yml")
	slow := filepath.Join(dir, "slow.yml")
	writeFileAtomic(t, fast, "prefill_base: 40ms\ndecode_base: 10ms\n")
	writeFileAtomic(t, slow, "prefill_base: 120ms\ndecode_base: 30ms\n")
	sd := func(name string, slowAt int) (string, []string) {
		var addrs []string
		groups := []map[string]any{}
		for i := range 8 {
			cfg := fast
			if i == slowAt {
				cfg = slow
			}
			_, u := startSim(t, "--sim.config.file="+cfg)
			addr := hostPort(t, u)
			addrs = append(addrs, addr)
			groups = append(groups, map[string]any{"targets": []string{addr},
				"labels": map[string]string{"pod": fmt.Sprintf("vllm-%s-%d", name, i), "namespace": "prod", "node": "gpu-1"}})
		}
		b, _ := json.Marshal(groups)
		path := filepath.Join(dir, name+".json")
		writeFileAtomic(t, path, string(b))
		return path, addrs
	}
	mixedSD, mixed := sd("mixed", 5)
	alikeSD, _ := sd("alike", -1)
	cfg := filepath.Join(dir, "llmprobe.yml")
	writeFileAtomic(t, cfg, fmt.Sprintf(`
global: {warmup: 0s}
workloads:
  w: {classes: [{name: c, prompt_tokens: {dist: lognormal, median: 64, p99: 512, max: 1024}, output_tokens: 8}]}
targets:
  - name: mixed
    url: http://vllm.prod.svc:8000/v1
    model: %[1]s
    workload: w
    tokenize: "off"
    arrival: {rate: 2}
    rate_per: replica
    extra_body: {ignore_eos: true}
    discovery: {file: {files: [%[2]s], refresh_interval: 5s}}
  - name: alike
    url: http://vllm.prod.svc:8000/v1
    model: %[1]s
    workload: w
    tokenize: "off"
    arrival: {rate: 2}
    rate_per: replica
    extra_body: {ignore_eos: true}
    discovery: {file: {files: [%[3]s], refresh_interval: 5s}}
`, simModel, mixedSD, alikeSD))
	_, daemonURL := startDaemon(t, cfg)

	mixin := alerts.DefaultConfig()
	mixin.ReplicaOutlier.Window = model.Duration(60 * time.Second)
	mixin.ReplicaOutlier.For = model.Duration(10 * time.Second)
	rules, err := mixin.RulesYAML()
	if err != nil {
		t.Fatal(err)
	}
	rulesFile := filepath.Join(dir, "rules.yml")
	if err := os.WriteFile(rulesFile, rules, 0o644); err != nil {
		t.Fatal(err)
	}
	prom := promtest.Start(t, promtest.Options{
		Targets:        []promtest.ScrapeTarget{{JobName: llmprobeJob, Address: hostPort(t, daemonURL)}},
		ScrapeInterval: time.Second,
		RuleFiles:      []string{rulesFile},
	})

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	firing := `ALERTS{alertname="LLMProbeReplicaOutlier", alertstate="firing"}`
	if _, err := prom.WaitFor(ctx, firing, func(r *promtest.Result) bool { return !r.Empty() }); err != nil {
		e, _ := scrape(t, daemonURL)
		if sat, _ := e.sum("llmprobe_replica_harness_saturated", nil); sat > 0 {
			t.Fatalf("the harness flags its own numbers for %v replicas (llmprobe_replica_harness_saturated): the alert leaves them out, so no verdict could be drawn: %v", sat, err)
		}
		t.Fatalf("LLMProbeReplicaOutlier did not fire for the 3x slower replica: %v\n%s", err, grepLines(scrapeText(t, daemonURL), "llmprobe_replica_requests_total", 40))
	}
	// Every replica the alert named, pending or firing, since the start.
	named, err := prom.Query(ctx, `count by (target, replica) (max_over_time(ALERTS{alertname="LLMProbeReplicaOutlier"}[5m]))`, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range named.Vector {
		got = append(got, s.Metric["target"]+"/"+s.Metric["replica"])
	}
	// file_sd's pod label names the replica (docs/config.md).
	if want := []string{"mixed/vllm-mixed-5"}; !slices.Equal(got, want) {
		ratios, _ := prom.Query(ctx, alerts.ReplicaRatioRecord, time.Now())
		t.Errorf("the outlier alert named %v, want only %v\nratios: %v", got, want, ratios)
	}
	desc := alertDescription(t, prom.URL, alerts.AlertReplicaOutlier, "")
	for _, want := range []string{mixed[5], "vllm-mixed-5"} {
		if !strings.Contains(desc, want) {
			t.Errorf("the alert's description does not name %q:\n%s", want, desc)
		}
	}
}
