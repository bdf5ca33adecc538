// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package exporter

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmprobe/llmprobe/probe/harness"
)

// The harness' own measurement-inflation figures (process-wide, no
// labels): what could make its timestamps late. See probe/harness/harness.go.
var (
	wakeLatencyDesc = prometheus.NewDesc(namespace+"_harness_wakeup_latency_seconds",
		"How late the harness' heartbeat ran: every 10 ms it waits on a timerfd in Go's netpoller, as a stream read waits on its socket, and records its lateness. Whatever delays a woken reader (the OS, the Go scheduler, a CPU quota) delays it alike: this is how late event timestamps can be.", nil, nil)
	schedLatencyDesc = prometheus.NewDesc(namespace+"_harness_sched_latency_seconds",
		"Time goroutines spent runnable before they ran (the Go scheduler; runtime/metrics /sched/latencies:seconds): how late a goroutine that reads a stream event can timestamp it when the process is starved.", nil, nil)
	runqueueWaitDesc = prometheus.NewDesc(namespace+"_harness_runqueue_wait_seconds_total",
		"Time the process' threads spent waiting for a CPU in the OS run queue (/proc/self/task/*/schedstat). Divided by llmprobe_harness_timeslices_total: the mean wait per timeslice.", nil, nil)
	timeslicesDesc = prometheus.NewDesc(namespace+"_harness_timeslices_total",
		"Timeslices the process' threads ran (/proc/self/task/*/schedstat).", nil, nil)
	throttledDesc = prometheus.NewDesc(namespace+"_harness_cpu_throttled_seconds_total",
		"Time the process' cgroup was stopped by its CPU quota (cgroup cpu.stat throttled_usec, or throttled_time on cgroup v1).", nil, nil)
	throttledPeriodsDesc = prometheus.NewDesc(namespace+"_harness_cpu_throttled_periods_total",
		"CPU-quota enforcement periods in which the process' cgroup was throttled (cpu.stat nr_throttled).", nil, nil)
	periodsDesc = prometheus.NewDesc(namespace+"_harness_cpu_periods_total",
		"CPU-quota enforcement periods of the process' cgroup (cpu.stat nr_periods).", nil, nil)
	inflationDesc = prometheus.NewDesc(namespace+"_harness_timestamp_inflation_seconds",
		"Estimate of how late the harness timestamps events over the saturation window: the largest of the heartbeat's p99 lateness, the Go scheduler's p99 wait, the mean OS run-queue wait per timeslice and (when throttled) the mean stall per throttled CPU period.", nil, nil)
)

// harnessCollector exports the engine's inflation figures at scrape time.
type harnessCollector struct {
	harness func() (harness.Stats, harness.Totals, bool)
}

// NewHarnessCollector returns a collector of the harness' inflation
// figures (llmprobe_harness_sched_latency_seconds, _runqueue_wait_*,
// _cpu_throttled_*, _timestamp_inflation_seconds), typically over
// (*probe.Engine).Harness. Series whose source the machine lacks (no
// schedstat, no cgroup CPU controller) are left out.
func NewHarnessCollector(harness func() (harness.Stats, harness.Totals, bool)) prometheus.Collector {
	return harnessCollector{harness: harness}
}

// Describe implements prometheus.Collector.
func (c harnessCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{wakeLatencyDesc, schedLatencyDesc, runqueueWaitDesc, timeslicesDesc, throttledDesc, throttledPeriodsDesc, periodsDesc, inflationDesc} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c harnessCollector) Collect(ch chan<- prometheus.Metric) {
	w, t, ok := c.harness()
	if !ok {
		return
	}
	if h := constHistogram(wakeLatencyDesc, t.WakeBuckets, t.WakeCounts, true); h != nil {
		ch <- h
	}
	if h := constHistogram(schedLatencyDesc, t.SchedBuckets, t.SchedCounts, false); h != nil {
		ch <- h
	}
	if t.HasSchedstat {
		ch <- prometheus.MustNewConstMetric(runqueueWaitDesc, prometheus.CounterValue, t.RunqueueWait.Seconds())
		ch <- prometheus.MustNewConstMetric(timeslicesDesc, prometheus.CounterValue, float64(t.Timeslices))
	}
	if t.HasCgroup {
		ch <- prometheus.MustNewConstMetric(throttledDesc, prometheus.CounterValue, t.Throttled.Seconds())
		ch <- prometheus.MustNewConstMetric(throttledPeriodsDesc, prometheus.CounterValue, float64(t.ThrottledPeriods))
		ch <- prometheus.MustNewConstMetric(periodsDesc, prometheus.CounterValue, float64(t.Periods))
	}
	ch <- prometheus.MustNewConstMetric(inflationDesc, prometheus.GaugeValue, w.Inflation.Seconds())
}

// constHistogram maps a fine histogram (upper bounds, counts per bucket)
// onto harnessBuckets: a fine bucket counts towards the first classic
// bound at or above its upper edge, so the cumulative counts stay exact at
// every bound. The sum is estimated from bucket midpoints (finite ones),
// or, with upperSum, from upper bounds (the heartbeat's buckets are
// coarser).
func constHistogram(desc *prometheus.Desc, bounds []float64, counts []uint64, upperSum bool) prometheus.Metric {
	if len(counts) == 0 || len(counts) != len(bounds) {
		return nil
	}
	cum := make(map[float64]uint64, len(harnessBuckets))
	var total uint64
	var sum float64
	prevUpper := 0.0
	for i, c := range counts {
		upper := bounds[i]
		total += c
		if c > 0 && upper < 1e300 {
			if upperSum {
				sum += float64(c) * upper
			} else {
				sum += float64(c) * (prevUpper + upper) / 2
			}
		}
		prevUpper = upper
		for _, b := range harnessBuckets {
			if upper <= b {
				cum[b] += c
			}
		}
	}
	return prometheus.MustNewConstHistogram(desc, total, sum, cum)
}
