// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"fmt"
	"hash/fnv"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"

	"github.com/prometheus/client_golang/prometheus"
)

// The simulated GPU as NVIDIA's dcgm-exporter reports it, served at
// /dcgm/metrics with dcgm-exporter's family names and labels:
//
//	DCGM_FI_DEV_GPU_UTIL     % of the last sampling interval the engine spent executing steps
//	DCGM_FI_DEV_FB_USED      MiB: what vLLM takes at start (gpu_memory_utilization of the total)
//	DCGM_FI_DEV_FB_FREE      MiB: the rest
//	DCGM_FI_DEV_POWER_USAGE  W: idle_watts + (max_watts − idle_watts) × utilization
//
// each labelled gpu="0", UUID, device="nvidia0", modelName, Hostname, and
// pod, namespace, container when a pod is configured (dcgm-exporter's
// Kubernetes mapping), so that a query joining the GPU on the engine's
// pod works.
//
// The utilization is a model. A real GPU's (the driver's "percent of
// time over the past sample period during which one or more kernels was
// executing") is read here as the share of the interval covered by
// engine steps (their durations in the timing model), each step being
// all kernels: a continuously busy engine shows 100, an idle one 0,
// whatever the batch. The memory is flat as
// vLLM's is: it allocates its KV cache in full at start, so the
// framebuffer does not follow the KV blocks in use (that is
// vllm:kv_cache_usage_perc).

// DCGMConfig is Config.DCGM.
type DCGMConfig struct {
	// Interval is the sampling interval: every Interval, the utilization
	// becomes the share of the interval just ended the engine spent in
	// steps (dcgm-exporter's collect interval, -c, is 30s by default; its
	// driver's sample period is about a second).
	Interval time.Duration `yaml:"interval"`
	// The labels: modelName, UUID (empty: derived from the first model
	// name), Hostname; Pod, Namespace and Container, the Kubernetes
	// mapping's, only with Pod.
	ModelName string `yaml:"model_name"`
	UUID      string `yaml:"uuid"`
	Hostname  string `yaml:"hostname"`
	Pod       string `yaml:"pod"`
	Namespace string `yaml:"namespace"`
	Container string `yaml:"container"`
	// FBTotalMiB is the framebuffer; GPUMemoryUtilization the share of
	// it the engine takes at start (vLLM's --gpu-memory-utilization).
	FBTotalMiB           int     `yaml:"fb_total_mib"`
	GPUMemoryUtilization float64 `yaml:"gpu_memory_utilization"`
	// IdleWatts and MaxWatts are the power at 0 and 100% utilization.
	IdleWatts float64 `yaml:"idle_watts"`
	MaxWatts  float64 `yaml:"max_watts"`
}

// DefaultDCGMConfig is one H100 80GB (SXM) under vLLM's default memory
// share, sampled every second.
func DefaultDCGMConfig() DCGMConfig {
	return DCGMConfig{
		Interval:             time.Second,
		ModelName:            "NVIDIA H100 80GB HBM3",
		Hostname:             "llmprobe-sim",
		FBTotalMiB:           81559,
		GPUMemoryUtilization: 0.9,
		IdleWatts:            70,
		MaxWatts:             700,
	}
}

// Bounds of the DCGM view.
const (
	minDCGMInterval = 10 * time.Millisecond
	maxDCGMInterval = time.Hour
	maxWatts        = 10000
)

func (c *Config) validateDCGM() []error {
	var errs []error
	bad := func(path, format string, args ...any) {
		errs = append(errs, &fieldError{path: path, msg: fmt.Sprintf(format, args...)})
	}
	d := &c.DCGM
	if d.Interval < minDCGMInterval || d.Interval > maxDCGMInterval {
		bad("dcgm.interval", "must be between %s and %s, got %s", minDCGMInterval, maxDCGMInterval, d.Interval)
	}
	for _, l := range []struct{ key, v string }{
		{"model_name", d.ModelName}, {"uuid", d.UUID}, {"hostname", d.Hostname},
		{"pod", d.Pod}, {"namespace", d.Namespace}, {"container", d.Container},
	} {
		switch {
		case len(l.v) > 256:
			bad("dcgm."+l.key, "longer than 256 bytes")
		case strings.ContainsFunc(l.v, func(r rune) bool { return unicode.IsControl(r) || r == unicode.ReplacementChar }):
			bad("dcgm."+l.key, "%q contains a control character or invalid UTF-8", l.v)
		}
	}
	if d.Pod == "" && (d.Namespace != "" || d.Container != "") {
		bad("dcgm.pod", "must be set with namespace and container (the Kubernetes mapping labels a GPU with the pod it is assigned to)")
	}
	if d.FBTotalMiB < 1 || d.FBTotalMiB > 1<<24 {
		bad("dcgm.fb_total_mib", "must be between 1 and %d, got %d", 1<<24, d.FBTotalMiB)
	}
	if !(d.GPUMemoryUtilization > 0 && d.GPUMemoryUtilization <= 1) {
		bad("dcgm.gpu_memory_utilization", "must be greater than 0 and at most 1, got %v", d.GPUMemoryUtilization)
	}
	if !(d.IdleWatts >= 0 && d.IdleWatts <= maxWatts) {
		bad("dcgm.idle_watts", "must be between 0 and %d, got %v", maxWatts, d.IdleWatts)
	}
	if !(d.MaxWatts >= d.IdleWatts && d.MaxWatts <= maxWatts) {
		bad("dcgm.max_watts", "must be between idle_watts (%v) and %d, got %v", d.IdleWatts, maxWatts, d.MaxWatts)
	}
	return errs
}

// gpuUUID derives a stable UUID-shaped GPU id from the model name.
func gpuUUID(model string) string {
	h := fnv.New128a()
	h.Write([]byte(model))
	b := h.Sum(nil)
	return fmt.Sprintf("GPU-%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// busyClock is the time the engine has spent executing steps, on the
// timing model's clock: each step counts its duration d, the part of it
// already elapsed while it runs. It is what a GPU would be busy for: the
// time the simulator itself takes between steps (on a loaded machine, its
// lateness) is not the model's, and under zero_latency nothing is.
type busyClock struct {
	mu        sync.Mutex
	done      time.Duration
	stepStart time.Time // zero between steps
	stepDur   time.Duration
	// wall is the wall time the steps done took, from their start to
	// their end: more than done when the engine fell behind its model
	// (a machine too busy to run it on time).
	wall time.Duration
}

func (b *busyClock) begin(now time.Time, d time.Duration) {
	b.mu.Lock()
	b.stepStart, b.stepDur = now, d
	b.mu.Unlock()
}

func (b *busyClock) end(now time.Time) {
	b.mu.Lock()
	b.done += b.stepDur
	b.wall += max(now.Sub(b.stepStart), 0)
	b.stepStart, b.stepDur = time.Time{}, 0
	b.mu.Unlock()
}

// totals returns the model time and the wall time of the steps done.
func (b *busyClock) totals() (model, wall time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.done, b.wall
}

// at returns the busy time as of now.
func (b *busyClock) at(now time.Time) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	t := b.done
	if !b.stepStart.IsZero() {
		t += min(max(now.Sub(b.stepStart), 0), b.stepDur)
	}
	return t
}

// dcgm samples the engine's busy time and serves dcgm-exporter's view.
type dcgm struct {
	cfg      DCGMConfig
	busy     *busyClock
	registry *prometheus.Registry
	util     atomic.Int64 // percent, as of the last sample
	quit     chan struct{}
	done     chan struct{}

	fbUsed              float64
	descUtil, descUsed  *prometheus.Desc
	descFree, descPower *prometheus.Desc
}

func newDCGM(cfg DCGMConfig, models []string) *dcgm {
	g := &dcgm{cfg: cfg, registry: prometheus.NewRegistry(), quit: make(chan struct{}), done: make(chan struct{})}
	labels := prometheus.Labels{
		"gpu": "0", "UUID": cfg.UUID, "device": "nvidia0", "modelName": cfg.ModelName, "Hostname": cfg.Hostname,
	}
	if labels["UUID"] == "" {
		labels["UUID"] = gpuUUID(models[0])
	}
	if cfg.Pod != "" {
		labels["pod"], labels["namespace"], labels["container"] = cfg.Pod, cfg.Namespace, cfg.Container
	}
	g.fbUsed = math.Round(float64(cfg.FBTotalMiB) * cfg.GPUMemoryUtilization)
	g.descUtil = prometheus.NewDesc("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", nil, labels)
	g.descUsed = prometheus.NewDesc("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", nil, labels)
	g.descFree = prometheus.NewDesc("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).", nil, labels)
	g.descPower = prometheus.NewDesc("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", nil, labels)
	g.registry.MustRegister(g)
	return g
}

func (g *dcgm) Describe(ch chan<- *prometheus.Desc) {
	ch <- g.descUtil
	ch <- g.descUsed
	ch <- g.descFree
	ch <- g.descPower
}

// Collect reports one sample: the power is that of the utilization
// reported beside it.
func (g *dcgm) Collect(ch chan<- prometheus.Metric) {
	util := float64(g.util.Load())
	ch <- prometheus.MustNewConstMetric(g.descUtil, prometheus.GaugeValue, util)
	ch <- prometheus.MustNewConstMetric(g.descUsed, prometheus.GaugeValue, g.fbUsed)
	ch <- prometheus.MustNewConstMetric(g.descFree, prometheus.GaugeValue, float64(g.cfg.FBTotalMiB)-g.fbUsed)
	ch <- prometheus.MustNewConstMetric(g.descPower, prometheus.GaugeValue, g.cfg.IdleWatts+(g.cfg.MaxWatts-g.cfg.IdleWatts)*util/100)
}

// start samples the engine's busy clock every interval until stop.
func (g *dcgm) start(busy *busyClock) {
	g.busy = busy
	go g.run()
}

// run samples every interval until stop.
func (g *dcgm) run() {
	defer close(g.done)
	t := time.NewTicker(g.cfg.Interval)
	defer t.Stop()
	last := time.Now()
	lastBusy := g.busy.at(last)
	for {
		select {
		case <-g.quit:
			return
		case now := <-t.C:
			now = time.Now()
			busy := g.busy.at(now)
			if el := now.Sub(last); el > 0 {
				g.util.Store(int64(math.Round(min(100, 100*float64(busy-lastBusy)/float64(el)))))
			}
			last, lastBusy = now, busy
		}
	}
}

func (g *dcgm) stop() {
	close(g.quit)
	<-g.done
}
