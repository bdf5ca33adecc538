// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package probe_test

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmprobe/llmprobe/internal/testio"
	"github.com/llmprobe/llmprobe/probe"
	"github.com/llmprobe/llmprobe/sim"
)

// The messages of the failing log (failing.go).
const (
	msgEveryFails        = "every request to the target fails"
	msgMostFail          = "most requests to the target fail"
	msgReplicasEveryFail = "every request to replicas of the target fails"
	msgReplicasMostFail  = "most requests to replicas of the target fail"
	msgRecovered         = "requests to the target succeed again"
)

// failingLine reports whether r is a failing target's WARN line.
func (r logRecord) failingLine() bool {
	switch r.str("msg") {
	case msgEveryFails, msgMostFail, msgReplicasEveryFail, msgReplicasMostFail:
		return r.str("level") == "WARN"
	}
	return false
}

// closedPort returns a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// TestFailingTargetsSaidOutLoud runs the engine against five targets: a
// server answering 401 with the API key it was sent in its body, a closed
// port, two servers answering 404 (the second starts to proxy to a
// simulator half-way), and a healthy simulator; the failing window and
// the interval of repeated lines are scaled down (2 s, 3 s for 15 s and
// 1 m). Each failing target gets a WARN line naming its outcome, error type
// and a sanitised error with its counts, then at most one per interval;
// the healthy one none; the one that recovers one INFO line and no WARN
// after it; no line holds the API key.
func TestFailingTargetsSaidOutLoud(t *testing.T) {
	const (
		window = 2 * time.Second
		every  = 3 * time.Second
		apiKey = "sk-llmprobe-echoed-4f9a1c7e0b"
	)
	_, simURL := startSim(t, func(c *sim.Config) { c.ZeroLatency = true })
	unauthorised := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, `{"error":{"message":"invalid API key: %s"}}`, r.Header.Get("Authorization"))
	}))
	defer unauthorised.Close()
	missing := httptest.NewServer(http.NotFoundHandler())
	defer missing.Close()
	simBase, err := url.Parse(strings.TrimSuffix(simURL, "/v1"))
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(simBase)
	proxy.FlushInterval = -1
	var fixed atomic.Bool
	recovering := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if fixed.Load() {
			proxy.ServeHTTP(w, r)
			return
		}
		http.NotFound(w, r)
	}))
	defer recovering.Close()

	cfg := loadConfig(t, `
global: {warmup: 0s, request_timeout: 5s}
workloads:
  w: {classes: [{name: c, prompt_tokens: 8, output_tokens: 2}]}
targets:
  - {name: unauthorised, url: "%s/v1", model: sim-model, workload: w, arrival: {process: constant, rate: 5},
     http_client_config: {authorization: {credentials: %s}}}
  - {name: refused, url: "http://%s/v1", model: sim-model, workload: w, arrival: {process: constant, rate: 5}}
  - {name: missing, url: "%s/v1", model: sim-model, workload: w, arrival: {process: constant, rate: 5}}
  - {name: recovering, url: "%s/v1", model: sim-model, workload: w, arrival: {process: constant, rate: 5}}
  - {name: healthy, url: "%s", model: sim-model, workload: w, arrival: {process: constant, rate: 5}}
`, unauthorised.URL, apiKey, closedPort(t), missing.URL, recovering.URL, simURL)

	var logs testio.Buffer
	e := probe.NewEngine(probe.Options{Logger: jsonLogger(&logs)})
	probe.SetLogTiming(e, window, every)
	start := time.Now()
	if err := e.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	failing := []string{"unauthorised", "refused", "missing", "recovering"}
	waitLog(t, &logs, "a WARN line for every failing target", 30*time.Second, func(rs []logRecord) bool {
		for _, name := range failing {
			if len(byTarget(rs, name, logRecord.failingLine)) == 0 {
				return false
			}
		}
		return true
	})
	for _, name := range failing {
		first := byTarget(records(t, &logs), name, logRecord.failingLine)[0]
		t.Logf("%s: first WARN %v after the start: %v", name, first.time(t).Sub(start).Round(10*time.Millisecond), first)
	}
	// Three more intervals of failures: reminders, one per interval.
	time.Sleep(3*every + time.Second)
	fixed.Store(true)
	waitLog(t, &logs, "the recovery line", 30*time.Second, func(rs []logRecord) bool {
		return len(byTarget(rs, "recovering", func(r logRecord) bool { return r.str("msg") == msgRecovered })) > 0
	})
	time.Sleep(2 * every) // the recovered target stays quiet
	shutdown(t, e)
	end := time.Now()

	rs := records(t, &logs)
	if strings.Contains(logs.String(), apiKey) {
		t.Errorf("the log holds the API key:\n%s", logs.String())
	}
	want := map[string]struct{ outcome, errorType, status string }{
		"unauthorised": {"http_error", "http_401", "401"},
		"refused":      {"connect_error", "connection_refused", ""},
		"missing":      {"http_error", "http_404", "404"},
		"recovering":   {"http_error", "http_404", "404"},
	}
	for _, name := range failing {
		lines := byTarget(rs, name, logRecord.failingLine)
		w := want[name]
		for i, l := range lines {
			if l.str("msg") != msgEveryFails || l.str("outcome") != w.outcome || l.str("error_type") != w.errorType ||
				l.str("status_code") != w.status || l.str("error") == "" || l.str("failed") != l.str("of") || l[`failed`].(float64) < 3 || l.str("over") == "" {
				t.Errorf("%s: WARN line %d: %v", name, i, l)
			}
		}
		checkSpacing(t, name+" WARN", lines, every, end)
		if name != "recovering" && len(lines) < 3 {
			t.Errorf("%s: %d WARN lines over %v of failures, want a reminder every %v", name, len(lines), end.Sub(start), every)
		}
	}
	if l := byTarget(rs, "unauthorised", logRecord.failingLine); len(l) > 0 && !strings.Contains(l[0].str("error"), "invalid API key") {
		t.Errorf("the 401's line does not quote the server's message: %v", l[0])
	}
	if l := byTarget(rs, "healthy", logRecord.failingLine); len(l) > 0 {
		t.Errorf("the healthy target was logged as failing: %v", l)
	}
	for _, name := range []string{"unauthorised", "refused", "missing", "healthy"} {
		if l := byTarget(rs, name, func(r logRecord) bool { return r.str("msg") == msgRecovered }); len(l) > 0 {
			t.Errorf("%s: recovery lines %v", name, l)
		}
	}
	// One recovery line, at INFO, and no WARN after it.
	idx := slices.IndexFunc(rs, func(r logRecord) bool { return r.str("target") == "recovering" && r.str("msg") == msgRecovered })
	if n := len(byTarget(rs, "recovering", func(r logRecord) bool { return r.str("msg") == msgRecovered })); n != 1 || rs[idx].str("level") != "INFO" {
		t.Errorf("recovering: %d recovery lines (want 1, INFO): %v", n, rs[idx])
	}
	if after := byTarget(rs[idx:], "recovering", logRecord.failingLine); len(after) > 0 {
		t.Errorf("recovering: WARN after the recovery line: %v", after)
	}
}

// TestFailingReplicasLoggedPerTarget: a discovery target whose file_sd
// lists three simulators, one of which answers every request 503 (the
// simulator's fault injection): the log has one WARN line per interval
// for the target, saying that every request to a replica of it fails and
// naming that replica only, not a line per replica; the target's status
// and that replica's say it fails.
func TestFailingReplicasLoggedPerTarget(t *testing.T) {
	const every = 3 * time.Second
	_, addrs := replicaSims(t, 3, func(i int, c *sim.Config) {
		c.ZeroLatency = true
		if i == 1 {
			c.Faults.HTTP503.Probability = 1
		}
	})
	sd := filepath.Join(t.TempDir(), "pool.json")
	writeFileSD(t, sd, addrs...)
	cfg := loadConfig(t, `
global: {warmup: 0s}
workloads:
  w: {classes: [{name: c, prompt_tokens: 8, output_tokens: 2}]}
targets:
  - name: pool
    model: sim-model
    workload: w
    arrival: {process: constant, rate: 5}
    rate_per: replica
    discovery:
      file: {files: [%s], refresh_interval: 1s}
`, sd)
	var logs testio.Buffer
	e := probe.NewEngine(probe.Options{Logger: jsonLogger(&logs)})
	probe.SetLogTiming(e, 2*time.Second, every)
	if err := e.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	waitLog(t, &logs, "the pool's WARN line", 30*time.Second, func(rs []logRecord) bool {
		return len(byTarget(rs, "pool", logRecord.failingLine)) > 0
	})
	time.Sleep(3*every + time.Second)
	st := waitTarget(t, e, "pool", "the failing replica in the status", 10*time.Second, func(s probe.TargetStatus) bool { return s.Failing != nil })
	shutdown(t, e)
	end := time.Now()

	if f := st.Failing; !slices.Equal(f.Replicas, []string{addrs[1]}) || !f.All || f.Failed == 0 || f.Failed != f.Judged {
		t.Errorf("the target's verdict: %+v", f)
	}
	for _, r := range st.Replicas {
		if (r.Failing != nil) != (r.Name == addrs[1]) {
			t.Errorf("replica %s: failing %+v", r.Name, r.Failing)
		}
	}
	rs := records(t, &logs)
	lines := byTarget(rs, "pool", logRecord.failingLine)
	t.Logf("%d WARN lines for the pool; the first: %v", len(lines), lines[0])
	checkSpacing(t, "pool WARN", lines, every, end)
	for i, l := range lines {
		if l.str("replicas") != addrs[1] || l.str("outcome") != "http_error" || l.str("error_type") != "http_503" || l.str("msg") != msgReplicasEveryFail || l.str("replicas_judged") != "3" {
			t.Errorf("WARN line %d: %v", i, l)
		}
	}
	for _, r := range rs {
		if r.failingLine() && r.str("target") != "pool" {
			t.Errorf("a failing line not of the target: %v", r)
		}
	}
}
