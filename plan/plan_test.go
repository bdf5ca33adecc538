// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package plan

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/llmprobe/llmprobe/alerts"
	"github.com/llmprobe/llmprobe/config"
	"github.com/llmprobe/llmprobe/probe/workload"
	"github.com/llmprobe/llmprobe/regression"
)

func load(t *testing.T, yml string) *config.Config {
	t.Helper()
	cfg, err := config.Load([]byte(yml), "plan.yml")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// oneClass is a configuration of one completions target with one class.
func oneClass(rate float64, class string) string {
	return fmt.Sprintf(`workloads:
  w:
    classes:
%s
targets:
  - name: t
    url: http://127.0.0.1:1/v1
    api: completions
    model: m
    workload: w
    arrival: {rate: %g}
`, class, rate)
}

// figuresStream is the stream of regression's figures (its
// stream_test.go, independent requests): Poisson arrivals, TTFT the
// reference model's over its prompt lengths, ×change after the step,
// drawn from the figures' seeds.
type figuresStream struct {
	r      *rand.Rand
	rate   float64
	change float64
}

func (s *figuresStream) Gap() time.Duration {
	return time.Duration(s.r.ExpFloat64() / s.rate * 1e9)
}

func (s *figuresStream) Value(changed bool) float64 {
	v := regression.ReferenceTTFT(regression.ReferencePromptTokens(s.r.NormFloat64()), s.r.NormFloat64())
	if changed {
		v *= s.change
	}
	return v
}

// TestPlanMatchesFigures: for a class whose prompt lengths are the
// figures' (log-normal, median 120, p99 2048), the planned median delay
// of a +25% median TTFT step at 0.5 and 5 req/s is within 20% of the one
// measured the figures' way (regression's TestFigures row "median +25%,
// 900 samples of history": its seeds, phases and deadlines), both over
// 200 steps.
func TestPlanMatchesFigures(t *testing.T) {
	const steps = 200
	for _, rate := range []float64{0.5, 5} {
		cfg := load(t, oneClass(rate, `      - name: chat
        prompt_tokens: {dist: lognormal, median: 120, p99: 2048}
        output_tokens: 100`))
		rep, err := Plan(cfg, Options{Trials: steps, Effects: []Effect{{MetricTTFT, 0.5, 1.25}}})
		if err != nil {
			t.Fatal(err)
		}
		d := rep.Classes[0].Detection[0]
		if d.MedianSeconds == nil {
			t.Fatalf("%g req/s: no median delay: %+v", rate, d)
		}
		deadline := time.Duration(900 / rate * float64(time.Second))
		trials := make([]regression.Trial, steps)
		for i := range trials {
			seed := uint64(10000 + i)
			trials[i] = regression.Step{
				Kind: regression.Latency, Options: regression.Options{MinSpan: time.Minute},
				Series:  &figuresStream{r: rand.New(rand.NewPCG(seed, seed*0x9e3779b97f4a7c15+1)), rate: rate, change: 1.25},
				History: deadline, Horizon: 3 * deadline, Phase: time.Duration(seed*7919%60000) * time.Millisecond,
			}.Run()
		}
		fig := regression.Summarise(trials, deadline)
		ratio := *d.MedianSeconds / fig.Median.Seconds()
		t.Logf("%g req/s: planned median %.1fs (p90 %.1fs, %.1f%% missed within %s), figures' %.1fs (p90 %.1fs, %.1f%% missed within %s): ratio %.3f",
			rate, *d.MedianSeconds, *d.P90Seconds, 100*d.MissRate, fmtSeconds(d.DeadlineSeconds), fig.Median.Seconds(), fig.P90.Seconds(), 100*fig.Missed, deadline, ratio)
		if d.HistorySeconds != deadline.Seconds() {
			t.Errorf("%g req/s: history %gs, want the figures' 900 samples (%v)", rate, d.HistorySeconds, deadline)
		}
		if ratio < 0.8 || ratio > 1.2 {
			t.Errorf("%g req/s: planned median delay %.1fs, figures' %.1fs: more than 20%% apart", rate, *d.MedianSeconds, fig.Median.Seconds())
		}
	}
}

// TestTokensPerDay: the tokens a day follow the class's lengths, its
// shared prefix (a first turn is at least the prefix, the nonce and the
// template), its turns (each later turn carries the history) and its
// weight's share of the target's rate.
func TestTokensPerDay(t *testing.T) {
	cfg := load(t, `workloads:
  w:
    classes:
      - {name: single, weight: 1, prompt_tokens: 100, output_tokens: 50}
      - {name: prefixed, weight: 1, prompt_tokens: 100, output_tokens: 50, prefix: {groups: 2, tokens: 256, probability: 0.5}}
      - {name: convo, weight: 2, prompt_tokens: 100, output_tokens: 50, turns: {count: 3, user_tokens: 20}}
  e:
    classes:
      - {name: embed, prompt_tokens: 300, output_tokens: 1, batch_size: 4}
targets:
  - name: chat
    url: http://127.0.0.1:1/v1
    model: m
    workload: w
    arrival: {rate: 2}
  - name: emb
    url: http://127.0.0.1:1/v1
    api: embeddings
    model: m
    workload: e
    arrival: {rate: 0.5}
`)
	rep, err := Plan(cfg, Options{Trials: 10, Effects: []Effect{}})
	if err != nil {
		t.Fatal(err)
	}
	const day = 86400.0
	// The template prior: 5 + 5 per chat message; a later turn adds two
	// messages' 10.
	want := map[string]struct{ rate, prompt, output, cached float64 }{
		"single": {0.5, 100, 50, 0},
		// Half the first turns carry the 256-token prefix: 256 + 6
		// (nonce) + 15 (two messages) = 277 tokens at least.
		"prefixed": {0.5, 0.5*100 + 0.5*277, 50, 0.5 * 256},
		// 3 turns: 100, 100+50+20+10 = 180, 260; the history of turns 2
		// and 3 (150 and 230) is cacheable.
		"convo": {1 * 3, (100 + 180 + 260) / 3.0, 50, (150 + 230) / 3.0},
		"embed": {0.5, 4 * 300, 0, 0},
	}
	for _, c := range rep.Classes {
		w := want[c.Class]
		if !near(c.Rate, w.rate, 1e-9) {
			t.Errorf("%s: rate %g, want %g", c.Class, c.Rate, w.rate)
		}
		perReq := func(v float64) float64 { return v / (c.Rate * day) }
		if !near(perReq(c.TokensPerDay.Prompt), w.prompt, 1e-3) || !near(perReq(c.TokensPerDay.Output), w.output, 1e-3) || !near(perReq(c.TokensPerDay.CachedPrompt), w.cached, 1e-3) {
			t.Errorf("%s: per request prompt %g output %g cached %g, want %g %g %g", c.Class,
				perReq(c.TokensPerDay.Prompt), perReq(c.TokensPerDay.Output), perReq(c.TokensPerDay.CachedPrompt), w.prompt, w.output, w.cached)
		}
	}
	if len(rep.Targets) != 2 || !near(rep.Targets[0].TokensPerDay.Output, (0.5+0.5+3)*50*day, 1e-6) {
		t.Errorf("targets: %+v", rep.Targets)
	}
}

// TestTokensOfDistributions: expectations are exact for distributions
// too: a log-normal's mean, with the first turn's floor under a prefix.
func TestTokensOfDistributions(t *testing.T) {
	cfg := load(t, oneClass(1, `      - name: c
        prompt_tokens: {dist: lognormal, median: 120, p99: 2048, max: 6144}
        output_tokens: {dist: uniform, min: 64, max: 256}
        prefix: {groups: 4, tokens: 256, probability: 0.8}`))
	rep, err := Plan(cfg, Options{Trials: 10, Effects: []Effect{}})
	if err != nil {
		t.Fatal(err)
	}
	// A Monte Carlo of the same rule: max(X, 256 + 6 + 5) with
	// probability 0.8 (completions: the template's 5), else max(X, 11).
	r := rand.New(rand.NewPCG(1, 2))
	sigma := math.Log(2048.0/120) / 2.3263478740408408
	var sum float64
	const n = 4000000
	for range n {
		x := min(120*math.Exp(sigma*r.NormFloat64()), 6144)
		if r.Float64() < 0.8 {
			x = max(x, 267)
		} else {
			x = max(x, 11)
		}
		sum += x
	}
	c := rep.Classes[0]
	got, mc := c.TokensPerDay.Prompt/86400, sum/n
	t.Logf("prompt tokens per request: planned %.2f, Monte Carlo %.2f", got, mc)
	if !near(got, mc, 0.003) {
		t.Errorf("prompt tokens per request %.2f, Monte Carlo %.2f", got, mc)
	}
	if out := c.TokensPerDay.Output / 86400; !near(out, 160, 1e-3) {
		t.Errorf("output tokens per request %.2f, want 160", out)
	}
}

func near(got, want, rel float64) bool {
	if want == 0 {
		return math.Abs(got) < 1e-9
	}
	return math.Abs(got-want) <= rel*math.Abs(want)
}

// TestCost: per million tokens with a cached price, and a self-hosted
// server's GPU-hours (servermetrics' cost per million generated tokens).
func TestCost(t *testing.T) {
	cfg := load(t, `workloads:
  w:
    classes:
      - {name: c, prompt_tokens: 1000, output_tokens: 100, prefix: {groups: 1, tokens: 600, probability: 1}}
targets:
  - name: hosted
    url: http://127.0.0.1:1/v1
    api: completions
    model: m
    workload: w
    arrival: {rate: 1}
    pricing: {input_per_million: 2, cached_input_per_million: 0.5, output_per_million: 8}
  - name: self
    url: http://127.0.0.1:1/v1
    api: completions
    model: m
    workload: w
    arrival: {rate: 1}
    pricing: {gpu_price_per_hour: 3, gpus: 2, generated_tokens_per_second: 1000}
  - name: free
    url: http://127.0.0.1:1/v1
    api: completions
    model: m
    workload: w
    arrival: {rate: 1}
`)
	rep, err := Plan(cfg, Options{Trials: 10, Effects: []Effect{}})
	if err != nil {
		t.Fatal(err)
	}
	const day = 86400.0
	hosted := (400*2 + 600*0.5 + 100*8) * day / 1e6
	// 2 GPUs at 3 an hour for 1000 tokens a second: 6/3.6M a token.
	self := 100 * day * 6 / 3600 / 1000
	for i, want := range []float64{hosted, self} {
		if c := rep.Classes[i].CostPerDay; c == nil || !near(*c, want, 1e-9) {
			t.Errorf("%s: cost %v, want %g", rep.Classes[i].Target, c, want)
		}
		if c := rep.Targets[i].CostPerDay; c == nil || !near(*c, want, 1e-9) {
			t.Errorf("target %s: cost %v, want %g", rep.Targets[i].Target, c, want)
		}
	}
	if rep.Classes[2].CostPerDay != nil || rep.Targets[2].Notes[0] != noPricing {
		t.Errorf("no pricing: %+v", rep.Targets[2])
	}
}

// TestSLOWindows: at 0.05 req/s the fast window pair holds enough
// requests; at 0.005 req/s its hour holds 18, fewer than the 20 it needs,
// and an objective of 0.9 can never burn 14.4 times its budget.
func TestSLOWindows(t *testing.T) {
	for _, c := range []struct {
		rate, objective float64
		fastFires       bool
		why             string
	}{
		{0.05, 0.99, true, ""},
		{0.005, 0.99, false, "its 1h window holds 18 requests, fewer than the 20 it needs"},
		{1, 0.9, false, "a burn rate over 14.4 needs more than every request bad (the budget is 0.1)"},
	} {
		cfg := load(t, oneClass(c.rate, fmt.Sprintf(`      - {name: c, prompt_tokens: 10, output_tokens: 10, slo: {objective: %g, ttft: 1s}}`, c.objective)))
		rep, err := Plan(cfg, Options{Trials: 4, Effects: []Effect{}})
		if err != nil {
			t.Fatal(err)
		}
		s := rep.Classes[0].SLO
		if s == nil || len(s.Windows) != 4 {
			t.Fatalf("%g req/s: %+v", c.rate, s)
		}
		w := s.Windows[0]
		if w.CanFire != c.fastFires || w.Why != c.why || w.LongSeconds != 3600 || w.ShortSeconds != 300 || w.BurnRate != 14.4 || !near(w.LongRequests, 3600*c.rate, 1e-9) {
			t.Errorf("%g req/s objective %g: fast window %+v", c.rate, c.objective, w)
		}
		if c.fastFires && !near(w.MinBadRatio, math.Max(14.4*(1-c.objective), 5/(3600*c.rate)), 1e-9) {
			t.Errorf("%g req/s: min bad ratio %g", c.rate, w.MinBadRatio)
		}
	}
	// Another mixin's windows and guards are the ones judged.
	a := alerts.DefaultConfig()
	a.MinRequests = 200
	cfg := load(t, oneClass(0.05, `      - {name: c, prompt_tokens: 10, output_tokens: 10, slo: {objective: 0.99}}`))
	rep, err := Plan(cfg, Options{Trials: 4, Effects: []Effect{}, Alerts: &a})
	if err != nil {
		t.Fatal(err)
	}
	if w := rep.Classes[0].SLO.Windows[0]; w.CanFire {
		t.Errorf("min_requests 200, 180 requests an hour, and it fires: %+v", w)
	}
}

// TestGoalRate: the lowest rate found for a goal meets it when the target
// is planned at the target rate it names, and the current rate's verdict
// agrees with the detection figure.
func TestGoalRate(t *testing.T) {
	g, err := ParseGoal("ttft:+50%:10m")
	if err != nil {
		t.Fatal(err)
	}
	class := `      - {name: a, weight: 3, prompt_tokens: {dist: lognormal, median: 120, p99: 2048}, output_tokens: 50}
      - {name: b, weight: 1, prompt_tokens: {dist: lognormal, median: 120, p99: 2048}, output_tokens: 50}`
	rep, err := Plan(load(t, oneClass(1, class)), Options{Trials: 60, Effects: []Effect{}, Goals: []Goal{g}})
	if err != nil {
		t.Fatal(err)
	}
	b := rep.Classes[1]
	gr := b.Goals[0]
	if gr.Rate == nil || gr.TargetRate == nil || gr.TokensPerDay == nil {
		t.Fatalf("no rate: %+v", gr)
	}
	t.Logf("class b: lowest %g req/s, the target at %g req/s; the target's goal %g req/s", *gr.Rate, *gr.TargetRate, *rep.Targets[0].Goals[0].Rate)
	if !near(*gr.TargetRate, *gr.Rate*4, 0.01) {
		t.Errorf("target rate %g for a quarter of the arrivals at %g", *gr.TargetRate, *gr.Rate)
	}
	// The target's goal is its slowest class's: b's, a quarter of it.
	if tg := rep.Targets[0].Goals[0]; tg.Rate == nil || *tg.Rate != *gr.TargetRate {
		t.Errorf("target goal %+v, want b's %g", tg, *gr.TargetRate)
	}
	// At the rate found the goal is met; at half of it, it is not. The
	// steps at another rate are the same draws spread over other times,
	// whose alarms fall at other evaluations: one step more or less may
	// miss.
	for _, c := range []struct {
		rate float64
		met  bool
	}{{*gr.TargetRate, true}, {*gr.TargetRate / 2, false}} {
		at, err := Plan(load(t, oneClass(c.rate, class)), Options{Trials: 60, Effects: []Effect{}, Goals: []Goal{g}})
		if err != nil {
			t.Fatal(err)
		}
		d := at.Classes[1].Detection[0]
		t.Logf("the target at %g req/s: %.1f%% missed within %gs", c.rate, 100*d.MissRate, d.DeadlineSeconds)
		if d.DeadlineSeconds != 600 || c.met && d.MissRate > 1-GoalShare+1.0/60+1e-9 || !c.met && d.MissRate <= 1-GoalShare {
			t.Errorf("the target at %g req/s: %+v, goal %+v", c.rate, d, at.Classes[1].Goals[0])
		}
	}
}

// TestObservedShape: with enough of the daemon's samples a class is
// planned on them; a server whose TTFT barely varies shows a step sooner
// than the reference model's wide one. With too few, the shape is assumed
// and says why.
func TestObservedShape(t *testing.T) {
	cfg := load(t, oneClass(5, `      - {name: c, prompt_tokens: {dist: lognormal, median: 120, p99: 2048}, output_tokens: 100}`))
	r := rand.New(rand.NewPCG(3, 4))
	s := &Samples{Requests: 300}
	for range 300 {
		v := 0.04 * math.Exp(0.01*r.NormFloat64())
		s.TTFT, s.TPOT, s.E2E = append(s.TTFT, v), append(s.TPOT, v/4), append(s.E2E, 10*v)
	}
	eff := []Effect{{MetricTTFT, 0.5, 1.25}}
	obs, err := Plan(cfg, Options{Trials: 40, Effects: eff, Observed: map[Key]*Samples{{"t", "c"}: s}})
	if err != nil {
		t.Fatal(err)
	}
	ref, err := Plan(cfg, Options{Trials: 40, Effects: eff})
	if err != nil {
		t.Fatal(err)
	}
	o, a := obs.Classes[0], ref.Classes[0]
	if o.Shape != ShapeObserved || a.Shape != ShapeAssumed {
		t.Fatalf("shapes %s, %s", o.Shape, a.Shape)
	}
	om, am := *o.Detection[0].MedianSeconds, *a.Detection[0].MedianSeconds
	t.Logf("+25%% at 5 req/s: observed narrow %.0fs, assumed %.0fs", om, am)
	if !(om < am) || om > 90 {
		t.Errorf("a narrow server's +25%% is not seen sooner: observed %.0fs, assumed %.0fs", om, am)
	}
	few := &Samples{Requests: 5, TTFT: s.TTFT[:5]}
	rep, err := Plan(cfg, Options{Trials: 4, Effects: eff, Observed: map[Key]*Samples{{"t", "c"}: few}})
	if err != nil {
		t.Fatal(err)
	}
	if c := rep.Classes[0]; c.Shape != ShapeAssumed || len(c.Notes) != 1 || !strings.Contains(c.Notes[0], "fewer than 20 recent samples") {
		t.Errorf("few samples: %s %q", c.Shape, c.Notes)
	}
}

// TestDeterministic: a plan is the same whatever the number of workers.
func TestDeterministic(t *testing.T) {
	cfg := load(t, oneClass(2, `      - {name: c, prompt_tokens: {dist: lognormal, median: 300, p99: 3000}, output_tokens: 80}`))
	o := Options{Trials: 12, Effects: []Effect{{MetricTTFT, 0.5, 1.5}, {MetricErrors, 0, 5}}}
	o.Workers = 1
	one, err := Plan(cfg, o)
	if err != nil {
		t.Fatal(err)
	}
	o.Workers = 3
	three, err := Plan(cfg, o)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(one, three) {
		t.Errorf("1 worker:\n%+v\n3 workers:\n%+v", one, three)
	}
}

// TestJSONShape: the document has the shape: classes of target,
// class, rate, shape, tokens_per_day {prompt, output}, cost_per_day and
// detection entries of metric, quantile (null for errors), effect,
// median_seconds, p90_seconds and miss_rate.
func TestJSONShape(t *testing.T) {
	cfg := load(t, oneClass(5, `      - {name: c, prompt_tokens: 100, output_tokens: 20}`))
	rep, err := Plan(cfg, Options{Trials: 6})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(rep); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Classes []map[string]json.RawMessage `json:"classes"`
	}
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	c := doc.Classes[0]
	for _, k := range []string{"target", "class", "rate", "shape", "tokens_per_day", "cost_per_day", "detection"} {
		if _, ok := c[k]; !ok {
			t.Errorf("class has no %q: %s", k, buf.String())
		}
	}
	if string(c["target"]) != `"t"` || string(c["shape"]) != `"assumed"` || string(c["cost_per_day"]) != "null" {
		t.Errorf("class: %s", buf.String())
	}
	var tok map[string]float64
	if err := json.Unmarshal(c["tokens_per_day"], &tok); err != nil || tok["prompt"] <= 0 || tok["output"] <= 0 {
		t.Errorf("tokens_per_day %s: %v", c["tokens_per_day"], err)
	}
	var det []map[string]any
	if err := json.Unmarshal(c["detection"], &det); err != nil || len(det) != len(DefaultEffects) {
		t.Fatalf("detection %s: %v", c["detection"], err)
	}
	for i, d := range det {
		e := DefaultEffects[i]
		for _, k := range []string{"metric", "quantile", "effect", "median_seconds", "p90_seconds", "miss_rate"} {
			if _, ok := d[k]; !ok {
				t.Errorf("detection %d has no %q", i, k)
			}
		}
		if d["metric"] != e.Metric || d["effect"] != e.Effect {
			t.Errorf("detection %d: %v", i, d)
		}
		switch q := d["quantile"]; {
		case e.Metric == MetricErrors && q != nil:
			t.Errorf("errors quantile %v, want null", q)
		case e.Metric != MetricErrors && q != e.Quantile:
			t.Errorf("%s quantile %v, want %g", e.Metric, q, e.Quantile)
		}
	}
}

// TestMetricsPlanned: an embeddings target is not streamed, so only its
// E2E and errors are planned; a class whose answers are one token long
// has no TPOT; a class with detection off has no figures, and says so.
func TestMetricsPlanned(t *testing.T) {
	cfg := load(t, `workloads:
  e:
    classes:
      - {name: embed, prompt_tokens: 300, output_tokens: 1}
  w:
    classes:
      - {name: short, prompt_tokens: 100, output_tokens: 1}
      - {name: off, prompt_tokens: 100, output_tokens: 50, regression: {enabled: false}}
targets:
  - name: emb
    url: http://127.0.0.1:1/v1
    api: embeddings
    model: m
    workload: e
    arrival: {rate: 1}
  - name: chat
    url: http://127.0.0.1:1/v1
    model: m
    workload: w
    arrival: {rate: 1}
`)
	rep, err := Plan(cfg, Options{Trials: 3})
	if err != nil {
		t.Fatal(err)
	}
	metrics := func(c Class) (out []string) {
		for _, d := range c.Detection {
			out = append(out, d.Metric)
		}
		return out
	}
	if got := strings.Join(metrics(rep.Classes[0]), ","); got != "e2e,errors" {
		t.Errorf("embeddings: %s", got)
	}
	if got := strings.Join(metrics(rep.Classes[1]), ","); got != "ttft,ttft,ttft,e2e,errors" {
		t.Errorf("one-token answers: %s", got)
	}
	if c := rep.Classes[2]; len(c.Detection) != 0 || len(c.Notes) != 1 || c.Notes[0] != "regression detection is off for this class" {
		t.Errorf("detection off: %+v", c)
	}
}

// TestConversationsInterleaved: a multi-turn class's simulated requests
// interleave many conversations, as its real requests do (each turn comes
// an answer and a think time after the last), so successive requests'
// prompts are nearly uncorrelated, while every turn still carries its
// history: the mean prompt is the tokens' planned mean.
func TestConversationsInterleaved(t *testing.T) {
	cfg := load(t, oneClass(1, `      - {name: c, prompt_tokens: {dist: lognormal, median: 500, p99: 4000}, output_tokens: 200, turns: {count: 10, user_tokens: 100}}`))
	rep, err := Plan(cfg, Options{Trials: 2, Effects: []Effect{}})
	if err != nil {
		t.Fatal(err)
	}
	w := workload.NewWorkload(cfg.Workloads["w"])
	l := &lengths{c: w.Classes[0], api: cfg.Targets[0].API}
	r := rand.New(rand.NewPCG(1, 2))
	const n = 200000
	xs := make([]float64, n)
	var mean float64
	for i := range xs {
		p, _ := l.next(r)
		xs[i] = float64(p)
		mean += xs[i] / n
	}
	var c0, c1 float64
	for i := range xs {
		c0 += (xs[i] - mean) * (xs[i] - mean)
		if i > 0 {
			c1 += (xs[i] - mean) * (xs[i-1] - mean)
		}
	}
	planned := rep.Classes[0].TokensPerDay.Prompt / (rep.Classes[0].Rate * 86400)
	t.Logf("lag-1 autocorrelation %.3f; mean prompt %.1f, planned %.1f", c1/c0, mean, planned)
	if rho := c1 / c0; rho > 0.1 {
		t.Errorf("successive prompts correlate %.3f: one conversation after the other", rho)
	}
	if !near(mean, planned, 0.01) {
		t.Errorf("mean prompt %.1f, planned %.1f", mean, planned)
	}
}
