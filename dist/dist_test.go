// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package dist

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
)

const draws = 50_000

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x6c6c6d70726f6265)) }

// must unwraps a constructor's result in test tables; the constructors
// are tested for their errors separately.
func must(s Sampler, err error) Sampler {
	if err != nil {
		panic(err)
	}
	return s
}

func relErr(got, want float64) float64 {
	if got == want {
		return 0
	}
	return math.Abs(got-want) / math.Abs(want)
}

// drawSorted draws n values with a fixed seed and sorts them.
func drawSorted(s Sampler, n int) []float64 {
	r := newRand(42)
	xs := make([]float64, n)
	for i := range xs {
		xs[i] = s.Sample(r)
	}
	slices.Sort(xs)
	return xs
}

func TestNormQuantile(t *testing.T) {
	// Reference values computed to 40 digits with mpmath.
	known := []struct{ p, z float64 }{
		{1e-300, -37.047096299361199},
		{1e-20, -9.2623400897984076},
		{1e-10, -6.3613409024040562},
		{0.001, -3.0902323061678135},
		{0.02425, -1.9729610513118849}, // Acklam's region boundary
		{0.3, -0.52440051270804078},
		{0.5, 0},
		{0.975, 1.9599639845400542},
		{0.99, 2.3263478740408411},
		{0.999, 3.0902323061678135},
	}
	for _, k := range known {
		got := NormQuantile(k.p)
		if math.Abs(got-k.z) > 1e-13*math.Max(1, math.Abs(k.z)) {
			t.Errorf("NormQuantile(%g) = %.17g, want %.17g", k.p, got, k.z)
		}
	}
	// Round trip over the range, against math.Erfc.
	for p := 1e-15; p < 1; p = p*1.7 + 1e-4 {
		z := NormQuantile(p)
		var back float64
		if p > 0.5 {
			back = 1 - normCDF(-z)
		} else {
			back = normCDF(z)
		}
		if relErr(back, p) > 1e-12 {
			t.Errorf("Φ(NormQuantile(%g)) = %.17g", p, back)
		}
		if q := 1 - p; q > 0.5 && NormQuantile(q) != -NormQuantile(1-q) {
			t.Errorf("asymmetric at p=%g: %g vs %g", q, NormQuantile(q), NormQuantile(1-q))
		}
	}
	if !math.IsInf(NormQuantile(0), -1) || !math.IsInf(NormQuantile(1), 1) {
		t.Error("NormQuantile(0) and NormQuantile(1) must be -Inf and +Inf")
	}
	for _, p := range []float64{-0.1, 1.1, math.NaN(), math.Inf(1)} {
		if !math.IsNaN(NormQuantile(p)) {
			t.Errorf("NormQuantile(%g) should be NaN", p)
		}
	}
}

func TestLogNormCDF(t *testing.T) {
	// Reference values computed with mpmath.
	for _, c := range []struct{ x, want float64 }{
		{3, -0.0013508099647481938},
		{0, -0.69314718055994531},
		{-5, -15.064998393988726},
		{-29.9, -451.32291245852863},
		{-30.1, -457.32956441638226},
		{-40, -804.60844201375379},
		{-100, -5005.5242086942051},
		{-1e4, -50000010.129278915},
	} {
		if got := logNormCDF(c.x); relErr(got, c.want) > 1e-11 {
			t.Errorf("logNormCDF(%g) = %.17g, want %.17g", c.x, got, c.want)
		}
	}
	// ln ∫ e^(b(u-t0)) φ(u) du over u <= z: the direct formula where it is
	// representable, and continuity across the switch to the series.
	for _, c := range [][3]float64{{1.2, 0, 2}, {3, 1, -1}, {40, 2, 9.99}, {40, 2, 10.01}, {0.5, -1, math.Inf(1)}} {
		b, t0, z := c[0], c[1], c[2]
		want := b*b/2 - b*t0 + math.Log(normCDF(z-b))
		if got := logExpNormInt(b, t0, z); relErr(got, want) > 1e-9 {
			t.Errorf("logExpNormInt(%g, %g, %g) = %.15g, want %.15g", b, t0, z, got, want)
		}
	}
	// A huge slope: the integral up to z is dominated by u near z, so it is
	// e^(b(z-t0)) φ(z)/b to first order.
	b, z := 1e12, 1.5
	want := b*(z-1) + math.Log(normPDF(z)/b)
	if got := logExpNormInt(b, 1, z); relErr(got, want) > 1e-12 {
		t.Errorf("logExpNormInt(1e12, 1, 1.5) = %.17g, want %.17g", got, want)
	}
}

func TestGammaQuantileReference(t *testing.T) {
	// Reference quantiles computed with mpmath (regularized incomplete
	// gamma, bisection to 40 digits).
	known := []struct{ shape, p, x float64 }{
		{0.05, 0.5, 5.5738784407462475e-7},
		{0.05, 0.99, 1.0876274000918096},
		{0.25, 0.01, 6.7496979295584683e-9},
		{0.25, 0.5, 0.04367380235287341},
		{0.25, 0.999, 4.3764442578866864},
		{0.5, 0.95, 1.9207294103470622},
		{1, 0.5, 0.69314718055994531},
		{4, 0.001, 0.42855241362842297},
		{4, 0.5, 3.6720607488508961},
		{4, 0.99, 10.045117514831615},
		{5, 0.99, 11.604625579477179},
		{50, 0.5, 49.667064617994228},
		{50, 0.999, 74.724626389519353},
	}
	for _, k := range known {
		g := must(Gamma(k.shape, 2))
		if got := g.Quantile(k.p); relErr(got, 2*k.x) > 1e-10 {
			t.Errorf("gamma(shape=%g).Quantile(%g) = %.17g, want %.17g", k.shape, k.p, got, 2*k.x)
		}
	}
	// P(0.5, x) = erf(√x) and P(1, x) = 1 - e^-x in closed form.
	for _, x := range []float64{1e-8, 0.01, 0.5, 1, 3, 10, 40} {
		if p, _ := gammaPQ(0.5, x); relErr(p, math.Erf(math.Sqrt(x))) > 1e-13 {
			t.Errorf("P(0.5, %g) = %.17g, want %.17g", x, p, math.Erf(math.Sqrt(x)))
		}
		if _, q := gammaPQ(1, x); relErr(q, math.Exp(-x)) > 1e-12 {
			t.Errorf("Q(1, %g) = %.17g, want %.17g", x, q, math.Exp(-x))
		}
	}
	// Round trips at extreme p.
	for _, shape := range []float64{0.01, 0.3, 1, 2.5, 30, 1000} {
		g := must(Gamma(shape, 1)).(*gamma)
		for _, p := range []float64{1e-12, 1e-6, 0.01, 0.3, 0.5, 0.9, 0.999, 1 - 1e-9} {
			x := g.Quantile(p)
			if lg1, _ := math.Lgamma(shape + 1); (math.Log(p)+lg1)/shape < -745 {
				if x != 0 {
					t.Errorf("shape %g: Quantile(%g) = %g, want 0 (below the smallest float64)", shape, p, x)
				}
				continue
			}
			P, Q := gammaPQ(shape, x)
			if (p <= 0.5 && relErr(P, p) > 1e-9) || (p > 0.5 && relErr(Q, 1-p) > 1e-6) {
				t.Errorf("shape %g: P(Quantile(%g)=%g) = %g (Q %g)", shape, p, x, P, Q)
			}
		}
	}
}

// samplerCases are the distributions the statistical tests run over.
func samplerCases(t testing.TB) []struct {
	name string
	s    Sampler
} {
	table := must(Empirical([]Point{{0.5, 1800}, {0.9, 4000}, {0.99, 7000}}))
	bounded := must(Empirical([]Point{{0, 10}, {0.5, 100}, {0.9, 300}, {1, 1000}}))
	ln := must(LogNormalFromMedianP99(120, 2048))
	obs := drawSorted(must(LogNormal(5, 0.8)), 2000)
	return []struct {
		name string
		s    Sampler
	}{
		{"fixed", Fixed(256)},
		{"uniform", must(Uniform(2, 6))},
		{"normal", must(Normal(100, 20))},
		{"lognormal mu sigma", must(LogNormal(4.8, 1.2))},
		{"lognormal median p99", ln},
		{"exponential", must(Exponential(3))},
		{"gamma 0.25", must(Gamma(0.25, 4))},
		{"gamma 1", must(Gamma(1, 2))},
		{"gamma 4", must(Gamma(4, 0.5))},
		{"empirical table", table},
		{"empirical bounded", bounded},
		{"from samples", must(FromSamples(obs))},
		{"clamped lognormal", Clamp(ln, 4, 1024)},
		{"clamped empirical", Clamp(table, 500, 6000)},
		{"clamped normal", Clamp(must(Normal(10, 20)), 0, math.NaN())},
		{"clamped gamma", Clamp(must(Gamma(0.5, 10)), 1, 20)},
	}
}

// TestSamplesMatchQuantilesAndMean checks every distribution's draws
// against its own Quantile and Mean: 50k draws with a fixed seed.
func TestSamplesMatchQuantilesAndMean(t *testing.T) {
	for _, c := range samplerCases(t) {
		t.Run(c.name, func(t *testing.T) {
			xs := drawSorted(c.s, draws)
			for _, p := range []float64{0.01, 0.1, 0.5, 0.9, 0.99, 0.999} {
				// The fraction of draws below Quantile(p) must be p, within
				// 4.5 standard errors (a check that does not depend on how
				// steep the distribution is).
				q := c.s.Quantile(p)
				below, atOrBelow := 0, 0
				for _, x := range xs {
					if x < q {
						below++
					}
					if x <= q {
						atOrBelow++
					}
				}
				tol := 4.5 * math.Sqrt(p*(1-p)/draws)
				if float64(below)/draws > p+tol || float64(atOrBelow)/draws < p-tol {
					t.Errorf("p%g: Quantile %.5g, but %.5f of draws are below it and %.5f at or below", p, q, float64(below)/draws, float64(atOrBelow)/draws)
				}
				t.Logf("p%g: Quantile %.5g, draws %.5g (value error %.2f%%)", p, q, Quantile(xs, p), 100*relErr(Quantile(xs, p), q))
			}
			sum := 0.0
			for _, x := range xs {
				sum += x
			}
			mean := sum / float64(len(xs))
			if err := relErr(mean, c.s.Mean()); err > 0.03 {
				t.Errorf("mean of draws %.4g, Mean() %.4g (error %.1f%%)", mean, c.s.Mean(), 100*err)
			}
			// Quantile is non-decreasing and covers the draws.
			prev := c.s.Quantile(0)
			for p := 0.0; p <= 1; p += 1.0 / 512 {
				q := c.s.Quantile(p)
				if q < prev || math.IsNaN(q) {
					t.Fatalf("Quantile not monotone at p=%g: %g after %g", p, q, prev)
				}
				prev = q
			}
			if xs[0] < c.s.Quantile(0) || xs[len(xs)-1] > c.s.Quantile(1) {
				t.Errorf("draws [%g, %g] outside [Quantile(0), Quantile(1)] = [%g, %g]", xs[0], xs[len(xs)-1], c.s.Quantile(0), c.s.Quantile(1))
			}
		})
	}
}

// opaque hides a Sampler's analytic methods, forcing the numerical path.
type opaque struct{ Sampler }

// TestMeanMatchesNumericalIntegration compares the closed-form (clamped)
// means against integrating the quantile function numerically.
func TestMeanMatchesNumericalIntegration(t *testing.T) {
	bounds := [][2]float64{{math.Inf(-1), math.Inf(1)}, {5, math.Inf(1)}, {math.Inf(-1), 300}, {50, 400}, {1000, 2000}}
	for _, c := range samplerCases(t) {
		for _, b := range bounds {
			exact := Clamp(c.s, b[0], b[1]).Mean()
			approx := Clamp(opaque{c.s}, b[0], b[1]).Mean()
			if b == bounds[0] {
				approx = numeric{c.s}.partialMean(math.Inf(1))
			}
			tol := 1e-6
			if _, ok := c.s.(*clamped); ok || c.name == "from samples" || b != bounds[0] {
				tol = 3e-4 // kinks in the integrand slow the quadrature down
			}
			if relErr(exact, approx) > tol && math.Abs(exact-approx) > 1e-9 {
				t.Errorf("%s clamped [%g, %g]: Mean %.10g, numerical %.10g", c.name, b[0], b[1], exact, approx)
			}
		}
	}
}

func TestEmpiricalReproducesTable(t *testing.T) {
	pts := []Point{{0.99, 7000}, {0.5, 1800}, {0.9, 4000}} // order does not matter
	s := must(Empirical(pts))
	xs := drawSorted(s, draws)
	for _, pt := range pts {
		if got := s.Quantile(pt.P); relErr(got, pt.V) > 1e-12 {
			t.Errorf("Quantile(%g) = %.15g, want %g", pt.P, got, pt.V)
		}
		got := Quantile(xs, pt.P)
		err := relErr(got, pt.V)
		t.Logf("p%g: table %g, %d draws %.0f (error %.2f%%)", pt.P, pt.V, draws, got, 100*err)
		if err > 0.05 {
			t.Errorf("p%g: table %g, draws give %.0f", pt.P, pt.V, got)
		}
	}
	// The heavy tail survives extrapolation.
	p999 := s.Quantile(0.999)
	if p999 <= 7000*1.2 {
		t.Errorf("Quantile(0.999) = %g, want well beyond p99 = 7000", p999)
	}
	if got := Quantile(xs, 0.999); got <= 7000 {
		t.Errorf("p99.9 of draws %g is not beyond p99", got)
	}
	t.Logf("extrapolated p99.9 = %.0f, p0.1 = %.0f, mean = %.0f", p999, s.Quantile(0.001), s.Mean())
	if got := s.String(); got != "empirical(p0.5=1800, p0.9=4000, p0.99=7000)" {
		t.Errorf("String() = %q", got)
	}
	if q0, q1 := s.Quantile(0), s.Quantile(1); q0 != 0 || !math.IsInf(q1, 1) {
		t.Errorf("unbounded tails: Quantile(0) = %g, Quantile(1) = %g; want 0 and +Inf", q0, q1)
	}
}

func TestEmpiricalExactForLogNormal(t *testing.T) {
	ln := must(LogNormal(4.8, 1.2))
	var pts []Point
	for _, p := range []float64{0.1, 0.5, 0.9, 0.99} {
		pts = append(pts, Point{p, ln.Quantile(p)})
	}
	e := must(Empirical(pts))
	for _, p := range []float64{1e-6, 0.001, 0.05, 0.3, 0.7, 0.95, 0.999, 1 - 1e-9} {
		if relErr(e.Quantile(p), ln.Quantile(p)) > 1e-9 {
			t.Errorf("Quantile(%g) = %g, log-normal %g", p, e.Quantile(p), ln.Quantile(p))
		}
	}
	if relErr(e.Mean(), ln.Mean()) > 1e-9 {
		t.Errorf("Mean = %.12g, log-normal %.12g", e.Mean(), ln.Mean())
	}
	for _, b := range [][2]float64{{10, 500}, {200, math.Inf(1)}} {
		if a, w := Clamp(e, b[0], b[1]).Mean(), Clamp(ln, b[0], b[1]).Mean(); relErr(a, w) > 1e-9 {
			t.Errorf("clamped %v: Mean = %.12g, log-normal %.12g", b, a, w)
		}
	}
}

func TestEmpiricalExplicitBounds(t *testing.T) {
	s := must(Empirical([]Point{{0, 10}, {0.5, 100}, {1, 1000}}))
	if s.Quantile(0) != 10 || relErr(s.Quantile(1), 1000) > 1e-12 {
		t.Errorf("Quantile(0), Quantile(1) = %g, %g; want 10, 1000", s.Quantile(0), s.Quantile(1))
	}
	// ln v linear in p on both segments: the midpoint of [0, 0.5] is the
	// geometric mean of the ends.
	if got := s.Quantile(0.25); relErr(got, math.Sqrt(10*100)) > 1e-12 {
		t.Errorf("Quantile(0.25) = %g, want %g", got, math.Sqrt(1000))
	}
	// Mean in closed form: ∫ e^(a+bp) dp over each half.
	b := 2 * math.Log(10)
	want := (100-10)/b + (1000-100)/b
	if relErr(s.Mean(), want) > 1e-12 {
		t.Errorf("Mean = %.15g, want %.15g", s.Mean(), want)
	}
	// Two points with p=1: the lower tail extends the p-linear segment.
	s2 := must(Empirical([]Point{{0.5, 100}, {1, 400}}))
	if got := s2.Quantile(0); relErr(got, 25) > 1e-12 {
		t.Errorf("Quantile(0) = %g, want 25", got)
	}
	// A flat table is a fixed distribution.
	flat := must(Empirical([]Point{{0.1, 7}, {0.9, 7}}))
	if flat.Quantile(0.001) != 7 || flat.Quantile(0.999) != 7 || relErr(flat.Mean(), 7) > 1e-12 {
		t.Errorf("flat table: %g %g mean %g", flat.Quantile(0.001), flat.Quantile(0.999), flat.Mean())
	}
}

func TestConstructorErrors(t *testing.T) {
	errOf := func(_ Sampler, err error) error { return err }
	cases := []struct {
		err  error
		want string
	}{
		{errOf(Uniform(5, 2)), "uniform: min (5) > max (2)"},
		{errOf(Uniform(math.NaN(), 2)), "uniform: min (NaN) and max (2) must be finite numbers"},
		{errOf(Normal(100, 0)), "normal: stddev (0) must be > 0"},
		{errOf(Normal(100, -3)), "normal: stddev (-3) must be > 0"},
		{errOf(Normal(math.Inf(1), 3)), "normal: mean (+Inf) must be a finite number"},
		{errOf(LogNormal(4.8, 0)), "lognormal: sigma (0) must be > 0"},
		{errOf(LogNormal(math.NaN(), 1)), "lognormal: mu (NaN) must be a finite number"},
		{errOf(LogNormalFromMedianP99(120, 100)), "lognormal: p99 (100) must be greater than median (120)"},
		{errOf(LogNormalFromMedianP99(120, 120)), "lognormal: p99 (120) must be greater than median (120)"},
		{errOf(LogNormalFromMedianP99(0, 100)), "lognormal: median (0) must be > 0"},
		{errOf(LogNormalFromMedianP99(10, math.Inf(1))), "lognormal: p99 (+Inf) must be a finite number"},
		{errOf(Exponential(0)), "exponential: mean (0) must be > 0"},
		{errOf(Exponential(math.Inf(1))), "exponential: mean (+Inf) must be a finite number"},
		{errOf(Normal(1, math.NaN())), "normal: stddev (NaN) must be a finite number"},
		{errOf(Gamma(0, 1)), "gamma: shape (0) must be > 0"},
		{errOf(Gamma(1, -1)), "gamma: scale (-1) must be > 0"},
		{errOf(Empirical([]Point{{0.5, 100}})), "empirical: need at least 2 quantile points, got 1"},
		{errOf(Empirical(nil)), "empirical: need at least 2 quantile points, got 0"},
		{errOf(Empirical([]Point{{0.5, 1200}, {0.9, 800}})), "empirical: quantiles must increase: p0.9=800 < p0.5=1200"},
		{errOf(Empirical([]Point{{0.9, 800}, {0.5, 1200}})), "empirical: quantiles must increase: p0.9=800 < p0.5=1200"},
		{errOf(Empirical([]Point{{0.5, 1}, {0.5, 2}})), "empirical: quantile p0.5 is given twice"},
		{errOf(Empirical([]Point{{0.5, 1}, {1.5, 2}})), "empirical: quantile p1.5 is outside [0, 1]"},
		{errOf(Empirical([]Point{{0.5, 0}, {0.9, 2}})), "empirical: value at p0.5 (0) must be > 0"},
		{errOf(Empirical([]Point{{0.5, 1}, {0.9, math.Inf(1)}})), "empirical: value at p0.9 (+Inf) must be > 0"},
		{errOf(Empirical([]Point{{0, 1}, {5e-324, 2}})), "empirical: quantiles p0 and p5e-324 are too close together"},
		{errOf(FromSamples(nil)), "empirical: no samples"},
		{errOf(FromSamples([]float64{1, math.NaN()})), "empirical: sample 2 (NaN) is not a finite number"},
	}
	for _, c := range cases {
		if c.err == nil {
			t.Errorf("no error, want %q", c.want)
			continue
		}
		if c.err.Error() != c.want {
			t.Errorf("error %q, want %q", c.err, c.want)
		}
	}
}

func TestStrings(t *testing.T) {
	ln := must(LogNormalFromMedianP99(120, 2048))
	cases := []struct {
		s    Sampler
		want string
	}{
		{Fixed(256), "fixed(256)"},
		{must(Uniform(2, 6)), "uniform(2, 6)"},
		{must(Normal(100, 20)), "normal(mean=100, stddev=20)"},
		{must(LogNormal(4.8, 1.2)), "lognormal(mu=4.8, sigma=1.2)"},
		{ln, "lognormal(median=120, p99=2048)"},
		{Clamp(ln, 4, 8192), "lognormal(median=120, p99=2048) clamped [4, 8192]"},
		{Clamp(ln, 4, math.NaN()), "lognormal(median=120, p99=2048) clamped [4, +Inf)"},
		{Clamp(ln, math.Inf(-1), 8192), "lognormal(median=120, p99=2048) clamped (-Inf, 8192]"},
		{must(Exponential(2)), "exponential(mean=2)"},
		{must(Gamma(0.5, 4)), "gamma(shape=0.5, scale=4)"},
		{must(FromSamples([]float64{3, 1, 2})), "empirical(3 samples, p50=2, p99=2.98)"},
	}
	for _, c := range cases {
		if got := c.s.String(); got != c.want {
			t.Errorf("String() = %q, want %q", got, c.want)
		}
	}
}

func TestClamp(t *testing.T) {
	ln := must(LogNormalFromMedianP99(120, 2048))
	if Clamp(ln, math.NaN(), math.Inf(1)) != ln || Clamp(ln, math.Inf(-1), math.NaN()) != ln {
		t.Error("Clamp with no finite bound should return the sampler itself")
	}
	c := Clamp(ln, 4, 1024)
	r := newRand(1)
	atMax := 0
	for range draws {
		x := c.Sample(r)
		if x < 4 || x > 1024 {
			t.Fatalf("draw %g outside [4, 1024]", x)
		}
		if x == 1024 {
			atMax++
		}
	}
	// Mass above the bound piles up at it: P(X > 1024) for this log-normal.
	wantAtMax := 1 - analyticOf(ln).cdf(1024)
	if got := float64(atMax) / draws; math.Abs(got-wantAtMax) > 0.003 {
		t.Errorf("%.4f of draws at the max, want %.4f", got, wantAtMax)
	}
	if c.Quantile(0) != 4 || c.Quantile(1) != 1024 || c.Quantile(0.5) != ln.Quantile(0.5) {
		t.Errorf("clamped quantiles %g %g %g", c.Quantile(0), c.Quantile(0.5), c.Quantile(1))
	}
	if !math.IsNaN(c.Quantile(2)) {
		t.Error("Quantile(2) should be NaN")
	}
	if c.Mean() >= ln.Mean() {
		t.Errorf("clamping the tail should lower the mean: %g vs %g", c.Mean(), ln.Mean())
	}
	// Nested clamps compose.
	n := Clamp(Clamp(ln, 4, 1024), 100, 2000)
	flat := Clamp(ln, 100, 1024)
	if relErr(n.Mean(), flat.Mean()) > 1e-12 {
		t.Errorf("nested clamp mean %g, want %g", n.Mean(), flat.Mean())
	}
	// min > max: every draw is max.
	d := Clamp(ln, 500, 100)
	if d.Sample(r) != 100 || d.Mean() != 100 || d.Quantile(0.01) != 100 {
		t.Errorf("degenerate clamp: draw %g, mean %g", d.Sample(r), d.Mean())
	}
	// Fixed outside the bounds.
	if got := Clamp(Fixed(3), 4, 10).Mean(); got != 4 {
		t.Errorf("clamped fixed mean %g, want 4", got)
	}
}

func TestFromSamples(t *testing.T) {
	values := []float64{5, 1, 9, 3, 7}
	s := must(FromSamples(values))
	if values[0] != 5 {
		t.Fatal("FromSamples modified its input")
	}
	sorted := []float64{1, 3, 5, 7, 9}
	for _, p := range []float64{0, 0.1, 0.25, 0.5, 0.8, 1} {
		if s.Quantile(p) != Quantile(sorted, p) {
			t.Errorf("Quantile(%g) = %g, want %g", p, s.Quantile(p), Quantile(sorted, p))
		}
	}
	// Mean of the piecewise-linear quantile function: (sum - (min+max)/2)/(n-1).
	if want := (25 - 5.0) / 4; s.Mean() != want {
		t.Errorf("Mean = %g, want %g", s.Mean(), want)
	}
	one := must(FromSamples([]float64{42}))
	if one.Sample(newRand(1)) != 42 || one.Mean() != 42 || one.Quantile(0.7) != 42 {
		t.Error("a single sample should be a fixed distribution")
	}
	if got := Clamp(one, 50, 60).Mean(); got != 50 {
		t.Errorf("clamped single sample mean %g, want 50", got)
	}
}

func TestQuantileType7(t *testing.T) {
	xs := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	// R: quantile(1:10, c(0, .5, .9, .99, 1)) (type 7)
	for _, c := range []struct{ p, want float64 }{{0, 1}, {0.5, 5.5}, {0.9, 9.1}, {0.99, 9.91}, {1, 10}} {
		if got := Quantile(xs, c.p); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("Quantile(1..10, %g) = %g, want %g", c.p, got, c.want)
		}
	}
	if !math.IsNaN(Quantile(nil, 0.5)) || !math.IsNaN(Quantile(xs, 1.5)) || !math.IsNaN(Quantile(xs, math.NaN())) {
		t.Error("Quantile of nothing, or at p outside [0, 1], should be NaN")
	}
}

func TestSummarize(t *testing.T) {
	values := []float64{10, 1, math.NaN(), 4, 3, 2, 5, 6, 7, 8, 9}
	s := Summarize(values)
	want := Summary{Count: 10, Mean: 5.5, Min: 1, Max: 10, P50: 5.5, P90: 9.1, P95: 9.55, P99: 9.91, P999: 9.991}
	if s.Count != want.Count || s.Min != want.Min || s.Max != want.Max || s.Mean != want.Mean {
		t.Errorf("Summarize = %+v, want %+v", s, want)
	}
	for _, q := range [][2]float64{{s.P50, want.P50}, {s.P90, want.P90}, {s.P95, want.P95}, {s.P99, want.P99}, {s.P999, want.P999}} {
		if math.Abs(q[0]-q[1]) > 1e-9 {
			t.Errorf("Summarize = %+v, want %+v", s, want)
		}
	}
	if values[0] != 10 {
		t.Error("Summarize modified its input")
	}
	if (Summarize(nil) != Summary{}) || (Summarize([]float64{math.NaN()}) != Summary{}) {
		t.Error("Summarize of no values should be zero")
	}
}

func TestFitLogNormal(t *testing.T) {
	ln := must(LogNormal(4.8, 1.2))
	xs := drawSorted(ln, 100_000)
	xs = append(xs, 0, -3, math.NaN(), math.Inf(1)) // ignored
	mu, sigma, err := FitLogNormal(xs)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("fit of 100k draws of lognormal(4.8, 1.2): mu=%.4f sigma=%.4f", mu, sigma)
	if math.Abs(mu-4.8) > 0.02 || math.Abs(sigma-1.2) > 0.012 {
		t.Errorf("fit mu=%g sigma=%g, want 4.8, 1.2", mu, sigma)
	}
	for _, c := range []struct {
		in   []float64
		want string
	}{
		{[]float64{5, 0, -1}, "lognormal fit: need at least 2 positive values, got 1"},
		{[]float64{7, 7, 7}, "lognormal fit: all 3 positive values are equal (7); use a fixed distribution"},
	} {
		if _, _, err := FitLogNormal(c.in); err == nil || err.Error() != c.want {
			t.Errorf("FitLogNormal(%v) error %v, want %q", c.in, err, c.want)
		}
	}
}

func TestSampleDoesNotAllocate(t *testing.T) {
	r := newRand(7)
	for _, c := range samplerCases(t) {
		if n := testing.AllocsPerRun(1000, func() { c.s.Sample(r) }); n != 0 {
			t.Errorf("%s: %g allocations per draw", c.name, n)
		}
	}
}

func TestConcurrentSampling(t *testing.T) {
	cases := samplerCases(t)
	var wg sync.WaitGroup
	results := make([][]float64, 4)
	for g := range results {
		wg.Go(func() {
			r := newRand(uint64(g))
			for _, c := range cases {
				for range 2000 {
					results[g] = append(results[g], c.s.Sample(r))
				}
			}
		})
	}
	wg.Wait()
	// The same seed gives the same stream whatever the other goroutines do.
	r := newRand(2)
	for i, c := range cases {
		for k := range 2000 {
			if x := c.s.Sample(r); x != results[2][i*2000+k] {
				t.Fatalf("%s: draw %d differs between runs: %g vs %g", c.name, k, x, results[2][i*2000+k])
			}
		}
	}
}

func BenchmarkSample(b *testing.B) {
	for _, c := range samplerCases(b) {
		b.Run(c.name, func(b *testing.B) {
			r := newRand(1)
			var sink float64
			b.ReportAllocs()
			for b.Loop() {
				sink += c.s.Sample(r)
			}
			if math.IsNaN(sink) {
				b.Fatal("NaN")
			}
		})
	}
}

func ExampleEmpirical() {
	s, err := Empirical([]Point{{0.5, 1800}, {0.9, 4000}, {0.99, 7000}})
	if err != nil {
		panic(err)
	}
	fmt.Printf("%s: p90=%.0f p99.9=%.0f\n", s, s.Quantile(0.9), s.Quantile(0.999))
	// Output: empirical(p0.5=1800, p0.9=4000, p0.99=7000): p90=4000 p99.9=10539
}
