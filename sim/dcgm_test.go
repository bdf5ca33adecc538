// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// dcgmSeries is the label set of the default simulated GPU.
const dcgmSeries = `{Hostname="llmprobe-sim",UUID="GPU-%s",device="nvidia0",gpu="0",modelName="NVIDIA H100 80GB HBM3"}`

// dcgmValue returns the value of the series written exactly as series
// (metricValue's pattern does not take label values with spaces, as
// modelName's).
func dcgmValue(t *testing.T, exposition, series string) float64 {
	t.Helper()
	for _, line := range strings.Split(exposition, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", series, err)
			}
			return f
		}
	}
	t.Fatalf("series %s not exposed", series)
	return 0
}

func dcgmLabels() string {
	return strings.Replace(dcgmSeries, "GPU-%s", gpuUUID("sim-model"), 1)
}

// waitDCGM polls /dcgm/metrics until the utilization satisfies ok (10 s
// at most) and returns the exposition then.
func waitDCGM(t *testing.T, base string, ok func(util float64) bool) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	var util float64
	for time.Now().Before(deadline) {
		m := httpGet(t, base+"/dcgm/metrics")
		if util = dcgmValue(t, m, "DCGM_FI_DEV_GPU_UTIL"+dcgmLabels()); ok(util) {
			return m
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("DCGM_FI_DEV_GPU_UTIL stayed at %v", util)
	return ""
}

// TestDCGMUtilization: the utilization is the share of the sampling
// interval the engine spent in steps: 100 while a request keeps it
// stepping, 0 once it is idle; power follows it, memory is flat.
func TestDCGMUtilization(t *testing.T) {
	cfg := DefaultConfig()
	cfg.EOSProbability = 0
	cfg.DecodeBase = 20 * time.Millisecond // 150 tokens: 3 s of steps
	cfg.DCGM.Interval = 200 * time.Millisecond
	base, _ := startSim(t, cfg)
	m := waitDCGM(t, base, func(u float64) bool { return u == 0 })
	for name, want := range map[string]float64{
		"DCGM_FI_DEV_FB_USED": 73403, "DCGM_FI_DEV_FB_FREE": 81559 - 73403, "DCGM_FI_DEV_POWER_USAGE": 70,
	} {
		if got := dcgmValue(t, m, name+dcgmLabels()); got != want {
			t.Errorf("%s = %v idle, want %v", name, got, want)
		}
	}
	done := make(chan *streamResult)
	go func() { done <- stream(t, base+"/v1/completions", completionBody("keep the engine busy", 150)) }()
	// Steps back to back (absolute deadlines: lateness is made up by the
	// next step), so close to 100; 80 leaves a loaded machine room.
	m = waitDCGM(t, base, func(u float64) bool { return u >= 80 })
	util := dcgmValue(t, m, "DCGM_FI_DEV_GPU_UTIL"+dcgmLabels())
	if p := dcgmValue(t, m, "DCGM_FI_DEV_POWER_USAGE"+dcgmLabels()); p != 70+630*util/100 {
		t.Errorf("power %v W at %v%%, want %v", p, util, 70+630*util/100)
	}
	if fb := dcgmValue(t, m, "DCGM_FI_DEV_FB_USED"+dcgmLabels()); fb != 73403 {
		t.Errorf("FB used %v MiB busy, want the flat 73403", fb)
	}
	if r := <-done; !r.done {
		t.Fatalf("stream: %v", r.readErr)
	}
	waitDCGM(t, base, func(u float64) bool { return u == 0 })
}

func TestDCGMZeroLatencyIdle(t *testing.T) {
	cfg := zeroConfig()
	cfg.DCGM.Interval = 50 * time.Millisecond
	base, _ := startSim(t, cfg)
	exerciseMetrics(t, base)
	time.Sleep(120 * time.Millisecond)
	if u := dcgmValue(t, httpGet(t, base+"/dcgm/metrics"), "DCGM_FI_DEV_GPU_UTIL"+dcgmLabels()); u != 0 {
		t.Errorf("utilization %v under zero_latency", u)
	}
}

// TestDCGMLabels: the Kubernetes mapping's labels with a pod, as
// dcgm-exporter -k sets them; configured names.
func TestDCGMLabels(t *testing.T) {
	cfg := zeroConfig()
	cfg.DCGM.Pod, cfg.DCGM.Namespace, cfg.DCGM.Container = "vllm-0", "llm", "vllm"
	cfg.DCGM.UUID, cfg.DCGM.Hostname, cfg.DCGM.ModelName = "GPU-1234", "node-a", "NVIDIA L4"
	base, _ := startSim(t, cfg)
	m := httpGet(t, base+"/dcgm/metrics")
	const labels = `{Hostname="node-a",UUID="GPU-1234",container="vllm",device="nvidia0",gpu="0",modelName="NVIDIA L4",namespace="llm",pod="vllm-0"}`
	for _, name := range []string{"DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_POWER_USAGE"} {
		dcgmValue(t, m, name+labels)
		if !strings.Contains(m, "# TYPE "+name+" gauge\n") {
			t.Errorf("%s is not a gauge", name)
		}
	}
	if strings.Contains(m, "go_") || strings.Contains(m, "vllm:") {
		t.Error("/dcgm/metrics serves more than dcgm-exporter's families")
	}
	if !strings.HasPrefix(gpuUUID("sim-model"), "GPU-") || len(gpuUUID("sim-model")) != len("GPU-")+36 {
		t.Errorf("derived UUID %q is not UUID-shaped", gpuUUID("sim-model"))
	}
}

func TestBusyClock(t *testing.T) {
	var b busyClock
	t0 := time.Unix(1000, 0)
	b.begin(t0, 50*time.Millisecond)
	if got := b.at(t0.Add(30 * time.Millisecond)); got != 30*time.Millisecond {
		t.Errorf("during the first step: %v", got)
	}
	if got := b.at(t0.Add(70 * time.Millisecond)); got != 50*time.Millisecond {
		t.Errorf("the first step overslept: %v, want its 50ms", got)
	}
	b.end(t0.Add(70 * time.Millisecond))
	if got := b.at(t0.Add(time.Second)); got != 50*time.Millisecond {
		t.Errorf("idle after it: %v", got)
	}
	b.begin(t0.Add(2*time.Second), 10*time.Millisecond)
	b.end(t0.Add(2*time.Second + 10*time.Millisecond))
	if got := b.at(t0.Add(3 * time.Second)); got != 60*time.Millisecond {
		t.Errorf("two steps: %v", got)
	}
	if model, wall := b.totals(); model != 60*time.Millisecond || wall != 80*time.Millisecond {
		t.Errorf("totals: model %v, wall %v; want 60ms, 80ms", model, wall)
	}
}

func TestDCGMConfigErrors(t *testing.T) {
	for doc, want := range map[string]string{
		"dcgm: {interval: 1ms}\n":                              "line 1: dcgm.interval: must be between 10ms and 1h0m0s, got 1ms",
		"dcgm:\n  namespace: llm\n":                            "line 1: dcgm.pod: must be set with namespace and container",
		"dcgm:\n  fb_total_mib: 0\n":                           "line 2: dcgm.fb_total_mib: must be between 1 and 16777216, got 0",
		"dcgm:\n  gpu_memory_utilization: 1.5\n":               "line 2: dcgm.gpu_memory_utilization: must be greater than 0 and at most 1, got 1.5",
		"dcgm:\n  idle_watts: 100\n  max_watts: 50\n":          "line 3: dcgm.max_watts: must be between idle_watts (100) and 10000, got 50",
		"dcgm:\n  idle_watts: -1\n":                            "line 2: dcgm.idle_watts: must be between 0 and 10000, got -1",
		"dcgm:\n  pod: \"a\\nb\"\n":                            `line 2: dcgm.pod: "a\nb" contains a control character`,
		"dcgm: {hostname: " + strings.Repeat("h", 257) + "}\n": "line 1: dcgm.hostname: longer than 256 bytes",
		"dcgm: {gpus: 2}\n":                                    "field gpus not found",
	} {
		_, err := parseConfig([]byte(doc))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want %q", doc, err, want)
		}
	}
	cfg, err := parseConfig([]byte("dcgm: {pod: vllm-0}\n"))
	if err != nil || cfg.DCGM.Pod != "vllm-0" || cfg.DCGM.FBTotalMiB != 81559 {
		t.Errorf("dcgm: {pod: vllm-0} keeps the other defaults: %v, %+v", err, cfg.DCGM)
	}
}
