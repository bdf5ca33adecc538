// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package dashboards_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/llmprobe/llmprobe/alerts"
	"github.com/llmprobe/llmprobe/dashboards"
)

// replicaPanels are the titles of the correlation dashboard's replicas
// row, in order.
var replicaPanels = []string{
	"TTFT p50 / median of peers", "Outlier ratio now",
	"TTFT p50 and p99 per replica", "TPOT p50 per replica", "Error ratio per replica",
	"Engine queue per replica (vLLM)", "KV-cache usage per replica (vLLM)", "GPU utilisation and power per replica (DCGM)",
}

// TestReplicasRow checks the correlation dashboard's replicas row: its
// panels follow the row in order, the outlier panels read the ratio the
// alert reads and turn red at the alert's factor (from the mixin config),
// every query is per replica, and the engine and GPU queries join by pod
// through llmprobe_replica_info, taking the replica's namespace from
// exported_namespace when llmprobe's own scrape labels displaced it.
func TestReplicasRow(t *testing.T) {
	cfg := alerts.DefaultConfig()
	cfg.ReplicaOutlier.Factor = 2.5
	d, err := dashboards.Correlation(cfg)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	var board struct {
		Panels []struct {
			Type        string `json:"type"`
			Title       string `json:"title"`
			FieldConfig struct {
				Defaults struct {
					Thresholds struct {
						Steps []struct {
							Value *float64 `json:"value"`
							Color string   `json:"color"`
						} `json:"steps"`
					} `json:"thresholds"`
				} `json:"defaults"`
			} `json:"fieldConfig"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &board); err != nil {
		t.Fatal(err)
	}
	start := -1
	for i, p := range board.Panels {
		if p.Type == "row" && p.Title == dashboards.ReplicasRowTitle {
			start = i
		}
	}
	if start < 0 || start+len(replicaPanels) >= len(board.Panels) {
		t.Fatalf("no row %q followed by %d panels", dashboards.ReplicasRowTitle, len(replicaPanels))
	}
	for i, want := range replicaPanels {
		p := board.Panels[start+1+i]
		if p.Title != want {
			t.Errorf("panel %d of the row is %q, want %q", i, p.Title, want)
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("%s: no query", want)
		}
		for _, tg := range p.Targets {
			if !strings.Contains(tg.Expr, "replica") {
				t.Errorf("%s: query is not per replica: %s", want, tg.Expr)
			}
			if strings.Contains(tg.Expr, "vllm:") || strings.Contains(tg.Expr, "DCGM_") {
				for _, part := range []string{"* on (namespace, pod) group_left (replica)", alerts.ReplicaInfoMetric + "{",
					`"pod", "$1", "replica", "(.+)"`, `"namespace", "$1", "exported_namespace", "(.+)"`} {
					if !strings.Contains(tg.Expr, part) {
						t.Errorf("%s: the join lacks %q: %s", want, part, tg.Expr)
					}
				}
			}
		}
		if i < 2 {
			if len(p.Targets) != 1 || !strings.HasPrefix(p.Targets[0].Expr, alerts.ReplicaRatioRecord) {
				t.Errorf("%s: want the one recorded ratio %s, got %+v", want, alerts.ReplicaRatioRecord, p.Targets)
			}
			steps := p.FieldConfig.Defaults.Thresholds.Steps
			if last := steps[len(steps)-1]; last.Color != "red" || last.Value == nil || *last.Value != 2.5 {
				t.Errorf("%s: thresholds %+v, want red from the alert's factor 2.5", want, steps)
			}
		}
	}
}
