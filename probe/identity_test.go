// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package probe_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/llmprobe/llmprobe/internal/testio"
	"github.com/llmprobe/llmprobe/probe"
	"github.com/llmprobe/llmprobe/sim"
)

// identityChanges is an Observer that is also an IdentityObserver and
// keeps every change.
type identityChanges struct {
	*recorder
	mu  sync.Mutex
	chs []probe.IdentityChange
}

func (c *identityChanges) IdentityChanged(ch probe.IdentityChange) {
	c.mu.Lock()
	c.chs = append(c.chs, ch)
	c.mu.Unlock()
}

func (c *identityChanges) list() []probe.IdentityChange {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]probe.IdentityChange(nil), c.chs...)
}

const identityWorkload = `
global: {warmup: 0s, seed: 7}
workloads:
  w:
    classes:
      - name: c
        prompt_tokens: 8
        output_tokens: 2
targets:
  - name: t
    url: %s
    model: sim-model
    workload: w
    arrival: {process: constant, rate: %v}
    identity: {poll_interval: %s}
`

// waitTarget polls the engine's status of target until cond holds, for at
// most d, and fails the test with its last status if it never does.
func waitTarget(t *testing.T, e *probe.Engine, target, what string, d time.Duration, cond func(probe.TargetStatus) bool) probe.TargetStatus {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		var last probe.TargetStatus
		for _, s := range e.Status() {
			if s.Name == target {
				last = s
			}
		}
		if last.Name == target && cond(last) {
			return last
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s never happened within %v; status %+v, discovery %+v", target, what, d, last, last.Discovery)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func shutdown(t *testing.T, e *probe.Engine) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := e.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
}

// TestEngineFollowsTargetIdentity runs the engine against a simulator
// whose fingerprint, version and Server header change 3 s after its
// start (the version endpoint is asked 1 s after the engine's start, then
// every second): each is one change, told in the status, the log, the observer
// and (for the two a response reveals) a span event; the model does not
// change. The identity is kept across a reload that restarts the target
// and forgotten when a reload removes it.
func TestEngineFollowsTargetIdentity(t *testing.T) {
	_, url := startSim(t, func(c *sim.Config) {
		c.ZeroLatency = true
		c.Identity = sim.Identity{Fingerprint: "fp-a", Version: "0.1.0", Server: "sim/1"}
		c.IdentitySteps = []sim.IdentityStep{{After: 3 * time.Second, Fingerprint: "fp-b", Version: "0.2.0", Server: "sim/2"}}
	})
	var logs testio.Buffer
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	defer tp.Shutdown(context.Background())
	changes := &identityChanges{recorder: newRecorder()}
	e := probe.NewEngine(probe.Options{
		Observer: probe.Observers{changes},
		Logger:   slog.New(slog.NewTextHandler(&logs, nil)),
		Tracer:   tp.Tracer("test"),
	})
	if err := e.Apply(loadConfig(t, identityWorkload, url, 40, "1s")); err != nil {
		t.Fatal(err)
	}
	defer shutdown(t, e)
	before := waitTarget(t, e, "t", "the first identity", time.Minute, func(s probe.TargetStatus) bool {
		return s.Identity.Current.Version != "" && s.Identity.Current.Fingerprint != ""
	})
	if id := before.Identity.Current; id.Fingerprint != "fp-a" || id.Version != "0.1.0" || id.Server != "sim/1" {
		t.Skipf("the machine is too slow for this test: the first identity seen was %+v, after the step", id)
	}
	st := waitTarget(t, e, "t", "the three changes", time.Minute, func(s probe.TargetStatus) bool {
		id := s.Identity.Current
		return id.Fingerprint == "fp-b" && id.Server == "sim/2" && id.Version == "0.2.0"
	})
	id := st.Identity
	if id.Current.Model != "sim-model" || id.VersionEndpoint != "/version" || id.VersionError != "" {
		t.Errorf("identity %+v", id)
	}
	want := map[string]uint64{probe.IdentityModel: 0, probe.IdentityFingerprint: 1, probe.IdentityServer: 1, probe.IdentityVersion: 1}
	for what, n := range want {
		if id.Changes[what] != n {
			t.Errorf("%s changed %d times, want %d (%+v)", what, id.Changes[what], n, id.Changes)
		}
	}
	if len(id.Recent) != 3 || id.LastChange != id.Recent[0].At {
		t.Errorf("recent %+v, last %v", id.Recent, id.LastChange)
	}
	got := map[string]probe.IdentityChange{}
	for _, ch := range changes.list() {
		got[ch.What] = ch
	}
	for what, from := range map[string]string{probe.IdentityFingerprint: "fp-a", probe.IdentityServer: "sim/1", probe.IdentityVersion: "0.1.0"} {
		if ch := got[what]; ch.Target != "t" || ch.From != from || ch.To != id.Current.Get(what) {
			t.Errorf("observer: %s change %+v", what, ch)
		}
	}
	if len(changes.list()) != 3 {
		t.Errorf("observer told %d changes: %+v", len(changes.list()), changes.list())
	}
	for _, what := range []string{"fingerprint from=fp-a to=fp-b", "server from=sim/1 to=sim/2", "version from=0.1.0 to=0.2.0"} {
		if !strings.Contains(logs.String(), `msg="target identity changed" target=t what=`+what) {
			t.Errorf("no log line for %s in\n%s", what, logs.String())
		}
	}
	events := map[string]string{}
	for _, s := range spans.Ended() {
		for _, ev := range s.Events() {
			if ev.Name != probe.IdentityChangedEvent {
				continue
			}
			attrs := map[string]string{}
			for _, kv := range ev.Attributes {
				attrs[string(kv.Key)] = kv.Value.Emit()
			}
			events[attrs["llmprobe.identity.what"]] = attrs["llmprobe.identity.from"] + "->" + attrs["llmprobe.identity.to"]
		}
	}
	if events["fingerprint"] != "fp-a->fp-b" || events["server"] != "sim/1->sim/2" || len(events) != 2 {
		t.Errorf("span events %v", events)
	}

	// A reload that restarts the target keeps its identity.
	if err := e.Apply(loadConfig(t, identityWorkload, url, 30, "1s")); err != nil {
		t.Fatal(err)
	}
	if id := waitTarget(t, e, "t", "the restarted target", time.Minute, func(s probe.TargetStatus) bool { return s.ArrivalRate == 30 }).Identity; id.Current.Fingerprint != "fp-b" || id.Changes[probe.IdentityFingerprint] != 1 {
		t.Errorf("after a reload: %+v", id)
	}
	// One that removes it forgets it.
	other := strings.Replace(identityWorkload, "name: t\n", "name: u\n", 1)
	if err := e.Apply(loadConfig(t, other, url, 30, "1s")); err != nil {
		t.Fatal(err)
	}
	if err := e.Apply(loadConfig(t, identityWorkload, url, 30, "0s")); err != nil {
		t.Fatal(err)
	}
	if id := waitTarget(t, e, "t", "the re-added target", time.Minute, func(probe.TargetStatus) bool { return true }).Identity; id.Changes[probe.IdentityFingerprint] != 0 || id.Current.Version != "" {
		t.Errorf("a removed and re-added target kept %+v", id)
	}
}

// TestEngineFollowsOllamaVersion: Ollama says its version only at GET
// /api/version, at the root next to /v1 ({"version":"0.17.4"}, gin's
// JSON); an upgrade behind the same URL is one change of the target's
// version, told like any other. The simulator stands in for Ollama's
// OpenAI-compatible API (and, without a version of its own, answers
// /version and the others 404, as Ollama does).
func TestEngineFollowsOllamaVersion(t *testing.T) {
	s, _ := startSim(t, func(c *sim.Config) { c.ZeroLatency = true })
	var version atomic.Value
	version.Store("0.17.4")
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/version", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		fmt.Fprintf(w, `{"version":%q}`, version.Load())
	})
	mux.Handle("/", s.Handler())
	ollama := httptest.NewServer(mux)
	defer ollama.Close()
	changes := &identityChanges{recorder: newRecorder()}
	e := probe.NewEngine(probe.Options{Observer: probe.Observers{changes}, Logger: slog.New(slog.DiscardHandler)})
	if err := e.Apply(loadConfig(t, identityWorkload, ollama.URL+"/v1", 5, "1s")); err != nil {
		t.Fatal(err)
	}
	defer shutdown(t, e)
	st := waitTarget(t, e, "t", "Ollama's version", 30*time.Second, func(s probe.TargetStatus) bool {
		return s.Identity.Current.Version != "" || s.Identity.VersionError != ""
	})
	if id := st.Identity; id.Current.Version != "0.17.4" || id.VersionEndpoint != "/api/version" || id.VersionError != "" {
		t.Fatalf("identity %+v, want version 0.17.4 from /api/version", id)
	}
	version.Store("0.17.5")
	id := waitTarget(t, e, "t", "the upgrade", 30*time.Second, func(s probe.TargetStatus) bool {
		return s.Identity.Current.Version == "0.17.5"
	}).Identity
	if id.Changes[probe.IdentityVersion] != 1 || id.VersionEndpoint != "/api/version" {
		t.Errorf("identity %+v, want one version change, from /api/version", id)
	}
	var told []probe.IdentityChange
	for _, ch := range changes.list() {
		if ch.What == probe.IdentityVersion {
			told = append(told, ch)
		}
	}
	if len(told) != 1 || told[0].Target != "t" || told[0].From != "0.17.4" || told[0].To != "0.17.5" {
		t.Errorf("version changes told: %+v", told)
	}
}

// roundRobin is a reverse proxy over backends, one after the other, or
// only to backend alone-1 once alone is set.
type roundRobin struct {
	proxies []*httputil.ReverseProxy
	next    atomic.Uint64
	alone   atomic.Int64
}

func newRoundRobin(t *testing.T, bases ...string) *roundRobin {
	rr := &roundRobin{}
	for _, b := range bases {
		u, err := url.Parse(b)
		if err != nil {
			t.Fatal(err)
		}
		p := httputil.NewSingleHostReverseProxy(u)
		p.FlushInterval = -1
		rr.proxies = append(rr.proxies, p)
	}
	return rr
}

func (rr *roundRobin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	i := int(rr.next.Add(1) % uint64(len(rr.proxies)))
	if a := rr.alone.Load(); a > 0 {
		i = int(a - 1)
	}
	rr.proxies[i].ServeHTTP(w, r)
}

// TestIdentityRoundRobinDoesNotFlap: two builds behind a round-robin load
// balancer alternate response by response; that is no change at all
// (IdentityConfirmations in a row are needed). Once the balancer sends
// everything to the new build, fingerprint and server change once each,
// and stay.
func TestIdentityRoundRobinDoesNotFlap(t *testing.T) {
	_, urlA := startSim(t, func(c *sim.Config) {
		c.ZeroLatency = true
		c.Identity = sim.Identity{Fingerprint: "fp-a", Server: "build-a"}
	})
	_, urlB := startSim(t, func(c *sim.Config) {
		c.ZeroLatency = true
		c.Identity = sim.Identity{Fingerprint: "fp-b", Server: "build-b"}
	})
	rr := newRoundRobin(t, strings.TrimSuffix(urlA, "/v1"), strings.TrimSuffix(urlB, "/v1"))
	srv := httptest.NewServer(rr)
	defer srv.Close()
	lb := srv.URL
	rec := newRecorder()
	e := probe.NewEngine(probe.Options{Observer: rec, Logger: slog.New(slog.DiscardHandler)})
	if err := e.Apply(loadConfig(t, identityWorkload, lb+"/v1", 50, "0s")); err != nil {
		t.Fatal(err)
	}
	defer shutdown(t, e)
	st := waitTarget(t, e, "t", "200 answers through the balancer", time.Minute, func(s probe.TargetStatus) bool { return s.Outcomes["success"] >= 200 })
	if c := st.Identity.Changes; c[probe.IdentityFingerprint] != 0 || c[probe.IdentityServer] != 0 {
		t.Fatalf("alternating builds counted as changes: %+v (identity %+v)", c, st.Identity.Current)
	}
	if cur := st.Identity.Current; cur.Fingerprint != "fp-a" && cur.Fingerprint != "fp-b" {
		t.Fatalf("identity %+v", cur)
	}
	// Everything to the build that is not current.
	first := st.Identity.Current.Fingerprint
	if first == "fp-a" {
		rr.alone.Store(2)
	} else {
		rr.alone.Store(1)
	}
	n := st.Outcomes["success"]
	st = waitTarget(t, e, "t", "the new build's identity", time.Minute, func(s probe.TargetStatus) bool {
		return s.Identity.Current.Fingerprint != first && s.Outcomes["success"] >= n+100
	})
	if c := st.Identity.Changes; c[probe.IdentityFingerprint] != 1 || c[probe.IdentityServer] != 1 {
		t.Errorf("one rollout counted %+v changes", c)
	}
}

// TestIdentityFlappingLogBounded: a simulator whose fingerprint flips
// every 600 ms (50 req/s: 30 answers each time, past the 16 in a row a
// change needs) changes the target's identity every time, and every
// change still counts; the log has the first change at INFO and then at
// most one summary per (scaled) minute, whose counts add up to every
// change.
func TestIdentityFlappingLogBounded(t *testing.T) {
	const (
		every = 2 * time.Second
		flips = 12
		phase = 600 * time.Millisecond
	)
	_, url := startSim(t, func(c *sim.Config) {
		c.ZeroLatency = true
		c.Identity = sim.Identity{Fingerprint: "fp-a", Server: "sim"}
		for i := 1; i <= flips; i++ {
			fp := "fp-b"
			if i%2 == 0 {
				fp = "fp-a"
			}
			c.IdentitySteps = append(c.IdentitySteps, sim.IdentityStep{After: time.Duration(i) * phase, Fingerprint: fp})
		}
	})
	var logs testio.Buffer
	e := probe.NewEngine(probe.Options{Logger: jsonLogger(&logs)})
	probe.SetLogTiming(e, 0, every)
	if err := e.Apply(loadConfig(t, identityWorkload, url, 50, "0s")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Duration(flips+1) * phase)
	st := waitTarget(t, e, "t", "the fingerprint changes", 10*time.Second, func(s probe.TargetStatus) bool {
		return s.Identity.Changes[probe.IdentityFingerprint] >= 4
	})
	changes := st.Identity.Changes[probe.IdentityFingerprint]
	isIdentity := func(r logRecord) bool {
		return r.str("what") == probe.IdentityFingerprint && (r.str("msg") == "target identity changed" || r.str("msg") == "target identity flapping")
	}
	logged := func(rs []logRecord) (n int) {
		for _, r := range byTarget(rs, "t", isIdentity) {
			switch r.str("msg") {
			case "target identity changed":
				n++
			case "target identity flapping":
				var c int
				fmt.Sscan(r.str("changes"), &c)
				n += c
			}
		}
		return n
	}
	// The flips are over: the last summary comes within an interval.
	waitLog(t, &logs, fmt.Sprintf("every one of the %d changes in the log", changes), 3*every+5*time.Second, func(rs []logRecord) bool {
		return uint64(logged(rs)) == changes
	})
	shutdown(t, e)
	end := time.Now()
	if changes != st.Identity.Changes[probe.IdentityFingerprint] || changes < 4 {
		t.Fatalf("%d changes counted", changes)
	}
	lines := byTarget(records(t, &logs), "t", isIdentity)
	t.Logf("%d fingerprint changes, %d lines", changes, len(lines))
	if lines[0].str("msg") != "target identity changed" || lines[0].str("level") != "INFO" {
		t.Errorf("first line %v, want the change at INFO", lines[0])
	}
	for i, l := range lines[1:] {
		if l.str("msg") != "target identity flapping" || l.str("level") != "WARN" || l.str("to") == "" {
			t.Errorf("line %d: %v, want a summary", i+1, l)
		}
	}
	checkSpacing(t, "identity", lines, every, end)
}
