// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package harness

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

// DropCause is what a dropped arrival says to the judgement: the
// harness could not send it in time, or the target was too slow (its
// max_inflight requests were running), or neither (a shutdown, the
// answer-memory budget). The engine's DropReason, which the observers
// see, maps to one cause; the window counts by cause only.
type DropCause uint8

const (
	DropOther   DropCause = iota // counted as dropped, judged neither way
	DropHarness                  // not sendable in time: the harness' shortfall
	DropTarget                   // over max_inflight: the target's overload
	dropCauses
)

// slot is one second of a target's activity.
type slot struct {
	sec       int64 // unix second this slot holds; other values mean stale
	scheduled uint32
	sent      uint32
	late      uint32 // sent more than the window's late bound after planned
	dropped   [dropCauses]uint32
	lag       [lagBuckets]uint32
}

// Window keeps per-second counts over a sliding window for the harness'
// self-judgement: scheduled vs sent vs dropped, and schedule-lag
// quantiles. Memory is fixed (one slot per second of the window).
type Window struct {
	mu    sync.Mutex
	slots []slot
	late  time.Duration // a send this late is counted as late
}

func NewWindow(d, late time.Duration) *Window {
	n := max(int(d/time.Second), 1)
	return &Window{slots: make([]slot, n), late: late}
}

func (w *Window) at(now time.Time) *slot {
	sec := now.Unix()
	s := &w.slots[int(sec%int64(len(w.slots)))]
	if s.sec != sec {
		*s = slot{sec: sec}
	}
	return s
}

func (w *Window) Scheduled(now time.Time) {
	w.mu.Lock()
	w.at(now).scheduled++
	w.mu.Unlock()
}

func (w *Window) Dropped(now time.Time, cause DropCause) {
	if cause >= dropCauses {
		cause = DropOther
	}
	w.mu.Lock()
	w.at(now).dropped[cause]++
	w.mu.Unlock()
}

func (w *Window) Sent(now time.Time, lag time.Duration) {
	w.mu.Lock()
	s := w.at(now)
	s.sent++
	if lag > w.late {
		s.late++
	}
	s.lag[lagBucket(lag)]++
	w.mu.Unlock()
}

// WindowStats summarises the window ending at now.
type WindowStats struct {
	Span                     time.Duration // covered so far (shorter right after start)
	Scheduled, Sent, Dropped uint64
	Late                     uint64        // sends later than the window's late bound
	DroppedLate              uint64        // dropped: not sendable in time (the harness)
	DroppedInflight          uint64        // dropped: max_inflight reached (the target)
	LagP50, LagP99, LagMax   time.Duration // bucket upper bounds
}

func (w *Window) Stats(now time.Time, since time.Time) WindowStats {
	w.mu.Lock()
	defer w.mu.Unlock()
	var st WindowStats
	var lag [lagBuckets]uint64
	cur := now.Unix()
	oldest := cur - int64(len(w.slots)) + 1
	for i := range w.slots {
		s := &w.slots[i]
		if s.sec < oldest || s.sec > cur {
			continue
		}
		st.Scheduled += uint64(s.scheduled)
		st.Sent += uint64(s.sent)
		st.Late += uint64(s.late)
		for _, n := range s.dropped {
			st.Dropped += uint64(n)
		}
		st.DroppedLate += uint64(s.dropped[DropHarness])
		st.DroppedInflight += uint64(s.dropped[DropTarget])
		for j, c := range s.lag {
			lag[j] += uint64(c)
		}
	}
	st.Span = time.Duration(len(w.slots)) * time.Second
	if age := now.Sub(since); age < st.Span {
		st.Span = max(age, time.Second)
	}
	st.LagP50 = lagQuantile(&lag, st.Sent, 0.50)
	st.LagP99 = lagQuantile(&lag, st.Sent, 0.99)
	st.LagMax = lagQuantile(&lag, st.Sent, 1)
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
