// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package slo

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
)

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

func TestJudge(t *testing.T) {
	o := &Objective{Ratio: 0.99, TTFT: model.Duration(ms(500)), TPOT: model.Duration(ms(60)), E2E: model.Duration(30 * time.Second)}
	for _, c := range []struct {
		name  string
		r     Request
		broke []Bound
	}{
		{"within every bound", Request{Succeeded: true, TTFT: ms(200), TPOT: ms(40), OutputTokens: 10, E2E: ms(600)}, nil},
		{"at the bounds is good", Request{Succeeded: true, TTFT: ms(500), TPOT: ms(60), OutputTokens: 10, E2E: 30 * time.Second}, nil},
		{"slow first token", Request{Succeeded: true, TTFT: ms(501), TPOT: ms(40), OutputTokens: 10, E2E: ms(900)}, []Bound{BoundTTFT}},
		{"slow tokens and slow whole", Request{Succeeded: true, TTFT: ms(100), TPOT: ms(61), OutputTokens: 1000, E2E: 61 * time.Second}, []Bound{BoundTPOT, BoundE2E}},
		{"one token: no TPOT to judge", Request{Succeeded: true, TTFT: ms(100), TPOT: time.Hour, OutputTokens: 1, E2E: ms(100)}, nil},
		{"failed: error only, whatever its latency", Request{Succeeded: false, TTFT: time.Minute, E2E: time.Hour}, []Bound{BoundError}},
	} {
		v := o.Judge(c.r)
		if got := v.Broken(); !slices.Equal(got, c.broke) || v.Good != (len(c.broke) == 0) {
			t.Errorf("%s: good=%v broke %v, want broke %v", c.name, v.Good, got, c.broke)
		}
	}
	// An availability objective (no latency bound): only failures are bad.
	avail := &Objective{Ratio: 0.999}
	if v := avail.Judge(Request{Succeeded: true, TTFT: time.Hour, E2E: time.Hour}); !v.Good {
		t.Errorf("availability objective: a slow success is bad: %v", v.Broken())
	}
}

func TestResolve(t *testing.T) {
	if Resolve(nil, nil) != nil {
		t.Fatal("no objective resolved to one")
	}
	target := &Objective{Ratio: 0.995, TTFT: model.Duration(ms(500)), TPOT: model.Duration(ms(60))}
	class := &Objective{TTFT: model.Duration(2 * time.Second), E2E: model.Duration(time.Minute)}
	got := Resolve(target, class)
	want := Objective{Ratio: 0.995, TTFT: model.Duration(2 * time.Second), TPOT: model.Duration(ms(60)), E2E: model.Duration(time.Minute), Window: DefaultWindow}
	if *got != want {
		t.Errorf("Resolve(target, class) = %+v, want %+v", *got, want)
	}
	if got := Resolve(nil, class); got.Ratio != DefaultRatio || got.Window != DefaultWindow {
		t.Errorf("defaults not applied: %+v", *got)
	}
	if *target != (Objective{Ratio: 0.995, TTFT: model.Duration(ms(500)), TPOT: model.Duration(ms(60))}) {
		t.Errorf("Resolve changed its input: %+v", *target)
	}
}

func TestValidate(t *testing.T) {
	if ps := (&Objective{}).Validate(); len(ps) != 0 {
		t.Errorf("an empty objective is invalid: %v", ps)
	}
	ps := (&Objective{Ratio: 1, TTFT: -1, TPOT: -1, Window: model.Duration(time.Hour)}).Validate()
	var fields []string
	for _, p := range ps {
		fields = append(fields, p.Field)
	}
	if !slices.Equal(fields, []string{"objective", "ttft", "tpot", "window"}) {
		t.Errorf("problems %v, want objective, ttft, tpot, window", ps)
	}
	for _, r := range []float64{0.5, 0.99, 0.99999} {
		if ps := (&Objective{Ratio: r}).Validate(); len(ps) != 0 {
			t.Errorf("objective %v refused: %v", r, ps)
		}
	}
}

func TestString(t *testing.T) {
	for o, want := range map[Objective]string{
		{Ratio: 0.99, TTFT: model.Duration(ms(500)), TPOT: model.Duration(ms(60))}: "99% of requests with TTFT ≤ 500ms, TPOT ≤ 60ms",
		{Ratio: 0.999}: "99.9% of requests succeeding",
		{Ratio: 0.9995, E2E: model.Duration(30 * time.Second)}: "99.95% of requests with E2E ≤ 30s",
	} {
		if got := o.String(); got != want {
			t.Errorf("%+v: %q, want %q", o, got, want)
		}
	}
}

func TestParseSpec(t *testing.T) {
	s, err := ParseSpec("ttft=500ms, tpot=60ms,objective=0.995,tpot_p99=100ms,ttft_p999=2s,e2e_p50=1s")
	if err != nil {
		t.Fatal(err)
	}
	want := Objective{Ratio: 0.995, TTFT: model.Duration(ms(500)), TPOT: model.Duration(ms(60)), Window: DefaultWindow}
	if s.Objective == nil || *s.Objective != want {
		t.Errorf("objective %+v, want %+v", s.Objective, want)
	}
	wantQ := []QuantileBound{{"tpot", 0.99, ms(100)}, {"ttft", 0.999, 2 * time.Second}, {"e2e", 0.5, time.Second}}
	if !slices.Equal(s.Quantiles, wantQ) {
		t.Errorf("quantiles %+v, want %+v", s.Quantiles, wantQ)
	}
	if got := s.Quantiles[1].String(); got != "TTFT p99.9 ≤ 2s" {
		t.Errorf("String() = %q", got)
	}

	only, err := ParseSpec("tpot_p99=100ms")
	if err != nil || only.Objective != nil || len(only.Quantiles) != 1 {
		t.Errorf("quantile-only spec: %+v, %v", only, err)
	}

	// Every problem at once, each naming its item.
	_, err = ParseSpec("ttft=fast,objective=1,foo=1s,tpot_p0=1s,tpot_p99=-1s,e2e,ttft=1s")
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{`"ttft=fast"`, `"objective=1"`, `unknown key "foo"`, `"p0"`, `"tpot_p99=-1s"`, `"e2e": want KEY=VALUE`, `"ttft=1s": ttft is given twice`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %s:\n%v", want, err)
		}
	}
	if _, err := ParseSpec(" , "); err == nil || !strings.Contains(err.Error(), "no bound given") {
		t.Errorf("empty spec: %v", err)
	}
}
