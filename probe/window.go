// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package probe

import (
	"math"
	"sync"
	"time"
)

// lagBuckets are log-spaced upper bounds for schedule-lag quantiles in the
// judgement window: 10µs × 1.25^i, i < 80, i.e. up to ~10 minutes with
// 25% resolution, which is plenty to compare p99 against a threshold.
const (
	lagBuckets    = 80
	lagBucketBase = 10 * time.Microsecond
	lagGrowth     = 1.25
)

var lagBounds = func() [lagBuckets]time.Duration {
	var b [lagBuckets]time.Duration
	v := float64(lagBucketBase)
	for i := range b {
		b[i] = time.Duration(v)
		v *= lagGrowth
	}
	return b
}()

func lagBucket(d time.Duration) int {
	if d <= lagBucketBase {
		return 0
	}
	i := int(math.Ceil(math.Log(float64(d)/float64(lagBucketBase)) / math.Log(lagGrowth)))
	return min(i, lagBuckets-1)
}

// slot is one second of a target's activity.
type slot struct {
	sec       int64 // unix second this slot holds; other values mean stale
	scheduled uint32
	sent      uint32
	late      uint32 // sent more than the window's late bound after planned
	dropped   [len(DropReasons)]uint32
	lag       [lagBuckets]uint32
}

// window keeps per-second counts over a sliding window for the harness'
// self-judgement: scheduled vs sent vs dropped, and schedule-lag
// quantiles. Memory is fixed (one slot per second of the window).
type window struct {
	mu    sync.Mutex
	slots []slot
	late  time.Duration // a send this late is counted as late
}

func newWindow(d, late time.Duration) *window {
	n := max(int(d/time.Second), 1)
	return &window{slots: make([]slot, n), late: late}
}

func (w *window) at(now time.Time) *slot {
	sec := now.Unix()
	s := &w.slots[int(sec%int64(len(w.slots)))]
	if s.sec != sec {
		*s = slot{sec: sec}
	}
	return s
}

func (w *window) scheduled(now time.Time) {
	w.mu.Lock()
	w.at(now).scheduled++
	w.mu.Unlock()
}

func (w *window) dropped(now time.Time, reason DropReason) {
	w.mu.Lock()
	s := w.at(now)
	for i, r := range DropReasons {
		if r == reason {
			s.dropped[i]++
		}
	}
	w.mu.Unlock()
}

func (w *window) sent(now time.Time, lag time.Duration) {
	w.mu.Lock()
	s := w.at(now)
	s.sent++
	if lag > w.late {
		s.late++
	}
	s.lag[lagBucket(lag)]++
	w.mu.Unlock()
}

// windowStats summarises the window ending at now.
type windowStats struct {
	span                     time.Duration // covered so far (shorter right after start)
	scheduled, sent, dropped uint64
	late                     uint64        // sends later than the window's late bound
	droppedLate              uint64        // dropped: not sendable in time (the harness)
	droppedInflight          uint64        // dropped: max_inflight reached (the target)
	lagP50, lagP99, lagMax   time.Duration // bucket upper bounds
}

func (w *window) stats(now time.Time, since time.Time) windowStats {
	w.mu.Lock()
	defer w.mu.Unlock()
	var st windowStats
	var lag [lagBuckets]uint64
	cur := now.Unix()
	oldest := cur - int64(len(w.slots)) + 1
	for i := range w.slots {
		s := &w.slots[i]
		if s.sec < oldest || s.sec > cur {
			continue
		}
		st.scheduled += uint64(s.scheduled)
		st.sent += uint64(s.sent)
		st.late += uint64(s.late)
		for j, r := range DropReasons {
			st.dropped += uint64(s.dropped[j])
			switch r {
			case DropLate:
				st.droppedLate += uint64(s.dropped[j])
			case DropInflightLimit:
				st.droppedInflight += uint64(s.dropped[j])
			}
		}
		for j, c := range s.lag {
			lag[j] += uint64(c)
		}
	}
	st.span = time.Duration(len(w.slots)) * time.Second
	if age := now.Sub(since); age < st.span {
		st.span = max(age, time.Second)
	}
	st.lagP50 = lagQuantile(&lag, st.sent, 0.50)
	st.lagP99 = lagQuantile(&lag, st.sent, 0.99)
	st.lagMax = lagQuantile(&lag, st.sent, 1)
	return st
}

func lagQuantile(h *[lagBuckets]uint64, n uint64, q float64) time.Duration {
	if n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(n)))
	var acc uint64
	for i, c := range h {
		acc += c
		if acc >= rank {
			return lagBounds[i]
		}
	}
	return lagBounds[lagBuckets-1]
}
