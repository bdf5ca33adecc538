// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package probe

import (
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/llmprobe/llmprobe/internal/testio"
	"github.com/llmprobe/llmprobe/probe/wire"
)

// endAt counts, in w, requests that ended at at with the given outcomes.
func endAt(w *failWindow, at time.Time, outcomes ...wire.Outcome) {
	for _, o := range outcomes {
		res := &wire.Result{Outcome: o}
		if o != wire.OutcomeSuccess {
			res.ErrorType, res.Error, res.StatusCode = string(o)+"-type", string(o)+" at "+at.Format(time.StampMilli), 500
		}
		w.observe(outcomeIndex(o), res, at)
	}
}

// TestFailingVerdict: a runner's failing verdict judges the requests that
// ended in its window (at least FailingMin, half or more failed; "every
// request fails" when all did), or the last FailingMin to end when fewer
// ended in it; requests llmprobe cancelled are not judged.
func TestFailingVerdict(t *testing.T) {
	ok, conn, http5, timeout := wire.OutcomeSuccess, wire.OutcomeConnectError, wire.OutcomeHTTPError, wire.OutcomeTimeout
	t0 := time.Unix(1_700_000_000, 0)

	w := newFailWindow(15 * time.Second)
	if f, judged := w.judge(t0); f != nil || judged {
		t.Errorf("empty: %+v, judged %v", f, judged)
	}
	endAt(w, t0, conn, conn)
	if f, judged := w.judge(t0); f != nil || judged {
		t.Errorf("2 requests: %+v, judged %v (too few)", f, judged)
	}
	endAt(w, t0.Add(time.Second), ok, ok)
	if f, judged := w.judge(t0.Add(time.Second)); f == nil || f.All || f.Failed != 2 || f.Judged != 4 || !judged {
		t.Errorf("2 of 4 failed: %+v (half is failing)", f)
	}
	endAt(w, t0.Add(2*time.Second), ok)
	if f, judged := w.judge(t0.Add(2 * time.Second)); f != nil || !judged {
		t.Errorf("2 of 5 failed: %+v", f)
	}

	// 3 of 4: outcomes by count, the example the newest of the first.
	w = newFailWindow(15 * time.Second)
	endAt(w, t0, http5)
	endAt(w, t0.Add(time.Second), conn)
	endAt(w, t0.Add(2*time.Second), conn, ok)
	f, _ := w.judge(t0.Add(3 * time.Second))
	if f == nil || f.All || f.Failed != 3 || f.Judged != 4 || f.Over != 15*time.Second ||
		!slices.Equal(f.Outcomes, []OutcomeCount{{conn, 2}, {http5, 1}}) ||
		f.Example.Outcome != conn || !f.Example.At.Equal(t0.Add(2*time.Second)) || f.Example.ErrorType != "connect_error-type" {
		t.Errorf("3 of 4 failed: %+v", f)
	}
	// A cancelled request is not judged.
	w.observe(outcomeIndex(timeout), &wire.Result{Outcome: timeout, ErrorType: wire.ErrorTypeCancelled}, t0.Add(3*time.Second))
	if g, _ := w.judge(t0.Add(3 * time.Second)); g == nil || g.Judged != 4 {
		t.Errorf("a cancelled request was judged: %+v", g)
	}
	// All failed.
	endAt(w, t0.Add(20*time.Second), timeout, timeout, timeout)
	if f, _ := w.judge(t0.Add(20 * time.Second)); f == nil || !f.All || f.Failed != 3 || f.Outcomes[0] != (OutcomeCount{timeout, 3}) {
		t.Errorf("3 of 3 failed: %+v", f)
	}

	// One 500 in a thousand is not failing.
	w = newFailWindow(15 * time.Second)
	for i := range 1000 {
		o := ok
		if i == 500 {
			o = http5
		}
		endAt(w, t0.Add(time.Duration(i)*10*time.Millisecond), o)
	}
	if f, judged := w.judge(t0.Add(10 * time.Second)); f != nil || !judged {
		t.Errorf("1 of 1000 failed: %+v", f)
	}

	// Below FailingMin requests a window (0.1 req/s), the last FailingMin
	// to end are judged, however old: 2 of the last 3 failed.
	w = newFailWindow(15 * time.Second)
	endAt(w, t0, ok)
	endAt(w, t0.Add(10*time.Second), http5)
	endAt(w, t0.Add(20*time.Second), http5)
	f, judged := w.judge(t0.Add(25 * time.Second))
	if f == nil || !judged || f.Judged != 3 || f.Failed != 2 || f.Over != 25*time.Second {
		t.Errorf("2 of the last 3 at 0.1 req/s: %+v", f)
	}
	endAt(w, t0.Add(30*time.Second), ok)
	endAt(w, t0.Add(40*time.Second), ok)
	if f, judged := w.judge(t0.Add(41 * time.Second)); f != nil || !judged {
		t.Errorf("1 of the last 3 at 0.1 req/s: %+v", f)
	}
}

// TestMergeFailing: a discovery target fails when any replica does, with
// its failing replicas' sums, named; "every request fails" when each of
// them fails every request.
func TestMergeFailing(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	a := &FailingStatus{Failed: 4, Judged: 4, Over: 15 * time.Second, All: true, Outcomes: []OutcomeCount{{wire.OutcomeConnectError, 4}},
		Example: FailureExample{At: t0, Outcome: wire.OutcomeConnectError, ErrorType: "connection_refused"}}
	b := &FailingStatus{Failed: 3, Judged: 5, Over: 20 * time.Second, Outcomes: []OutcomeCount{{wire.OutcomeHTTPError, 2}, {wire.OutcomeConnectError, 1}},
		Example: FailureExample{At: t0.Add(time.Second), Outcome: wire.OutcomeHTTPError, ErrorType: "http_503"}}
	if f := mergeFailing([]replicaVerdict{{"r1", nil}, {"r2", nil}}); f != nil {
		t.Errorf("no replica fails: %+v", f)
	}
	f := mergeFailing([]replicaVerdict{{"r3", b}, {"r1", a}, {"r2", nil}})
	if f == nil || f.All || f.Failed != 7 || f.Judged != 9 || f.Over != 20*time.Second || !slices.Equal(f.Replicas, []string{"r1", "r3"}) ||
		!slices.Equal(f.Outcomes, []OutcomeCount{{wire.OutcomeConnectError, 5}, {wire.OutcomeHTTPError, 2}}) ||
		f.Example.ErrorType != "connection_refused" {
		t.Errorf("two of three fail: %+v", f)
	}
	if f := mergeFailing([]replicaVerdict{{"r1", a}, {"r2", nil}}); f == nil || !f.All || f.Failed != 4 || !slices.Equal(f.Replicas, []string{"r1"}) {
		t.Errorf("one replica fails every request: %+v", f)
	}
	if f := mergeFailing([]replicaVerdict{{"", a}}); f == nil || f.Replicas != nil || !f.Example.At.Equal(a.Example.At) {
		t.Errorf("a target without discovery: %+v", f)
	}
}

// TestFailLog: a target found failing gets its WARN line a second later,
// then one per interval while it fails, and one INFO line when it no
// longer does; a target that flaps writes no WARN within an interval of
// the last; a runner that stops is forgotten without a line; a runner
// without evidence says nothing.
func TestFailLog(t *testing.T) {
	var buf testio.Buffer
	every := time.Minute
	l := newFailLog("t", slog.New(slog.NewTextHandler(&buf, nil)), every)
	r := &runner{}
	t0 := time.Unix(1_700_000_000, 0)
	bad := &FailingStatus{Failed: 5, Judged: 5, Over: 15 * time.Second, All: true, Outcomes: []OutcomeCount{{wire.OutcomeHTTPError, 5}},
		Example: FailureExample{Outcome: wire.OutcomeHTTPError, ErrorType: "http_401", Error: "HTTP 401 Unauthorized: bad key", StatusCode: 401}}
	lines := func() []string {
		var out []string
		for _, s := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
			if s != "" {
				out = append(out, s)
			}
		}
		return out
	}
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }

	l.report(r, bad, at(0))
	if n := len(lines()); n != 0 {
		t.Fatalf("a line at once: %v", lines())
	}
	l.report(r, bad, at(1))
	if got := lines(); len(got) != 1 || !strings.Contains(got[0], `level=WARN msg="every request to the target fails" target=t outcome=http_error error_type=http_401 status_code=401 error="HTTP 401 Unauthorized: bad key" failed=5 of=5 over=15s`) {
		t.Fatalf("after a second: %v", got)
	}
	for s := 2; s < 61; s++ {
		l.report(r, bad, at(s))
	}
	if n := len(lines()); n != 1 {
		t.Fatalf("%d lines within a minute: %v", n, lines())
	}
	l.report(r, bad, at(61))
	if got := lines(); len(got) != 2 || !strings.Contains(got[1], "failing_for=1m1s") {
		t.Fatalf("the reminder: %v", got)
	}
	l.report(r, nil, at(62))
	l.report(r, nil, at(63))
	if got := lines(); len(got) != 3 || !strings.Contains(got[2], `level=INFO msg="requests to the target succeed again" target=t failing_for=1m2s`) {
		t.Fatalf("the recovery: %v", got)
	}
	// Flapping: failing again within a minute of the last WARN waits
	// for the minute.
	for s := 64; s < 121; s++ {
		v := bad
		if s%4 == 0 {
			v = nil
		}
		l.report(r, v, at(s))
	}
	if got := lines(); len(got) != 3 {
		t.Fatalf("flapping within the minute: %v", got)
	}
	l.report(r, bad, at(121))
	l.report(r, bad, at(122))
	if got := lines(); len(got) != 4 || !strings.Contains(got[3], "level=WARN") {
		t.Fatalf("flapping after the minute: %v", got)
	}
	// A runner that stops is forgotten quietly; its successor's verdict
	// speaks, when it has one.
	l.forget(r)
	if got := lines(); len(got) != 4 {
		t.Fatalf("forget wrote %v", got)
	}
	next := &runner{}
	l.report(next, nil, at(125))
	if got := lines(); len(got) != 5 || !strings.Contains(got[4], "succeed again") {
		t.Fatalf("the successor's verdict: %v", got)
	}

	// Replicas: one line for the target, naming the failing ones.
	buf = testio.Buffer{}
	l = newFailLog("pool", slog.New(slog.NewTextHandler(&buf, nil)), every)
	reps := make([]*runner, 12)
	for i := range reps {
		reps[i] = &runner{replica: string(rune('a' + i))}
	}
	for s := range 3 {
		for i, rr := range reps {
			v := bad
			if i == 0 {
				v = nil
			}
			l.report(rr, v, at(s))
		}
	}
	got := lines()
	if len(got) != 1 || !strings.Contains(got[0], `target=pool replicas="b,c,d,e,f,g,h,i,… (3 more)" replicas_failing=11 replicas_judged=12 outcome=http_error`) ||
		!strings.Contains(got[0], `msg="every request to replicas of the target fails"`) || !strings.Contains(got[0], "failed=55 of=55") {
		t.Errorf("replicas: %v", got)
	}
}
