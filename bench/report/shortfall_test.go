// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package report

import (
	"strings"
	"testing"
	"time"
)

// TestShortfall: a count that chance explains is not a shortfall, at low
// rates (the CI failure: 32 of an expected 40 at 20 req/s over 2 s was
// called "achieved 16 of 20 req/s") and at high ones; a real one is named.
func TestShortfall(t *testing.T) {
	for _, c := range []struct {
		rate  float64
		dur   time.Duration
		sent  int
		short bool
	}{
		{20, 2 * time.Second, 32, false},     // 1.3σ below 40
		{20, 2 * time.Second, 15, false},     // 4σ: chance, barely
		{20, 2 * time.Second, 10, true},      // a quarter of the load
		{0.1, time.Minute, 0, false},         // 6 expected, none sent: chance can do that
		{1000, 5 * time.Second, 4850, false}, // 3% low, 2.1σ
		{1000, 5 * time.Second, 4700, true},  // 6% low, 4.2σ
		{1000, 5 * time.Second, 5100, false}, // more is never short
		{0, time.Second, 0, false},
	} {
		s := &StageReport{RequestedRate: c.rate, Duration: c.dur, Sent: c.sent, AchievedRate: float64(c.sent) / c.dur.Seconds()}
		got := s.Shortfall()
		if (got != "") != c.short {
			t.Errorf("%v req/s for %v, %d sent: Shortfall() = %q, want short=%v", c.rate, c.dur, c.sent, got, c.short)
		}
		if c.short && !strings.Contains(got, "fewer than chance explains") {
			t.Errorf("the shortfall does not say why: %q", got)
		}
	}
}
