// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package diagnosis

import (
	"math"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)

// steadyInterval is one 15 s read of a plain engine: 15 probe requests of
// 100 ms TTFT (3 ms of it the path), 150 of the engine's.
func steadyInterval(i int) Interval {
	return Interval{
		End:      t0.Add(time.Duration(i) * readEvery),
		Identity: "a",
		Probe: ProbeFigures{Requests: 15, TTFT: Mean{15 * 0.1, 15}, TTFTSample: []float64{0.1, 0.1, 0.12},
			TPOT: Mean{15 * 0.02, 15}, PromptTokens: 15000, CachedTokens: 0},
		Server: &ServerFigures{Engine: "vllm", TTFTIncludesQueue: true,
			TTFT: Mean{150 * 0.097, 150}, Queue: Mean{150 * 0.005, 150}, Prefill: Mean{150 * 0.085, 150},
			Decode: Mean{150 * 4, 150}, ITL: Mean{30000 * 0.02, 30000}, PromptLen: Mean{150000, 150},
			Running: 40, Waiting: 0, KVUsage: 0.3, Preemptions: 0, Finished: 150,
			PrefixHits: 0, PrefixQueries: 150000},
	}
}

// TestAddRefusesOutOfOrder: an interval not after the last is refused
// with an error naming both times, and changes nothing.
func TestAddRefusesOutOfOrder(t *testing.T) {
	j := NewJudge()
	if err := j.Add(steadyInterval(2)); err != nil {
		t.Fatal(err)
	}
	err := j.Add(steadyInterval(1))
	if err == nil || !strings.Contains(err.Error(), "00:00:15Z") || !strings.Contains(err.Error(), "00:00:30Z") {
		t.Fatalf("out of order: %v", err)
	}
	if err := j.Add(Interval{}); err == nil {
		t.Fatal("an interval without an end was taken")
	}
	if len(j.recent) != 1 {
		t.Fatalf("%d intervals kept", len(j.recent))
	}
}

// TestUnknownBeforeHistory: the first minutes say unknown (no history),
// then none; a verdict's Since stays while its cause does.
func TestUnknownBeforeHistory(t *testing.T) {
	j := NewJudge()
	var causes []Cause
	var since time.Time
	for i := 1; i <= 40; i++ {
		if err := j.Add(steadyInterval(i)); err != nil {
			t.Fatal(err)
		}
		if i%4 == 0 {
			v := j.Verdict(steadyInterval(i).End)
			causes = append(causes, v.Cause)
			if v.Cause == None {
				if since.IsZero() {
					since = v.Since
				} else if !v.Since.Equal(since) {
					t.Errorf("Since moved from %s to %s while none held", since, v.Since)
				}
			}
		}
	}
	want := []Cause{Unknown, Unknown, Unknown, None}
	for i, c := range want {
		if causes[i] != c {
			t.Fatalf("verdicts %v, want them to start %v", causes, want)
		}
	}
	if causes[len(causes)-1] != None {
		t.Fatalf("verdicts %v", causes)
	}
}

// TestGapLeavesQueueOut: an engine whose TTFT leaves the queue out
// (llm-d-inference-sim) has its queue time added before the gap, so a
// long queue is queueing, never path.
func TestGapLeavesQueueOut(t *testing.T) {
	j := NewJudge()
	for i := 1; i <= 12; i++ {
		in := steadyInterval(i)
		// The probe waits 1 s in the queue; the engine's TTFT is its
		// 50 ms of prefill alone.
		in.Probe.TTFT = Mean{15 * 1.053, 15}
		in.Server.TTFTIncludesQueue = false
		in.Server.TTFT = Mean{150 * 0.05, 150}
		in.Server.Queue = Mean{150 * 1.0, 150}
		in.Server.Waiting = 12
		if err := j.Add(in); err != nil {
			t.Fatal(err)
		}
	}
	v := j.Verdict(steadyInterval(12).End)
	if v.Cause != Queueing {
		t.Fatalf("%s: %s", v.Cause, v.Sentence)
	}
	// The same engine, no queue figure: no comparable TTFT, no view.
	j = NewJudge()
	for i := 1; i <= 12; i++ {
		in := steadyInterval(i)
		in.Server.TTFTIncludesQueue = false
		in.Server.Queue = Mean{}
		if err := j.Add(in); err != nil {
			t.Fatal(err)
		}
	}
	if v := j.Verdict(steadyInterval(12).End); v.Cause != Unknown {
		t.Fatalf("without a queue figure: %s: %s", v.Cause, v.Sentence)
	}
}

// TestMixNotJudged: when the probe's prompts are far from the engine's
// mix, a large gap is shown but not judged path.
func TestMixNotJudged(t *testing.T) {
	j := NewJudge()
	for i := 1; i <= 20; i++ {
		in := steadyInterval(i)
		in.Probe.TTFT = Mean{15 * 0.4, 15} // 300 ms of gap
		in.Server.PromptLen = Mean{150 * 4000, 150}
		if err := j.Add(in); err != nil {
			t.Fatal(err)
		}
	}
	v := j.Verdict(steadyInterval(20).End)
	if v.Cause == Path || !strings.Contains(v.Sentence, "not judged") {
		t.Fatalf("%s: %s", v.Cause, v.Sentence)
	}
	checkVerdict(t, v)
}

// TestHarnessWins: a saturated harness in the recent window wins over a
// queueing engine.
func TestHarnessWins(t *testing.T) {
	feed := func(saturated func(i int) bool) Verdict {
		j := NewJudge()
		for i := 1; i <= 12; i++ {
			in := steadyInterval(i)
			in.Server.Waiting, in.Server.Queue = 20, Mean{150 * 0.09, 150}
			in.Saturated = saturated(i)
			if err := j.Add(in); err != nil {
				t.Fatal(err)
			}
		}
		return j.Verdict(steadyInterval(12).End)
	}
	if v := feed(func(i int) bool { return i >= 7 }); v.Cause != Harness {
		t.Fatalf("saturated in the last 6 reads: %s: %s", v.Cause, v.Sentence)
	}
	// One saturated read of the recent window is left out, and the rest
	// are judged as if it had not been there.
	want := feed(func(int) bool { return false })
	if v := feed(func(i int) bool { return i == 11 }); v.Cause != want.Cause || v.Cause == Harness {
		t.Fatalf("saturated in one read: %s (%s), without it: %s", v.Cause, v.Sentence, want.Cause)
	}
}

// TestBounded: a judge fed a year of reads every second holds a bounded
// ring and no list that grows.
func TestBounded(t *testing.T) {
	j := NewJudge()
	in := steadyInterval(0)
	for i := 1; i <= 200000; i++ {
		in.End = t0.Add(time.Duration(i) * time.Second)
		if err := j.Add(in); err != nil {
			t.Fatal(err)
		}
		if len(j.recent) > MaxRecent {
			t.Fatalf("%d intervals in the recent ring", len(j.recent))
		}
	}
	if v := j.Verdict(in.End); v.Cause != None {
		t.Fatalf("%s: %s", v.Cause, v.Sentence)
	}
	if len(j.recent) > 121 {
		t.Fatalf("%d intervals kept for a 2-minute window of 1 s reads", len(j.recent))
	}
}

// FuzzJudgeAdd: arbitrary figures never panic, never give a non-finite
// evidence figure or a figure the sentence does not take from its
// evidence; all of them NaN is unknown.
func FuzzJudgeAdd(f *testing.F) {
	f.Add(0.1, 0.097, 0.005, 40.0, 0.3, 0.0, 150.0, 15, 0.5, false, "a")
	f.Add(math.NaN(), math.Inf(1), -1.0, math.NaN(), 7.0, -3.0, math.Inf(-1), -5, math.NaN(), true, "")
	f.Add(1e308, 1e308, 1e308, 1e308, 1e308, 1e308, 1e308, 1<<30, 1e308, false, "b")
	f.Fuzz(func(t *testing.T, ttft, srvTTFT, queue, running, kv, preempt, finished float64, requests int, gpu float64, saturated bool, identity string) {
		j := NewJudge()
		for i := 1; i <= 30; i++ {
			in := steadyInterval(i)
			if i > 15 {
				in.Probe.Requests = requests
				in.Probe.TTFT = Mean{ttft * 15, float64(requests)}
				in.Probe.TTFTSample = []float64{ttft, srvTTFT, queue}
				in.Probe.PromptTokens, in.Probe.CachedTokens = kv, preempt
				in.Server.TTFT = Mean{srvTTFT, finished}
				in.Server.Queue = Mean{queue, finished}
				in.Server.Running, in.Server.Waiting, in.Server.KVUsage = running, preempt, kv
				in.Server.Preemptions, in.Server.Finished = preempt, finished
				in.Server.ITL = Mean{ttft, -finished}
				in.GPUUtil = &gpu
				in.Saturated = saturated && i == 29
				in.Identity = identity
				in.ReuseIntent = kv
			}
			if err := j.Add(in); err != nil {
				t.Fatal(err)
			}
			if i%4 == 0 {
				checkVerdict(t, j.Verdict(in.End))
			}
		}
		nan := math.NaN()
		j = NewJudge()
		for i := 1; i <= 12; i++ {
			in := Interval{End: steadyInterval(i).End, Probe: ProbeFigures{Requests: 15, TTFT: Mean{nan, nan}},
				Server: &ServerFigures{TTFT: Mean{nan, 1}, Queue: Mean{nan, nan}, Running: nan, Waiting: nan, KVUsage: nan,
					Preemptions: -1, Finished: nan}}
			if err := j.Add(in); err != nil {
				t.Fatal(err)
			}
		}
		if v := j.Verdict(steadyInterval(12).End); v.Cause != Unknown {
			t.Fatalf("NaN figures: %s: %s", v.Cause, v.Sentence)
		}
	})
}
