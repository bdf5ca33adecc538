// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package regression

import (
	"testing"
	"time"
)

// A window is tested only once its samples span Options.MinSpan: after a
// cut, a doubled latency is not decided on 5 s of requests when 30 s are
// required, and is once 30 s have come; without the option it is decided
// at once.
func TestMinSpanHoldsBackShortWindows(t *testing.T) {
	run := func(minSpan time.Duration) (early, late Result) {
		d := NewDetector(Latency, Options{MinSpan: minSpan}.WithDefaults())
		t0 := time.Unix(1_700_000_000, 0)
		at := t0
		v := func(i int, f float64) float64 { return f * (0.05 + 0.01*float64(i%7)) }
		for i := range 400 {
			at = t0.Add(time.Duration(i) * 250 * time.Millisecond)
			d.Add(at, v(i, 1))
		}
		cut := at.Add(time.Millisecond)
		d.Cut(cut)
		for i := range 50 { // 5 s at 10/s
			d.Add(cut.Add(time.Duration(i)*100*time.Millisecond), v(i, 2))
		}
		early = d.Evaluate(cut.Add(5 * time.Second))
		for i := 50; i < 320; i++ { // to 32 s
			d.Add(cut.Add(time.Duration(i)*100*time.Millisecond), v(i, 2))
		}
		late = d.Evaluate(cut.Add(32 * time.Second))
		return early, late
	}
	early, late := run(30 * time.Second)
	if early.Regressed {
		t.Errorf("decided on 5 s of requests with MinSpan 30s: %+v", early)
	}
	if !late.Regressed {
		t.Errorf("not decided on 32 s of doubled requests: %+v", late)
	}
	if early, _ := run(0); !early.Regressed {
		t.Errorf("without MinSpan, 50 doubled requests are not decided: %+v", early)
	}
}
