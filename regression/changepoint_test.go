// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package regression

import (
	"testing"
	"time"
)

// TestGrowingBaselineSparesStep: a fresh detector's growing baseline
// takes the older current samples at each evaluation unless a test is
// suspicious, and the windows that do not yet span MinSpan (the newest
// minute at 5 req/s) are not tested for an alarm — but they are judged
// for suspicion, so an evaluation 10 to 50 s after a doubling of a
// narrow stream's TTFT, whose longer windows mix the step with the
// minute before it, moves none of the doubled samples into the baseline.
func TestGrowingBaselineSparesStep(t *testing.T) {
	t.Parallel()
	for seed := range uint64(20) {
		d := NewDetector(Latency, figureOptions)
		s := newStream(80000+seed, 5, 0)
		narrowScale(2, false)(s)
		step := epoch.Add(3 * time.Minute)
		// The evaluations fall 10 to 48 s after the step.
		phase := time.Duration(10+2*seed) * time.Second
		run(d, s, epoch, phase, 10*time.Minute, Latency, step, 0, func(now time.Time, r Result) bool {
			// Before the step the values are within 5σ of 40 ms, after it
			// within 5σ of 80 ms.
			if d.refN > 0 && d.ref[d.refN-1] > 0.06 {
				t.Errorf("seed %d: at %v (the step at %v), a doubled value %.4f is in the baseline of %d", seed, now.Sub(epoch), step.Sub(epoch), d.ref[d.refN-1], d.refN)
				return false
			}
			return !r.Regressed
		})
	}
}
