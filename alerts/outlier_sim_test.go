// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package alerts

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// This file measures, offline, the false-alarm rate and the detection time
// of exactly the rule LLMProbeReplicaOutlier evaluates: replicas probed
// open-loop (Poisson arrivals), TTFT drawn from a heavy-tailed model,
// binned into the classic buckets of llmprobe_ttft_seconds, scraped every
// 15s, and every evaluation interval: histogram_quantile(0.5) of each
// replica's bucket increases over the window (Prometheus' linear
// interpolation), the evidence (the count's increase, extrapolated as
// increase() does), the median over the replicas with evidence (PromQL's
// quantile), the ratio against Factor, at least MinReplicas with evidence,
// and the `for`. docs/runbook.md (LLMProbeReplicaOutlier) states the
// figures TestReplicaOutlierFigures prints.
//
// Simplifications, each named: a request is observed at its arrival
// instant (not at its first token, up to a few seconds later); the
// recording rules and the alert are evaluated at the same instant, on the
// same scrape (as group_eval_order does in promtool; in Prometheus the
// alert group may read recorded series one interval old); the harness is
// never saturated and no replica warms up.

// ttftBucketsSim is the classic bucket layout of llmprobe_ttft_seconds
// (exporter/metrics.go ttftBuckets), shared by llmprobe_replica_ttft_seconds.
var ttftBucketsSim = []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 1.5, 2, 3, 5, 7.5, 10, 15, 20, 30, 45, 60}

// latencyModel draws a request's TTFT: a queue-and-prefill base, log-normal
// with spread Sigma around Median, plus prefill proportional to the prompt
// length (log-normal tokens, median PromptMedian, spread PromptSigma), and
// with probability StallP a stall multiplying it by 2 to 6 (a long prefill
// ahead in the batch, a preemption): a heavy right tail.
type latencyModel struct {
	Median       float64 // seconds
	Sigma        float64
	PromptMedian float64 // tokens
	PromptSigma  float64
	PerToken     float64 // seconds per prompt token
	StallP       float64
	// DriftSD is the stationary standard deviation of a per-replica,
	// slowly varying log factor (AR(1) with correlation time DriftTau):
	// replicas that are alike but not identical (another node, another
	// GPU, a noisy neighbour). 0: replicas are statistically identical.
	DriftSD  float64
	DriftTau time.Duration
}

var defaultLatencyModel = latencyModel{
	Median: 0.15, Sigma: 0.5,
	PromptMedian: 400, PromptSigma: 0.9, PerToken: 0.0002,
	StallP: 0.03,
}

func (m latencyModel) draw(rng *rand.Rand, slow, drift float64) float64 {
	base := m.Median * math.Exp(m.Sigma*rng.NormFloat64())
	prefill := m.PromptMedian * math.Exp(m.PromptSigma*rng.NormFloat64()) * m.PerToken
	v := (base + prefill) * slow * drift
	if rng.Float64() < m.StallP {
		v *= 2 + 4*rng.Float64()
	}
	return v
}

// ruleParams are the rule's settings and the evaluation's cadence.
type ruleParams struct {
	Window, For      time.Duration
	Factor           float64
	MinRequests      int
	MinReplicas      int
	Scrape, Interval time.Duration
}

func paramsOf(c Config) ruleParams {
	r := c.ReplicaOutlier
	return ruleParams{
		Window: time.Duration(r.Window), For: time.Duration(r.For), Factor: r.Factor,
		MinRequests: r.MinRequests, MinReplicas: r.MinReplicas,
		Scrape: 15 * time.Second, Interval: time.Minute,
	}
}

// simReplica is one replica's cumulative bucket counts as scraped.
type simReplica struct {
	cum     []float64   // live cumulative counts per bucket, +Inf last
	snaps   [][]float64 // ring of the counts at the last scrapes
	next    float64     // next arrival, seconds
	slow    float64
	logDrif float64
	active  float64 // alert's activeAt, seconds; NaN when inactive
	fired   bool
}

// outlierSim runs the rule over simulated replicas.
type outlierSim struct {
	p     ruleParams
	m     latencyModel
	rate  float64 // req/s per replica
	rng   *rand.Rand
	reps  []*simReplica
	now   float64 // seconds
	ring  int     // snapshots kept: Window/Scrape
	nsnap int
	// maxRatio is the largest ratio of a replica with evidence seen at an
	// evaluation (how close the healthy ones come to Factor).
	maxRatio float64
	scratch  []float64
}

func newOutlierSim(p ruleParams, m latencyModel, replicas int, rate float64, seed uint64) *outlierSim {
	s := &outlierSim{p: p, m: m, rate: rate, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
	s.ring = int(p.Window / p.Scrape)
	for range replicas {
		r := &simReplica{cum: make([]float64, len(ttftBucketsSim)+1), slow: 1, active: math.NaN()}
		r.snaps = make([][]float64, s.ring)
		for i := range r.snaps {
			r.snaps[i] = make([]float64, len(r.cum))
		}
		r.next = s.rng.ExpFloat64() / rate
		if m.DriftSD > 0 {
			r.logDrif = m.DriftSD * s.rng.NormFloat64()
		}
		s.reps = append(s.reps, r)
	}
	return s
}

func (s *outlierSim) observe(r *simReplica, v float64) {
	i, _ := slices.BinarySearch(ttftBucketsSim, v) // first bucket with le >= v
	for ; i < len(r.cum); i++ {
		r.cum[i]++
	}
}

// step advances one scrape interval: arrivals, drift, the scrape.
func (s *outlierSim) step() {
	dt := s.p.Scrape.Seconds()
	end := s.now + dt
	for _, r := range s.reps {
		if s.m.DriftSD > 0 {
			a := math.Exp(-dt / s.m.DriftTau.Seconds())
			r.logDrif = a*r.logDrif + s.m.DriftSD*math.Sqrt(1-a*a)*s.rng.NormFloat64()
		}
		drift := math.Exp(r.logDrif)
		for r.next < end {
			s.observe(r, s.m.draw(s.rng, r.slow, drift))
			r.next += s.rng.ExpFloat64() / s.rate
		}
		copy(r.snaps[s.nsnap%s.ring], r.cum)
	}
	s.nsnap++
	s.now = end
}

// histogramQuantile is Prometheus' histogram_quantile over classic
// buckets (cumulative counts, +Inf last).
func histogramQuantile(q float64, cum []float64) float64 {
	total := cum[len(cum)-1]
	if total == 0 {
		return math.NaN()
	}
	rank := q * total
	b := 0
	for b < len(cum)-1 && cum[b] < rank {
		b++
	}
	if b == len(cum)-1 {
		return ttftBucketsSim[len(ttftBucketsSim)-1]
	}
	start, before := 0.0, 0.0
	if b > 0 {
		start, before = ttftBucketsSim[b-1], cum[b-1]
	}
	return start + (ttftBucketsSim[b]-start)*(rank-before)/(cum[b]-before)
}

// promQuantile is PromQL's quantile(): linear interpolation between the
// closest ranks, q*(n-1).
func promQuantile(q float64, vs []float64) float64 {
	slices.Sort(vs)
	rank := q * float64(len(vs)-1)
	lo := math.Floor(rank)
	hi := math.Min(lo+1, float64(len(vs)-1))
	w := rank - lo
	return vs[int(lo)]*(1-w) + vs[int(hi)]*w
}

// evaluate runs the rule once (the window must be full of scrapes) and
// returns the replicas whose alert went from pending to firing.
func (s *outlierSim) evaluate() []int {
	n := len(s.reps)
	p50 := make([]float64, n)
	ok := make([]bool, n)
	delta := make([]float64, len(ttftBucketsSim)+1)
	cur := (s.nsnap - 1) % s.ring
	old := s.nsnap % s.ring // the oldest kept: Window - Scrape before now
	// increase() extrapolates the first sample's Scrape back to the
	// window's start.
	extrap := s.p.Window.Seconds() / (s.p.Window - s.p.Scrape).Seconds()
	s.scratch = s.scratch[:0]
	for i, r := range s.reps {
		for b := range delta {
			delta[b] = r.snaps[cur][b] - r.snaps[old][b]
		}
		p50[i] = histogramQuantile(0.5, delta)
		ok[i] = delta[len(delta)-1]*extrap >= float64(s.p.MinRequests) && !math.IsNaN(p50[i])
		if ok[i] {
			s.scratch = append(s.scratch, p50[i])
		}
	}
	var fired []int
	eligible := len(s.scratch) >= s.p.MinReplicas
	median := math.NaN()
	if len(s.scratch) > 0 {
		median = promQuantile(0.5, s.scratch)
	}
	for i, r := range s.reps {
		cond := false
		if ok[i] && eligible {
			ratio := p50[i] / median
			s.maxRatio = math.Max(s.maxRatio, ratio)
			cond = ratio > s.p.Factor
		}
		if !cond {
			r.active, r.fired = math.NaN(), false
			continue
		}
		if math.IsNaN(r.active) {
			r.active = s.now
		}
		if !r.fired && s.now-r.active >= s.p.For.Seconds() {
			r.fired = true
			fired = append(fired, i)
		}
	}
	return fired
}

// run advances d of simulated time, evaluating every Interval once the
// window is full, and calls onFire for each replica that starts firing.
func (s *outlierSim) run(d time.Duration, onFire func(replica int, at float64) bool) {
	perEval := int(s.p.Interval / s.p.Scrape)
	end := s.now + d.Seconds()
	for s.now < end {
		for range perEval {
			s.step()
		}
		if s.nsnap < s.ring {
			continue
		}
		for _, i := range s.evaluate() {
			if !onFire(i, s.now) {
				return
			}
		}
	}
}

// nullAlarms is the number of alarms over d with all replicas alike, and
// the largest ratio seen.
func nullAlarms(p ruleParams, m latencyModel, replicas int, rate float64, d time.Duration, seed uint64) (int, float64) {
	s := newOutlierSim(p, m, replicas, rate, seed)
	alarms := 0
	s.run(d, func(int, float64) bool { alarms++; return true })
	return alarms, s.maxRatio
}

// detection runs one replica turning slow × factor after a healthy hour,
// at a random instant, and returns how long the rule took to name it (or
// a negative value if it was not named within limit) and whether another
// replica was named first.
func detection(p ruleParams, m latencyModel, replicas int, rate, slow float64, limit time.Duration, seed uint64) (time.Duration, bool) {
	s := newOutlierSim(p, m, replicas, rate, seed)
	s.run(time.Hour+time.Duration(s.rng.Float64()*float64(time.Minute)), func(int, float64) bool { return true })
	t0 := s.now
	s.reps[0].slow = slow
	took, wrong := time.Duration(-1), false
	s.run(limit, func(i int, at float64) bool {
		if i != 0 {
			wrong = true
			return true
		}
		took = time.Duration((at - t0) * float64(time.Second))
		return false
	})
	return took, wrong
}

type detectionStats struct {
	median, p95 time.Duration
	missed      int
	wrong       int
	runs        int
}

func detectionFigures(p ruleParams, m latencyModel, runs int, seed uint64) detectionStats {
	var ds []time.Duration
	st := detectionStats{runs: runs}
	for i := range runs {
		d, wrong := detection(p, m, 8, 0.2, 3, time.Hour, seed+uint64(i))
		if wrong {
			st.wrong++
		}
		if d < 0 {
			st.missed++
			d = time.Hour
		}
		ds = append(ds, d)
	}
	slices.Sort(ds)
	st.median = ds[len(ds)/2]
	st.p95 = ds[int(math.Ceil(0.95*float64(len(ds))))-1]
	return st
}

func TestHistogramQuantileMatchesPrometheus(t *testing.T) {
	// The replica.yml promtool case: 6 in (0.1, 0.15], 6 in (0.15, 0.2].
	cum := make([]float64, len(ttftBucketsSim)+1)
	for b, le := range append(slices.Clone(ttftBucketsSim), math.Inf(1)) {
		switch {
		case le >= 0.2:
			cum[b] = 12
		case le >= 0.15:
			cum[b] = 6
		}
	}
	if got := histogramQuantile(0.5, cum); math.Abs(got-0.15) > 1e-12 {
		t.Errorf("p50 = %g, want 0.15 (promtool's value)", got)
	}
	if got := histogramQuantile(0.75, cum); math.Abs(got-0.175) > 1e-12 {
		t.Errorf("p75 = %g, want 0.175", got)
	}
	if got := promQuantile(0.5, []float64{0.15, 0.1625, 0.15, 0.1625, 0.15, 0.1625, 0.15, 0.5}); math.Abs(got-0.15625) > 1e-12 {
		t.Errorf("median = %g, want 0.15625 (promtool's)", got)
	}
}

// TestReplicaOutlierDefaults checks the defaults on a short simulation
// (fixed seeds: deterministic, no wall-clock timing): a replica 3× slower
// out of 8 at 0.2 req/s is named within 15 minutes in most runs, never
// another replica first, and 8 alike replicas raise no alarm over 30
// simulated days. TestReplicaOutlierFigures measures the stated figures.
func TestReplicaOutlierDefaults(t *testing.T) {
	p := paramsOf(DefaultConfig())
	runs := 40
	if testing.Short() {
		runs = 10
	}
	st := detectionFigures(p, defaultLatencyModel, runs, 1)
	if st.median > 15*time.Minute || st.missed > 0 || st.wrong > 0 {
		t.Errorf("detection over %d runs: median %s, p95 %s, %d missed, %d named another replica; want median ≤ 15m, none missed or wrong",
			runs, st.median, st.p95, st.missed, st.wrong)
	}
	alarms, maxRatio := nullAlarms(p, defaultLatencyModel, 8, 0.2, 30*24*time.Hour/time.Duration(map[bool]int{true: 10, false: 1}[testing.Short()]), 7)
	if alarms > 0 {
		t.Errorf("%d false alarms with 8 alike replicas (largest ratio %.2f)", alarms, maxRatio)
	}
	t.Logf("detection median %s p95 %s; null: largest ratio %.2f", st.median, st.p95, maxRatio)
}

// TestReplicaOutlierFigures prints the figures docs/runbook.md states. It
// takes a few minutes, so it runs only with LLMPROBE_FIGURES=1:
//
//	LLMPROBE_FIGURES=1 go test -run TestReplicaOutlierFigures -v -timeout 1h ./alerts/
//
// LLMPROBE_FIGURES_MONTHS sets the null runs' length (default 12 months
// of 30 days, 8 replicas: 96 replica-months per row) and
// LLMPROBE_FIGURES_RUNS the detection runs per row (default 400).
func TestReplicaOutlierFigures(t *testing.T) {
	if os.Getenv("LLMPROBE_FIGURES") == "" {
		t.Skip("set LLMPROBE_FIGURES=1 to measure the figures (minutes)")
	}
	months := envInt(t, "LLMPROBE_FIGURES_MONTHS", 12)
	runs := envInt(t, "LLMPROBE_FIGURES_RUNS", 400)
	def := paramsOf(DefaultConfig())
	variant := func(f func(*ruleParams)) ruleParams { p := def; f(&p); return p }
	rows := []struct {
		name string
		p    ruleParams
	}{
		{"defaults (10m, k=2, 40, for 5m)", def},
		{"window 5m", variant(func(p *ruleParams) { p.Window = 5 * time.Minute; p.MinRequests = 20 })},
		{"k=1.5", variant(func(p *ruleParams) { p.Factor = 1.5 })},
		{"for 2m", variant(func(p *ruleParams) { p.For = 2 * time.Minute })},
		{"for 10m", variant(func(p *ruleParams) { p.For = 10 * time.Minute })},
	}
	drift := defaultLatencyModel
	drift.DriftSD, drift.DriftTau = 0.15, 30*time.Minute
	var out strings.Builder
	pr := func(format string, a ...any) { fmt.Fprintf(&out, format+"\n", a...) }
	pr("8 replicas at 0.2 req/s, TTFT log-normal (median %gs, σ %g) + prompt prefill (median %g tokens, σ %g, %gms/token), %g%% stalls ×2–6; "+
		"scrape 15s, evaluation 1m; %d replica-months per null row, %d detection runs (one replica 3× slower after a healthy hour)",
		defaultLatencyModel.Median, defaultLatencyModel.Sigma, defaultLatencyModel.PromptMedian, defaultLatencyModel.PromptSigma,
		defaultLatencyModel.PerToken*1000, defaultLatencyModel.StallP*100, months*8, runs)
	pr("%-34s %10s %10s %8s %8s | %14s %9s | %14s %9s", "rule", "median", "p95", "missed", "wrong",
		"alarms (alike)", "max ratio", "alarms (drift)", "max ratio")
	d := time.Duration(months) * 30 * 24 * time.Hour
	for i, r := range rows {
		st := detectionFigures(r.p, defaultLatencyModel, runs, uint64(1000*i+1))
		a, mr := nullAlarms(r.p, defaultLatencyModel, 8, 0.2, d, uint64(1000*i+7))
		ad, mrd := nullAlarms(r.p, drift, 8, 0.2, d, uint64(1000*i+9))
		pr("%-34s %10s %10s %8d %8d | %14d %9.2f | %14d %9.2f", r.name, st.median.Round(time.Second), st.p95.Round(time.Second),
			st.missed, st.wrong, a, mr, ad, mrd)
	}
	pr("drift: each replica's latency × exp(AR(1)), stationary sd %g, correlation time %s", drift.DriftSD, drift.DriftTau)
	t.Log("\n" + out.String())
}

func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	var n int
	if _, err := fmt.Sscan(v, &n); err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}
