package exporter

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmprobe/llmprobe/probe"
)

var (
	inflightDesc = prometheus.NewDesc(namespace+"_inflight_requests",
		"Requests sent and not yet ended.", targetLabels, nil)
	targetRateDesc = prometheus.NewDesc(namespace+"_target_request_rate",
		"Requested mean arrival rate of this process (its share when replicas split a target), in requests per second.", targetLabels, nil)
	saturatedDesc = prometheus.NewDesc(namespace+"_harness_saturated",
		"1 while the harness cannot deliver the requested load (schedule lag p99 or shortfall over its threshold within the saturation window): this target's numbers are not trustworthy.", targetLabels, nil)
	warmupDesc = prometheus.NewDesc(namespace+"_warmup",
		"1 while the target is in its warm-up period (after start or a config change); its requests are kept out of the latency histograms.", targetLabels, nil)
	reuseTargetDesc = prometheus.NewDesc(namespace+"_prefix_reuse_target_ratio",
		"Configured intent: the fraction of prompt tokens the workload class shares as prefixes a prefix cache could serve.", targetClassLabels, nil)
)

// statusCollector exports the engine's point-in-time gauges at scrape
// time, so the series of a removed target disappear with it.
type statusCollector struct {
	status func() []probe.TargetStatus
}

// NewStatusCollector returns a collector of the gauges that describe the
// engine's state (llmprobe_inflight_requests, _target_request_rate,
// _harness_saturated, _warmup, _prefix_reuse_target_ratio), read from
// status (typically (*probe.Engine).Status) at every scrape.
func NewStatusCollector(status func() []probe.TargetStatus) prometheus.Collector {
	return statusCollector{status: status}
}

// Describe implements prometheus.Collector.
func (c statusCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- inflightDesc
	ch <- targetRateDesc
	ch <- saturatedDesc
	ch <- warmupDesc
	ch <- reuseTargetDesc
}

// Collect implements prometheus.Collector.
func (c statusCollector) Collect(ch chan<- prometheus.Metric) {
	if c.status == nil {
		return
	}
	for _, s := range c.status() {
		ch <- prometheus.MustNewConstMetric(inflightDesc, prometheus.GaugeValue, float64(s.Inflight), s.Name)
		ch <- prometheus.MustNewConstMetric(targetRateDesc, prometheus.GaugeValue, s.RequestedRate, s.Name)
		ch <- prometheus.MustNewConstMetric(saturatedDesc, prometheus.GaugeValue, boolValue(s.Saturated), s.Name)
		ch <- prometheus.MustNewConstMetric(warmupDesc, prometheus.GaugeValue, boolValue(s.Warmup), s.Name)
		for _, cl := range s.Classes {
			ch <- prometheus.MustNewConstMetric(reuseTargetDesc, prometheus.GaugeValue, cl.ReuseIntent, s.Name, cl.Name)
		}
	}
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
