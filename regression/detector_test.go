// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package regression

import (
	"fmt"
	"math"
	"testing"
	"time"
)

// TestStationaryNoAlarm: days of a stationary stream, independent and
// autocorrelated (AR(1), ρ 0.3 between consecutive requests), raise no
// alarm at the default level, and no test of them rejects at it even
// without the effect gate (the figures measure the margin over simulated
// years).
func TestStationaryNoAlarm(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		kind Kind
		rate float64
		rho  float64
		dur  time.Duration
	}{
		{"ttft 5/s", Latency, 5, 0, 4 * time.Hour},
		{"ttft 5/s AR(1) 0.3", Latency, 5, 0.3, 4 * time.Hour},
		{"ttft 0.5/s", Latency, 0.5, 0, 12 * time.Hour},
		{"errors 5/s", Ratio, 5, 0, 4 * time.Hour},
		{"errors 0.5/s", Ratio, 0.5, 0, 12 * time.Hour},
	} {
		alarms, margin, d := nullRun(c.kind, Options{}, c.rate, c.rho, c.dur, 42)
		if alarms != 0 {
			t.Errorf("%s: %d alarms in %v", c.name, alarms, c.dur)
		}
		if margin < 1 {
			t.Errorf("%s: a p-value %.3g times its level", c.name, margin)
		}
		if m := d.MemoryBytes(); m > 64<<10 {
			t.Errorf("%s: %d bytes, want at most 64 KiB", c.name, m)
		}
	}
}

// TestDetectsMedianStep: a 25% rise of every TTFT after only 3 minutes
// of history at 5 req/s (900 samples) is caught by the median test,
// nearly always within 3 minutes, with the change point near the step
// and never before it.
func TestDetectsMedianStep(t *testing.T) {
	t.Parallel()
	const trials = 20
	within := 0
	for seed := range uint64(trials) {
		tr := stepTrial(Latency, Options{}, 5, 3*time.Minute, 15*time.Minute, 1000+seed, scale(1.25), 0)
		switch {
		case tr.Early:
			t.Errorf("seed %d: alarm %v before the step", seed, -tr.Delay)
			continue
		case !tr.Detected:
			t.Errorf("seed %d: not detected within 15m", seed)
			continue
		}
		if tr.Delay <= 3*time.Minute {
			within++
		}
		if tr.Test != TestMedian {
			t.Errorf("seed %d: decided by %q, want median", seed, tr.Test)
		}
		if tr.ChangePointError < -time.Minute || tr.ChangePointError > 2*time.Minute {
			t.Errorf("seed %d: change point %v from the step", seed, tr.ChangePointError)
		}
		if r := tr.Result; !(r.Shift >= 1.2 && r.MedianRatio > 1.1 && r.P < DefaultMedianLevel && r.Threshold == DefaultMedianLevel && r.Onset.After(r.ChangePoint)) {
			t.Errorf("seed %d: %+v", seed, r)
		}
	}
	if within < trials*17/20 {
		t.Errorf("%d of %d steps detected within 3m", within, trials)
	}
}

// TestDetectsTailOnly: the p99 doubled with the median unchanged is the
// tail test's.
func TestDetectsTailOnly(t *testing.T) {
	t.Parallel()
	for seed := range uint64(8) {
		tr := stepTrial(Latency, Options{}, 5, time.Hour, 30*time.Minute, 2000+seed, tail(), 0)
		if !tr.Detected || tr.Delay > 20*time.Minute || tr.Test != TestTail {
			t.Errorf("seed %d: %+v", seed, tr)
			continue
		}
		if r := tr.Result; !(r.P99Ratio >= 1.5 && r.MedianRatio < 1.1) {
			t.Errorf("seed %d: ratios %+v", seed, r)
		}
	}
}

// TestDetectsErrors: errors from 1% to 5% at 5 req/s within minutes.
func TestDetectsErrors(t *testing.T) {
	t.Parallel()
	for seed := range uint64(8) {
		tr := stepTrial(Ratio, Options{}, 5, time.Hour, 30*time.Minute, 3000+seed, nil, 0.05)
		if !tr.Detected || tr.Delay > 10*time.Minute || tr.Test != TestErrors {
			t.Errorf("seed %d: %+v", seed, tr)
			continue
		}
		if r := tr.Result; !(r.CurrentRatio > 0.03 && r.BaselineRatio < 0.02 && !(r.MedianRatio == r.MedianRatio)) {
			t.Errorf("seed %d: ratios %+v", seed, r)
		}
	}
}

// TestSmallShiftDoesNotPage: an 8% rise is real (the median test's p
// falls below the level) but under the effect gate, so it never alarms.
func TestSmallShiftDoesNotPage(t *testing.T) {
	t.Parallel()
	d := NewDetector(Latency, Options{})
	s := newStream(11, 5, 0)
	s.change = func(v float64) float64 { return v * 1.08 }
	minP := 1.0
	run(d, s, epoch, 0, 3*time.Hour, Latency, epoch.Add(time.Hour), 0, func(now time.Time, r Result) bool {
		if r.Regressed {
			t.Fatalf("alarm at %v: %+v", now.Sub(epoch), r)
		}
		minP = min(minP, r.P)
		return true
	})
	if minP > DefaultMedianLevel {
		t.Errorf("smallest p %.3g: the shift should be plainly significant", minP)
	}
}

// TestHoldRecoverAccept: a 30% regression raises one alarm that holds
// (no flapping) while it lasts and ends soon after it does; one that
// lasts past AcceptAfter (here 2h) becomes the baseline and stays quiet.
func TestHoldRecoverAccept(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		last   time.Duration
		accept bool
	}{{"1h", time.Hour, false}, {"3h", 3 * time.Hour, true}} {
		const acceptAfter = 2 * time.Hour
		d := NewDetector(Latency, Options{AcceptAfter: acceptAfter})
		s := newStream(21, 2, 0)
		step := epoch.Add(time.Hour)
		back := step.Add(c.last)
		s.change = func(v float64) float64 { return v * 1.3 }
		var onsets, recovered, accepted int
		var firstOnset, recoveredAt, acceptedAt time.Time
		prev := false
		run(d, s, epoch, 0, time.Hour+c.last+time.Hour, Latency, step, 0, func(now time.Time, r Result) bool {
			if now.After(back) {
				s.change = nil
			}
			if r.Regressed && !prev {
				onsets++
				firstOnset = now
			}
			if r.Regressed && !r.Onset.Equal(firstOnset) {
				t.Errorf("%s: onset moved to %v", c.name, r.Onset)
			}
			if r.Regressed && now.After(step.Add(5*time.Minute)) && now.Before(back) && r.Threshold != ExitLevel {
				t.Errorf("%s: held at threshold %g", c.name, r.Threshold)
			}
			if !r.Regressed && !r.Accepted && !r.Recovered && now.After(step.Add(5*time.Minute)) && now.Before(back) && !(c.accept && now.After(acceptedAt) && accepted > 0) {
				t.Errorf("%s: not regressed at %v", c.name, now.Sub(step))
			}
			if r.Recovered {
				recovered++
				recoveredAt = now
			}
			if r.Accepted {
				accepted++
				acceptedAt = now
			}
			prev = r.Regressed
			return true
		})
		if onsets != 1 {
			t.Errorf("%s: %d onsets, want 1", c.name, onsets)
		}
		if c.accept {
			if accepted != 1 || recovered != 0 {
				t.Errorf("%s: accepted %d recovered %d, want 1 and 0", c.name, accepted, recovered)
			} else if got := acceptedAt.Sub(firstOnset); got < acceptAfter || got > acceptAfter+time.Minute {
				t.Errorf("%s: accepted %v after the onset", c.name, got)
			}
			continue
		}
		if accepted != 0 || recovered != 1 {
			t.Errorf("%s: accepted %d recovered %d, want 0 and 1", c.name, accepted, recovered)
		} else if got := recoveredAt.Sub(back); got < 0 || got > 15*time.Minute {
			t.Errorf("%s: recovered %v after the regression ended", c.name, got)
		}
	}
}

// TestCut: a deploy (Cut) that brings a regression is blamed on the
// deploy: the change point is the Cut, the baseline is what came
// before. A deploy that changes nothing raises nothing. A Cut while an
// alarm holds keeps the old baseline: a fixed version ends the alarm, a
// still broken one keeps it with its first onset.
func TestCut(t *testing.T) {
	t.Parallel()
	feed := func(d *Detector, s *stream, from time.Time, dur time.Duration, f float64, each func(time.Time, Result)) time.Time {
		tm := from
		next := from.Add(time.Minute)
		for end := from.Add(dur); tm.Before(end); tm = tm.Add(s.gap()) {
			for !next.After(tm) {
				each(next, d.Evaluate(next))
				next = next.Add(time.Minute)
			}
			d.Add(tm, s.ttft()*f)
		}
		return tm
	}
	none := func(time.Time, Result) {}

	// A regression that comes with the deploy.
	d := NewDetector(Latency, Options{})
	s := newStream(31, 5, 0)
	tm := feed(d, s, epoch, time.Hour, 1, none)
	cut := tm.Add(time.Second)
	d.Cut(cut)
	if r := d.Evaluate(cut); r.BaselineN != BaselineCapacity || r.CurrentN != 0 {
		t.Errorf("after the Cut: baseline %d current %d, want %d and 0", r.BaselineN, r.CurrentN, BaselineCapacity)
	}
	var got Result
	feed(d, s, cut, 10*time.Minute, 1.3, func(now time.Time, r Result) {
		if r.Regressed && got.Onset.IsZero() {
			got = r
		}
	})
	if !got.Regressed || !got.ChangePoint.Equal(cut) {
		t.Errorf("regression after the deploy: %+v, want the change point at the Cut %v", got, cut)
	}

	// A deploy that changes nothing.
	d = NewDetector(Latency, Options{})
	s = newStream(32, 5, 0)
	tm = feed(d, s, epoch, time.Hour, 1, none)
	d.Cut(tm)
	feed(d, s, tm, time.Hour, 1, func(now time.Time, r Result) {
		if r.Regressed {
			t.Errorf("harmless deploy: alarm at %v", now.Sub(tm))
		}
	})

	// A Cut while an alarm holds.
	for _, fixed := range []bool{true, false} {
		d = NewDetector(Latency, Options{})
		s = newStream(33, 5, 0)
		tm = feed(d, s, epoch, time.Hour, 1, none)
		var onset time.Time
		tm = feed(d, s, tm, 10*time.Minute, 1.3, func(now time.Time, r Result) {
			if r.Regressed && onset.IsZero() {
				onset = r.Onset
			}
		})
		if onset.IsZero() {
			t.Fatal("no alarm before the Cut")
		}
		d.Cut(tm)
		f := 1.3
		if fixed {
			f = 1
		}
		var last Result
		recovered := false
		feed(d, s, tm, 30*time.Minute, f, func(now time.Time, r Result) {
			last = r
			recovered = recovered || r.Recovered
			if r.Regressed && !r.Onset.Equal(onset) {
				t.Errorf("fixed=%v: onset %v, want %v", fixed, r.Onset, onset)
			}
		})
		if fixed && (!recovered || last.Regressed) {
			t.Errorf("fixed version: recovered %v, last %+v", recovered, last)
		}
		if !fixed && !last.Regressed {
			t.Errorf("still broken: %+v", last)
		}
	}
}

// TestMemory: what a detector holds stays within 64 KiB at steady state
// (MemoryBytes counts it), and a young one holds less.
func TestMemory(t *testing.T) {
	for _, kind := range []Kind{Latency, Ratio} {
		d := NewDetector(kind, Options{})
		young := d.MemoryBytes()
		tm := epoch
		s := newStream(41, 100, 0)
		for i := range 3 * (BaselineCapacity + CurrentCapacity) {
			tm = tm.Add(10 * time.Millisecond)
			d.Add(tm, s.ttft())
			if i%6000 == 0 {
				d.Evaluate(tm)
			}
		}
		d.Evaluate(tm)
		if m := d.MemoryBytes(); m > 64<<10 || m <= young {
			t.Errorf("%v: %d bytes at steady state (%d young), want at most 64 KiB", kind, m, young)
		}
	}
}

// TestDeterministic: the same samples give the same results.
func TestDeterministic(t *testing.T) {
	t.Parallel()
	var out [2][]Result
	for k := range out {
		d := NewDetector(Latency, Options{})
		s := newStream(51, 5, 0)
		s.change = func(v float64) float64 { return v * 1.4 }
		run(d, s, epoch, 0, time.Hour, Latency, epoch.Add(40*time.Minute), 0, func(now time.Time, r Result) bool {
			out[k] = append(out[k], r)
			return true
		})
	}
	for i := range out[0] {
		if a, b := fmt.Sprintf("%+v", out[0][i]), fmt.Sprintf("%+v", out[1][i]); a != b {
			t.Fatalf("evaluation %d differs:\n%s\n%s", i, a, b)
		}
	}
}

// TestHostileInput: NaN, infinities, negative values, zeros, times that
// jump backwards, a silence of months and Cuts far in the past or the
// future neither panic nor produce out-of-range results.
func TestHostileInput(t *testing.T) {
	t.Parallel()
	for _, kind := range []Kind{Latency, Ratio} {
		d := NewDetector(kind, Options{})
		check := func(when string, r Result) {
			t.Helper()
			if !(r.P >= 0 && r.P <= 1) || r.BaselineN < 0 || r.BaselineN > BaselineCapacity || r.CurrentN < 0 || r.CurrentN > CurrentCapacity {
				t.Errorf("%v %s: %+v", kind, when, r)
			}
		}
		check("empty", d.Evaluate(epoch))
		d.Cut(epoch)
		tm := epoch
		rng := newStream(61, 1, 0)
		bad := []float64{math.NaN(), math.Inf(1), math.Inf(-1), -1, 0, math.Copysign(0, -1), 1e30, 5e-324}
		for i := range 20000 {
			tm = tm.Add(time.Duration(rng.rng.IntN(2000)) * time.Millisecond)
			v := rng.ttft()
			if i%7 == 0 {
				v = bad[i/7%len(bad)]
			}
			back := tm
			if i%101 == 0 {
				back = tm.Add(-3 * time.Hour) // far out of order
			}
			d.Add(back, v)
			if i%60 == 0 {
				check("stream", d.Evaluate(tm))
			}
			if i == 10000 {
				tm = tm.Add(90 * 24 * time.Hour) // a silence longer than the 32-bit offsets
				d.Cut(tm.Add(-200 * 24 * time.Hour))
			}
		}
		d.Cut(tm.Add(365 * 24 * time.Hour))
		d.Add(tm, 1) // before the Cut: dropped
		check("future cut", d.Evaluate(tm))
		if m := d.MemoryBytes(); m > 64<<10 {
			t.Errorf("%v: %d bytes", kind, m)
		}
	}
}

// TestDisorder: times a few seconds out of order change nothing that
// matters: no false alarm, and a step is still caught.
func TestDisorder(t *testing.T) {
	t.Parallel()
	d := NewDetector(Latency, Options{})
	s := newStream(71, 5, 0)
	step := epoch.Add(2 * time.Hour)
	var onset time.Time
	next := epoch.Add(time.Minute)
	for tm := epoch; tm.Before(step.Add(30 * time.Minute)); tm = tm.Add(s.gap()) {
		for !next.After(tm) {
			r := d.Evaluate(next)
			if r.Regressed && onset.IsZero() {
				onset = r.Onset
			}
			next = next.Add(time.Minute)
		}
		v := s.ttft()
		if !tm.Before(step) {
			v *= 1.3
		}
		d.Add(tm.Add(time.Duration(s.rng.IntN(4000)-2000)*time.Millisecond), v)
	}
	if onset.Before(step) || onset.After(step.Add(5*time.Minute)) {
		t.Errorf("onset %v, step %v", onset, step)
	}
}
