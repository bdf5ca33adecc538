// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/llmprobe/llmprobe/internal/promtest"
)

// chromiumBinary returns headless Chromium: $CHROMIUM, else chromium on
// $PATH (Debian's package, which `make test` installs when it can). A
// missing one skips the test, or fails it under LLMPROBE_REQUIRE_TOOLS=1.
func chromiumBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv(promtest.RequireToolsEnv) == "1" {
		t.Fatalf("chromium not found on $PATH (`make test` installs Debian's chromium as root; %s=1 makes a missing tool an error)", promtest.RequireToolsEnv)
	}
	t.Skip("skipping: chromium not found on $PATH (apt-get install chromium)")
	return ""
}

// dumpDOM loads url in headless Chromium and returns the rendered DOM.
func dumpDOM(t *testing.T, chromium, url string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, chromium,
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir="+filepath.Join(t.TempDir(), "profile"),
		"--dump-dom", url)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium --dump-dom %s: %v\n%s", url, err, tail(stderr.String(), 4<<10))
	}
	return stdout.String()
}

// TestStatusPageInChromium runs the daemon against the simulator under a
// route prefix (--web.external-url=http://<addr>/llmprobe/), lets it
// measure, makes a reload fail, and loads the status page in headless
// Chromium: the rendered DOM has the failed-reload banner with the error,
// each target's latency summary with numbers and n, its identity line,
// and the timeline SVG charts.
func TestStatusPageInChromium(t *testing.T) {
	chromium := chromiumBinary(t)
	_, simURL := startSim(t)
	cfg := filepath.Join(t.TempDir(), "llmprobe.yml")
	vars := map[string]string{"SIM_URL": simURL}
	writeFileAtomic(t, cfg, renderFixture(t, "reload-initial.yml", vars))
	_, base := startServer(t, "llmprobe run", "/llmprobe/-/ready", nil, func(addr string) []string {
		return []string{"run", "--config.file=" + cfg, "--web.listen-address=" + addr, "--web.enable-lifecycle",
			"--web.external-url=http://" + addr + "/llmprobe/", "--log.level=debug"}
	})
	page := base + "/llmprobe/"

	// Measured: out of warm-up, both targets have latencies in the window.
	measured := regexp.MustCompile(`<strong>all classes</strong></td><td class="num">[0-9.]+ (µs|ms|s)</td>`)
	deadline := time.Now().Add(30 * time.Second)
	for {
		body := get(t, page)
		if len(measured.FindAllString(body, -1)) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no latency summary for both targets after 30s:\n%.4000s", body)
		}
		time.Sleep(500 * time.Millisecond)
	}

	writeFileAtomic(t, cfg, renderFixture(t, "reload-bad.yml", vars))
	if code, _, body := httpDo(t, http.MethodPost, page+"-/reload", nil); code != http.StatusInternalServerError {
		t.Fatalf("POST /llmprobe/-/reload of a bad file = %d %s", code, body)
	}

	start := time.Now()
	dom := dumpDOM(t, chromium, page)
	t.Logf("chromium rendered %s in %s (%d bytes of DOM)", page, time.Since(start).Round(time.Millisecond), len(dom))
	banner := regexp.MustCompile(`(?s)<div class="banner reloadfail" id="reload-failed" role="alert">.*?</div>`).FindString(dom)
	for _, want := range []string{"CONFIGURATION RELOAD FAILED", "keeps running", `unknown field "rat"`, "targets[1].arrival.rat"} {
		if !strings.Contains(banner, want) {
			t.Errorf("the rendered failed-reload banner lacks %q:\n%s", want, banner)
		}
	}
	for _, target := range []string{"keep", "drop"} {
		lat := regexp.MustCompile(`(?s)<h3 id="latency-` + target + `">.*?</table>`).FindString(dom)
		if !strings.Contains(lat, "Latency, last 5 minutes") || !measured.MatchString(lat) || !regexp.MustCompile(`<td class="num">[1-9][0-9]*</td>`).MatchString(lat) {
			t.Errorf("the rendered latency summary of %s lacks quantiles or n:\n%s", target, lat)
		}
	}
	if n := strings.Count(dom, "<svg"); n != 4 {
		t.Errorf("%d SVG charts in the rendered DOM, want 4 (rate and TTFT per target)", n)
	}
	// Each target's identity line, learned from its answers (the
	// simulator names its model and sends no fingerprint).
	for _, target := range []string{"keep", "drop"} {
		id := regexp.MustCompile(`(?s)<p class="identity" id="identity-` + target + `">.*?</p>`).FindString(dom)
		if !strings.Contains(id, "Serving: model <code>meta-llama/Llama-3.1-8B-Instruct</code> · fingerprint <code>–</code>") {
			t.Errorf("the rendered identity line of %s: %q", target, id)
		}
	}
	for _, want := range []string{"keep: requested vs achieved rate", "drop: TTFT p50 and p99", "requests per second", `href="/llmprobe/metrics"`, `action="/llmprobe/-/reload"`} {
		if !strings.Contains(dom, want) {
			t.Errorf("the rendered page lacks %q", want)
		}
	}
}

// TestStatusPageFailingTargetInChromium runs the daemon against a target
// that refuses every connection (127.0.0.1:1) beside a healthy one and
// loads the status page in headless Chromium: the page opens with a
// summary line for the failing target, linking to its alarm; the failing
// target has an alarm of its own naming the outcome and an example error
// (every request connect_error had none), the healthy one has neither; each target's recent requests show
// the newest 5 rows with the others folded into a closed <details>, and
// its failures the newest 10 above their own; no duration is printed
// unrounded (30.814879ms).
func TestStatusPageFailingTargetInChromium(t *testing.T) {
	chromium := chromiumBinary(t)
	_, simURL := startSim(t)
	cfg := filepath.Join(t.TempDir(), "llmprobe.yml")
	writeFileAtomic(t, cfg, `global: {warmup: 1s, request_timeout: 10s}
workloads:
  w: {classes: [{name: chat, prompt_tokens: 16, output_tokens: 4}]}
targets:
  - {name: up, url: "`+simURL+`/v1", model: `+simModel+`, workload: w, arrival: {process: constant, rate: 5}}
  - {name: down, url: "http://127.0.0.1:1/v1", model: `+simModel+`, workload: w, arrival: {process: constant, rate: 5}}
`)
	_, base := startDaemon(t, cfg)
	page := base + "/"

	// Enough ended requests of both for every table to fold: at least
	// 20 failures and 20 successes (the rings keep 50).
	const ended = 20
	pollScrape(t, base, 60*time.Second, "20 requests ended of each target", func(e exposition) bool {
		up, _ := e.sum("llmprobe_requests_total", map[string]string{"target": "up", "outcome": "success"})
		down, _ := e.sum("llmprobe_requests_total", map[string]string{"target": "down", "outcome": "connect_error"})
		return up >= ended && down >= ended
	})

	dom := dumpDOM(t, chromium, page)
	alarm := regexp.MustCompile(`(?s)<div class="banner failing" role="alert" id="failing-down">.*?</div>`).FindString(dom)
	for _, want := range []string{"EVERY REQUEST FAILS", " requests to end in the last 15s failed: <code>connect_error</code>", "Example: <code>connection_refused</code>", "connection refused", "No request succeeds."} {
		if !strings.Contains(alarm, want) {
			t.Errorf("the failing target's alarm lacks %q: %q", want, alarm)
		}
	}
	// The summary of problems opens the page, above the charts: the
	// failing target's line links to its alarm; the healthy one has none.
	// (A machine too busy to time the load adds "harness saturated" to
	// either line.)
	summary := regexp.MustCompile(`(?s)<ul class="problems" id="problems" role="alert">.*?</ul>`).FindString(dom)
	if want := `<li id="problem-down"><a href="#target-down">down</a>: <a href="#failing-down">every request fails</a> (<code>connect_error</code> <code>connection_refused</code>)`; !strings.Contains(summary, want) {
		t.Errorf("the summary lacks %q: %q", want, summary)
	}
	if up := regexp.MustCompile(`<li id="problem-up">.*?</li>`).FindString(summary); strings.Contains(up, "fail") {
		t.Errorf("the healthy target is failing in the summary: %q", up)
	}
	if i, j := strings.Index(dom, `id="problems"`), strings.Index(dom, `id="timeline"`); i < 0 || j < 0 || i > j || i > strings.Index(dom, "<main>")+200 {
		t.Errorf("the summary (at %d) does not open the page, above the charts (at %d)", i, j)
	}
	if strings.Contains(dom, `id="failing-up"`) {
		t.Error("the healthy target has a failing alarm")
	}
	if !strings.Contains(dom, `<a href="#target-down">down</a> <strong class="failing-mark">(every request fails)</strong>`) {
		t.Error("the list of targets does not mark the failing one")
	}

	for _, c := range []struct{ table, more string }{
		{"recent-up", "recent-more-up"}, {"recent-down", "recent-more-down"}, {"failures-down", "failures-more-down"},
	} {
		shown := 5
		if strings.HasPrefix(c.table, "failures") {
			shown = 10
		}
		section := regexp.MustCompile(`(?s)<h3 id="` + c.table + `">(.*?)<details class="more" id="` + c.more + `">(.*?)</details>`).FindStringSubmatch(dom)
		if section == nil {
			t.Errorf("%s: no folded <details id=%q> after the table", c.table, c.more)
			continue
		}
		if visible := strings.Count(section[1], "<tr") - 1; visible != shown {
			t.Errorf("%s: %d rows shown above the fold, want %d", c.table, visible, shown)
		}
		if strings.Contains(regexp.MustCompile(`<details[^>]*>`).FindString(section[0][len(section[1]):]), " open") {
			t.Errorf("%s: the folded rows are open", c.table)
		}
		if folded := strings.Count(section[2], "<tr") - 1; folded < ended-shown {
			t.Errorf("%s: %d rows folded, want the rest (at least %d)", c.table, folded, ended-shown)
		}
	}
	if !strings.Contains(dom, `<h3 id="failures-up">Recent failures</h3>`) {
		t.Error("no failures section for the healthy target")
	}
	if m := regexp.MustCompile(`\b\d+\.\d{4,} ?(ns|µs|us|ms|s)\b`).FindString(dom); m != "" {
		t.Errorf("an unrounded duration on the page: %q", m)
	}
}
