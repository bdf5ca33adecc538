// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package regression

import (
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestFigures measures what docs/design.md ("Regression detection")
// states: false alarms over simulated years, detection delays and misses
// over hundreds of simulated steps, the trade-off of the level, memory and
// CPU. It takes minutes, so it runs only with LLMPROBE_FIGURES=1:
//
//	LLMPROBE_FIGURES=1 go test -run TestFigures -v -timeout 1h ./regression/
//
// LLMPROBE_FIGURES_DAYS sets the false-alarm runs' length (default 365
// days), LLMPROBE_FIGURES_SERIES how many independent series each row
// runs (default 2) and LLMPROBE_FIGURES_STEPS the power runs' steps
// (default 200).
// figureOptions are the daemon's: the defaults, and the 1m MinSpan its
// configuration sets (config regression.min_span).
var figureOptions = Options{MinSpan: time.Minute}

func TestFigures(t *testing.T) {
	if os.Getenv("LLMPROBE_FIGURES") == "" {
		t.Skip("set LLMPROBE_FIGURES=1 to measure the figures (minutes)")
	}
	days := envInt("LLMPROBE_FIGURES_DAYS", 365)
	series := envInt("LLMPROBE_FIGURES_SERIES", 2)
	steps := envInt("LLMPROBE_FIGURES_STEPS", 200)
	start := time.Now()
	var out strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&out, format+"\n", a...) }

	// False alarms.
	type nullCase struct {
		name string
		kind Kind
		rate float64
		rho  float64
	}
	var nulls []nullCase
	for _, rate := range []float64{0.05, 0.5, 5} {
		nulls = append(nulls,
			nullCase{"ttft", Latency, rate, 0},
			nullCase{"ttft AR(1) ρ=0.3", Latency, rate, 0.3},
			nullCase{"errors 1%", Ratio, rate, 0})
	}
	type nullOut struct {
		alarms int
		margin float64
		mem    int
	}
	runs := parallel(len(nulls)*series, func(i int) nullOut {
		c := nulls[i/series]
		a, margin, d := nullRun(c.kind, figureOptions, c.rate, c.rho, time.Duration(days)*24*time.Hour, uint64(100+i))
		return nullOut{a, margin, d.MemoryBytes()}
	})
	nullRes := make([]nullOut, len(nulls))
	for i, r := range runs {
		n := &nullRes[i/series]
		if i%series == 0 {
			*n = r
			continue
		}
		n.alarms += r.alarms
		n.margin = min(n.margin, r.margin)
	}
	p("False alarms, %d fresh detectors per row, %d simulated days each, levels %g (median), %g (tail), %g (errors):", series, days, DefaultMedianLevel, DefaultTailLevel, DefaultErrorLevel)
	p("  %-18s %7s %7s %12s %20s", "stream", "req/s", "alarms", "per 30 days", "smallest p / level")
	for i, c := range nulls {
		r := nullRes[i]
		per30 := float64(r.alarms) * 30 / float64(days*series)
		p("  %-18s %7g %7d %12.3g %20.3g", c.name, c.rate, r.alarms, per30, r.margin)
		if per30 > 1 {
			t.Errorf("%s at %g req/s: %d false alarms in %d days", c.name, c.rate, r.alarms, days)
		}
	}
	med, tl := TestsPerEvaluation(Latency, figureOptions)
	errs, _ := TestsPerEvaluation(Ratio, figureOptions)
	bound := func(o Options) (lat, rat float64) {
		return FalseAlarmBound(Latency, o, 43200), FalseAlarmBound(Ratio, o, 43200)
	}
	bl, br := bound(figureOptions)
	p("  union bound per 30 days (43200 evaluations): latency %d median tests × %g + %d tail tests × %g = %.3g; errors %d tests × %g = %.3g",
		med, DefaultMedianLevel, tl, DefaultTailLevel, bl, errs, DefaultErrorLevel, br)
	p("")

	// Power.
	type powerCase struct {
		name     string
		kind     Kind
		rate     float64
		hist     time.Duration
		deadline time.Duration
		mutate   func(*stream)
		errAfter float64
		o        Options
	}
	hist900 := func(rate float64) time.Duration { return time.Duration(900 / rate * float64(time.Second)) }
	power := []powerCase{
		{"median +25%, 900 samples of history", Latency, 0.05, hist900(0.05), 5 * time.Hour, scale(1.25), 0, figureOptions},
		{"median +25%, 900 samples of history", Latency, 0.5, hist900(0.5), 30 * time.Minute, scale(1.25), 0, figureOptions},
		{"median +25%, 900 samples of history", Latency, 5, hist900(5), 3 * time.Minute, scale(1.25), 0, figureOptions},
		{"median +25%, 12288 samples of history", Latency, 0.5, 12288 * 2 * time.Second, 30 * time.Minute, scale(1.25), 0, figureOptions},
		{"median +25%, 12288 samples of history", Latency, 5, 12288 * 200 * time.Millisecond, 3 * time.Minute, scale(1.25), 0, figureOptions},
		{"p99 ×2, median unchanged", Latency, 0.05, 96 * time.Hour, 24 * time.Hour, tail(), 0, figureOptions},
		{"p99 ×2, median unchanged", Latency, 0.5, 6 * time.Hour, 2 * time.Hour, tail(), 0, figureOptions},
		{"p99 ×2, median unchanged", Latency, 5, time.Hour, 20 * time.Minute, tail(), 0, figureOptions},
		{"errors 1% → 5%", Ratio, 0.05, 48 * time.Hour, 12 * time.Hour, nil, 0.05, figureOptions},
		{"errors 1% → 5%", Ratio, 0.5, 6 * time.Hour, 2 * time.Hour, nil, 0.05, figureOptions},
		{"errors 1% → 5%", Ratio, 5, time.Hour, 20 * time.Minute, nil, 0.05, figureOptions},
	}
	p("Power, %d simulated steps per row (fresh detector, the history given, then the change; evaluations once a minute at a random phase):", steps)
	p("  %-40s %6s %10s %10s %10s %10s %8s %6s %10s", "change", "req/s", "history", "deadline", "median", "p90", "missed", "early", "|cp err|")
	for _, c := range power {
		s := Summarise(parallel(steps, func(i int) trial {
			return stepTrial(c.kind, c.o, c.rate, c.hist, 3*c.deadline, uint64(10000+i), c.mutate, c.errAfter)
		}), c.deadline)
		p("  %-40s %6g %10s %10s %10s %10s %7.1f%% %6d %10s", c.name, c.rate, dur(c.hist), dur(c.deadline), dur(s.Median), dur(s.P90), 100*s.Missed, s.Early, dur(s.ChangePointError))
		if s.Early > 0 {
			t.Errorf("%s at %g req/s: %d alarms before the step", c.name, c.rate, s.Early)
		}
	}
	p("  (median and p90 of the delay from the step to the alarm, a step not caught within 3× the deadline counting as never; missed: not caught within the deadline; early: alarms before the step; |cp err|: median distance of the change point from the step)")
	p("")

	// The level's trade-off.
	p("Trade-off of the per-test levels (tail test at the level shown, median and errors tests at a tenth of it; %d steps per cell):", steps)
	p("  %-8s %14s %22s %22s %22s %20s", "level", "bound /30 days", "median +25% @5/s ≤3m", "median +25% @0.5/s ≤30m", "p99 ×2 @0.5/s ≤2h", "errors 5% @0.5/s")
	for _, level := range []float64{1e-5, 1e-6, 1e-7, 1e-8, 1e-9} {
		o := Options{MedianLevel: level / 10, TailLevel: level, ErrorLevel: level / 10}
		cell := func(c powerCase) string {
			s := Summarise(parallel(steps, func(i int) trial {
				return stepTrial(c.kind, o, c.rate, c.hist, 3*c.deadline, uint64(20000+i), c.mutate, c.errAfter)
			}), c.deadline)
			return fmt.Sprintf("%s, %.1f%% missed", dur(s.Median), 100*s.Missed)
		}
		bl, _ := bound(o)
		p("  %-8g %14.3g %22s %22s %22s %20s", level, bl,
			cell(power[2]), cell(power[1]), cell(power[6]), cell(power[9]))
	}
	p("")

	// Recovery.
	p("Recovery: a +30%% regression held 2h, then gone (%d runs per rate):", steps/4)
	for _, rate := range []float64{0.05, 0.5, 5} {
		var rec []time.Duration
		flaps := 0
		for _, r := range parallel(steps/4, func(i int) [2]time.Duration { return recovery(rate, uint64(30000+i)) }) {
			rec = append(rec, r[0])
			flaps += int(r[1])
		}
		slices.Sort(rec)
		p("  %5g req/s: recovered a median %s (p90 %s) after the regression ended; %d extra onsets", rate, dur(rec[len(rec)/2]), dur(rec[len(rec)*9/10]), flaps)
	}
	p("")

	// Memory and CPU.
	p("Memory per detector at steady state: latency %d bytes, errors %d bytes (MemoryBytes).", nullRes[len(nulls)-3].mem, nullRes[len(nulls)-1].mem)
	for _, c := range []struct {
		name string
		f    func(*testing.B)
	}{{"latency", BenchmarkDetector100rps}, {"errors", BenchmarkDetectorErrors100rps}} {
		b := testing.Benchmark(c.f)
		ns := float64(b.T.Nanoseconds()) / float64(b.N)
		p("CPU, %s at 100 req/s with an Evaluate a minute: %.0f ns per sample, %.4f%% of a core.", c.name, ns, ns*100/1e9*100)
	}
	p("(took %s)", time.Since(start).Round(time.Second))
	t.Log("\n" + out.String())
}

// recovery runs 24h of history, a +30% regression for 2h and 6h more:
// how long after the regression ended the alarm ended, and how many
// onsets beyond the first there were.
func recovery(rate float64, seed uint64) [2]time.Duration {
	d := NewDetector(Latency, figureOptions)
	s := newStream(seed, rate, 0)
	step := epoch.Add(24 * time.Hour)
	back := step.Add(2 * time.Hour)
	s.change = func(v float64) float64 { return v * 1.3 }
	onsets := 0
	rec := time.Duration(math.MaxInt64)
	prev := false
	run(d, s, epoch, time.Duration(seed%60)*time.Second, 32*time.Hour, Latency, step, 0, func(now time.Time, r Result) bool {
		if now.After(back) {
			s.change = nil
		}
		if r.Regressed && !prev {
			onsets++
		}
		if r.Recovered && rec == math.MaxInt64 && now.After(back) {
			rec = now.Sub(back)
		}
		prev = r.Regressed
		return true
	})
	return [2]time.Duration{rec, time.Duration(max(0, onsets-1))}
}

// parallel runs f(0..n-1) on GOMAXPROCS goroutines.
func parallel[T any](n int, f func(int) T) []T {
	out := make([]T, n)
	var wg sync.WaitGroup
	next := make(chan int)
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for i := range next {
				out[i] = f(i)
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return out
}

func dur(d time.Duration) string {
	switch {
	case d == math.MaxInt64:
		return "never"
	case d >= time.Hour:
		return fmt.Sprintf("%.1fh", d.Hours())
	case d >= time.Minute:
		return fmt.Sprintf("%.1fm", d.Minutes())
	}
	return fmt.Sprintf("%.0fs", d.Seconds())
}

func envInt(name string, def int) int {
	var v int
	if _, err := fmt.Sscan(os.Getenv(name), &v); err != nil || v <= 0 {
		return def
	}
	return v
}

// TestFiguresChangePoint measures how the change point dates a step
// (docs/design.md, "Change point"): at 5 req/s, fresh detectors with 3
// minutes or 1 hour of history, the distribution of the change point
// minus the step over LLMPROBE_FIGURES_DATING steps per row (default
// 1000), and, where both distributions are known, that of an oracle: the
// split of the same samples that maximises the true log-likelihood ratio
// of after against before, the best any dating could do. It runs with
// TestFigures (LLMPROBE_FIGURES=1, -run TestFigures).
func TestFiguresChangePoint(t *testing.T) {
	if os.Getenv("LLMPROBE_FIGURES") == "" {
		t.Skip("set LLMPROBE_FIGURES=1 to measure the figures (minutes)")
	}
	steps := envInt("LLMPROBE_FIGURES_DATING", 1000)
	both := []time.Duration{3 * time.Minute, time.Hour}
	hour := []time.Duration{time.Hour}
	p90, p99 := ttftQuantiles()
	k := (2*p99 - p90) / (p99 - p90)
	rows := []struct {
		name     string
		kind     Kind
		mutate   func(*stream)
		errAfter float64
		hists    []time.Duration
		oracle   func(v float64) float64 // one value's log-likelihood ratio; nil: none
	}{
		{"narrow TTFT ×2", Latency, narrowScale(2, false), 0, both, func(v float64) float64 {
			y := (math.Log(v/0.04) - math.Log(2)/2) / 0.01
			return y * math.Log(2) / 0.01
		}},
		{"narrow drifting TTFT ×2", Latency, narrowScale(2, true), 0, both, nil},
		{"narrow drifting TTFT +25%", Latency, narrowScale(1.25, true), 0, both, nil},
		{"TTFT ×2", Latency, scale(2), 0, both, changedLLR(func(v float64) (float64, float64) { return v / 2, 2 })},
		{"TTFT +50%", Latency, scale(1.5), 0, both, changedLLR(func(v float64) (float64, float64) { return v / 1.5, 1.5 })},
		{"TTFT +25%", Latency, scale(1.25), 0, both, changedLLR(func(v float64) (float64, float64) { return v / 1.25, 1.25 })},
		{"p99 ×2, median unchanged", Latency, tail(), 0, hour, changedLLR(func(v float64) (float64, float64) {
			if v <= p90 {
				return v, 1
			}
			return p90 + (v-p90)/k, k
		})},
		{"errors 1% → 20%", Ratio, nil, 0.2, hour, errorsLLR(0.01, 0.2)},
		{"errors 1% → 5%", Ratio, nil, 0.05, hour, errorsLLR(0.01, 0.05)},
	}
	var out strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&out, format+"\n", a...) }
	p("Change point minus step, 5 req/s, %d steps per row (fresh detector, the history given; evaluations once a minute at a random phase, the daemon's options):", steps)
	p("  %-28s %8s %9s %10s %7s %7s %7s %7s %7s %14s", "change", "history", "detected", "within 5s", "q01", "q05", "median", "q95", "q99", "oracle ≤5s")
	for _, r := range rows {
		for _, hist := range r.hists {
			type res struct {
				tr     trial
				oracle time.Duration
			}
			runs := parallel(steps, func(i int) res {
				var o time.Duration
				step := epoch.Add(hist)
				tr := stepTrialWith(r.kind, figureOptions, 5, hist, time.Hour, uint64(40000+i), r.mutate, r.errAfter, func(d *Detector) {
					if r.oracle != nil {
						o = time.Unix(0, oracleChangePoint(d, r.oracle)).Sub(step)
					}
				})
				return res{tr, o}
			})
			var errs, orc []time.Duration
			for _, x := range runs {
				if x.tr.Detected {
					errs = append(errs, x.tr.ChangePointError)
					orc = append(orc, x.oracle)
				}
				if x.tr.Early {
					t.Errorf("%s: an alarm before the step", r.name)
				}
			}
			slices.Sort(errs)
			q := func(f float64) string {
				if len(errs) == 0 {
					return "-"
				}
				return fmt.Sprintf("%+.1fs", errs[min(len(errs)-1, int(f*float64(len(errs))))].Seconds())
			}
			share := func(e []time.Duration) string {
				if len(e) == 0 {
					return "-"
				}
				return fmt.Sprintf("%.1f%%", 100*float64(within(e, 5*time.Second))/float64(len(e)))
			}
			oracle := "-"
			if r.oracle != nil {
				oracle = share(orc)
			}
			p("  %-28s %8s %9d %10s %7s %7s %7s %7s %7s %14s", r.name, dur(hist), len(errs), share(errs), q(0.01), q(0.05), q(0.5), q(0.95), q(0.99), oracle)
		}
	}
	t.Log("\n" + out.String())
}

// oracleChangePoint is the split of d's current samples that maximises
// the sum of llr over the samples after it (the first of them; on a tie,
// the later split).
func oracleChangePoint(d *Detector, llr func(v float64) float64) int64 {
	best, bestK, sum := math.Inf(-1), 0, 0.0
	for i := d.n - 1; i >= 0; i-- {
		j := d.idx(i)
		var v float64
		if d.kind == Latency {
			v = float64(d.val[j])
		} else if d.plc[j]&exceedBit != 0 {
			v = 1
		}
		sum += llr(v)
		if sum > best {
			best, bestK = sum, i
		}
	}
	return d.timeOf(bestK)
}

// changedLLR is the log-likelihood ratio of a TTFT v of the wide stream
// after a monotone change c against before it, given c's inverse: the
// value x = c⁻¹(v) and c's slope there.
func changedLLR(inv func(v float64) (x, slope float64)) func(v float64) float64 {
	f := ttftLogDensity()
	dens := func(x float64) float64 { return f(math.Log(x)) - math.Log(x) } // of TTFT, from that of its log
	return func(v float64) float64 {
		x, slope := inv(v)
		return dens(x) - math.Log(slope) - dens(v)
	}
}

// errorsLLR is the log-likelihood ratio of an outcome (1: an error) at
// error ratio q against p.
func errorsLLR(p, q float64) func(v float64) float64 {
	return func(v float64) float64 {
		if v != 0 {
			return math.Log(q / p)
		}
		return math.Log((1 - q) / (1 - p))
	}
}

// ttftLogDensity is the log density of the wide stream's log TTFT: a
// histogram of 8 million draws in bins of 0.0025, smoothed with a
// Gaussian of 3 bins, with a pseudo-count that keeps the sparse tails
// finite.
var ttftLogDensity = sync.OnceValue(func() func(y float64) float64 {
	const lo, hi, bins, draws = -6.0, 4.0, 4000, 8000000
	h := make([]float64, bins)
	s := newStream(7, 1, 0)
	for range draws {
		if b := int((math.Log(s.ttft()) - lo) / (hi - lo) * bins); b >= 0 && b < bins {
			h[b]++
		}
	}
	logd := make([]float64, bins)
	for i := range bins {
		var a, w float64
		for j := max(0, i-12); j <= min(bins-1, i+12); j++ {
			g := math.Exp(-float64((j-i)*(j-i)) / 18)
			a += g * h[j]
			w += g
		}
		logd[i] = math.Log((a/w + 0.01) / draws / ((hi - lo) / bins))
	}
	return func(y float64) float64 {
		return logd[min(max(int((y-lo)/(hi-lo)*bins), 0), bins-1)]
	}
})
