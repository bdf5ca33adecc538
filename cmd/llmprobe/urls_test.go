// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/llmprobe/llmprobe/internal/otlptest"
	"github.com/llmprobe/llmprobe/internal/proctest"
	"github.com/llmprobe/llmprobe/internal/simtest"
	"github.com/llmprobe/llmprobe/sim"
)

// The secrets of TestURLSecretsShownNowhere's URLs.
const (
	urlPassword = "urlpass-SECRET-7c1e"
	urlToken    = "urltoken-SECRET-93ab"
	urlKey      = "urlkey-SECRET-51fd"
)

// secretURL is http://HOSTPORT/PATH with a user name and password and a
// query of two secrets.
func secretURL(hostport, path string) string {
	return "http://probeuser:" + urlPassword + "@" + hostport + secretQuery(path)
}

// secretQuery is PATH with a query of two secrets (for the URLs whose
// configuration refuses user information).
func secretQuery(path string) string {
	return path + "?token=" + urlToken + "&api_key=" + urlKey
}

// fakePrometheus answers every query of fit (and of workload_from's
// refits, and bench's GPU queries): classic token-length buckets of
// model "sim-model" for a _bucket query, their sum for a _sum query, and
// an empty vector for anything else.
func fakePrometheus(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		q := r.Form.Get("query")
		var result string
		switch {
		case strings.Contains(q, "_bucket"):
			result = `{"metric":{"le":"64","model_name":"sim-model"},"value":[1700000000,"40"]},` +
				`{"metric":{"le":"256","model_name":"sim-model"},"value":[1700000000,"90"]},` +
				`{"metric":{"le":"+Inf","model_name":"sim-model"},"value":[1700000000,"100"]}`
		case strings.Contains(q, "_sum"):
			result = `{"metric":{"model_name":"sim-model"},"value":[1700000000,"9000"]}`
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"status":"success","data":{"resultType":"vector","result":[%s]}}`, result)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// assertNoURLSecret fails t when text, what where names, shows any of
// the URLs' secrets.
func assertNoURLSecret(t *testing.T, where, text string) {
	t.Helper()
	for _, s := range []string{urlPassword, urlToken, urlKey} {
		if i := strings.Index(text, s); i >= 0 {
			t.Errorf("%s shows %q: ...%s...", where, s, text[max(i-100, 0):min(i+60, len(text))])
		}
	}
}

// TestURLSecretsShownNowhere gives every URL llmprobe takes a user name,
// a password and secrets in its query, and reads everything that shows a
// URL: the daemon's log, /metrics, status page, /config and spans
// (target, workload_from's Prometheus, proxy, OAuth2 token endpoint);
// bench's standard output and error, JSON and Markdown reports (its
// command line, server-metrics and GPU Prometheus URLs); fit's summary,
// workload file, plot and errors. No secret may appear in any of them,
// and each place still says which host it means.
func TestURLSecretsShownNowhere(t *testing.T) {
	bin := binary(t)
	simCfg := sim.DefaultConfig()
	simCfg.ZeroLatency = true
	simSrv := simtest.Start(t, simCfg)
	simHost := strings.TrimPrefix(simSrv.Base, "http://")
	prom := fakePrometheus(t)
	promHost := strings.TrimPrefix(prom.URL, "http://")
	// A token endpoint that refuses, quoting the URL it was asked at.
	token := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		http.Error(w, `{"error":"invalid_client","error_description":"no client at `+r.URL.String()+`"}`, http.StatusBadRequest)
	}))
	defer token.Close()
	dead := proctest.FreeAddr(t) // nothing listens: a proxy that refuses
	dir := t.TempDir()

	t.Run("run", func(t *testing.T) {
		sink := otlptest.Start(t)
		path := filepath.Join(dir, "llmprobe.yml")
		writeTestFile(t, path, fmt.Sprintf(`
global: {warmup: 0s, shutdown_grace_period: 2s}
workloads:
  w:
    classes:
      - {name: chat, prompt_tokens: 16, output_tokens: 4}
targets:
  - name: refitted
    url: http://%[1]s/v1
    model: sim-model
    workload: w
    arrival: {process: constant, rate: 5}
    workload_from:
      prometheus: {url: "%[2]s", refresh: 1s}
  - name: proxied
    url: http://%[1]s/v1
    model: sim-model
    workload: w
    arrival: {process: constant, rate: 5}
    http_client_config:
      proxy_url: "%[3]s"
  - name: oauth
    url: http://%[1]s/v1
    model: sim-model
    workload: w
    arrival: {process: constant, rate: 5}
    http_client_config:
      oauth2: {client_id: probe, client_secret: oauth-client-secret, token_url: "%[4]s"}
`, simHost, "http://"+promHost+secretQuery("/"), secretURL(dead, "/"), secretURL(strings.TrimPrefix(token.URL, "http://"), "/token")))
		listen := proctest.FreeAddr(t)
		p := proctest.Start(t, bin, proctest.Options{Env: []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://" + sink.Addr, "OTEL_BSP_SCHEDULE_DELAY=100"}},
			"run", "--config.file="+path, "--web.listen-address="+listen, "--log.level=debug")
		web := "http://" + listen
		waitHTTP(t, web+"/-/ready")
		// Every target has failed (proxied, oauth) or been refitted
		// (refitted) a few times.
		deadline := time.Now().Add(20 * time.Second)
		var page string
		for time.Now().Before(deadline) {
			page = httpGetBody(t, web+"/")
			if strings.Count(p.Stderr(), "request failed") >= 6 && strings.Contains(p.Stderr(), "workload refitted") {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		metrics := httpGetBody(t, web+"/metrics")
		cfgPage := httpGetBody(t, web+"/config")
		if err := p.Stop(10 * time.Second); err != nil {
			t.Error(err)
		}
		sink.WaitFor(1, 5*time.Second)
		var spans strings.Builder
		for _, s := range sink.Spans() {
			fmt.Fprintln(&spans, s.Span.String())
		}
		for where, text := range map[string]string{"the log": p.Output(), "/": page, "/metrics": metrics, "/config": cfgPage, "the spans": spans.String()} {
			assertNoURLSecret(t, where, text)
		}
		for _, want := range []string{promHost, dead, strings.TrimPrefix(token.URL, "http://")} {
			if !strings.Contains(cfgPage, want) {
				t.Errorf("/config does not show %s", want)
			}
		}
		if !strings.Contains(p.Stderr(), "oauth2") || !strings.Contains(page, "proxied") {
			t.Errorf("the failures to judge are missing: log\n%s", proctest.Tail(p.Stderr(), 2000))
		}
	})

	t.Run("bench", func(t *testing.T) {
		path := filepath.Join(dir, "bench.yml")
		writeTestFile(t, path, fmt.Sprintf(`
global: {warmup: 0s}
workloads:
  w:
    classes:
      - {name: chat, prompt_tokens: 16, output_tokens: 4}
targets:
  - {name: sim, url: "http://%[1]s/v1", model: sim-model, workload: w, arrival: {process: constant, rate: 1}}
  - {name: again, url: "http://%[1]s/v1", model: sim-model, workload: w, arrival: {process: constant, rate: 1}}
`, simHost))
		jsonOut, mdOut := filepath.Join(dir, "r.json"), filepath.Join(dir, "r.md")
		r := runBinary(t, bin, nil, "bench", "--config.file="+path, "--stage=4:2s", "--warmup=0s",
			// One server's metrics are scraped, the other's cannot be;
			// nor can the GPUs' Prometheus be reached.
			"--server-metrics=sim="+secretURL(simHost, "/metrics")+",again="+secretURL(dead, "/metrics"),
			"--prometheus.url="+secretURL(dead, "/"), `--gpu.selector=Hostname="gpu-1"`,
			"--output="+jsonOut, "--output="+mdOut)
		if r.code != 0 {
			t.Fatalf("bench exit %d: %s", r.code, r.stderr)
		}
		jsonReport, mdReport := readTestFile(t, jsonOut), readTestFile(t, mdOut)
		for where, text := range map[string]string{"bench's stdout": r.stdout, "bench's stderr": r.stderr, "the JSON report": jsonReport, "the Markdown report": mdReport} {
			assertNoURLSecret(t, where, text)
		}
		for _, host := range []string{simHost, dead} {
			if !strings.Contains(jsonReport, `"url": "http://xxxxx@`+host+`/metrics?token=xxxxx\u0026api_key=xxxxx"`) {
				t.Errorf("the JSON report's server_metrics.url of %s is not the masked URL:\n%s", host, jsonReport)
			}
		}
		if !strings.Contains(jsonReport, "connection refused") {
			t.Errorf("the JSON report does not say the scrapes failed:\n%s", jsonReport)
		}
	})

	t.Run("fit", func(t *testing.T) {
		out, plot := filepath.Join(dir, "fitted.yml"), filepath.Join(dir, "fitted.svg")
		r := runBinary(t, bin, nil, "fit", "--prometheus.url="+secretURL(promHost, "/"), "--range=1h", "--output="+out, "--plot="+plot)
		if r.code != 0 {
			t.Fatalf("fit exit %d: %s", r.code, r.stderr)
		}
		fitted := readTestFile(t, out)
		for where, text := range map[string]string{"fit's stdout": r.stdout, "fit's stderr": r.stderr, "the fitted workload": fitted, "the plot": readTestFile(t, plot)} {
			assertNoURLSecret(t, where, text)
		}
		if !strings.Contains(fitted, promHost) {
			t.Errorf("the fitted workload does not name its source:\n%s", fitted)
		}
		// A Prometheus that cannot be reached: the error names it.
		r = runBinary(t, bin, nil, "fit", "--prometheus.url="+secretURL(dead, "/"), "--range=1h", "--output="+out)
		if r.code == 0 || !strings.Contains(r.stderr, dead) {
			t.Fatalf("fit against nothing: exit %d, %s", r.code, r.stderr)
		}
		assertNoURLSecret(t, "fit's error", r.stderr)
	})
}

func readTestFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func httpGetBody(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
