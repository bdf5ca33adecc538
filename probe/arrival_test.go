// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package probe

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// gapStats draws n gaps and returns their mean (seconds) and coefficient
// of variation.
func gapStats(a Arrivals, n int) (mean, cv float64) {
	r := rand.New(rand.NewPCG(2024, 7))
	var sum, sumSq float64
	for range n {
		g := a.Next(r).Seconds()
		sum += g
		sumSq += g * g
	}
	mean = sum / float64(n)
	variance := sumSq/float64(n) - mean*mean
	return mean, math.Sqrt(max(variance, 0)) / mean
}

func TestArrivalsMeanAndCV(t *testing.T) {
	const n = 200_000
	cases := []struct {
		process          string
		rate, burstiness float64
		wantCV           float64
	}{
		{"poisson", 5, 0, 1},
		{"poisson", 0.5, 1, 1},
		{"gamma", 5, 0.25, 2},
		{"gamma", 5, 1, 1},
		{"gamma", 5, 4, 0.5},
		{"gamma", 200, 0.25, 2},
		{"constant", 3, 0, 0},
	}
	for _, c := range cases {
		a, err := NewArrivals(c.process, c.rate, c.burstiness)
		if err != nil {
			t.Fatal(err)
		}
		if a.Rate() != c.rate {
			t.Errorf("%s: Rate() = %g, want %g", a, a.Rate(), c.rate)
		}
		mean, cv := gapStats(a, n)
		wantMean := 1 / c.rate
		// Standard error of the mean gap is CV/√n (0.45% at CV 2); of the
		// CV a few times that for the heavier gamma tails.
		meanErr := math.Abs(mean-wantMean) / wantMean
		t.Logf("%-36s %d gaps: mean %.6gs (want %.6gs, error %.2f%%), CV %.4f (want %.4g)", a, n, mean, wantMean, 100*meanErr, cv, c.wantCV)
		if meanErr > 0.02 {
			t.Errorf("%s: mean gap %gs, want %gs", a, mean, wantMean)
		}
		if math.Abs(cv-c.wantCV) > 0.04*math.Max(c.wantCV, 0.25) {
			t.Errorf("%s: CV %.4f, want %.4g", a, cv, c.wantCV)
		}
	}
}

func TestConstantArrivalsExact(t *testing.T) {
	a, err := NewArrivals("constant", 3, 1)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 1))
	want := time.Duration(333_333_333) // 1/3 s, rounded to the nanosecond
	for range 1000 {
		if g := a.Next(r); g != want {
			t.Fatalf("constant gap %v, want %v", g, want)
		}
	}
}

// TestArrivalsTimeline builds the absolute timeline the engine uses and
// checks that the requested rate is what is offered.
func TestArrivalsTimeline(t *testing.T) {
	for _, proc := range []string{"poisson", "gamma", "constant"} {
		a, err := NewArrivals(proc, 50, 0.5*boolF(proc == "gamma"))
		if err != nil {
			t.Fatal(err)
		}
		r := rand.New(rand.NewPCG(9, 9))
		var planned time.Duration
		const n = 100_000
		for range n {
			planned += a.Next(r)
		}
		got := n / planned.Seconds()
		if math.Abs(got-50)/50 > 0.02 {
			t.Errorf("%s: %d arrivals over %v is %.3f/s, want 50/s", a, n, planned, got)
		}
	}
}

func boolF(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func TestArrivalsErrors(t *testing.T) {
	cases := []struct {
		process          string
		rate, burstiness float64
		want             string
	}{
		{"poisson", 0, 0, "arrival: rate (0) must be > 0 requests per second"},
		{"gamma", -1, 1, "arrival: rate (-1) must be > 0 requests per second"},
		{"constant", math.NaN(), 0, "arrival: rate (NaN) must be > 0 requests per second"},
		{"poisson", math.Inf(1), 0, "arrival: rate (+Inf) must be > 0 requests per second"},
		{"gamma", 1, 0, "arrival: burstiness (0) must be > 0 (1 is Poisson, < 1 burstier, > 1 smoother)"},
		{"gamma", 1, -2, "arrival: burstiness (-2) must be > 0 (1 is Poisson, < 1 burstier, > 1 smoother)"},
		{"poisson", 1, 0.5, `arrival: burstiness (0.5) applies to the gamma process only, not "poisson"`},
		{"weibull", 1, 0, `arrival: unknown process "weibull" (want poisson, gamma or constant)`},
		{"", 1, 0, `arrival: unknown process "" (want poisson, gamma or constant)`},
		{"poisson", 1e-320, 0, "arrival: rate (1e-320) is too small"},
		{"gamma", 1e-300, 1e-300, "arrival: rate (1e-300) and burstiness (1e-300): gamma: scale (+Inf) must be a finite number"},
	}
	for _, c := range cases {
		_, err := NewArrivals(c.process, c.rate, c.burstiness)
		if err == nil || err.Error() != c.want {
			t.Errorf("NewArrivals(%q, %g, %g) error %v, want %q", c.process, c.rate, c.burstiness, err, c.want)
		}
	}
}

func TestArrivalsExtremeRates(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	slow, err := NewArrivals("constant", 1e-12, 0)
	if err != nil {
		t.Fatal(err)
	}
	if g := slow.Next(r); g != time.Duration(math.MaxInt64) {
		t.Errorf("a gap beyond time.Duration's range should saturate, got %v", g)
	}
	fast, err := NewArrivals("gamma", 1e12, 0.05)
	if err != nil {
		t.Fatal(err)
	}
	for range 1000 {
		if g := fast.Next(r); g < 0 {
			t.Fatalf("negative gap %v", g)
		}
	}
}

func TestArrivalsString(t *testing.T) {
	for _, c := range []struct {
		process          string
		rate, burstiness float64
		want             string
	}{
		{"poisson", 0.5, 0, "poisson(rate=0.5/s)"},
		{"gamma", 2, 0.25, "gamma(rate=2/s, burstiness=0.25)"},
		{"constant", 10, 1, "constant(rate=10/s)"},
	} {
		a, err := NewArrivals(c.process, c.rate, c.burstiness)
		if err != nil {
			t.Fatal(err)
		}
		if a.String() != c.want {
			t.Errorf("String() = %q, want %q", a.String(), c.want)
		}
	}
}

func TestArrivalsNextDoesNotAllocate(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	for _, p := range []string{"poisson", "gamma", "constant"} {
		a, err := NewArrivals(p, 10, 1)
		if err != nil {
			t.Fatal(err)
		}
		if n := testing.AllocsPerRun(1000, func() { a.Next(r) }); n != 0 {
			t.Errorf("%s: %g allocations per gap", a, n)
		}
	}
}

func BenchmarkArrivalsNext(b *testing.B) {
	for _, c := range []struct {
		p     string
		burst float64
	}{{"poisson", 0}, {"gamma", 0.25}, {"gamma", 4}, {"constant", 0}} {
		a, err := NewArrivals(c.p, 100, c.burst)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(a.String(), func(b *testing.B) {
			r := rand.New(rand.NewPCG(1, 2))
			var sum time.Duration
			b.ReportAllocs()
			for b.Loop() {
				sum += a.Next(r)
			}
			if sum < 0 {
				b.Fatal(sum)
			}
		})
	}
}
