// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package harness

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/llmprobe/llmprobe/config"
)

// defaultJudgement is global.saturation's defaults, as documented: 50 ms
// lag, 1%, 2% shortfall, 5 events, 10 ms inflation.
var defaultJudgement = NewJudgement(config.DefaultGlobal.Saturation)

func TestJudgementDefaults(t *testing.T) {
	want := Judgement{maxLag: 50 * time.Millisecond, maxLateRatio: 0.01, maxShortfall: 0.02, minEvidence: 5, maxInflation: 10 * time.Millisecond}
	if defaultJudgement != want {
		t.Fatalf("defaults %+v, documented %+v", defaultJudgement, want)
	}
}

// TestJudgeByCounts: the rules at the rates the daemon runs at and under
// load, on window figures (the loopback tests drive the real runner).
func TestJudgeByCounts(t *testing.T) {
	min := time.Minute
	for _, tc := range []struct {
		name       string
		w          WindowStats
		h          Stats
		reasons    []SaturationReason
		overloaded bool
	}{
		{"0.2/s, one slow first connection", WindowStats{Span: min, Scheduled: 12, Sent: 12, Late: 1}, Stats{}, nil, false},
		{"1/s, one GC pause", WindowStats{Span: min, Scheduled: 60, Sent: 60, Late: 1}, Stats{}, nil, false},
		{"10/s, one 100 ms stall", WindowStats{Span: min, Scheduled: 600, Sent: 600, Late: 2}, Stats{}, nil, false},
		{"1/s, every send late", WindowStats{Span: 5 * time.Second, Scheduled: 5, Sent: 5, Late: 5}, Stats{}, []SaturationReason{ReasonLateSends}, false},
		{"3000/s, 10 s into an overload", WindowStats{Span: min, Scheduled: 180000, Sent: 175000, Late: 30000, DroppedLate: 5000}, Stats{},
			[]SaturationReason{ReasonLateSends, ReasonLateDrops}, false},
		{"3000/s, a burst of 0.5% late", WindowStats{Span: min, Scheduled: 180000, Sent: 180000, Late: 900}, Stats{}, nil, false},
		{"slow target: 28% over max_inflight", WindowStats{Span: min, Scheduled: 1000, Sent: 720, DroppedInflight: 280}, Stats{}, nil, true},
		{"slow target at 0.2/s: one drop", WindowStats{Span: min, Scheduled: 12, Sent: 11, DroppedInflight: 1}, Stats{}, nil, false},
		{"the process wakes late", WindowStats{Span: min, Scheduled: 60, Sent: 60},
			Stats{Span: min, WakeEvents: 6000, WakeOver: 300, WakeP99: 25 * time.Millisecond}, []SaturationReason{ReasonWakeLatency}, false},
		{"the process wakes late once", WindowStats{Span: min, Scheduled: 60, Sent: 60},
			Stats{Span: min, WakeEvents: 6000, WakeOver: 3}, nil, false},
		{"Go scheduler starved", WindowStats{Span: min, Scheduled: 60, Sent: 60},
			Stats{Span: min, SchedEvents: 10000, SchedOver: 500, SchedP99: 30 * time.Millisecond}, []SaturationReason{ReasonSchedLatency}, false},
		{"Go scheduler: a few slow wake-ups", WindowStats{Span: min, Scheduled: 60, Sent: 60},
			Stats{Span: min, SchedEvents: 10000, SchedOver: 20}, nil, false},
		{"CPU contention", WindowStats{Span: min, Scheduled: 60, Sent: 60},
			Stats{Span: min, HasSchedstat: true, Timeslices: 5000, RunqueueWait: 15 * time.Millisecond}, []SaturationReason{ReasonCPUContention}, false},
		{"CPU contention below the bound", WindowStats{Span: min, Scheduled: 60, Sent: 60},
			Stats{Span: min, HasSchedstat: true, Timeslices: 5000, RunqueueWait: 2 * time.Millisecond}, nil, false},
		{"CPU quota", WindowStats{Span: min, Scheduled: 60, Sent: 60},
			Stats{Span: min, HasCgroup: true, Periods: 600, ThrottledPeriods: 300, ThrottleStall: 60 * time.Millisecond}, []SaturationReason{ReasonCPUThrottled}, false},
		{"CPU quota: two short stalls", WindowStats{Span: min, Scheduled: 60, Sent: 60},
			Stats{Span: min, HasCgroup: true, Periods: 600, ThrottledPeriods: 2, ThrottleStall: 60 * time.Millisecond}, nil, false},
	} {
		v := defaultJudgement.Judge(tc.w, tc.h)
		if !slices.Equal(v.Reasons, tc.reasons) || v.Overloaded != tc.overloaded {
			t.Errorf("%s: reasons %v overloaded %v (%s | %s), want %v %v", tc.name, v.Reasons, v.Overloaded, v.Detail, v.Overload, tc.reasons, tc.overloaded)
		}
		if v.Saturated() != (v.Detail != "") || v.Overloaded != (v.Overload != "") {
			t.Errorf("%s: explanation missing: %+v", tc.name, v)
		}
	}
}

// TestJudgeRoundsDurations: the explanations the status page and bench
// show round the measured durations to 3 significant digits (the page
// said "p99 30.814879ms").
func TestJudgeRoundsDurations(t *testing.T) {
	min := time.Minute
	v := defaultJudgement.Judge(WindowStats{Span: min, Scheduled: 60, Sent: 60}, Stats{
		Span: min, WakeEvents: 6000, WakeOver: 300, WakeP99: 30814879,
		SchedEvents: 10000, SchedOver: 500, SchedP99: 12345678,
		HasSchedstat: true, Timeslices: 5000, RunqueueWait: 15432101,
		HasCgroup: true, Periods: 600, ThrottledPeriods: 300, ThrottleStall: 61234567,
	})
	for _, want := range []string{"(p99 30.8ms)", "(p99 12.3ms)", "waited 15.4ms per timeslice", "for 61.2ms each"} {
		if !strings.Contains(v.Detail, want) {
			t.Errorf("the explanation lacks %q: %s", want, v.Detail)
		}
	}
	for _, c := range []struct{ d, want time.Duration }{
		{30814879, 30800000}, {131249, 131000}, {999, 999}, {1234567891, 1230000000}, {-30814879, -30800000}, {0, 0}, {90 * time.Minute, 90 * time.Minute},
	} {
		if got := RoundDuration(c.d); got != c.want {
			t.Errorf("RoundDuration(%v) = %v, want %v", c.d, got, c.want)
		}
	}
}
