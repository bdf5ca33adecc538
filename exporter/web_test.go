// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package exporter

import (
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmprobe/llmprobe/internal/testio"
	"github.com/llmprobe/llmprobe/probe"
)

// webFixture is the daemon's wiring without an engine (the request
// metrics, the recent-request log, the status collector over testStatus,
// a reloader from a file holding testConfigYAML, loaded) behind
// NewHandler, served on loopback.
type webFixture struct {
	srv      *httptest.Server
	reg      *prometheus.Registry
	metrics  *Metrics
	recent   *Recent
	reloader *Reloader
	path     string
	logs     *testio.Buffer // the debug log
}

// newWebFixture serves the fixture; opts, when not nil, adjusts the
// handler's options (lifecycle endpoints on, testStatus and testHarness,
// version 1.2.3-test).
func newWebFixture(t *testing.T, opts func(*WebOptions)) *webFixture {
	t.Helper()
	f := &webFixture{reg: prometheus.NewRegistry(), logs: &testio.Buffer{}}
	f.path = filepath.Join(t.TempDir(), "llmprobe.yml")
	writeFile(t, f.path, testConfigYAML)
	logger := newTextLogger(f.logs)
	f.metrics = NewMetrics(f.reg)
	f.recent = NewRecent(logger)
	f.reg.MustRegister(NewStatusCollector(testStatus))
	f.reloader = NewReloader(fileLoader(f.path), logger, f.reg, Infallible(f.metrics.SetConfig), Infallible(f.recent.SetConfig))
	if err := f.reloader.Reload(); err != nil {
		t.Fatal(err)
	}
	o := WebOptions{
		Logger:          logger,
		Gatherer:        f.reg,
		Status:          testStatus,
		Harness:         testHarness,
		Recent:          f.recent,
		Metrics:         f.metrics,
		Reloader:        f.reloader,
		Version:         "1.2.3-test",
		EnableLifecycle: true,
	}
	if opts != nil {
		opts(&o)
	}
	f.srv = httptest.NewServer(NewHandler(o))
	t.Cleanup(f.srv.Close)
	return f
}

// do sends a request to the fixture's server (fetch: redirects are
// returned, not followed).
func (f *webFixture) do(t *testing.T, method, path string, header map[string]string) (int, http.Header, string) {
	t.Helper()
	h := http.Header{}
	for k, v := range header {
		h.Set(k, v)
	}
	resp, body := fetch(t, method, f.srv.URL+path, h, "")
	return resp.StatusCode, resp.Header, body
}

func TestHealthyAndReady(t *testing.T) {
	var ready atomic.Bool
	f := newWebFixture(t, func(o *WebOptions) { o.Ready = ready.Load })
	if code, _, body := f.do(t, "GET", "/-/healthy", nil); code != 200 || strings.TrimSpace(body) != "Healthy" {
		t.Errorf("/-/healthy = %d %q", code, body)
	}
	if code, _, _ := f.do(t, "GET", "/-/ready", nil); code != http.StatusServiceUnavailable {
		t.Errorf("/-/ready before ready = %d, want 503", code)
	}
	ready.Store(true)
	if code, _, body := f.do(t, "GET", "/-/ready", nil); code != 200 || strings.TrimSpace(body) != "Ready" {
		t.Errorf("/-/ready = %d %q", code, body)
	}
	if code, _, _ := f.do(t, "GET", "/nope", nil); code != http.StatusNotFound {
		t.Errorf("/nope = %d, want 404", code)
	}
}

func TestMetricsEndpoint(t *testing.T) {
	f := newWebFixture(t, nil)
	f.metrics.Observe(successResult("alpha", "model-a", "chat"))

	code, h, body := f.do(t, "GET", "/metrics", map[string]string{"Accept": "application/openmetrics-text;version=1.0.0"})
	if code != 200 || !strings.HasPrefix(h.Get("Content-Type"), "application/openmetrics-text") {
		t.Fatalf("/metrics (OpenMetrics) = %d %s", code, h.Get("Content-Type"))
	}
	// Exemplars on latency buckets, and the end marker.
	for _, want := range []string{
		`llmprobe_ttft_seconds_bucket{class="chat",model="model-a",target="alpha",le="0.3"} 1 # {trace_id="` + testTraceID + `"} 0.25 `,
		`llmprobe_e2e_seconds_bucket{class="chat",model="model-a",target="alpha",le="1.0"} 1 # {trace_id="` + testTraceID + `"} 0.62 `,
		`# {trace_id="` + testTraceID + `"} 0.09`, // ITL: the longest gap
		`llmprobe_harness_saturated{target="beta"} 1`,
		`llmprobe_config_last_reload_successful 1`,
		"# EOF",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("OpenMetrics exposition lacks %q", want)
		}
	}
	if n := strings.Count(body, `trace_id="`); n != 4 {
		t.Errorf("%d exemplars, want 4 (TTFT, TPOT, one ITL, E2E)", n)
	}

	// The classic text format still works (without exemplars).
	code, h, body = f.do(t, "GET", "/metrics", nil)
	if code != 200 || !strings.HasPrefix(h.Get("Content-Type"), "text/plain") || !strings.Contains(body, `llmprobe_requests_total{class="chat",model="model-a",outcome="success",target="alpha"} 1`) {
		t.Errorf("/metrics (text) = %d %s", code, h.Get("Content-Type"))
	}
}

func TestReloadRoute(t *testing.T) {
	f := newWebFixture(t, nil)
	running := f.reloader.Current()

	if code, h, _ := f.do(t, "GET", "/-/reload", nil); code != http.StatusMethodNotAllowed || !strings.Contains(h.Get("Allow"), "POST") {
		t.Errorf("GET /-/reload = %d (Allow %q), want 405", code, h.Get("Allow"))
	}
	for _, method := range []string{"POST", "PUT"} {
		if code, _, body := f.do(t, method, "/-/reload", nil); code != 200 || strings.TrimSpace(body) != "Reloaded" {
			t.Errorf("%s /-/reload = %d %q", method, code, body)
		}
	}
	if f.reloader.Current() == running {
		t.Error("a successful reload did not swap the configuration")
	}
	running = f.reloader.Current()

	writeFile(t, f.path, "global:\n  warmup: soon\n")
	code, _, body := f.do(t, "POST", "/-/reload", nil)
	if code != http.StatusInternalServerError || !strings.Contains(body, f.path) || !strings.Contains(body, "warmup") {
		t.Errorf("POST /-/reload of a bad file = %d %q", code, body)
	}
	if f.reloader.Current() != running {
		t.Error("a failed reload changed the configuration")
	}
	if _, _, m := f.do(t, "GET", "/metrics", nil); !strings.Contains(m, "llmprobe_config_last_reload_successful 0") {
		t.Error("llmprobe_config_last_reload_successful is not 0 after a failed reload")
	}
	if _, _, page := f.do(t, "GET", "/config", nil); !strings.Contains(page, "model-b") {
		t.Error("/config no longer shows the running configuration after a failed reload")
	}
}

func TestStatusPage(t *testing.T) {
	f := newWebFixture(t, nil)
	f.metrics.Observe(successResult("alpha", "model-a", "chat")) // hit ratio 40/100
	f.recent.Observe(successResult("alpha", "model-a", "chat"))
	hostile := failedResult("alpha", "model-a", "chat", 0)
	hostile.Error = `<script>alert("pwned")</script><img src=x onerror=alert(1)>`
	hostile.ErrorType = `http_<b>500</b>`
	hostile.TraceID = "0af7651916cd43dd8448eb211c80319c"
	f.recent.Observe(hostile)

	code, h, body := f.do(t, "GET", "/", nil)
	if code != 200 || !strings.HasPrefix(h.Get("Content-Type"), "text/html") {
		t.Fatalf("/ = %d %s", code, h.Get("Content-Type"))
	}
	for _, want := range []string{
		`<meta http-equiv="refresh" content="5; url=/">`,
		`href="/metrics"`, `href="/config"`,
		"1.2.3-test",
		"HARNESS SATURATED",
		"schedule lag p99 9s over 1m0s (max_lag 50ms)",
		"Warming up until", // beta: since + 30s warm-up
		"alpha", "beta", "model-a",
		"25.0%",   // alpha/chat reuse intent
		"40.0%",   // alpha/chat observed hit ratio
		"no data", // alpha/agent
		"99% of requests with TTFT ≤ 500ms, TPOT ≤ 60ms", // alpha's SLO
		"100.0% (1 good, 0 bad)",                         // alpha/chat
		"none judged yet",                                // alpha/agent
		"0.98/s",                                         // achieved rate
		"4.0 ms",                                         // lag p99
		"inflight_limit",
		testTraceID,
		"0af7651916cd43dd8448eb211c80319c",
		"Recent failures", "Recent requests",
		"&lt;script&gt;alert(&#34;pwned&#34;)&lt;/script&gt;",
		"http_&lt;b&gt;500&lt;/b&gt;",
		"Follows production", "prompt p50/p90/p99 700/1500/4000", "The last refit failed", "no samples for vllm:request_prompt_tokens",
		// alpha's TTFT detector holds a regression.
		`id="regression-alpha-chat-ttft"`, "REGRESSION: the ttft of class <code>chat</code> got worse than its baseline",
		"the median is 1.45× and the p99 1.30× the baseline's (240 requests against 900); median test, p = 1e-09.",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("status page lacks %q", want)
		}
	}
	for _, bad := range []string{"<script>", "<img src=x", "<b>500"} {
		if strings.Contains(body, bad) {
			t.Errorf("status page contains unescaped %q", bad)
		}
	}
	// Only the saturated target carries the banner.
	alpha := body[strings.Index(body, `id="target-alpha"`):strings.Index(body, `id="target-beta"`)]
	if strings.Contains(alpha, "HARNESS SATURATED") || strings.Contains(alpha, "Warming up") {
		t.Error("alpha shows the saturation banner or warm-up note")
	}
	// Only held regressions have a banner: one, alpha's TTFT.
	if n := strings.Count(body, "REGRESSION:"); n != 1 {
		t.Errorf("%d regression banners, want 1 (alpha's ttft)", n)
	}
}

func TestConfigPageHidesSecrets(t *testing.T) {
	f := newWebFixture(t, nil)
	code, _, body := f.do(t, "GET", "/config", nil)
	if code != 200 {
		t.Fatalf("/config = %d", code)
	}
	for _, want := range []string{"alpha", "model-b", "hit_ratio_window: 10s", "&lt;secret&gt;", `href="/"`} {
		if !strings.Contains(body, want) {
			t.Errorf("/config lacks %q", want)
		}
	}
	for _, secret := range []string{testPassword, testBearer} {
		if strings.Contains(body, secret) {
			t.Errorf("/config shows the secret %q", secret)
		}
	}
}

func TestHandlerWithoutOptionalParts(t *testing.T) {
	srv := httptest.NewServer(NewHandler(WebOptions{
		Gatherer:        prometheus.NewRegistry(),
		Status:          func() []probe.TargetStatus { return nil },
		EnableLifecycle: true,
	}))
	defer srv.Close()
	f := &webFixture{srv: srv}
	if code, _, _ := f.do(t, "GET", "/-/ready", nil); code != 200 {
		t.Errorf("/-/ready without a Ready func = %d, want 200", code)
	}
	if code, _, _ := f.do(t, "POST", "/-/reload", nil); code != http.StatusServiceUnavailable {
		t.Errorf("/-/reload without a Reloader = %d, want 503", code)
	}
	if code, _, body := f.do(t, "GET", "/config", nil); code != 200 || !strings.Contains(body, "No configuration is loaded") {
		t.Errorf("/config without a Reloader = %d", code)
	}
	if code, _, body := f.do(t, "GET", "/", nil); code != 200 || !strings.Contains(body, "No target is running") {
		t.Errorf("/ without targets = %d", code)
	}
}

// TestReloadNeedsLifecycleAndSameOrigin: POST /-/reload is off unless
// enabled (Prometheus' --web.enable-lifecycle), and a browser on another
// site cannot make it reload even then.
func TestReloadNeedsLifecycleAndSameOrigin(t *testing.T) {
	f := newWebFixture(t, nil)
	off := httptest.NewServer(NewHandler(WebOptions{Gatherer: f.reg, Reloader: f.reloader}))
	defer off.Close()
	running := f.reloader.Current()
	resp, err := http.Post(off.URL+"/-/reload", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "--web.enable-lifecycle") || f.reloader.Current() != running {
		t.Errorf("POST /-/reload without the lifecycle API = %d %q", resp.StatusCode, body)
	}

	for _, h := range []map[string]string{
		{"Sec-Fetch-Site": "cross-site"},
		{"Sec-Fetch-Site": "same-site"},
		{"Origin": "http://evil.example"},
		{"Origin": "null"},
	} {
		code, _, body := f.do(t, "POST", "/-/reload", h)
		if code != http.StatusForbidden || f.reloader.Current() != running {
			t.Errorf("cross-origin POST /-/reload %v = %d %q (reloaded: %v)", h, code, body, f.reloader.Current() != running)
		}
	}
	// The status page's own form, and curl, still work.
	for _, h := range []map[string]string{{"Sec-Fetch-Site": "same-origin"}, {"Origin": f.srv.URL}, nil} {
		if code, _, body := f.do(t, "POST", "/-/reload", h); code != http.StatusOK {
			t.Errorf("same-origin POST /-/reload %v = %d %q", h, code, body)
		}
	}
}
