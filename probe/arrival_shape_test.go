// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package probe

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// A trace_shape process follows its curve on the absolute timeline: the
// arrivals counted in each bin over many periods match rate × curve[bin]
// (within 5 standard deviations of a Poisson count), none falls in a bin
// of rate 0, the mean rate is the target's, and RateAt reports the curve.
func TestShapeArrivalsFollowCurve(t *testing.T) {
	curve := []float64{0, 0.5, 1, 2, 3, 1.5, 0, 0} // mean 1 over 8 bins
	const (
		rate    = 2.0
		bin     = time.Minute
		period  = 8 * bin
		periods = 200
	)
	a, err := NewShapeArrivals(rate, curve, bin, period)
	if err != nil {
		t.Fatal(err)
	}
	ta := a.(TimedArrivals)
	if a.Rate() != rate {
		t.Errorf("Rate() = %v, want the mean %v", a.Rate(), rate)
	}
	r := rand.New(rand.NewPCG(3, 4))
	start := time.Unix(0, 0).Add(1000 * period) // phase 0
	end := start.Add(periods * period)
	counts := make([]float64, len(curve))
	n := 0
	for next := start; ; {
		next = next.Add(ta.NextAt(r, next))
		if !next.Before(end) {
			break
		}
		n++
		counts[int(next.Sub(start)%period/bin)]++
	}
	for i, c := range curve {
		want := rate * c * bin.Seconds() * periods
		if tol := 5 * math.Sqrt(max(want, 1)); math.Abs(counts[i]-want) > tol {
			t.Errorf("bin %d: %v arrivals, want %v ± %.0f", i, counts[i], want, tol)
		}
		if got := ta.RateAt(start.Add(time.Duration(i)*bin + bin/2)); got != rate*c {
			t.Errorf("RateAt(bin %d) = %v, want %v", i, got, rate*c)
		}
	}
	if got, want := float64(n)/(periods*period.Seconds()), rate; math.Abs(got-want) > 0.01*want {
		t.Errorf("mean rate %.3f, want %v", got, want)
	}
	t.Logf("%d arrivals over %d periods; per bin %v", n, periods, counts)
}

// The phase is the instant's position in the period counted from the Unix
// epoch, not from the runner's start: two processes (replicas, a restart)
// see the same rate at the same instant.
func TestShapeArrivalsEpochAligned(t *testing.T) {
	a, err := NewShapeArrivals(10, []float64{2, 0}, 12*time.Hour, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	ta := a.(TimedArrivals)
	morning := time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC)
	evening := time.Date(2026, 12, 2, 18, 0, 0, 0, time.UTC)
	if ta.RateAt(morning) != 20 || ta.RateAt(evening) != 0 {
		t.Errorf("RateAt 06:00 UTC = %v, 18:00 UTC = %v; want 20 and 0", ta.RateAt(morning), ta.RateAt(evening))
	}
	// From the evening trough, the next arrival comes after midnight.
	r := rand.New(rand.NewPCG(1, 1))
	for range 100 {
		if at := evening.Add(ta.NextAt(r, evening)); at.Before(time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)) {
			t.Fatalf("arrival at %v, inside the trough", at)
		}
	}
}

func TestShapeArrivalsErrors(t *testing.T) {
	for _, tc := range []struct {
		curve       []float64
		bin, period time.Duration
	}{
		{[]float64{0, 0}, time.Minute, 2 * time.Minute},
		{[]float64{1}, time.Minute, 2 * time.Minute},
		{nil, time.Minute, time.Minute},
		{[]float64{1, math.NaN()}, time.Minute, 2 * time.Minute},
	} {
		if _, err := NewShapeArrivals(1, tc.curve, tc.bin, tc.period); err == nil {
			t.Errorf("NewShapeArrivals(%v, %v, %v): no error", tc.curve, tc.bin, tc.period)
		}
	}
}
