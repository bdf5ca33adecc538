// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package plan

import (
	"fmt"
	"time"

	"github.com/llmprobe/llmprobe/alerts"
	"github.com/llmprobe/llmprobe/slo"
)

// SLO says whether a class's SLO burn-rate alerts can fire at its rate.
type SLO struct {
	Objective float64      `json:"objective"`
	Windows   []BurnWindow `json:"windows"`
}

// BurnWindow is one window pair of a burn-rate alert (the mixin's
// slo_fast and slo_slow): the requests its windows hold at the class's
// rate, and whether they are enough for it to ever fire. A condition
// holds when both windows burn faster than BurnRate and the long one
// holds at least the mixin's min_requests judged and slo_min_bad_requests
// bad requests (alerts' burnRateCondition).
type BurnWindow struct {
	Alert         string  `json:"alert"` // fast or slow
	LongSeconds   float64 `json:"long_seconds"`
	ShortSeconds  float64 `json:"short_seconds"`
	BurnRate      float64 `json:"burn_rate"`
	LongRequests  float64 `json:"long_requests"`
	ShortRequests float64 `json:"short_requests"`
	// MinBadRatio is the least share of bad requests at which it fires:
	// the burn rate's (BurnRate × the error budget), or the guard's
	// (slo_min_bad_requests of the long window's requests), the larger.
	MinBadRatio float64 `json:"min_bad_ratio"`
	CanFire     bool    `json:"can_fire"`
	// Why it cannot fire.
	Why string `json:"why,omitempty"`
}

// sloWindows judges objective's burn-rate windows at rate (judged
// requests per second) with the mixin's settings.
func sloWindows(o *slo.Objective, rate float64, a alerts.Config) *SLO {
	out := &SLO{Objective: o.Ratio}
	budget := 1 - o.Ratio
	for _, al := range []struct {
		name string
		a    alerts.BurnRateAlert
	}{{"fast", a.SLOFast}, {"slow", a.SLOSlow}} {
		for _, w := range al.a.Windows {
			long, short := time.Duration(w.Long).Seconds(), time.Duration(w.Short).Seconds()
			bw := BurnWindow{Alert: al.name, LongSeconds: long, ShortSeconds: short, BurnRate: w.BurnRate,
				LongRequests: rate * long, ShortRequests: rate * short}
			bw.MinBadRatio = w.BurnRate * budget
			if bw.LongRequests > 0 {
				bw.MinBadRatio = max(bw.MinBadRatio, float64(a.SLOMinBadRequests)/bw.LongRequests)
			}
			switch {
			case w.BurnRate*budget >= 1:
				bw.Why = fmt.Sprintf("a burn rate over %g needs more than every request bad (the budget is %.3g)", w.BurnRate, budget)
			case bw.LongRequests < float64(a.MinRequests):
				bw.Why = fmt.Sprintf("its %s window holds %.3g requests, fewer than the %d it needs", fmtSeconds(long), bw.LongRequests, a.MinRequests)
			case bw.LongRequests < float64(a.SLOMinBadRequests):
				bw.Why = fmt.Sprintf("its %s window holds %.3g requests, fewer than the %d bad ones it needs", fmtSeconds(long), bw.LongRequests, a.SLOMinBadRequests)
			case bw.ShortRequests < 1:
				bw.Why = fmt.Sprintf("its %s window holds %.2g requests: mostly none to burn", fmtSeconds(short), bw.ShortRequests)
			default:
				bw.CanFire = true
			}
			bw.MinBadRatio = roundTo(min(bw.MinBadRatio, 1), 6)
			out.Windows = append(out.Windows, bw)
		}
	}
	return out
}
