// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package dist

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
)

// Sampler draws values from a distribution. Implementations are immutable
// and safe for concurrent use; randomness comes from the caller's *rand.Rand
// (math/rand/v2), so runs are reproducible with a seed.
type Sampler interface {
	// Sample draws one value. It does not allocate.
	Sample(r *rand.Rand) float64
	// Quantile is the inverse CDF: the smallest value v with P(X <= v) >= p,
	// for p in [0, 1]. It is NaN for any other p. Quantile(0) and
	// Quantile(1) may be infinite for unbounded distributions.
	Quantile(p float64) float64
	// Mean is the expected value, exact or computed numerically, with
	// clamping taken into account. It may be +Inf.
	Mean() float64
	// String describes the distribution compactly, for logs and reports,
	// e.g. "lognormal(median=120, p99=2048) clamped [4, 8192]".
	String() string
}

// analytic is implemented by the built-in distributions. It gives Clamp
// (and the clamped distributions themselves) exact means.
type analytic interface {
	// cdf returns sup{p : Quantile(p) <= x}, which is P(X <= x).
	cdf(x float64) float64
	// partialMean returns E[X; X <= x], the integral of Quantile over
	// [0, cdf(x)].
	partialMean(x float64) float64
}

// z99 is the standard normal 0.99 quantile.
var z99 = NormQuantile(0.99)

// num formats a parameter for String and error messages: shortest exact
// representation ("120", "4.8", "1e+06").
func num(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// checkPositive returns an error unless v is a finite number > 0.
func checkPositive(dist, name string, v float64) error {
	if !finite(v) {
		return fmt.Errorf("%s: %s (%s) must be a finite number", dist, name, num(v))
	}
	if v <= 0 {
		return fmt.Errorf("%s: %s (%s) must be > 0", dist, name, num(v))
	}
	return nil
}

// badP reports whether p is not a probability.
func badP(p float64) bool { return !(p >= 0 && p <= 1) }

// openUnit draws a uniform value in the open interval (0, 1): inverse-CDF
// sampling then never meets the infinite ends of an unbounded quantile
// function.
func openUnit(r *rand.Rand) float64 {
	return (float64(r.Uint64()>>11) + 0.5) / (1 << 53)
}

// normCDF is the standard normal CDF Φ.
func normCDF(x float64) float64 { return 0.5 * math.Erfc(-x/math.Sqrt2) }

// normPDF is the standard normal density φ.
func normPDF(x float64) float64 { return math.Exp(-0.5*x*x) / math.Sqrt(2*math.Pi) }

// logNormCDF returns ln Φ(x), also far in the lower tail where Φ(x)
// underflows.
func logNormCDF(x float64) float64 {
	if x > -30 {
		return math.Log(normCDF(x))
	}
	if math.IsInf(x, -1) {
		return math.Inf(-1)
	}
	return -x*x/2 + logMillsTail(x)
}

// logMillsTail returns ln Φ(x) + x²/2 for x <= -30 from the asymptotic
// series Φ(x) = φ(x)/|x| · (1 - 1/x² + 3/x⁴ - 15/x⁶ + 105/x⁸ - …), whose
// truncation error there is below 1e-12.
func logMillsTail(x float64) float64 {
	r := 1 / (x * x)
	series := 1 - r*(1-r*(3-r*(15-r*105)))
	return -math.Log(-x) - 0.5*math.Log(2*math.Pi) + math.Log(series)
}

// logExpNormInt returns ln ∫_{-∞}^{z} e^{b(u-t0)} φ(u) du
// = b²/2 - b·t0 + ln Φ(z-b), for b >= 0. It is the building block of the
// partial means of log-normal shapes; far in the tail it is computed as
// b(z-t0) - z²/2 + logMillsTail(z-b), which avoids cancelling b²/2 against
// (z-b)²/2 when the slope b is huge.
func logExpNormInt(b, t0, z float64) float64 {
	x := z - b
	if x > -30 || math.IsNaN(x) {
		return b*b/2 - b*t0 + logNormCDF(x)
	}
	if math.IsInf(z, -1) {
		return math.Inf(-1)
	}
	return b*(z-t0) - z*z/2 + logMillsTail(x)
}

// logSubExp returns ln(e^a - e^c) for c <= a (-Inf when they are equal).
func logSubExp(a, c float64) float64 {
	if !(c < a) {
		return math.Inf(-1)
	}
	if math.IsInf(a, 1) {
		return a
	}
	return a + math.Log(-math.Expm1(c-a))
}

// ---------------------------------------------------------------------------
// fixed

type fixed struct{ v float64 }

// Fixed returns the distribution that always yields v.
func Fixed(v float64) Sampler { return &fixed{v} }

func (f *fixed) Sample(*rand.Rand) float64 { return f.v }
func (f *fixed) Mean() float64             { return f.v }
func (f *fixed) String() string            { return "fixed(" + num(f.v) + ")" }

func (f *fixed) Quantile(p float64) float64 {
	if badP(p) {
		return math.NaN()
	}
	return f.v
}

func (f *fixed) cdf(x float64) float64 {
	if x >= f.v {
		return 1
	}
	return 0
}

func (f *fixed) partialMean(x float64) float64 {
	if x >= f.v {
		return f.v
	}
	return 0
}

// ---------------------------------------------------------------------------
// uniform

type uniform struct{ lo, hi float64 }

// Uniform returns the continuous uniform distribution on [min, max].
// min == max is allowed and always yields that value.
func Uniform(min, max float64) (Sampler, error) {
	if !finite(min) || !finite(max) {
		return nil, fmt.Errorf("uniform: min (%s) and max (%s) must be finite numbers", num(min), num(max))
	}
	if min > max {
		return nil, fmt.Errorf("uniform: min (%s) > max (%s)", num(min), num(max))
	}
	return &uniform{min, max}, nil
}

func (u *uniform) Sample(r *rand.Rand) float64 { return u.lo + r.Float64()*(u.hi-u.lo) }
func (u *uniform) Mean() float64               { return u.lo + (u.hi-u.lo)/2 }
func (u *uniform) String() string              { return "uniform(" + num(u.lo) + ", " + num(u.hi) + ")" }

func (u *uniform) Quantile(p float64) float64 {
	if badP(p) {
		return math.NaN()
	}
	return u.lo + p*(u.hi-u.lo)
}

func (u *uniform) cdf(x float64) float64 {
	switch {
	case x >= u.hi:
		return 1
	case x < u.lo:
		return 0
	}
	return (x - u.lo) / (u.hi - u.lo)
}

func (u *uniform) partialMean(x float64) float64 {
	switch {
	case x >= u.hi:
		return u.Mean()
	case x < u.lo:
		return 0
	}
	return (x - u.lo) * (x + u.lo) / (2 * (u.hi - u.lo))
}

// ---------------------------------------------------------------------------
// normal

type normal struct{ mu, sd float64 }

// Normal returns the normal distribution with the given mean and standard
// deviation. Its draws can be negative; clamp it for lengths.
func Normal(mean, stddev float64) (Sampler, error) {
	if !finite(mean) {
		return nil, fmt.Errorf("normal: mean (%s) must be a finite number", num(mean))
	}
	if err := checkPositive("normal", "stddev", stddev); err != nil {
		return nil, err
	}
	return &normal{mean, stddev}, nil
}

func (n *normal) Sample(r *rand.Rand) float64 { return n.mu + n.sd*r.NormFloat64() }
func (n *normal) Mean() float64               { return n.mu }
func (n *normal) String() string {
	return "normal(mean=" + num(n.mu) + ", stddev=" + num(n.sd) + ")"
}

func (n *normal) Quantile(p float64) float64 {
	if badP(p) {
		return math.NaN()
	}
	return n.mu + n.sd*NormQuantile(p)
}

func (n *normal) cdf(x float64) float64 { return normCDF((x - n.mu) / n.sd) }

func (n *normal) partialMean(x float64) float64 {
	if math.IsInf(x, 1) {
		return n.mu
	}
	z := (x - n.mu) / n.sd
	return n.mu*normCDF(z) - n.sd*normPDF(z)
}

// ---------------------------------------------------------------------------
// log-normal

type lognormal struct {
	mu, sigma    float64
	median, p99  float64 // set when built from median and p99 (for String)
	fromQuantile bool
}

// LogNormal returns the log-normal distribution whose logarithm is normal
// with mean mu and standard deviation sigma (median e^mu).
func LogNormal(mu, sigma float64) (Sampler, error) {
	if !finite(mu) {
		return nil, fmt.Errorf("lognormal: mu (%s) must be a finite number", num(mu))
	}
	if err := checkPositive("lognormal", "sigma", sigma); err != nil {
		return nil, err
	}
	return &lognormal{mu: mu, sigma: sigma}, nil
}

// LogNormalFromMedianP99 returns the log-normal distribution with the given
// median and 99th percentile: mu = ln(median), sigma = ln(p99/median)/z(0.99).
func LogNormalFromMedianP99(median, p99 float64) (Sampler, error) {
	if err := checkPositive("lognormal", "median", median); err != nil {
		return nil, err
	}
	if !finite(p99) {
		return nil, fmt.Errorf("lognormal: p99 (%s) must be a finite number", num(p99))
	}
	if p99 <= median {
		return nil, fmt.Errorf("lognormal: p99 (%s) must be greater than median (%s)", num(p99), num(median))
	}
	return &lognormal{
		mu:           math.Log(median),
		sigma:        math.Log(p99/median) / z99,
		median:       median,
		p99:          p99,
		fromQuantile: true,
	}, nil
}

func (l *lognormal) Sample(r *rand.Rand) float64 { return math.Exp(l.mu + l.sigma*r.NormFloat64()) }
func (l *lognormal) Mean() float64               { return math.Exp(l.mu + l.sigma*l.sigma/2) }

func (l *lognormal) String() string {
	if l.fromQuantile {
		return "lognormal(median=" + num(l.median) + ", p99=" + num(l.p99) + ")"
	}
	return "lognormal(mu=" + num(l.mu) + ", sigma=" + num(l.sigma) + ")"
}

func (l *lognormal) Quantile(p float64) float64 {
	if badP(p) {
		return math.NaN()
	}
	return math.Exp(l.mu + l.sigma*NormQuantile(p))
}

func (l *lognormal) cdf(x float64) float64 {
	if x <= 0 {
		return 0
	}
	return normCDF((math.Log(x) - l.mu) / l.sigma)
}

func (l *lognormal) partialMean(x float64) float64 {
	if x <= 0 {
		return 0
	}
	if math.IsInf(x, 1) {
		return l.Mean()
	}
	z := (math.Log(x) - l.mu) / l.sigma
	// E[X; X <= x] = ∫ e^(mu + sigma·u) φ(u) du over u <= z.
	return math.Exp(l.mu + logExpNormInt(l.sigma, 0, z))
}

// ---------------------------------------------------------------------------
// exponential

type exponential struct{ mean float64 }

// Exponential returns the exponential distribution with the given mean.
func Exponential(mean float64) (Sampler, error) {
	if err := checkPositive("exponential", "mean", mean); err != nil {
		return nil, err
	}
	return &exponential{mean}, nil
}

func (e *exponential) Sample(r *rand.Rand) float64 { return e.mean * r.ExpFloat64() }
func (e *exponential) Mean() float64               { return e.mean }
func (e *exponential) String() string              { return "exponential(mean=" + num(e.mean) + ")" }

func (e *exponential) Quantile(p float64) float64 {
	if badP(p) {
		return math.NaN()
	}
	return -e.mean * math.Log1p(-p)
}

func (e *exponential) cdf(x float64) float64 {
	if x <= 0 {
		return 0
	}
	return -math.Expm1(-x / e.mean)
}

func (e *exponential) partialMean(x float64) float64 {
	if x <= 0 {
		return 0
	}
	if math.IsInf(x, 1) {
		return e.mean
	}
	t := x / e.mean
	// mean · (1 - e^-t (1 + t)), written to keep precision for small t.
	return e.mean * (-math.Expm1(-t) - t*math.Exp(-t))
}

// ---------------------------------------------------------------------------
// gamma

type gamma struct {
	shape, scale float64
	// Marsaglia–Tsang constants for shape' = max(shape, shape+1 when < 1).
	d, c float64
}

// Gamma returns the gamma distribution with the given shape (k) and scale
// (θ): mean kθ, coefficient of variation 1/√k. Draws use Marsaglia and
// Tsang's method; a shape below 1 draws with shape+1 and multiplies by
// U^(1/shape).
func Gamma(shape, scale float64) (Sampler, error) {
	if err := checkPositive("gamma", "shape", shape); err != nil {
		return nil, err
	}
	if err := checkPositive("gamma", "scale", scale); err != nil {
		return nil, err
	}
	a := shape
	if a < 1 {
		a++
	}
	d := a - 1.0/3
	return &gamma{shape: shape, scale: scale, d: d, c: 1 / math.Sqrt(9*d)}, nil
}

func (g *gamma) Sample(r *rand.Rand) float64 {
	var x float64
	for {
		n := r.NormFloat64()
		v := 1 + g.c*n
		if v <= 0 {
			continue
		}
		v = v * v * v
		u := openUnit(r)
		n2 := n * n
		if u < 1-0.0331*n2*n2 || math.Log(u) < 0.5*n2+g.d*(1-v+math.Log(v)) {
			x = g.d * v
			break
		}
	}
	if g.shape < 1 {
		// Boost: Gamma(k) = Gamma(k+1) · U^(1/k), in log space so that a
		// tiny shape underflows gracefully to 0.
		x *= math.Exp(math.Log(openUnit(r)) / g.shape)
	}
	return x * g.scale
}

func (g *gamma) Mean() float64 { return g.shape * g.scale }
func (g *gamma) String() string {
	return "gamma(shape=" + num(g.shape) + ", scale=" + num(g.scale) + ")"
}

func (g *gamma) Quantile(p float64) float64 {
	if badP(p) {
		return math.NaN()
	}
	return g.scale * gammaPInv(g.shape, p)
}

func (g *gamma) cdf(x float64) float64 {
	p, _ := gammaPQ(g.shape, x/g.scale)
	return p
}

func (g *gamma) partialMean(x float64) float64 {
	// E[X; X <= x] = kθ · P(k+1, x/θ).
	p, _ := gammaPQ(g.shape+1, x/g.scale)
	return g.shape * g.scale * p
}

// gammaPQ returns the regularized incomplete gamma functions P(a, x) and
// Q(a, x) = 1 - P(a, x), each accurate where it is small: a power series
// below x = a+1, Lentz's continued fraction for Q above.
func gammaPQ(a, x float64) (p, q float64) {
	switch {
	case !(x > 0):
		return 0, 1
	case math.IsInf(x, 1):
		return 1, 0
	}
	lg, _ := math.Lgamma(a)
	logPrefix := -x + a*math.Log(x) - lg
	if x < a+1 {
		ap, del, sum := a, 1/a, 1/a
		for range 10000 {
			ap++
			del *= x / ap
			sum += del
			if math.Abs(del) < math.Abs(sum)*1e-17 {
				break
			}
		}
		p = math.Exp(logPrefix + math.Log(sum))
		return p, 1 - p
	}
	const tiny = 1e-300
	b := x + 1 - a
	c := 1 / tiny
	d := 1 / b
	h := d
	for i := 1; i < 10000; i++ {
		an := -float64(i) * (float64(i) - a)
		b += 2
		d = an*d + b
		if math.Abs(d) < tiny {
			d = tiny
		}
		c = b + an/c
		if math.Abs(c) < tiny {
			c = tiny
		}
		d = 1 / d
		del := d * c
		h *= del
		if math.Abs(del-1) < 1e-16 {
			break
		}
	}
	q = math.Exp(logPrefix + math.Log(h))
	return 1 - q, q
}

// gammaPInv returns x with P(a, x) = p. It runs Newton's method on
// u = ln x inside a bracket that every step narrows (bisecting when a step
// would leave it), so it converges for any shape, including quantiles many
// orders of magnitude below 1 for small shapes.
func gammaPInv(a, p float64) float64 {
	switch {
	case p <= 0:
		return 0
	case p >= 1:
		return math.Inf(1)
	}
	lg, _ := math.Lgamma(a)
	lg1, _ := math.Lgamma(a + 1)
	// For small x, P(a, x) ≈ x^a / Γ(a+1).
	uSmall := (math.Log(p) + lg1) / a
	if uSmall < -746 { // below the smallest float64
		return 0
	}
	// Initial guess (Numerical Recipes §6.2.1): Wilson–Hilferty above shape
	// 1, the small-x and large-x approximations below.
	u := uSmall
	if a > 1 {
		if t := 1 - 1/(9*a) + NormQuantile(p)/(3*math.Sqrt(a)); t > 0 {
			u = math.Log(a) + 3*math.Log(t)
		}
	} else if t := 1 - a*(0.253+a*0.12); p >= t {
		u = math.Log(1 - math.Log1p(-(p-t)/(1-t)))
	}
	lo, hi := math.Inf(-1), math.Inf(1) // bracket on u
	upper := p > 0.5                    // solve on the smaller of P and Q for precision
	for range 200 {
		x := math.Exp(u)
		P, Q := gammaPQ(a, x)
		f := P - p // f > 0: u is above the root
		if upper {
			f = (1 - p) - Q
		}
		if f == 0 {
			return x
		}
		if f > 0 {
			hi = u
		} else {
			lo = u
		}
		slope := math.Exp(a*u - x - lg) // dP/du = x·density(x)
		next := u - f/slope
		if !(next > lo && next < hi) {
			switch {
			case math.IsInf(hi, 1):
				next = u + max(1, math.Abs(u))
			case math.IsInf(lo, -1):
				next = u - max(1, math.Abs(u))
			default:
				next = lo + (hi-lo)/2
			}
		}
		if math.Abs(next-u) <= 1e-15*max(1, math.Abs(u)) {
			return math.Exp(next)
		}
		u = next
	}
	return math.Exp(u)
}
