// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package exporter

import (
	"errors"
	"math"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmprobe/llmprobe/config"
	"github.com/llmprobe/llmprobe/probe"
	"github.com/llmprobe/llmprobe/probe/wire"
)

// TestReloadFormRedirectsToPage: the page's reload form (a browser form
// POST) gets 303 See Other back to the page, which shows the outcome;
// curl, PUT and a POST without the form's field keep the text answers and
// codes; cross-origin and lifecycle-off refusals are unchanged.
func TestReloadFormRedirectsToPage(t *testing.T) {
	f := newWebFixture(t, nil)
	form := http.Header{"Content-Type": {"application/x-www-form-urlencoded"}, "Sec-Fetch-Site": {"same-origin"}}

	resp, _ := fetch(t, "POST", f.srv.URL+"/-/reload", form, "from=status-page")
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/?reload=ok" {
		t.Fatalf("form POST of a good file = %d Location %q, want 303 to /?reload=ok", resp.StatusCode, resp.Header.Get("Location"))
	}
	_, page := fetch(t, "GET", f.srv.URL+"/?reload=ok", nil, "")
	if !strings.Contains(page, "Configuration reloaded at") || strings.Contains(page, "RELOAD FAILED") {
		t.Error("the page after a successful form reload does not say so")
	}

	writeFile(t, f.path, "global:\n  warmup: soon\n")
	resp, _ = fetch(t, "POST", f.srv.URL+"/-/reload", form, "from=status-page")
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/?reload=failed" {
		t.Fatalf("form POST of a bad file = %d Location %q, want 303 to /?reload=failed", resp.StatusCode, resp.Header.Get("Location"))
	}
	_, page = fetch(t, "GET", f.srv.URL+resp.Header.Get("Location"), nil, "")
	for _, want := range []string{`id="reload-outcome"`, "The reload you asked for at", `id="reload-failed"`, "CONFIGURATION RELOAD FAILED", "global.warmup"} {
		if !strings.Contains(page, want) {
			t.Errorf("the page after a failed form reload lacks %q", want)
		}
	}
	multipart := "--XX\r\nContent-Disposition: form-data; name=\"from\"\r\n\r\nstatus-page\r\n--XX--\r\n"
	if resp, _ := fetch(t, "POST", f.srv.URL+"/-/reload", http.Header{"Content-Type": {"multipart/form-data; boundary=XX"}}, multipart); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("multipart form POST = %d, want 303", resp.StatusCode)
	}

	// Without form semantics: today's text answers.
	for _, c := range []struct {
		method string
		header http.Header
		body   string
	}{
		{"POST", nil, ""}, // curl -X POST
		{"PUT", nil, ""},
		{"PUT", form, "from=status-page"},
		{"POST", http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}, ""}, // curl -d ''
		{"POST", http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}, "from=elsewhere"},
		{"POST", http.Header{"Content-Type": {"application/json"}}, `{"from":"status-page"}`},
	} {
		resp, body := fetch(t, c.method, f.srv.URL+"/-/reload", c.header, c.body)
		if resp.StatusCode != http.StatusInternalServerError || !strings.HasPrefix(body, "failed to reload config: ") || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
			t.Errorf("%s %v %q = %d %q, want 500 and the text error", c.method, c.header, c.body, resp.StatusCode, body)
		}
	}
	writeFile(t, f.path, testConfigYAML)
	if resp, body := fetch(t, "POST", f.srv.URL+"/-/reload", nil, ""); resp.StatusCode != 200 || strings.TrimSpace(body) != "Reloaded" {
		t.Errorf("curl POST of a good file = %d %q", resp.StatusCode, body)
	}

	// Refusals stay refusals, form or not.
	running := f.reloader.Current()
	cross := http.Header{"Content-Type": {"application/x-www-form-urlencoded"}, "Sec-Fetch-Site": {"cross-site"}}
	if resp, _ := fetch(t, "POST", f.srv.URL+"/-/reload", cross, "from=status-page"); resp.StatusCode != http.StatusForbidden || f.reloader.Current() != running {
		t.Errorf("cross-site form POST = %d, want 403 and no reload", resp.StatusCode)
	}
	off := newWebFixture(t, func(o *WebOptions) { o.EnableLifecycle = false })
	if resp, body := fetch(t, "POST", off.srv.URL+"/-/reload", form, "from=status-page"); resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "--web.enable-lifecycle") {
		t.Errorf("form POST without the lifecycle API = %d %q, want 403", resp.StatusCode, body)
	}
}

// TestFailedReloadBanner: a failed reload puts a banner with when and the
// error on the status and configuration pages, cleared by the next
// successful reload. The error of a file that quotes the running
// configuration's secrets (a token pasted into the wrong field) is
// scrubbed by probe's Redactor everywhere it goes: the returned error, the
// HTTP answer, the log and the pages.
func TestFailedReloadBanner(t *testing.T) {
	f := newWebFixture(t, nil)
	if _, page := fetch(t, "GET", f.srv.URL+"/", nil, ""); strings.Contains(page, "RELOAD FAILED") {
		t.Fatal("banner before any failure")
	}
	bad := strings.Replace(testConfigYAML, "warmup: 30s", "warmup: "+testBearer, 1)
	bad = strings.Replace(bad, "hit_ratio_window: 10s", "hit_ratio_window: "+testPassword, 1)
	writeFile(t, f.path, bad)
	before := time.Now()
	err := f.reloader.Reload()
	if err == nil {
		t.Fatal("the bad file reloaded")
	}
	var cerrs config.Errors
	if !errors.As(err, &cerrs) || len(cerrs) != 2 {
		t.Errorf("the reload error does not wrap the config errors: %#v", err)
	}
	resp, body := fetch(t, "PUT", f.srv.URL+"/-/reload", nil, "")
	if resp.StatusCode != http.StatusInternalServerError {
		t.Errorf("PUT /-/reload = %d", resp.StatusCode)
	}
	_, page := fetch(t, "GET", f.srv.URL+"/", nil, "")
	_, cfgPage := fetch(t, "GET", f.srv.URL+"/config", nil, "")
	for name, text := range map[string]string{"error": err.Error(), "HTTP answer": body, "log": f.logs.String(), "status page": page, "config page": cfgPage} {
		for _, secret := range []string{testBearer, testPassword} {
			if strings.Contains(text, secret) {
				t.Errorf("the %s shows the secret %q", name, secret)
			}
		}
		if name != "log" && !strings.Contains(text, "global.warmup") {
			t.Errorf("the %s does not name the field", name)
		}
	}
	if !strings.Contains(err.Error(), `not a valid duration "[secret]"`) {
		t.Errorf("error = %q, want the secret replaced by [secret]", err)
	}
	st, ok := f.reloader.Status()
	if !ok || !st.Failed || st.Time.Before(before) || st.LastSuccess.IsZero() || !st.LastSuccess.Before(before) {
		t.Errorf("Status() = %+v", st)
	}
	for _, p := range []string{page, cfgPage} {
		banner := between(p, `id="reload-failed"`, "</div>")
		for _, want := range []string{"CONFIGURATION RELOAD FAILED", st.Time.Format(time.RFC3339), "keeps running", "global.warmup", "global.hit_ratio_window", "<li>"} {
			if !strings.Contains(banner, want) {
				t.Errorf("the banner lacks %q: %s", want, banner)
			}
		}
	}

	writeFile(t, f.path, testConfigYAML)
	if err := f.reloader.Reload(); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/", "/config"} {
		if _, page := fetch(t, "GET", f.srv.URL+p, nil, ""); strings.Contains(page, "RELOAD FAILED") {
			t.Errorf("%s still shows the banner after a successful reload", p)
		}
	}
}

// between returns s from the first start to the next end after it.
func between(s, start, end string) string {
	i := strings.Index(s, start)
	if i < 0 {
		return ""
	}
	s = s[i:]
	if j := strings.Index(s, end); j >= 0 {
		return s[:j]
	}
	return s
}

// The recent requests are shown in the order they were sent (newest
// first), not in the order they ended: a long request sent first ends
// after a short one sent later.
func TestRecentInSendOrder(t *testing.T) {
	rec := NewRecent(nil)
	rec.SetConfig(mustConfig(t, testConfigYAML)) // recent_requests: 3
	base := time.Unix(1_700_000_000, 0)
	long := successResult("alpha", "model-a", "chat")
	long.Dispatched, long.Turn = base, 1
	short := successResult("alpha", "model-a", "chat")
	short.Dispatched, short.Turn = base.Add(time.Second), 2
	fail := failedResult("alpha", "model-a", "chat", 0)
	fail.Dispatched, fail.Turn = base.Add(2*time.Second), 3
	fail2 := failedResult("alpha", "model-a", "chat", 1)
	fail2.Dispatched, fail2.Turn = base.Add(-time.Second), 4
	for _, r := range []*wire.Result{short, fail, long, fail2} { // the order they end
		rec.Observe(r)
	}
	recent, failures := rec.Snapshot("alpha")
	turns := func(es []Entry) (out []int) {
		for _, e := range es {
			out = append(out, e.Turn)
		}
		return out
	}
	// The ring keeps the last 3 to end (fail, long, fail2), shown by send time.
	if got := turns(recent); len(got) != 3 || got[0] != 3 || got[1] != 1 || got[2] != 4 {
		t.Errorf("recent = turns %v, want [3 1 4] (by send time, newest first)", got)
	}
	if got := turns(failures); len(got) != 2 || got[0] != 3 || got[1] != 4 {
		t.Errorf("failures = turns %v, want [3 4]", got)
	}
}

// TestRecentWindow: the latency quantiles per target and class over the
// last 5 minutes follow the histograms' rules, expire, and cost no
// allocation per request; the timeline holds the requested and achieved
// rates per 10 s.
func TestRecentWindow(t *testing.T) {
	rec := NewRecent(nil)
	var mu sync.Mutex
	now := time.Unix(1_700_000_000, 0) // a multiple of 10 s
	rec.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	rec.SetConfig(mustConfig(t, testConfigYAML))

	if w, ok := rec.Window("alpha"); !ok || len(w.Summary) != 3 || w.Summary[0].TTFT.N != 0 {
		t.Fatalf("empty window = %+v, %v", w, ok)
	}
	if _, ok := rec.Window("nope"); ok {
		t.Error("a window for an unknown target")
	}
	// 100 chat requests with TTFT 1..100 ms, E2E 10× that; 10 agent ones.
	for i := 1; i <= 100; i++ {
		r := successResult("alpha", "model-a", "chat")
		r.TTFT, r.E2E, r.TPOT = time.Duration(i)*time.Millisecond, time.Duration(10*i)*time.Millisecond, 5*time.Millisecond
		rec.Sent("alpha", "", "chat")
		rec.Observe(r)
	}
	for range 10 {
		r := successResult("alpha", "model-a", "agent")
		r.TTFT = 2 * time.Second
		rec.Observe(r)
	}
	// Left out: warm-up; a failure counts for TTFT only when it had a
	// first token; one output token has no TPOT.
	w := successResult("alpha", "model-a", "chat")
	w.Warmup, w.TTFT = true, time.Hour
	rec.Observe(w)
	broken := successResult("alpha", "model-a", "agent")
	broken.Outcome, broken.TTFT, broken.E2E = wire.OutcomeStreamError, 2*time.Second, time.Hour
	rec.Observe(broken)
	one := successResult("alpha", "model-a", "agent")
	one.OutputTokens, one.TTFT, one.TPOT = 1, 2*time.Second, time.Hour
	rec.Observe(one)
	rec.SampleStatus(testStatus())

	snap, _ := rec.Window("alpha")
	all, chat, agent := snap.Summary[0], snap.Summary[1], snap.Summary[2]
	if all.Class != "" || chat.Class != "chat" || agent.Class != "agent" {
		t.Fatalf("rows = %q %q %q", all.Class, chat.Class, agent.Class)
	}
	near := func(name string, got, want time.Duration) {
		t.Helper()
		if math.Abs(float64(got-want)) > 0.1*float64(want) {
			t.Errorf("%s = %v, want %v ± 10%%", name, got, want)
		}
	}
	if chat.TTFT.N != 100 || chat.E2E.N != 100 || chat.TPOT.N != 100 {
		t.Errorf("chat n = %d/%d/%d, want 100 each", chat.TTFT.N, chat.TPOT.N, chat.E2E.N)
	}
	near("chat TTFT p50", chat.TTFT.P50, 50*time.Millisecond)
	near("chat TTFT p99", chat.TTFT.P99, 99*time.Millisecond)
	near("chat E2E p99", chat.E2E.P99, 990*time.Millisecond)
	near("chat TPOT p50", chat.TPOT.P50, 5*time.Millisecond)
	if agent.TTFT.N != 12 || agent.E2E.N != 11 || agent.TPOT.N != 10 || agent.TTFT.P99 != 2*time.Second {
		t.Errorf("agent = %+v, want TTFT n 12 (the broken stream too), E2E n 11, TPOT n 10, TTFT exactly 2s", agent)
	}
	if all.TTFT.N != 112 || all.TTFT.P99 != 2*time.Second {
		t.Errorf("all classes TTFT = %+v, want n 112, p99 2s", all.TTFT)
	}
	if !snap.Since.Equal(now.Add(-windowSpan + windowSlot)) {
		t.Errorf("Since = %v, want %v", snap.Since, now.Add(-windowSpan+windowSlot))
	}

	// 10 s later the slot is complete: it is on the timeline.
	advance(windowSlot)
	rec.SampleStatus(testStatus())
	snap, _ = rec.Window("alpha")
	if n := len(snap.Timeline); n != windowSlots-1 {
		t.Fatalf("%d timeline points, want %d", n, windowSlots-1)
	}
	last := snap.Timeline[len(snap.Timeline)-1]
	if last.Requested != 1 || last.Achieved != 10 || last.TTFT.N != 112 {
		t.Errorf("last point = %+v, want requested 1/s, achieved 10/s, TTFT n 112", last)
	}
	if first := snap.Timeline[0]; !math.IsNaN(first.Requested) || !math.IsNaN(first.Achieved) {
		t.Errorf("first point = %+v, want no data (before the target was configured)", first)
	}

	// Allocation-free per request.
	r := successResult("alpha", "model-a", "chat")
	if n := testing.AllocsPerRun(1000, func() { rec.Sent("alpha", "", "chat"); rec.Observe(r) }); n > 1 {
		t.Errorf("%.1f allocations per request", n)
	}

	// Five minutes on, it has all expired.
	advance(windowSpan)
	snap, _ = rec.Window("alpha")
	if snap.Summary[0].TTFT.N != 0 || snap.Summary[1].E2E.N != 0 {
		t.Errorf("after the window: %+v", snap.Summary)
	}
	for _, p := range snap.Timeline {
		if p.Achieved != 0 || p.TTFT.N != 0 || !math.IsNaN(p.Requested) {
			t.Errorf("after the window, a point %+v, want no traffic, nothing sampled", p)
		}
	}

	// A reload that drops a class drops its row; the target's window stays.
	rec.SetConfig(mustConfig(t, alphaOnlyYAML))
	if snap, ok := rec.Window("alpha"); !ok || len(snap.Summary) != 2 {
		t.Errorf("after dropping class agent: %+v", snap.Summary)
	}
}

// TestStatusPageLatencyAndTimeline: the page shows each target's latency
// quantiles with n over the stated window, and the timeline as inline SVG
// with axes, tick labels and a legend; nothing needs a script.
func TestStatusPageLatencyAndTimeline(t *testing.T) {
	f := newWebFixture(t, nil)
	now := time.Now().Truncate(windowSlot).Add(-windowSlot) // a completed slot
	f.recent.now = func() time.Time { return now }
	for _, tr := range *f.recent.rings.Load() { // as if configured a slot earlier
		tr.window.created = slotStart(now)
	}
	for range 4 {
		r := successResult("alpha", "model-a", "chat")
		f.recent.Sent("alpha", "", "chat")
		f.recent.Observe(r)
	}
	f.recent.SampleStatus(testStatus())
	f.recent.now = time.Now

	_, page := fetch(t, "GET", f.srv.URL+"/", nil, "")
	lat := between(page, `id="latency-alpha"`, "</table>")
	for _, want := range []string{"Latency, last 5 minutes", "Requests that ended since", "warm-up excluded", "TTFT p50", "E2E p99", "all classes", "<td class=\"num\">4</td>", "chat", "agent"} {
		if !strings.Contains(lat, want) {
			t.Errorf("alpha's latency summary lacks %q:\n%s", want, lat)
		}
	}
	if p50 := regexp.MustCompile(`<td class="num">(2[0-9.]+ ms)</td>`).FindStringSubmatch(lat); p50 == nil {
		t.Errorf("no TTFT p50 near 250 ms in %s", lat)
	}
	if strings.Contains(page, "<script") {
		t.Error("the page has a script")
	}
	svgs := regexp.MustCompile(`(?s)<svg .*?</svg>`).FindAllString(page, -1)
	if len(svgs) != 4 { // rate and TTFT for alpha and beta
		t.Fatalf("%d SVG charts, want 4", len(svgs))
	}
	rate, ttft := svgs[0], svgs[1]
	for _, want := range []string{"alpha: requested vs achieved rate", "requests per second", "requested", "achieved", "<polyline", "stroke-dasharray", "<line", "text-anchor=\"end\"", "time (10 s per point; now at the right)"} {
		if !strings.Contains(rate, want) {
			t.Errorf("the rate chart lacks %q", want)
		}
	}
	if !regexp.MustCompile(`>\d\d:\d\d</text>`).MatchString(rate) {
		t.Error("the rate chart has no clock labels on its time axis")
	}
	for _, want := range []string{"alpha: TTFT p50 and p99", "p50", "p99", "<circle", " ms</text>"} {
		if !strings.Contains(ttft, want) {
			t.Errorf("the TTFT chart lacks %q", want)
		}
	}
	if !strings.Contains(svgs[3], "no TTFT measured") {
		t.Error("beta's empty TTFT chart does not say so")
	}
}

// TestStatusPageProblemsFirst: the status page opens with one line per
// target that has a problem — failing (every request, or most; on which
// replicas), harness saturated, overloaded, regressed — each part linking
// to its banner further down, before the charts and the targets'
// sections; when all is well there is no such summary. The failing
// banner is the engine's verdict (probe.FailingStatus), the one the log
// writes.
func TestStatusPageProblemsFirst(t *testing.T) {
	failing := func() []probe.TargetStatus {
		st := testStatus()
		st[1].Overloaded, st[1].OverloadReason = true, "12 drops over max_inflight"
		gamma := st[0]
		gamma.Name, gamma.Regressions = "gamma", nil
		gamma.Failing = &probe.FailingStatus{Failed: 12, Judged: 12, Over: 15 * time.Second, All: true,
			Outcomes: []probe.OutcomeCount{{Outcome: wire.OutcomeConnectError, Count: 12}},
			Example:  probe.FailureExample{Outcome: wire.OutcomeConnectError, ErrorType: "connection_refused", Error: "dial tcp 127.0.0.1:1: connect: connection refused"}}
		pool := st[0]
		pool.Name, pool.Regressions = "pool", nil
		pool.Failing = &probe.FailingStatus{Failed: 9, Judged: 14, Over: 15 * time.Second, Replicas: []string{"10.0.0.2:8000", "10.0.0.3:8000"},
			Outcomes: []probe.OutcomeCount{{Outcome: wire.OutcomeHTTPError, Count: 8}, {Outcome: wire.OutcomeTimeout, Count: 1}},
			Example:  probe.FailureExample{Outcome: wire.OutcomeHTTPError, ErrorType: "http_503", Error: "HTTP 503 Service Unavailable", StatusCode: 503}}
		one := pool
		one.Name = "one"
		one.Failing = &probe.FailingStatus{Failed: 7, Judged: 7, Over: 15 * time.Second, All: true, Replicas: []string{"10.0.0.2:8000"},
			Outcomes: []probe.OutcomeCount{{Outcome: wire.OutcomeHTTPError, Count: 7}},
			Example:  probe.FailureExample{Outcome: wire.OutcomeHTTPError, ErrorType: "http_503", Error: "HTTP 503 Service Unavailable", StatusCode: 503}}
		pool.Replicas = []probe.ReplicaStatus{
			{Name: "10.0.0.1:8000", Address: "10.0.0.1:8000"},
			{Name: "10.0.0.2:8000", Address: "10.0.0.2:8000", Failing: &probe.FailingStatus{Failed: 5, Judged: 7}},
			{Name: "10.0.0.3:8000", Address: "10.0.0.3:8000", Failing: &probe.FailingStatus{Failed: 4, Judged: 7}},
		}
		pool.Discovery = &probe.DiscoveryStatus{Mechanism: "file", Replicas: 3, Discovered: 3, MaxReplicas: 64}
		return append(st, gamma, one, pool)
	}
	f := newWebFixture(t, func(o *WebOptions) { o.Status = failing })
	_, _, body := f.do(t, "GET", "/", nil)
	summary := between(body, `<ul class="problems" id="problems"`, "</ul>")
	if summary == "" {
		t.Fatalf("no summary of problems on the page:\n%s", body)
	}
	main := body[strings.Index(body, "<main>"):]
	if i := strings.Index(main, `id="problems"`); i < 0 || i > 200 {
		t.Errorf("the summary is not at the top of the page (at %d of <main>)", i)
	}
	for _, later := range []string{`id="timeline"`, `id="target-alpha"`, `<p>Targets:`} {
		if strings.Index(body, later) < strings.Index(body, `id="problems"`) {
			t.Errorf("%s comes before the summary", later)
		}
	}
	lines := regexp.MustCompile(`(?s)<li id="problem-([^"]+)">(.*?)</li>`).FindAllStringSubmatch(summary, -1)
	got := map[string]string{}
	var order []string
	for _, l := range lines {
		got[l[1]] = l[2]
		order = append(order, l[1])
	}
	if want := []string{"alpha", "beta", "gamma", "one", "pool"}; !slices.Equal(order, want) {
		t.Errorf("problem lines for %v, want %v:\n%s", order, want, summary)
	}
	for target, wants := range map[string][]string{
		"alpha": {`<a href="#target-alpha">alpha</a>`, `<a href="#regression-alpha-chat-ttft">ttft regressed</a> (class <code>chat</code>)`},
		"beta":  {`<a href="#saturated-beta">harness saturated</a>`, `<a href="#overloaded-beta">overloaded</a>`},
		"gamma": {`<a href="#failing-gamma">every request fails</a> (<code>connect_error</code> <code>connection_refused</code>)`},
		"one":   {`<a href="#failing-one">every request fails</a> (<code>http_error</code> <code>http_503</code>, on 1 replica)`},
		"pool":  {`<a href="#failing-pool">most requests fail</a> (<code>http_error</code> <code>http_503</code>, on 2 replicas)`},
	} {
		for _, want := range wants {
			if !strings.Contains(got[target], want) {
				t.Errorf("%s's problem line lacks %q: %q", target, want, got[target])
			}
		}
	}
	// Every link of the summary leads to an element of the page.
	for _, m := range regexp.MustCompile(`href="#([^"]+)"`).FindAllStringSubmatch(summary, -1) {
		if !strings.Contains(body, `id="`+m[1]+`"`) {
			t.Errorf("the summary links #%s, which the page lacks", m[1])
		}
	}
	for _, want := range []string{
		`id="failing-gamma">✖ EVERY REQUEST FAILS — 12 of the 12 requests to end in the last 15s failed: <code>connect_error</code> 12. Example: <code>connection_refused</code> dial tcp 127.0.0.1:1: connect: connection refused. No request succeeds.</div>`,
		`id="failing-one">✖ EVERY REQUEST FAILS ON 1 REPLICA (10.0.0.2:8000) — 7 of the 7 requests to end in the last 15s failed on them: <code>http_error</code> 7. Example: <code>http_503</code> HTTP 503 Service Unavailable (HTTP 503). No request succeeds on them.</div>`,
		`id="failing-pool">✖ MOST REQUESTS FAIL ON 2 REPLICAS (10.0.0.2:8000, 10.0.0.3:8000) — 9 of the 14 requests to end in the last 15s failed on them: <code>http_error</code> 8, <code>timeout</code> 1. Example: <code>http_503</code> HTTP 503 Service Unavailable (HTTP 503).</div>`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks the banner %q", want)
		}
	}
	if row := between(body, `id="replica-pool-10.0.0.2:8000"`, "</tr>"); !strings.Contains(row, "failing") {
		t.Errorf("the failing replica's row does not say so: %q", row)
	}
	if row := between(body, `id="replica-pool-10.0.0.1:8000"`, "</tr>"); strings.Contains(row, "failing") {
		t.Errorf("a healthy replica's row says failing: %q", row)
	}

	// All well: no summary.
	well := newWebFixture(t, func(o *WebOptions) {
		o.Status = func() []probe.TargetStatus {
			st := testStatus()
			st[0].Regressions, st[1].Saturated = nil, false
			return st
		}
	})
	if _, _, body := well.do(t, "GET", "/", nil); strings.Contains(body, `id="problems"`) || strings.Contains(body, `class="problems"`) {
		t.Errorf("a summary of problems when all is well:\n%s", between(body, "<main>", `id="target-alpha"`))
	}
}
