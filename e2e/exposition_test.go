// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/llmprobe/llmprobe/internal/promtest"
)

// contractMetrics are the metric families of the metrics contract
// (docs/design.md, docs/metrics.md), as the text format names them.
var contractMetrics = []string{
	"llmprobe_ttft_seconds",
	"llmprobe_tpot_seconds",
	"llmprobe_itl_seconds",
	"llmprobe_e2e_seconds",
	"llmprobe_schedule_lag_seconds",
	"llmprobe_requests_scheduled_total",
	"llmprobe_requests_total",
	"llmprobe_requests_dropped_total",
	"llmprobe_inflight_requests",
	"llmprobe_target_request_rate",
	"llmprobe_prompt_tokens_total",
	"llmprobe_output_tokens_total",
	"llmprobe_cached_prompt_tokens_total",
	"llmprobe_prompt_tokens",
	"llmprobe_output_tokens",
	"llmprobe_prefix_cache_hit_ratio",
	"llmprobe_prefix_reuse_target_ratio",
	"llmprobe_harness_saturated",
	"llmprobe_harness_saturation_reason",
	"llmprobe_target_overloaded",
	"llmprobe_harness_sched_latency_seconds",
	"llmprobe_harness_wakeup_latency_seconds",
	"llmprobe_harness_timestamp_inflation_seconds",
	"llmprobe_client_retries_total",
	"llmprobe_server_anomalies_total",
	"llmprobe_finish_reasons_total",
	"llmprobe_warmup",
	"llmprobe_config_last_reload_successful",
	"llmprobe_config_last_reload_success_timestamp_seconds",
	"llmprobe_build_info",
}

const openMetricsAccept = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"

// TestExposition scrapes the running daemon, probing with a bearer token,
// a basic-auth password and a secret header configured. The text
// exposition passes `promtool check metrics` without a finding, the
// OpenMetrics one is negotiated and well terminated, every family of the
// metrics contract is there, no series carries an instance label, and no
// secret appears in /metrics, /config, the status page, a refused
// reload's error, or the daemon's logs (at debug level).
func TestExposition(t *testing.T) {
	_, simURL := startSim(t, "--sim.zero-latency")
	secrets := map[string]string{
		"BEARER":        randomSecret(t, "bearer"),
		"HEADER_SECRET": randomSecret(t, "header"),
		"PASSWORD":      randomSecret(t, "password"),
		"URL_PASSWORD":  randomSecret(t, "urlpass"),
	}
	vars := map[string]string{"SIM_URL": simURL}
	for k, v := range secrets {
		vars[k] = v
	}
	cfg := filepath.Join(t.TempDir(), "llmprobe.yml")
	writeFileAtomic(t, cfg, renderFixture(t, "secrets.yml", vars))
	daemon, base := startDaemon(t, cfg)

	// Wait for every series to have data: latency observations, failures,
	// and a prefix-cache hit ratio (absent until a response reports usage).
	pollScrape(t, base, 30*time.Second, "the daemon has not observed requests of both targets", func(e exposition) bool {
		ttft, _ := e.sum("llmprobe_ttft_seconds", map[string]string{"target": "bearer"})
		failed, _ := e.sum("llmprobe_requests_total", map[string]string{"target": "basic", "outcome": "http_error"})
		_, ratio := e.sum("llmprobe_prefix_cache_hit_ratio", map[string]string{"target": "bearer", "class": "chat"})
		return ttft > 0 && failed > 0 && ratio
	})

	var bodies []page // everything served, for the secret check
	record := func(name, body string) string {
		bodies = append(bodies, page{name, body})
		return body
	}

	t.Run("text format", func(t *testing.T) {
		code, hdr, text := httpDo(t, http.MethodGet, base+"/metrics", nil)
		record("/metrics (text)", text)
		if code != http.StatusOK || !strings.HasPrefix(hdr.Get("Content-Type"), "text/plain; version=0.0.4") {
			t.Fatalf("GET /metrics: HTTP %d, Content-Type %q", code, hdr.Get("Content-Type"))
		}
		if out, err := checkMetrics(t, text); err != nil || strings.TrimSpace(out) != "" {
			t.Errorf("promtool check metrics: %v\n%s", err, out)
		}
		mfs, _ := scrape(t, base)
		for _, name := range contractMetrics {
			if mfs[name] == nil {
				t.Errorf("metric %s of the contract is not exposed", name)
			}
		}
		for name, mf := range mfs {
			for _, m := range mf.GetMetric() {
				if _, ok := labelsOf(m)["instance"]; ok {
					t.Errorf("%s has an instance label: %v", name, labelsOf(m))
					break
				}
			}
		}
		if os.Getenv(BinaryEnv) == "" {
			if v, _ := mfs.sum("llmprobe_build_info", map[string]string{"version": binaryVersion}); v != 1 {
				t.Errorf("llmprobe_build_info{version=%q} = %g, want 1", binaryVersion, v)
			}
		}
	})

	t.Run("OpenMetrics", func(t *testing.T) {
		code, hdr, om := httpDo(t, http.MethodGet, base+"/metrics", http.Header{"Accept": {openMetricsAccept}})
		record("/metrics (OpenMetrics)", om)
		if code != http.StatusOK || !strings.HasPrefix(hdr.Get("Content-Type"), "application/openmetrics-text; version=1.0.0") {
			t.Fatalf("GET /metrics with OpenMetrics accepted: HTTP %d, Content-Type %q", code, hdr.Get("Content-Type"))
		}
		if !strings.HasSuffix(om, "# EOF\n") {
			t.Errorf("the OpenMetrics exposition does not end with # EOF: %q", tail(om, 200))
		}
		for _, want := range []string{
			"# TYPE llmprobe_ttft_seconds histogram\n",
			"# TYPE llmprobe_requests counter\n",
		} {
			if !strings.Contains(om, want) {
				t.Errorf("the OpenMetrics exposition lacks %q", strings.TrimSpace(want))
			}
		}
		if strings.Contains(om, `instance="`) {
			t.Errorf("the OpenMetrics exposition has an instance label:\n%s", grepLines(om, `instance="`, 5))
		}
	})

	t.Run("no secret shown", func(t *testing.T) {
		cfgPage := record("/config", get(t, base+"/config"))
		// The auth sections are shown, their secrets masked.
		if n := strings.Count(cfgPage, "&lt;secret&gt;") + strings.Count(cfgPage, "<secret>"); n < 3 {
			t.Errorf("/config shows %d masked secrets, want the bearer token, the password and the header secret masked:\n%s", n, cfgPage)
		}
		record("/", get(t, base+"/"))
		record("/-/healthy", get(t, base+"/-/healthy"))
		record("/-/ready", get(t, base+"/-/ready"))

		// Refused reloads whose errors sit next to secrets.
		for _, bad := range []struct{ fixture, field string }{
			{"secrets-bad-url.yml", "targets[0].url: credentials in the URL are not allowed"},
			{"secrets-bad-field.yml", `targets[0].http_client_config.basic_auth.passwrd: unknown field "passwrd"`},
		} {
			writeFileAtomic(t, cfg, renderFixture(t, bad.fixture, vars))
			code, _, body := httpDo(t, http.MethodPost, base+"/-/reload", nil)
			record("POST /-/reload of "+bad.fixture, body)
			if code != http.StatusInternalServerError {
				t.Errorf("POST /-/reload of %s: HTTP %d, want 500: %s", bad.fixture, code, body)
			}
			if !strings.Contains(body, bad.field) {
				t.Errorf("POST /-/reload of %s: the error does not name %q:\n%s", bad.fixture, bad.field, body)
			}
		}
		record("/metrics after the refused reload", get(t, base+"/metrics"))
		time.Sleep(200 * time.Millisecond) // let the last log lines be written
		record("daemon log", daemon.Output())

		for _, p := range bodies {
			for name, s := range secrets {
				if strings.Contains(p.body, s) {
					t.Errorf("%s shows the %s secret:\n%s", p.name, name, grepLines(p.body, s, 5))
				}
			}
		}
	})
}

type page struct{ name, body string }

// randomSecret returns a secret that cannot appear by accident.
func randomSecret(t *testing.T, kind string) string {
	t.Helper()
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "e2e-" + kind + "-" + hex.EncodeToString(b)
}

// checkMetrics runs `promtool check metrics` on a text exposition and
// returns its output (empty when there is no finding).
func checkMetrics(t *testing.T, text string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, promtest.Promtool(t), "check", "metrics")
	cmd.Stdin = strings.NewReader(text)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}
