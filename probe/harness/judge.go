// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package harness

import (
	"fmt"
	"strings"
	"time"

	"github.com/llmprobe/llmprobe/config"
)

// The verdicts: is the harness delivering and timing the load honestly
// (saturation), and is the target absorbing it (overload)?
//
// Both are judged by counts over the judgement window with a minimum of
// evidence, never by a quantile of a handful of samples: at 1 req/s a
// one-minute window holds 60 sends, and its p99 is their maximum, so one
// GC pause would flag the harness and, through the inhibit rule, silence
// the latency pages. A rule "at least MinEvidence events AND more than a
// share of the window's events" holds at every rate: one outlier at
// 0.1–10 req/s never flags; a real overload at any rate of 1 req/s or more
// flags within MinEvidence seconds.
//
// Harness saturation (the numbers are suspect; it inhibits the latency
// alerts), with its reasons:
//
//   - late_sends: sends later than max_lag after their planned instant:
//     at least MinEvidence of them and more than MaxLateRatio of the
//     window's sends (with the default 1% this is "p99 lag > max_lag",
//     with evidence);
//   - late_drops: arrivals dropped because they could not be sent within
//     late_after: at least MinEvidence and more than MaxShortfall of the
//     scheduled arrivals;
//   - wakeup_latency: the heartbeat (a timerfd wake-up every 10 ms, as a
//     stream read waits) ran later than max_inflation: at least MinEvidence
//     such wake-ups and more than MaxLateRatio of all. This is the effect
//     itself, whatever the cause; the three below name a cause;
//   - sched_latency: goroutines waited longer than max_inflation to run
//     (the Go scheduler): at least MinEvidence such waits and more than
//     MaxLateRatio of all;
//   - cpu_contention: the process' threads waited on average longer than
//     max_inflation in the OS run queue per timeslice, over at least
//     MinEvidence timeslices;
//   - cpu_throttled: the cgroup's CPU quota stopped the process in at
//     least MinEvidence periods, more than MaxLateRatio of them, for longer
//     than max_inflation on average.
//
// Target overload (the load was not delivered because the target is too
// slow: exactly when latency alerts must fire, so it never inhibits them):
// arrivals dropped over max_inflight, at least MinEvidence and more than
// MaxShortfall of the scheduled arrivals.

// SaturationReason says why the harness flagged its own numbers. The
// values are the `reason` label of llmprobe_harness_saturation_reason.
type SaturationReason string

const (
	ReasonLateSends     SaturationReason = "late_sends"
	ReasonLateDrops     SaturationReason = "late_drops"
	ReasonWakeLatency   SaturationReason = "wakeup_latency"
	ReasonSchedLatency  SaturationReason = "sched_latency"
	ReasonCPUContention SaturationReason = "cpu_contention"
	ReasonCPUThrottled  SaturationReason = "cpu_throttled"
)

// SaturationReasons lists every reason, in a stable order.
var SaturationReasons = [...]SaturationReason{ReasonLateSends, ReasonLateDrops, ReasonWakeLatency, ReasonSchedLatency, ReasonCPUContention, ReasonCPUThrottled}

// Judgement holds the thresholds of the verdicts (global.saturation).
type Judgement struct {
	maxLag       time.Duration
	maxLateRatio float64
	maxShortfall float64
	minEvidence  uint64
	maxInflation time.Duration
}

func NewJudgement(s config.Saturation) Judgement {
	return Judgement{
		maxLag:       time.Duration(s.MaxLag),
		maxLateRatio: s.MaxLateRatio,
		maxShortfall: s.MaxShortfall,
		minEvidence:  uint64(max(s.MinEvents, 1)),
		maxInflation: time.Duration(s.MaxInflation),
	}
}

// MaxInflation is the bound on measurement inflation the verdicts
// judge the harness figures by (Monitor.Stats takes it).
func (j Judgement) MaxInflation() time.Duration { return j.maxInflation }

// Verdict is the outcome of one judgement.
type Verdict struct {
	Reasons    []SaturationReason
	Detail     string // why, for people: the log and the status page
	Overloaded bool
	Overload   string // why the target is overloaded
}

func (v Verdict) Saturated() bool { return len(v.Reasons) > 0 }

// exceeds is the evidence rule: n events of total, at least min and more
// than ratio of total.
func exceeds(n, total, min uint64, ratio float64) bool {
	return n > 0 && n >= min && float64(n) > ratio*float64(total)
}

// Judge applies the rules to a target's window and the process'
// harness figures.
func (j Judgement) Judge(w WindowStats, h Stats) Verdict {
	var v Verdict
	var why []string
	add := func(r SaturationReason, format string, args ...any) {
		v.Reasons = append(v.Reasons, r)
		why = append(why, fmt.Sprintf(format, args...))
	}
	if exceeds(w.Late, w.Sent, j.minEvidence, j.maxLateRatio) {
		add(ReasonLateSends, "%d of %d sends over %v were more than max_lag %v late", w.Late, w.Sent, w.Span.Round(100*time.Millisecond), j.maxLag)
	}
	if exceeds(w.DroppedLate, w.Scheduled, j.minEvidence, j.maxShortfall) {
		add(ReasonLateDrops, "%d of %d scheduled requests over %v could not be sent in time (max_shortfall %.1f%%)", w.DroppedLate, w.Scheduled, w.Span.Round(100*time.Millisecond), 100*j.maxShortfall)
	}
	if exceeds(h.WakeOver, h.WakeEvents, j.minEvidence, j.maxLateRatio) {
		add(ReasonWakeLatency, "the process woke up more than max_inflation %v late in %d of %d heartbeats (p99 %v) over %v", j.maxInflation, h.WakeOver, h.WakeEvents, RoundDuration(h.WakeP99), h.Span.Round(time.Second))
	}
	if exceeds(h.SchedOver, h.SchedEvents, j.minEvidence, j.maxLateRatio) {
		add(ReasonSchedLatency, "goroutines waited to run for more than max_inflation %v in %d of %d schedulings (p99 %v) over %v", j.maxInflation, h.SchedOver, h.SchedEvents, RoundDuration(h.SchedP99), h.Span.Round(time.Second))
	}
	if h.HasSchedstat && h.Timeslices >= j.minEvidence && h.RunqueueWait > j.maxInflation {
		add(ReasonCPUContention, "the process' threads waited %v per timeslice for a CPU (max_inflation %v) over %v", RoundDuration(h.RunqueueWait), j.maxInflation, h.Span.Round(time.Second))
	}
	if h.HasCgroup && exceeds(h.ThrottledPeriods, h.Periods, j.minEvidence, j.maxLateRatio) && h.ThrottleStall > j.maxInflation {
		add(ReasonCPUThrottled, "the CPU quota stopped the process in %d of %d periods for %v each (max_inflation %v) over %v", h.ThrottledPeriods, h.Periods, RoundDuration(h.ThrottleStall), j.maxInflation, h.Span.Round(time.Second))
	}
	v.Detail = strings.Join(why, "; ")
	if exceeds(w.DroppedInflight, w.Scheduled, j.minEvidence, j.maxShortfall) {
		v.Overloaded = true
		v.Overload = fmt.Sprintf("%d of %d scheduled requests over %v were dropped because max_inflight requests were still running: the target does not absorb the offered load", w.DroppedInflight, w.Scheduled, w.Span.Round(100*time.Millisecond))
	}
	return v
}

// RoundDuration rounds d to 3 significant digits (30.814879ms is
// 30.8ms, 131.2µs is 131µs), for the explanations people read.
func RoundDuration(d time.Duration) time.Duration {
	unit := time.Duration(1)
	for a := max(d, -d); a >= 1000*unit && unit < time.Hour; {
		unit *= 10
	}
	return d.Round(unit)
}
