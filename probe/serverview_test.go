// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package probe_test

import (
	"bytes"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmprobe/llmprobe/diagnosis"
	"github.com/llmprobe/llmprobe/probe"
	"github.com/llmprobe/llmprobe/servermetrics"
)

// serverViewConfig is one target probing url at rate req/s with
// server_metrics (the lines given, indented under it).
const serverViewConfig = `
global: {warmup: 0s, seed: 3}
workloads:
  w:
    classes:
      - {name: c, prompt_tokens: 32, output_tokens: 4}
targets:
  - name: t
    url: %s
    model: sim-model
    workload: w
    arrival: {process: constant, rate: %v}
    extra_body: {ignore_eos: true}
    http_client_config: {authorization: {credentials: sk-target-secret}}
    server_metrics:
%s
`

// delayProxy is a reverse proxy that holds every request for delay before
// passing it to base: a gateway the engine's own histograms do not see.
func delayProxy(t *testing.T, base string, delay time.Duration) string {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.FlushInterval = -1 // stream every chunk at once
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(delay)
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestServerViewPathGap: a gateway holding each request 50 ms in front of
// the simulator, probed at 1 req/s, the simulator's /metrics read every
// 5 s: over the second window, the mean path gap (the probe's mean TTFT minus the server's, from
// _sum/_count) is within 5 ms of the delay, the p50 gap within the
// server's bucket of it; the server's figures are those of the window.
// A reload with the same server_metrics keeps the reader.
func TestServerViewPathGap(t *testing.T) {
	if testing.Short() {
		t.Skip("16 s at 1 req/s")
	}
	const delay = 50 * time.Millisecond
	_, simURL := startSim(t, nil)
	base := strings.TrimSuffix(simURL, "/v1")
	gw := delayProxy(t, base, delay)
	cfg := loadConfig(t, serverViewConfig, gw+"/v1", 1, "      url: "+base+"/metrics\n      interval: 5s")
	e := applyEngine(t, cfg, probe.Options{})
	// The second window: the first holds the first request's new
	// connections (client to gateway, gateway to engine).
	st := waitTarget(t, e, "t", "a second server window", 30*time.Second, func(s probe.TargetStatus) bool {
		return s.Server != nil && s.Server.Gap != nil && s.Server.Reads[servermetrics.OutcomeOK] >= 3
	})
	sv := st.Server
	g := sv.Gap
	t.Logf("window %v: probe %d requests, mean %.1f ms, p50 %.1f ms; server %g, mean %.1f ms, p50 %.1f ms [%g, %g]; gap mean %.2f ms, p50 %.2f ms (bucket error ±%.1f ms), p99 %.2f ms",
		sv.Window.End.Sub(sv.Window.Start).Round(time.Millisecond), sv.Probe.Count, sv.Probe.Mean*1e3, sv.Probe.P50*1e3, g.ServerCount, g.ServerMean*1e3,
		g.ServerP50.Value*1e3, g.ServerP50.Lower, g.ServerP50.Upper, g.Mean*1e3, g.P50*1e3, g.P50Error*1e3, g.P99*1e3)
	if sv.Engine != "vllm" || !sv.Up || sv.Why != "" || sv.Reads[servermetrics.OutcomeOK] < 2 {
		t.Fatalf("server view: %+v", sv)
	}
	if math.Abs(g.Mean-delay.Seconds()) > 0.005 {
		t.Errorf("mean gap %.2f ms, want %v ± 5 ms", g.Mean*1e3, delay)
	}
	if width := g.ServerP50.Upper - g.ServerP50.Lower; math.Abs(g.P50-delay.Seconds()) > width+0.005 {
		t.Errorf("p50 gap %.2f ms, want %v within the server's bucket (%.0f ms wide) and 5 ms", g.P50*1e3, delay, width*1e3)
	}
	if w := sv.Window; w.Running == nil || w.Waiting == nil || w.KVUsage == nil || w.Finished == nil || *w.Finished < 3 {
		t.Errorf("window figures: %+v missing %v", w, w.Missing)
	}
	reads := sv.Reads[servermetrics.OutcomeOK]
	if err := e.Apply(loadConfig(t, serverViewConfig, gw+"/v1", 1, "      url: "+base+"/metrics\n      interval: 5s")); err != nil {
		t.Fatal(err)
	}
	if again := waitTarget(t, e, "t", "the status", time.Second, func(s probe.TargetStatus) bool { return s.Server != nil }); again.Server.Reads[servermetrics.OutcomeOK] < reads || again.Server.Gap == nil {
		t.Errorf("the reload restarted the reader: %+v", again.Server)
	}
}

// hostile is a /metrics server of a hostile kind.
func hostile(t *testing.T, kind string, other string) string {
	t.Helper()
	var n atomic.Int64
	good := func(k float64) string {
		return fmt.Sprintf("# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{model_name=\"sim-model\"} 1\n"+
			"# TYPE vllm:request_success_total counter\nvllm:request_success_total{model_name=\"sim-model\"} %g\n", k)
	}
	huge := bytes.Repeat([]byte("junk_series{a=\"b\"} 1\n"), (33<<20)/21)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := n.Add(1)
		switch kind {
		case "huge":
			_, _ = w.Write(huge)
		case "trickling":
			w.Write([]byte("# TYPE vllm:num_requests_running gauge\n"))
			for range 100 {
				if _, err := w.Write([]byte("#\n")); err != nil {
					return
				}
				w.(http.Flusher).Flush()
				select {
				case <-r.Context().Done():
					return
				case <-time.After(100 * time.Millisecond):
				}
			}
		case "nan":
			fmt.Fprintf(w, "%s# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{model_name=\"sim-model\"} NaN\n", good(float64(i)))
		case "wrong-types":
			fmt.Fprintf(w, "%s# TYPE vllm:time_to_first_token_seconds gauge\nvllm:time_to_first_token_seconds{model_name=\"sim-model\"} 3\n", good(float64(i)))
		case "reset":
			fmt.Fprint(w, good(float64(100/i))) // 100, 50, 33: a restarted engine each time
		case "no-engine":
			fmt.Fprint(w, "# TYPE go_goroutines gauge\ngo_goroutines 12\n")
		case "500":
			http.Error(w, "engine down", http.StatusInternalServerError)
		case "redirect":
			http.Redirect(w, r, other+"/metrics", http.StatusFound)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestServerViewHostile: a huge, trickling, NaN-valued, wrongly typed,
// resetting, engine-less, failing or redirecting /metrics leaves the
// probing untouched (every arrival sent, every request answered) and the
// server view says why it has no figure.
func TestServerViewHostile(t *testing.T) {
	if testing.Short() {
		t.Skip("4 s of probing per case")
	}
	probe.SetVerdictEvery(t, 500*time.Millisecond)
	var captured atomic.Int64
	capture := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		captured.Add(1)
	}))
	defer capture.Close()
	for _, c := range []struct {
		kind string
		why  func(*probe.ServerStatus) string // "" when right
	}{
		// Read whole within the timeout, it is too large; on a slow
		// machine (-race) the timeout comes first: bounded either way.
		{"huge", func(s *probe.ServerStatus) string {
			if whyContains("body larger than 33554432 bytes", servermetrics.OutcomeTooLarge)(s) == "" {
				return ""
			}
			return whyContains("no answer within 1s", servermetrics.OutcomeTimeout)(s)
		}},
		{"trickling", whyContains("no answer within 1s", servermetrics.OutcomeTimeout)},
		{"500", whyContains("500 Internal Server Error", servermetrics.OutcomeError)},
		{"redirect", whyContains("redirect", servermetrics.OutcomeError)},
		{"no-engine", whyContains("no known engine's metrics", servermetrics.OutcomeNotAnEngine)},
		{"nan", missing(servermetrics.FigureWaiting, "vllm:num_requests_waiting: the server sent NaN")},
		{"wrong-types", missing(servermetrics.FigureTTFT, "vllm:time_to_first_token_seconds is a gauge, not a histogram")},
		{"reset", func(s *probe.ServerStatus) string {
			// 100, then 50 or 33: the fallen counter's new value is the delta.
			if s.Window == nil || s.Window.Finished == nil || *s.Window.Finished != 50 && *s.Window.Finished != 33 {
				return fmt.Sprintf("window %+v", s.Window)
			}
			return ""
		}},
	} {
		t.Run(c.kind, func(t *testing.T) {
			t.Parallel()
			srv, simURL := startSim(t, nil)
			metrics := hostile(t, c.kind, capture.URL)
			cfg := loadConfig(t, serverViewConfig, simURL, 5, "      url: "+metrics+"/metrics\n      interval: 1s\n      timeout: 1s")
			rec := newRecorder()
			e := applyEngine(t, cfg, probe.Options{Observer: rec})
			st := waitTarget(t, e, "t", "two reads", 15*time.Second, func(s probe.TargetStatus) bool {
				n := uint64(0)
				for _, v := range s.Server.Reads {
					n += v
				}
				return n >= 2 && s.Diagnosis != nil && s.Diagnosis.At.After(s.Server.LastRead)
			})
			shutdown(t, e)
			if why := c.why(st.Server); why != "" {
				t.Errorf("server view: %s (%+v)", why, st.Server)
			}
			// Never a guess: no usable server view is unknown (or
			// harness, which wins, when the machine is too busy for the
			// probe to vouch for its own figures).
			if d := st.Diagnosis; (d.Cause != diagnosis.Unknown || !strings.Contains(d.Sentence, "unknown: ")) && d.Cause != diagnosis.Harness {
				t.Errorf("verdict %s: %s", d.Cause, d.Sentence)
			}
			t.Logf("%s: verdict %s", c.kind, st.Diagnosis.Sentence)
			t.Logf("%s: no server view: %s; reads %v", c.kind, st.Server.Why, st.Server.Reads)
			rec.mu.Lock()
			sent, sched, dropped := rec.sent["t"], rec.scheduled["t"], len(rec.dropped)
			rec.mu.Unlock()
			served := int(simCount(t, srv, "vllm:request_success_total"))
			if sent < 5 || sent != sched || dropped != 0 || served != sent {
				t.Errorf("probing disturbed: scheduled %d, sent %d, dropped %d, served %d", sched, sent, dropped, served)
			}
		})
	}
	t.Cleanup(func() {
		if n := captured.Load(); n != 0 {
			t.Errorf("the other origin received %d requests through the redirect", n)
		}
	})
}

func whyContains(want, outcome string) func(*probe.ServerStatus) string {
	return func(s *probe.ServerStatus) string {
		if s.Up || s.Window != nil || !strings.Contains(s.Why, want) || s.Reads[outcome] == 0 {
			return fmt.Sprintf("want no window, why %q, outcome %s", want, outcome)
		}
		return ""
	}
}

func missing(fig, want string) func(*probe.ServerStatus) string {
	return func(s *probe.ServerStatus) string {
		if s.Window == nil || s.Window.Missing[fig] != want {
			return fmt.Sprintf("want %s missing: %q", fig, want)
		}
		return ""
	}
}

// TestServerViewNeverSendsTheAPIKey: the metrics origin gets
// server_metrics' own credentials, never the target's API key.
func TestServerViewNeverSendsTheAPIKey(t *testing.T) {
	_, simURL := startSim(t, nil)
	var mu sync.Mutex
	var auths []string
	metrics := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auths = append(auths, r.Header.Get("Authorization"))
		mu.Unlock()
		fmt.Fprint(w, "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 0\n")
	}))
	defer metrics.Close()
	cfg := loadConfig(t, serverViewConfig, simURL, 2, "      url: "+metrics.URL+"/metrics\n      interval: 1s\n      http_client_config: {bearer_token: metrics-token}")
	e := applyEngine(t, cfg, probe.Options{})
	waitTarget(t, e, "t", "two reads", 10*time.Second, func(s probe.TargetStatus) bool { return s.Server.Reads[servermetrics.OutcomeOK] >= 2 })
	shutdown(t, e)
	mu.Lock()
	defer mu.Unlock()
	for _, a := range auths {
		if a != "Bearer metrics-token" || strings.Contains(a, "sk-target-secret") {
			t.Errorf("the metrics origin got Authorization %q", a)
		}
	}
}

// TestServerViewPerReplica: a discovery target with server_metrics path
// reads each of its 3 simulator replicas at its own address, and a
// replica that leaves stops being read.
func TestServerViewPerReplica(t *testing.T) {
	_, addrs := replicaSims(t, 3, nil)
	sd := filepath.Join(t.TempDir(), "pool.json")
	writeFileSD(t, sd, addrs...)
	cfg := loadConfig(t, `
global: {warmup: 0s}
workloads:
  w:
    classes:
      - {name: c, prompt_tokens: 20, output_tokens: 4}
targets:
  - name: pool
    model: sim-model
    workload: w
    arrival: {rate: 3}
    rate_per: replica
    discovery:
      file: {files: [%s], refresh_interval: 1s}
      grace_period: 1s
    server_metrics: {path: /metrics, interval: 1s}
`, sd)
	e := applyEngine(t, cfg, probe.Options{})
	st := waitPool(t, e, "pool", 15*time.Second, func(s probe.TargetStatus) bool {
		if len(s.Replicas) != 3 {
			return false
		}
		for _, r := range s.Replicas {
			if r.Server == nil || r.Server.Window == nil || r.Server.Window.TTFT == nil || r.Server.Probe.Count == 0 {
				return false
			}
		}
		return true
	})
	if st.Server != nil {
		t.Errorf("target-level server view with path: %+v", st.Server)
	}
	for _, r := range st.Replicas {
		if want := "http://" + r.Address + "/metrics"; r.Server.URL != want || r.Server.Engine != "vllm" {
			t.Errorf("replica %s: read %s (%s), want %s", r.Name, r.Server.URL, r.Server.Engine, want)
		}
	}
	writeFileSD(t, sd, addrs[:2]...)
	waitPool(t, e, "pool", 15*time.Second, func(s probe.TargetStatus) bool { return len(s.Replicas) == 2 })
}

// TestDiagnosisPerReplica: a discovery target reading each replica's
// path has a verdict per replica, and its own drawn from theirs.
func TestDiagnosisPerReplica(t *testing.T) {
	probe.SetVerdictEvery(t, time.Second)
	_, addrs := replicaSims(t, 2, nil)
	sd := filepath.Join(t.TempDir(), "pool.json")
	writeFileSD(t, sd, addrs...)
	cfg := loadConfig(t, `
global: {warmup: 0s}
workloads:
  w:
    classes:
      - {name: c, prompt_tokens: 20, output_tokens: 4}
targets:
  - name: pool
    model: sim-model
    workload: w
    arrival: {rate: 2}
    rate_per: replica
    discovery:
      file: {files: [%s], refresh_interval: 1s}
      grace_period: 1s
    server_metrics: {path: /metrics, interval: 1s}
`, sd)
	e := applyEngine(t, cfg, probe.Options{})
	st := waitPool(t, e, "pool", 15*time.Second, func(s probe.TargetStatus) bool {
		if len(s.Replicas) != 2 || s.Diagnosis == nil {
			return false
		}
		for _, r := range s.Replicas {
			if r.Diagnosis == nil {
				return false
			}
		}
		return true
	})
	d := st.Diagnosis
	if d.Judged != 2 || d.Named < 1 || d.From == "" || !strings.Contains(d.Sentence, " of 2 replicas; "+d.From+": ") {
		t.Errorf("target verdict %+v", d)
	}
	t.Logf("%s", d.Sentence)
}

// TestDiagnosisPath: a gateway holding each request 150 ms in front of
// the simulator, probed at 10 req/s, its /metrics read every second and
// judged every 2 s: the daemon's judge, fed by the reader, names path by
// share with the gap as its evidence, in Engine.Status.
func TestDiagnosisPath(t *testing.T) {
	if testing.Short() {
		t.Skip("about 10 s of probing")
	}
	probe.SetVerdictEvery(t, 2*time.Second)
	const delay = 150 * time.Millisecond
	_, simURL := startSim(t, nil)
	base := strings.TrimSuffix(simURL, "/v1")
	gw := delayProxy(t, base, delay)
	cfg := loadConfig(t, serverViewConfig, gw+"/v1", 10, "      url: "+base+"/metrics\n      interval: 1s")
	e := applyEngine(t, cfg, probe.Options{})
	st := waitTarget(t, e, "t", "a path verdict", 40*time.Second, func(s probe.TargetStatus) bool {
		return s.Diagnosis != nil && s.Diagnosis.Cause == diagnosis.Path
	})
	d := st.Diagnosis
	t.Logf("%s (since %v)", d.Sentence, d.Since.Format(time.TimeOnly))
	gap := evidence(d.Evidence, diagnosis.EvGapMean)
	if math.Abs(gap-delay.Seconds()) > 0.02 || st.DiagnosisWhy != "" || !strings.HasPrefix(d.Sentence, "p99 TTFT ") {
		t.Errorf("verdict %+v: gap %v, want %v", d, gap, delay)
	}
}

// evidence is the value of the figure named name, NaN when absent.
func evidence(ev []diagnosis.Evidence, name string) float64 {
	for _, e := range ev {
		if e.Name == name {
			return e.Value
		}
	}
	return math.NaN()
}
