// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// nanServers are a /metrics page whose KV-cache gauge is NaN and a
// Prometheus whose GPU utilisation is "NaN" and power "+Inf", over
// loopback.
func nanServers(t *testing.T) (metrics, prom string) {
	t.Helper()
	m := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		fmt.Fprint(w, `# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{model_name="m"} NaN
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="m"} 1
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{model_name="m"} +Inf
`)
	}))
	t.Cleanup(m.Close)
	p := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil || r.URL.Path != "/api/v1/query" {
			http.Error(w, "bad query", http.StatusBadRequest)
			return
		}
		value := "0.5"
		switch q := r.Form.Get("query"); {
		case strings.Contains(q, "DCGM_FI_DEV_GPU_UTIL"):
			value = "NaN"
		case strings.Contains(q, "DCGM_FI_DEV_POWER_USAGE"):
			value = "+Inf"
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"status":"success","data":{"resultType":"vector","result":[{"metric":{"Hostname":"h1","gpu":"0","UUID":"GPU-1","modelName":"A100"},"value":[1700000000.5,%q]}]}}`, value)
	}))
	t.Cleanup(p.Close)
	return m.URL + "/metrics", p.URL
}

// TestBenchNaNReport: NaN and ±Inf from the server's /metrics and from
// Prometheus do not lose the report: the JSON --output is written whole
// and parses, with null for those figures, and the Markdown shows them
// and says why the JSON has null.
func TestBenchNaNReport(t *testing.T) {
	if testing.Short() {
		t.Skip("two short stages against the simulator")
	}
	bin := binary(t)
	metrics, prom := nanServers(t)
	dir := t.TempDir()
	for _, out := range []string{"r.json", "r.md"} {
		file := filepath.Join(dir, out)
		res := runBinary(t, bin, nil, "bench", "--sim", "--target=sim-chat", "--stage=2:1500ms", "--warmup=0s",
			"--server-metrics="+metrics, "--prometheus.url="+prom, `--gpu.selector=Hostname="h1"`, "--output="+file)
		t.Logf("%s:\n%s", out, res.stdout)
		if res.code != 0 {
			t.Fatalf("%s: exit code %d: %s", out, res.code, res.stderr)
		}
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if out == "r.md" {
			for _, want := range []string{"| KV-cache usage | NaN |", "| NaN |", "+Inf", "written as null"} {
				if !strings.Contains(string(data), want) {
					t.Errorf("the Markdown lacks %q:\n%s", want, data)
				}
			}
			continue
		}
		var rep struct {
			Stages []struct {
				Server struct {
					KV      *float64 `json:"kv_cache_usage_ratio"`
					Running *float64 `json:"requests_running"`
					Gen     *float64 `json:"generation_tokens"`
				} `json:"server_metrics"`
				GPU struct {
					Devices []map[string]any `json:"devices"`
				} `json:"gpu"`
			} `json:"stages"`
		}
		if err := json.Unmarshal(data, &rep); err != nil {
			t.Fatalf("the JSON report (%d bytes) does not parse: %v", len(data), err)
		}
		if len(rep.Stages) != 1 {
			t.Fatalf("%d stages", len(rep.Stages))
		}
		ss := rep.Stages[0].Server
		if ss.KV != nil || ss.Gen != nil || ss.Running == nil || *ss.Running != 1 {
			t.Errorf("server figures: KV %v generation %v running %v; want null, null, 1", ss.KV, ss.Gen, ss.Running)
		}
		if !strings.Contains(string(data), `"kv_cache_usage_ratio": null`) {
			t.Errorf("the KV-cache usage is not written as null")
		}
		devs := rep.Stages[0].GPU.Devices
		if len(devs) != 1 || devs[0]["gpu_util_percent"] != nil || devs[0]["power_watts"] != nil || devs[0]["sm_active_ratio"] != 0.5 {
			t.Errorf("GPU devices %v: want utilisation and power null, SM active 0.5", devs)
		}
		if _, ok := devs[0]["gpu_util_percent"]; !ok {
			t.Errorf("the NaN utilisation is left out instead of null")
		}
	}
}
