// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package alerts_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llmprobe/llmprobe/alerts"
	"github.com/llmprobe/llmprobe/internal/promtest"
)

// runReplicaTests runs alerts/tests/replica.yml against rules.
func runReplicaTests(t *testing.T, rules []byte) (string, error) {
	t.Helper()
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "tests"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "llmprobe.rules.yml"), rules, 0o644); err != nil {
		t.Fatal(err)
	}
	test, err := os.ReadFile(filepath.Join(promtest.Root(t), "alerts", "tests", "replica.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tests", "replica.yml"), test, 0o644); err != nil {
		t.Fatal(err)
	}
	return promtest.RunPromtool(t, filepath.Join(dir, "tests"), "test", "rules", "replica.yml")
}

// TestReplicaOutlierGuardsMatter proves the silent targets of replica.yml
// are silent because of the guards, not by accident of their data: without
// the saturation, warm-up and retirement clauses the saturated, warming and
// retired replicas are named while they should not be, and with
// min_requests lowered to the
// sparse target's 30 requests per window its slow replica is named.
func TestReplicaOutlierGuardsMatter(t *testing.T) {
	rules, err := alerts.DefaultConfig().RulesYAML()
	if err != nil {
		t.Fatal(err)
	}
	// Drop each `unless on (target, replica)` and the clause after it.
	lines := strings.Split(string(rules), "\n")
	var stripped []string
	removed := 0
	for i := 0; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) == "unless on (target, replica)" {
			i++
			removed++
			continue
		}
		stripped = append(stripped, lines[i])
	}
	if removed != 3 {
		t.Fatalf("found %d unless clauses in the outlier alert, want 3 (saturated, warm-up, retired)", removed)
	}
	out, err := runReplicaTests(t, []byte(strings.Join(stripped, "\n")))
	if err == nil {
		t.Fatalf("replica.yml passes without the saturation and warm-up guards; it does not prove them:\n%s", out)
	}
	for _, want := range []string{`target="saturated"`, `target="warming"`, `target="retired"`} {
		if !strings.Contains(out, want) {
			t.Errorf("without the guards, promtool output lacks an alert for %s:\n%s", want, out)
		}
	}

	cfg := alerts.DefaultConfig()
	cfg.ReplicaOutlier.MinRequests = 30
	rules, err = cfg.RulesYAML()
	if err != nil {
		t.Fatal(err)
	}
	out, err = runReplicaTests(t, rules)
	if err == nil {
		t.Fatalf("replica.yml passes with min_requests 30; it does not prove the evidence guard:\n%s", out)
	}
	if !strings.Contains(out, `replica="r7", severity="warning", target="sparse"`) {
		t.Errorf("with min_requests 30, promtool output lacks the sparse target's slow replica:\n%s", out)
	}
}

func TestReplicaConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		mutate func(*alerts.Config)
		want   string
	}{
		{func(c *alerts.Config) { c.ReplicaOutlier.Factor = 1 }, "replica_outlier.factor: must be above 1"},
		{func(c *alerts.Config) { c.ReplicaOutlier.MinReplicas = 2 }, "replica_outlier.min_replicas: must be at least 3"},
		{func(c *alerts.Config) { c.ReplicaOutlier.MinRequests = 0 }, "replica_outlier.min_requests: must be at least 1"},
		{func(c *alerts.Config) { c.ReplicaOutlier.Window = 0 }, "replica_outlier.window: must be positive"},
		{func(c *alerts.Config) { c.Discovery.FailingAfter = 0 }, "discovery.failing_after: must be positive"},
	} {
		cfg := alerts.DefaultConfig()
		tc.mutate(&cfg)
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate() = %v, want an error containing %q", err, tc.want)
		}
	}
	// A mixin file sets them by their keys.
	cfg, err := alerts.ParseConfig("mixin.yml", []byte("replica_outlier:\n  factor: 3\n  window: 15m\ndiscovery:\n  failing_after: 30m\n"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := cfg.RulesYAML()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"llmprobe:replica_ttft_seconds:p50_ratio > 3\n", "llmprobe_replica_ttft_seconds_bucket{job=\"llmprobe\"}[15m]", "> 1800\n"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("rules from the mixin file lack %q", want)
		}
	}
}
