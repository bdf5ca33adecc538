// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package exporter

import (
	"sync"
	"time"
)

// maxRatioBuckets bounds the memory of one hit-ratio window: windows up
// to 5 minutes get one bucket per second, longer ones coarser buckets.
const maxRatioBuckets = 300

// ratioWindow sums a numerator and a denominator over a sliding time
// window kept as a ring of fixed-width buckets: memory is fixed per series
// whatever the request rate, and adding is O(1).
type ratioWindow struct {
	mu      sync.Mutex
	width   int64 // nanoseconds per bucket
	buckets []ratioBucket
}

type ratioBucket struct {
	idx      int64 // absolute bucket number (unix nanoseconds / width); others are stale
	num, den uint64
}

func newRatioWindow(window time.Duration) *ratioWindow {
	n := int64(window / time.Second)
	if n > maxRatioBuckets {
		n = maxRatioBuckets
	}
	if n < 1 {
		n = 1
	}
	width := int64(window) / n
	if width < 1 {
		width = 1
	}
	return &ratioWindow{width: width, buckets: make([]ratioBucket, n)}
}

func (w *ratioWindow) slot(now time.Time) (int64, *ratioBucket) {
	idx := now.UnixNano() / w.width
	i := idx % int64(len(w.buckets))
	if i < 0 {
		i += int64(len(w.buckets))
	}
	return idx, &w.buckets[i]
}

// add records num/den at now.
func (w *ratioWindow) add(now time.Time, num, den int) {
	w.mu.Lock()
	idx, b := w.slot(now)
	if b.idx != idx {
		*b = ratioBucket{idx: idx}
	}
	b.num += uint64(num)
	b.den += uint64(den)
	w.mu.Unlock()
}

// ratio returns Σnum/Σden over the buckets of the window ending at now
// (the current, partial bucket included), and false when Σden is 0.
func (w *ratioWindow) ratio(now time.Time) (float64, bool) {
	cur := now.UnixNano() / w.width
	oldest := cur - int64(len(w.buckets)) + 1
	var num, den uint64
	w.mu.Lock()
	for i := range w.buckets {
		if b := &w.buckets[i]; b.idx >= oldest && b.idx <= cur {
			num += b.num
			den += b.den
		}
	}
	w.mu.Unlock()
	if den == 0 {
		return 0, false
	}
	return float64(num) / float64(den), true
}
