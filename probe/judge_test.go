// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package probe

import (
	"slices"
	"testing"
	"time"

	"github.com/llmprobe/llmprobe/config"
)

// defaultJudgement is global.saturation's defaults, as documented: 50 ms
// lag, 1%, 2% shortfall, 5 events, 10 ms inflation.
var defaultJudgement = newJudgement(config.DefaultGlobal.Saturation)

func TestJudgementDefaults(t *testing.T) {
	want := judgement{maxLag: 50 * time.Millisecond, maxLateRatio: 0.01, maxShortfall: 0.02, minEvidence: 5, maxInflation: 10 * time.Millisecond}
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
		w          windowStats
		h          HarnessStats
		reasons    []SaturationReason
		overloaded bool
	}{
		{"0.2/s, one slow first connection", windowStats{span: min, scheduled: 12, sent: 12, late: 1}, HarnessStats{}, nil, false},
		{"1/s, one GC pause", windowStats{span: min, scheduled: 60, sent: 60, late: 1}, HarnessStats{}, nil, false},
		{"10/s, one 100 ms stall", windowStats{span: min, scheduled: 600, sent: 600, late: 2}, HarnessStats{}, nil, false},
		{"1/s, every send late", windowStats{span: 5 * time.Second, scheduled: 5, sent: 5, late: 5}, HarnessStats{}, []SaturationReason{ReasonLateSends}, false},
		{"3000/s, 10 s into an overload", windowStats{span: min, scheduled: 180000, sent: 175000, late: 30000, droppedLate: 5000}, HarnessStats{},
			[]SaturationReason{ReasonLateSends, ReasonLateDrops}, false},
		{"3000/s, a burst of 0.5% late", windowStats{span: min, scheduled: 180000, sent: 180000, late: 900}, HarnessStats{}, nil, false},
		{"slow target: 28% over max_inflight", windowStats{span: min, scheduled: 1000, sent: 720, droppedInflight: 280}, HarnessStats{}, nil, true},
		{"slow target at 0.2/s: one drop", windowStats{span: min, scheduled: 12, sent: 11, droppedInflight: 1}, HarnessStats{}, nil, false},
		{"the process wakes late", windowStats{span: min, scheduled: 60, sent: 60},
			HarnessStats{Span: min, WakeEvents: 6000, WakeOver: 300, WakeP99: 25 * time.Millisecond}, []SaturationReason{ReasonWakeLatency}, false},
		{"the process wakes late once", windowStats{span: min, scheduled: 60, sent: 60},
			HarnessStats{Span: min, WakeEvents: 6000, WakeOver: 3}, nil, false},
		{"Go scheduler starved", windowStats{span: min, scheduled: 60, sent: 60},
			HarnessStats{Span: min, SchedEvents: 10000, SchedOver: 500, SchedP99: 30 * time.Millisecond}, []SaturationReason{ReasonSchedLatency}, false},
		{"Go scheduler: a few slow wake-ups", windowStats{span: min, scheduled: 60, sent: 60},
			HarnessStats{Span: min, SchedEvents: 10000, SchedOver: 20}, nil, false},
		{"CPU contention", windowStats{span: min, scheduled: 60, sent: 60},
			HarnessStats{Span: min, HasSchedstat: true, Timeslices: 5000, RunqueueWait: 15 * time.Millisecond}, []SaturationReason{ReasonCPUContention}, false},
		{"CPU contention below the bound", windowStats{span: min, scheduled: 60, sent: 60},
			HarnessStats{Span: min, HasSchedstat: true, Timeslices: 5000, RunqueueWait: 2 * time.Millisecond}, nil, false},
		{"CPU quota", windowStats{span: min, scheduled: 60, sent: 60},
			HarnessStats{Span: min, HasCgroup: true, Periods: 600, ThrottledPeriods: 300, ThrottleStall: 60 * time.Millisecond}, []SaturationReason{ReasonCPUThrottled}, false},
		{"CPU quota: two short stalls", windowStats{span: min, scheduled: 60, sent: 60},
			HarnessStats{Span: min, HasCgroup: true, Periods: 600, ThrottledPeriods: 2, ThrottleStall: 60 * time.Millisecond}, nil, false},
	} {
		v := defaultJudgement.judgeWindow(tc.w, tc.h)
		if !slices.Equal(v.reasons, tc.reasons) || v.overloaded != tc.overloaded {
			t.Errorf("%s: reasons %v overloaded %v (%s | %s), want %v %v", tc.name, v.reasons, v.overloaded, v.detail, v.overload, tc.reasons, tc.overloaded)
		}
		if v.saturated() != (v.detail != "") || v.overloaded != (v.overload != "") {
			t.Errorf("%s: explanation missing: %+v", tc.name, v)
		}
	}
}
