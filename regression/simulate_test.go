// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package regression

import (
	"fmt"
	"math"
	"reflect"
	"testing"
	"time"
)

// TestEvaluateWithoutDescription: an evaluation that does not describe
// the current window (what Step runs) decides exactly as Evaluate does
// and leaves the detector in the same state, through a step, the alarm,
// its hold and its end; only the ratios of the Results without an alarm
// are left out.
func TestEvaluateWithoutDescription(t *testing.T) {
	for _, kind := range []Kind{Latency, Ratio} {
		full, bare := NewDetector(kind, figureOptions), NewDetector(kind, figureOptions)
		a, b := newStream(5, 2, 0.3), newStream(5, 2, 0.3)
		a.errRate, b.errRate = 0.01, 0.01
		sa := &series{stream: a, kind: kind, errAfter: 0.2}
		sb := &series{stream: b, kind: kind, errAfter: 0.2}
		a.change = func(v float64) float64 { return v * 1.5 }
		b.change = a.change
		step, back := epoch.Add(2*time.Hour), epoch.Add(3*time.Hour)
		var fr []Result
		Run(full, sa, epoch, 7*time.Second, time.Minute, 5*time.Hour, step, func(now time.Time, r Result) bool {
			if now.After(back) {
				a.change, sa.errAfter, a.errRate = nil, 0.01, 0.01
			}
			fr = append(fr, r)
			return true
		})
		i, alarms := 0, 0
		runSeries(bare, sb, epoch, 7*time.Second, time.Minute, 5*time.Hour, step, false, func(now time.Time, r Result) bool {
			if now.After(back) {
				b.change, sb.errAfter, b.errRate = nil, 0.01, 0.01
			}
			f := fr[i]
			i++
			if r.Regressed {
				alarms++
			}
			if fmt.Sprintf("%+v", r) == fmt.Sprintf("%+v", f) { // NaN fields compare as text
				return true
			}
			// Only a Result without an alarm (nor its end) may differ, by
			// its ratios.
			if r.Regressed || f.Recovered || r.Test != f.Test || r.P != f.P || r.TestN != f.TestN || r.Threshold != f.Threshold || r.Recovered != f.Recovered ||
				r.Accepted != f.Accepted || r.BaselineN != f.BaselineN || !math.IsNaN(r.MedianRatio) {
				t.Fatalf("%v at %v: %+v, Evaluate's %+v", kind, now.Sub(epoch), r, f)
			}
			return true
		})
		if i != len(fr) || alarms == 0 {
			t.Fatalf("%v: %d evaluations of %d, %d with an alarm", kind, i, len(fr), alarms)
		}
		if !reflect.DeepEqual(full, bare) {
			t.Errorf("%v: the detectors' states differ", kind)
		}
	}
}
