// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package servermetrics

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	"github.com/llmprobe/llmprobe/internal/bounded"
	"github.com/llmprobe/llmprobe/internal/httpclient"
	"github.com/llmprobe/llmprobe/internal/scrub"
)

// GPU figures: at the end of every stage bench asks Prometheus
// (--prometheus.url) for dcgm-exporter's series matching --gpu.selector,
// each averaged over the stage's measured window with avg_over_time
// (through the same client library fit.FromPrometheus uses).

// GPUMetrics are the dcgm-exporter series queried, by the field they
// fill.
var GPUMetrics = struct{ Util, SMActive, FBUsed, Power string }{
	Util: "DCGM_FI_DEV_GPU_UTIL", SMActive: "DCGM_FI_PROF_SM_ACTIVE",
	FBUsed: "DCGM_FI_DEV_FB_USED", Power: "DCGM_FI_DEV_POWER_USAGE",
}

const (
	gpuQueryTimeout = 10 * time.Second
	gpuMaxBody      = 8 << 20
)

// GPUStats are one stage's GPU figures from Prometheus.
type GPUStats struct {
	// Query is the PromQL of the utilisation (the others differ only by
	// metric name); Window the range averaged over.
	Query  string        `json:"query"`
	Window time.Duration `json:"window_ns"`
	// Errors say why a query failed or returned nothing.
	Errors  []string    `json:"errors,omitempty"`
	Devices []GPUDevice `json:"devices,omitempty"`
}

// GPUDevice is one GPU's averages over the stage (nil: not exported).
type GPUDevice struct {
	Hostname string `json:"hostname,omitempty"`
	GPU      string `json:"gpu,omitempty"`
	UUID     string `json:"uuid,omitempty"`
	Model    string `json:"model,omitempty"`
	// UtilPercent is DCGM_FI_DEV_GPU_UTIL (0–100).
	UtilPercent *Float `json:"gpu_util_percent,omitempty"`
	// SMActive is DCGM_FI_PROF_SM_ACTIVE (ratio 0–1).
	SMActive *Float `json:"sm_active_ratio,omitempty"`
	// FBUsedMiB is DCGM_FI_DEV_FB_USED.
	FBUsedMiB *Float `json:"fb_used_mib,omitempty"`
	// PowerWatts is DCGM_FI_DEV_POWER_USAGE.
	PowerWatts *Float `json:"power_watts,omitempty"`
}

// normalizeSelector strips the braces of a selector.
func normalizeSelector(s string) string {
	s = strings.TrimSpace(s)
	s = strings.TrimPrefix(s, "{")
	return strings.TrimSuffix(s, "}")
}

// QueryGPU averages the DCGM series matching selector over [end-window,
// end]. A failure is reported in the result, never returned.
func QueryGPU(ctx context.Context, promURL, selector string, end time.Time, window time.Duration) *GPUStats {
	window = max(window.Round(time.Millisecond), time.Second)
	sel := normalizeSelector(selector)
	rng := model.Duration(window).String()
	expr := func(metric string) string { return fmt.Sprintf("avg_over_time(%s{%s}[%s])", metric, sel, rng) }
	st := &GPUStats{Query: expr(GPUMetrics.Util), Window: window}
	hc, err := httpclient.New(httpclient.Plain, "llmprobe_bench_gpu", httpclient.Options{Timeout: gpuQueryTimeout})
	if err != nil {
		st.Errors = append(st.Errors, fmt.Sprintf("prometheus client for %s: %s", scrub.URL(promURL), scrub.URLs(err.Error())))
		return st
	}
	defer hc.CloseIdleConnections()
	c, err := api.NewClient(api.Config{Address: promURL, Client: bounded.Client(hc, gpuMaxBody, "the answer of Prometheus")})
	if err != nil {
		st.Errors = append(st.Errors, fmt.Sprintf("prometheus client for %s: %s", scrub.URL(promURL), scrub.URLs(err.Error())))
		return st
	}
	papi := promv1.NewAPI(c)
	index := map[string]int{}
	device := func(m model.Metric) *GPUDevice {
		d := GPUDevice{Hostname: string(m["Hostname"]), GPU: string(m["gpu"]), UUID: string(m["UUID"]), Model: string(m["modelName"])}
		key := d.Hostname + "\x00" + d.GPU + "\x00" + d.UUID
		if i, ok := index[key]; ok {
			return &st.Devices[i]
		}
		index[key] = len(st.Devices)
		st.Devices = append(st.Devices, d)
		return &st.Devices[len(st.Devices)-1]
	}
	for _, q := range []struct {
		metric string
		set    func(*GPUDevice, float64)
	}{
		{GPUMetrics.Util, func(d *GPUDevice, v float64) { d.UtilPercent = ptr(v) }},
		{GPUMetrics.SMActive, func(d *GPUDevice, v float64) { d.SMActive = ptr(v) }},
		{GPUMetrics.FBUsed, func(d *GPUDevice, v float64) { d.FBUsedMiB = ptr(v) }},
		{GPUMetrics.Power, func(d *GPUDevice, v float64) { d.PowerWatts = ptr(v) }},
	} {
		qctx, cancel := context.WithTimeout(ctx, gpuQueryTimeout)
		val, _, _, err := papi.Query(qctx, expr(q.metric), end)
		cancel()
		if err != nil {
			st.Errors = append(st.Errors, fmt.Sprintf("%s: %s", expr(q.metric), scrub.URLs(err.Error()))) // it quotes the URL
			continue
		}
		vec, ok := val.(model.Vector)
		if !ok {
			st.Errors = append(st.Errors, fmt.Sprintf("%s: a %s, not a vector", expr(q.metric), val.Type()))
			continue
		}
		if len(vec) == 0 {
			st.Errors = append(st.Errors, fmt.Sprintf("%s: no series", expr(q.metric)))
			continue
		}
		for _, s := range vec {
			v := float64(s.Value)
			d := device(s.Metric)
			q.set(d, v)
			if n := NonFinite(v); n != "" {
				st.Errors = append(st.Errors, fmt.Sprintf("%s: GPU %s on %s: Prometheus answered %s (written as null in JSON)", q.metric, cmp.Or(d.GPU, d.UUID, "?"), cmp.Or(d.Hostname, "?"), n))
			}
		}
	}
	slices.SortFunc(st.Devices, func(a, b GPUDevice) int {
		return strings.Compare(a.Hostname+"\x00"+a.GPU+"\x00"+a.UUID, b.Hostname+"\x00"+b.GPU+"\x00"+b.UUID)
	})
	if len(st.Devices) == 0 && len(st.Errors) == 0 {
		st.Errors = append(st.Errors, errors.New("no GPU series").Error())
	}
	return st
}
