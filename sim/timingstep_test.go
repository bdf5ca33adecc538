// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestTimingStepsValidation(t *testing.T) {
	steps := func(s ...TimingStep) Config {
		c := DefaultConfig()
		c.TimingSteps = s
		return c
	}
	tooMany := make([]TimingStep, maxTimingSteps+1)
	for i := range tooMany {
		tooMany[i] = TimingStep{After: time.Duration(i) * time.Second, Factor: 2}
	}
	zero := steps(TimingStep{After: time.Second, Factor: 5})
	zero.ZeroLatency = true
	for name, tc := range map[string]struct {
		cfg  Config
		want []string
	}{
		"negative after":  {steps(TimingStep{After: -time.Second, Factor: 2}), []string{"timing_steps[0].after: must not be negative, got -1s"}},
		"same after":      {steps(TimingStep{After: time.Second, Factor: 2}, TimingStep{After: time.Second, Factor: 1}), []string{"timing_steps[1].after: must be later than timing_steps[0].after (1s), got 1s"}},
		"decreasing":      {steps(TimingStep{After: 2 * time.Second, Factor: 2}, TimingStep{After: time.Second, Factor: 1}), []string{"timing_steps[1].after: must be later than timing_steps[0].after (2s), got 1s"}},
		"zero factor":     {steps(TimingStep{After: time.Second}), []string{"timing_steps[0].factor: must be greater than 0 and at most 1000, got 0"}},
		"negative factor": {steps(TimingStep{Factor: -1}), []string{"timing_steps[0].factor: must be greater than 0 and at most 1000, got -1"}},
		"NaN factor":      {steps(TimingStep{Factor: math.NaN()}), []string{"timing_steps[0].factor: must be greater than 0 and at most 1000, got NaN"}},
		"huge factor":     {steps(TimingStep{Factor: 1001}), []string{"timing_steps[0].factor: must be greater than 0 and at most 1000, got 1001"}},
		"too many":        {steps(tooMany...), []string{"timing_steps: at most 64 steps, got 65"}},
		"zero latency":    {zero, []string{"timing_steps: cannot be combined with zero_latency"}},
		"two problems":    {steps(TimingStep{After: time.Second, Factor: 0}, TimingStep{After: 0, Factor: 2}), []string{"timing_steps[0].factor:", "timing_steps[1].after:"}},
	} {
		err := tc.cfg.Validate()
		if err == nil {
			t.Errorf("%s: no error", name)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q, want it to contain %q", name, err, w)
			}
		}
	}
	if c := steps(TimingStep{After: 0, Factor: 0.5}, TimingStep{After: time.Minute, Factor: 1000}); c.Validate() != nil {
		t.Errorf("valid steps rejected: %v", c.Validate())
	}
}

func TestTimingStepsYAML(t *testing.T) {
	cfg, err := parseConfig([]byte("timing_steps:\n  - after: 2m\n    factor: 5\n  - {after: 12m, factor: 1}\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := []TimingStep{{After: 2 * time.Minute, Factor: 5}, {After: 12 * time.Minute, Factor: 1}}
	if !slices.Equal(cfg.TimingSteps, want) {
		t.Errorf("timing_steps %+v, want %+v", cfg.TimingSteps, want)
	}
	if cfg, err := parseConfig([]byte("timing_steps: []\n")); err != nil || cfg.TimingSteps != nil {
		t.Errorf("empty timing_steps: %v, %+v", err, cfg.TimingSteps)
	}
	for doc, want := range map[string]string{
		"timing_steps:\n  - {after: 2m, factor: 5}\n  - {after: 1m, factor: 1}\n": "line 3: timing_steps[1].after: must be later than timing_steps[0].after (2m0s), got 1m0s",
		"timing_steps:\n  - after: 1s\n    factor: 0\n":                           "line 3: timing_steps[0].factor: must be greater than 0",
		"zero_latency: true\ntiming_steps: [{after: 1s, factor: 2}]\n":            "line 2: timing_steps: cannot be combined with zero_latency",
		"timing_steps:\n  - {after: 1s, facter: 2}\n":                             "field facter not found",
		"timing_steps:\n  - {after: 30, factor: 2}\n":                             "cannot unmarshal !!int `30` into time.Duration",
		"timing_steps: {after: 1s}\n":                                             "cannot unmarshal !!map into []sim.TimingStep",
	} {
		_, err := parseConfig([]byte(doc))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want %q", doc, err, want)
		}
	}
}

func TestParseTimingStep(t *testing.T) {
	for in, want := range map[string]TimingStep{
		"30s:5":    {After: 30 * time.Second, Factor: 5},
		"2m:0.5":   {After: 2 * time.Minute, Factor: 0.5},
		" 0s:1 ":   {After: 0, Factor: 1},
		"1h30m:10": {After: 90 * time.Minute, Factor: 10},
	} {
		got, err := ParseTimingStep(in)
		if err != nil || got != want {
			t.Errorf("ParseTimingStep(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for in, want := range map[string]string{
		"30s":    "want AFTER:FACTOR",
		"30:5":   "after: time: missing unit",
		"30s:x":  `factor "x" is not a number`,
		"":       "want AFTER:FACTOR",
		"1s:2:3": `factor "2:3" is not a number`,
	} {
		if _, err := ParseTimingStep(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseTimingStep(%q): error %v, want %q", in, err, want)
		}
	}
}

func TestTimingScheduleFactorAt(t *testing.T) {
	start := time.Now()
	s := newTimingSchedule([]TimingStep{{After: time.Second, Factor: 5}, {After: 3 * time.Second, Factor: 0.5}}, start)
	for off, want := range map[time.Duration]float64{
		0: 1, 999 * time.Millisecond: 1, time.Second: 5, 2 * time.Second: 5,
		3 * time.Second: 0.5, time.Hour: 0.5, -time.Second: 1,
	} {
		if got := s.factorAt(start.Add(off)); got != want {
			t.Errorf("factor at %v: %v, want %v", off, got, want)
		}
	}
	if got := scaleDuration(10*time.Millisecond, 5); got != 50*time.Millisecond {
		t.Errorf("scaleDuration: %v", got)
	}
	if got := scaleDuration(time.Hour, 1000); got != maxStepDuration {
		t.Errorf("scaleDuration capped: %v", got)
	}
}

// TestTimingStepSlowsAtItsInstant runs a server whose timing model is 5×
// slower from 300 ms after its start to 1.4 s, and checks that a stream
// running across the instant switches from 10 ms to 50 ms per token
// there, that TTFT is 5× longer inside the window and back to normal
// after it, and that llmprobe_sim_timing_factor shows the step.
func TestTimingStepSlowsAtItsInstant(t *testing.T) {
	const (
		at     = 300 * time.Millisecond
		back   = 1400 * time.Millisecond
		factor = 5
		decode = 10 * time.Millisecond
	)
	cfg := DefaultConfig()
	cfg.EOSProbability = 0
	cfg.PrefillBase = 20 * time.Millisecond
	cfg.PrefillPerToken = 0
	cfg.DecodeBase = decode
	cfg.DecodePerSeq = 0
	cfg.TimingSteps = []TimingStep{{After: at, Factor: factor}, {After: back, Factor: 1}}
	before := time.Now()
	base, _ := startSim(t, cfg)
	after := time.Now() // the server started within [before, after]
	url := base + "/v1/completions"
	gauge := `llmprobe_sim_timing_factor{model_name="sim-model"}`
	if v := metricValue(t, scrape(t, base), gauge); v != 1 && time.Now().Before(before.Add(at)) {
		t.Errorf("timing factor %v before the step, want 1", v)
	}

	// TTFT before the step.
	pre := stream(t, url, completionBody("before", 1))
	// A stream from ~50 ms: ~24 tokens at 10 ms before the instant, then
	// 6 at 50 ms.
	r := stream(t, url, completionBody("across the step", 30))
	if !r.done || len(r.tokenAt) != 30 {
		t.Fatalf("stream across the step: done %v, %d tokens, %v", r.done, len(r.tokenAt), r.readErr)
	}
	if time.Since(before) >= back {
		t.Skipf("the machine is too slow for this test: the stream ended after %v", time.Since(before))
	}
	var short, long []time.Duration
	for i := 1; i < len(r.tokenAt); i++ {
		gap := r.tokenAt[i].Sub(r.tokenAt[i-1])
		switch {
		case r.tokenAt[i].Before(before.Add(at)):
			short = append(short, gap) // its step started before the instant
		case r.tokenAt[i-1].After(after.Add(at + 30*time.Millisecond)):
			long = append(long, gap) // its step started after the instant
		}
	}
	if len(short) < 10 || len(long) < 4 {
		t.Skipf("the machine is too slow for this test: %d gaps before the step, %d after, the stream did not span it as planned (tokens at %v)", len(short), len(long), offsets(r.tokenAt, before))
	}
	ms, ml := median(short), median(long)
	if ms > 2*decode || ml < factor*decode*8/10 || ml > factor*decode*3 {
		t.Errorf("median gap %v before the step, %v after; want about %v and %v", ms, ml, decode, factor*decode)
	}
	// Where the stream switched: the split that best separates short
	// gaps (< 4 × decode) from long ones (5 × decode, or a little less
	// right after a late step, as deadlines are absolute). The token before the first long
	// gap ended the last step that started before the instant.
	best, bestErr := 0, len(r.tokenAt)
	for k := 1; k < len(r.tokenAt); k++ {
		errs := 0
		for i := 1; i < len(r.tokenAt); i++ {
			isLong := r.tokenAt[i].Sub(r.tokenAt[i-1]) >= 4*decode
			if isLong != (i >= k) {
				errs++
			}
		}
		if errs < bestErr {
			best, bestErr = k, errs
		}
	}
	switchAt := r.tokenAt[best-1]
	if switchAt.Before(before.Add(at)) || switchAt.After(after.Add(at+6*decode)) {
		t.Errorf("the stream slowed down at %v after the start, want at %v (just after the last normal step; tokens at %v)",
			switchAt.Sub(before), at, offsets(r.tokenAt, before))
	}

	// Inside the window: the gauge shows the factor, TTFT is 5× longer.
	if v := metricValue(t, scrape(t, base), gauge); v != factor && time.Since(before) < back {
		t.Errorf("timing factor %v inside the window, want %v", v, factor)
	}
	slow := stream(t, url, completionBody("slow", 3))
	if time.Since(before) >= back {
		t.Skipf("the machine is too slow for this test: the second request ended after %v", time.Since(before))
	}
	const idleTTFT = 30 * time.Millisecond // prefill_base + decode_base
	if slow.ttft() < factor*idleTTFT*95/100 || slow.ttft() > 3*factor*idleTTFT {
		t.Errorf("TTFT inside the window %v, want about %v", slow.ttft(), factor*idleTTFT)
	}
	if before := min(pre.ttft(), r.ttft()); before*2 > slow.ttft() {
		t.Errorf("TTFT before the step %v, inside the window %v: want about 5× longer", before, slow.ttft())
	}
	t.Logf("median gap %v before the step, %v after; switched %v after the start; TTFT %v before, %v inside the window",
		ms, ml, switchAt.Sub(before).Round(time.Millisecond), min(pre.ttft(), r.ttft()), slow.ttft())
	if gap := slow.tokenAt[2].Sub(slow.tokenAt[0]) / 2; gap < factor*decode*8/10 {
		t.Errorf("TPOT inside the window %v, want about %v", gap, factor*decode)
	}

	// After the second step: back to normal.
	time.Sleep(time.Until(after.Add(back + 10*time.Millisecond)))
	if v := metricValue(t, scrape(t, base), gauge); v != 1 {
		t.Errorf("timing factor %v after the second step, want 1", v)
	}
	normal := stream(t, url, completionBody("normal again", 3))
	if normal.ttft()*2 > slow.ttft() {
		t.Errorf("TTFT after the window %v, inside it %v: want about 5× shorter", normal.ttft(), slow.ttft())
	}
}

// offsets renders instants relative to start, for failure messages.
func offsets(ts []time.Time, start time.Time) []time.Duration {
	out := make([]time.Duration, len(ts))
	for i, t := range ts {
		out[i] = t.Sub(start).Round(time.Millisecond)
	}
	return out
}
