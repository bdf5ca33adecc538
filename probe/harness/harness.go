// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package harness

import (
	"context"
	"math"
	"runtime/metrics"
	"sync"
	"time"
)

// Measurement inflation: can the harness' timestamps be trusted?
//
// The client timestamps a stream event when its goroutine reads it. If the
// process is starved of CPU, that goroutine runs late and every TTFT and
// ITL it measures is inflated, while sends can still look punctual. Three
// things starve it, and each is measured where it happens:
//
//   - the Go scheduler (more runnable goroutines than GOMAXPROCS):
//     runtime/metrics /sched/latencies:seconds, the time goroutines spend
//     runnable before they run;
//   - the OS (other processes on the same CPUs): the run-queue wait of the
//     process' threads, /proc/self/task/*/schedstat (Linux), as a mean per
//     timeslice;
//   - a CPU quota (Kubernetes limits): the cgroup's cpu.stat, v2
//     (nr_periods, nr_throttled, throttled_usec) or v1 (throttled_time),
//     as the stall per throttled period.
//
// And one thing measures the effect itself: a heartbeat goroutine waits,
// every heartbeatEvery, on the same kind of file event a stream read waits
// on (a timerfd in Go's netpoller, see sleeper_linux.go), and records how
// late it ran. Whatever delays a woken reader — its thread descheduled by
// the OS, a busy Go scheduler, a throttled cgroup — delays the heartbeat
// alike, at every request rate.
//
// A Monitor samples all of it once a second into a ring of
// cumulative readings, so that any window's figures are one subtraction.
// It is process-wide: every target's verdict uses the same figures.

// heartbeatEvery is the heartbeat's period: 100 wake-ups a second cost
// microseconds of CPU and give a window of a minute 6,000 samples.
const heartbeatEvery = 10 * time.Millisecond

// harnessSample is one cumulative reading.
type harnessSample struct {
	at time.Time
	// Heartbeat lateness histogram (lagBounds' buckets).
	wake [lagBuckets]uint64
	// Go scheduler latency histogram (runtime/metrics' buckets).
	sched []uint64
	// OS: run-queue wait and timeslices of the process' threads.
	runqueueWait time.Duration
	timeslices   uint64
	hasSchedstat bool
	// cgroup CPU controller.
	periods, throttledPeriods uint64
	throttled                 time.Duration
	hasCgroup                 bool
}

// Stats are the inflation figures over a window.
type Stats struct {
	Span time.Duration // covered by the readings (shorter right after start)

	// Heartbeat: wake-ups, how many ran later than the bound, and the p99
	// lateness (bucket upper bound).
	WakeEvents, WakeOver uint64
	WakeP99              time.Duration

	// Go scheduler: scheduling events, how many waited longer than the
	// bound asked for, and the p99 wait (bucket upper bound).
	SchedEvents, SchedOver uint64
	SchedP99               time.Duration

	// OS: mean run-queue wait per timeslice, over Timeslices timeslices;
	// HasSchedstat is false where the kernel does not say.
	RunqueueWait time.Duration
	Timeslices   uint64
	HasSchedstat bool

	// cgroup: CPU periods, throttled periods and the mean stall per
	// throttled period; HasCgroup is false without a CPU controller.
	Periods, ThrottledPeriods uint64
	ThrottleStall             time.Duration
	HasCgroup                 bool

	// Inflation is the estimate of how late the harness' timestamps are:
	// the largest of WakeP99, SchedP99, RunqueueWait and (when periods
	// were throttled) ThrottleStall.
	Inflation time.Duration
}

// Totals are the cumulative counters since the process started,
// for export as Prometheus counters and histograms.
type Totals struct {
	// SchedBuckets are the upper bounds (seconds) of SchedCounts' buckets;
	// the last is +Inf.
	SchedBuckets []float64
	SchedCounts  []uint64
	// WakeBuckets and WakeCounts are the heartbeat's lateness histogram.
	WakeBuckets []float64
	WakeCounts  []uint64

	RunqueueWait time.Duration
	Timeslices   uint64
	HasSchedstat bool

	Periods, ThrottledPeriods uint64
	Throttled                 time.Duration
	HasCgroup                 bool
}

const schedLatencyMetric = "/sched/latencies:seconds"

// Monitor keeps a ring of one-second readings covering a window.
type Monitor struct {
	mu      sync.Mutex
	ring    []harnessSample
	next    int
	n       int
	buckets []float64 // runtime/metrics' bucket boundaries (len(counts)+1)
	os      osReader
	rm      []metrics.Sample

	wakeMu sync.Mutex
	wake   [lagBuckets]uint64 // cumulative heartbeat lateness
}

// osReader reads the OS-specific sources (harness_linux.go).
type osReader interface {
	// read fills the schedstat and cgroup fields of s.
	read(s *harnessSample)
}

func NewMonitor(window time.Duration) *Monitor {
	m := &Monitor{
		ring: make([]harnessSample, max(int(window/time.Second), 1)+1),
		os:   newOSReader(),
		rm:   []metrics.Sample{{Name: schedLatencyMetric}},
	}
	m.Sample(time.Now())
	return m
}

// Resize makes the ring cover window, keeping the newest readings.
func (m *Monitor) Resize(window time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := max(int(window/time.Second), 1) + 1
	if n == len(m.ring) {
		return
	}
	ring := make([]harnessSample, n)
	keep := min(m.n, n)
	for i := range keep {
		ring[keep-1-i] = m.ring[(m.next-1-i+2*len(m.ring))%len(m.ring)]
	}
	m.ring, m.n, m.next = ring, keep, keep%n
}

// Heartbeat wakes every heartbeatEvery until ctx is done and records how
// late each wake-up ran. When it falls behind it skips the missed beats
// (their lateness is the one recorded).
func (m *Monitor) Heartbeat(ctx context.Context) {
	sl := NewSleeper(ctx)
	defer sl.Close()
	next := time.Now()
	for {
		next = next.Add(heartbeatEvery)
		if !sl.Until(ctx, next) {
			return
		}
		late := time.Since(next)
		m.wakeMu.Lock()
		m.wake[lagBucket(late)]++
		m.wakeMu.Unlock()
		if late > heartbeatEvery {
			next = next.Add(late.Truncate(heartbeatEvery))
		}
	}
}

// Sample takes one reading.
func (m *Monitor) Sample(now time.Time) {
	metrics.Read(m.rm)
	s := harnessSample{at: now}
	m.wakeMu.Lock()
	s.wake = m.wake
	m.wakeMu.Unlock()
	if v := m.rm[0].Value; v.Kind() == metrics.KindFloat64Histogram {
		h := v.Float64Histogram()
		s.sched = append([]uint64(nil), h.Counts...)
		m.mu.Lock()
		if m.buckets == nil {
			m.buckets = append([]float64(nil), h.Buckets...)
		}
		m.mu.Unlock()
	}
	m.os.read(&s)
	m.mu.Lock()
	m.ring[m.next] = s
	m.next = (m.next + 1) % len(m.ring)
	m.n = min(m.n+1, len(m.ring))
	m.mu.Unlock()
}

// Stats returns the figures between the oldest and the newest reading,
// counting scheduling events longer than bound as over.
func (m *Monitor) Stats(bound time.Duration) Stats {
	m.mu.Lock()
	defer m.mu.Unlock()
	var st Stats
	if m.n < 2 {
		return st
	}
	newest := m.ring[(m.next-1+len(m.ring))%len(m.ring)]
	oldest := m.ring[(m.next-m.n+len(m.ring))%len(m.ring)]
	st.Span = newest.at.Sub(oldest.at)

	var wake [lagBuckets]uint64
	for i := range wake {
		wake[i] = sub(newest.wake[i], oldest.wake[i])
		st.WakeEvents += wake[i]
		// Bucket i holds (lagBounds[i-1], lagBounds[i]].
		if i > 0 && lagBounds[i-1] >= bound {
			st.WakeOver += wake[i]
		}
	}
	st.WakeP99 = lagQuantile(&wake, st.WakeEvents, 0.99)

	if len(newest.sched) == len(oldest.sched) && len(m.buckets) == len(newest.sched)+1 {
		delta := make([]uint64, len(newest.sched))
		for i := range delta {
			delta[i] = sub(newest.sched[i], oldest.sched[i])
			st.SchedEvents += delta[i]
		}
		b := bound.Seconds()
		var acc uint64
		rank := uint64(math.Ceil(0.99 * float64(st.SchedEvents)))
		for i, c := range delta {
			// Bucket i holds values in [buckets[i], buckets[i+1]).
			if m.buckets[i] >= b {
				st.SchedOver += c
			}
			acc += c
			if st.SchedP99 == 0 && st.SchedEvents > 0 && acc >= rank {
				up := m.buckets[i+1]
				if math.IsInf(up, 1) {
					up = m.buckets[i]
				}
				st.SchedP99 = secondsDuration(up)
			}
		}
	}
	if newest.hasSchedstat && oldest.hasSchedstat {
		st.HasSchedstat = true
		st.Timeslices = sub(newest.timeslices, oldest.timeslices)
		if st.Timeslices > 0 {
			st.RunqueueWait = max(newest.runqueueWait-oldest.runqueueWait, 0) / time.Duration(st.Timeslices)
		}
	}
	if newest.hasCgroup && oldest.hasCgroup {
		st.HasCgroup = true
		st.Periods = sub(newest.periods, oldest.periods)
		st.ThrottledPeriods = sub(newest.throttledPeriods, oldest.throttledPeriods)
		if st.ThrottledPeriods > 0 {
			st.ThrottleStall = max(newest.throttled-oldest.throttled, 0) / time.Duration(st.ThrottledPeriods)
		}
	}
	st.Inflation = max(st.WakeP99, st.SchedP99, st.RunqueueWait)
	if st.ThrottledPeriods > 0 {
		st.Inflation = max(st.Inflation, st.ThrottleStall)
	}
	return st
}

// Totals returns the newest cumulative reading.
func (m *Monitor) Totals() Totals {
	m.mu.Lock()
	defer m.mu.Unlock()
	var t Totals
	if m.n == 0 {
		return t
	}
	s := m.ring[(m.next-1+len(m.ring))%len(m.ring)]
	t.WakeCounts = s.wake[:]
	t.WakeBuckets = make([]float64, lagBuckets)
	for i, b := range lagBounds {
		t.WakeBuckets[i] = b.Seconds()
	}
	t.WakeBuckets[lagBuckets-1] = math.Inf(1) // the last bucket takes everything above
	if len(m.buckets) == len(s.sched)+1 {
		t.SchedBuckets = m.buckets[1:]
		t.SchedCounts = s.sched
	}
	t.RunqueueWait, t.Timeslices, t.HasSchedstat = s.runqueueWait, s.timeslices, s.hasSchedstat
	t.Periods, t.ThrottledPeriods, t.Throttled, t.HasCgroup = s.periods, s.throttledPeriods, s.throttled, s.hasCgroup
	return t
}

// sub is a-b for counters that may have been reset (a thread that exited
// takes its schedstat with it): never negative.
func sub(a, b uint64) uint64 {
	if a < b {
		return 0
	}
	return a - b
}

func secondsDuration(s float64) time.Duration {
	switch {
	case math.IsInf(s, 1) || s > float64(math.MaxInt64)/1e9:
		return time.Duration(math.MaxInt64)
	case s <= 0:
		return 0
	}
	return time.Duration(s * 1e9)
}
