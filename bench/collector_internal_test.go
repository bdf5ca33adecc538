// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package bench

import (
	"testing"
	"time"
)

// TestExpectedResultsBounded: the collector's room is sized from the
// stage's rate but bounded: a stage at the arrival cap (or a mistaken
// 1e9 req/s, 2.4e9 values per slice, about 77 GB) preallocates a bounded
// number of values and grows past them on demand, instead of taking
// seconds to map gigabytes before the stage starts.
func TestExpectedResultsBounded(t *testing.T) {
	if n := expectedResults(10, 60*time.Second); n != 736 {
		t.Errorf("10 req/s for 60s: room for %d, want 736", n)
	}
	for _, rate := range []float64{1e5, 1e9, 1e300} {
		if n := expectedResults(rate, time.Hour); n > maxPrealloc || n <= 0 {
			t.Errorf("%g req/s: room for %d (bound %d)", rate, n, maxPrealloc)
		}
	}
}
