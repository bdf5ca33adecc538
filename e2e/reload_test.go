// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestReload proves the reload contract of docs/config.md on the running
// daemon. A bad file (an unknown field) is refused by POST /-/reload with
// HTTP 500 and an error naming file:line:column and the field;
// llmprobe_config_last_reload_successful drops to 0 and the old
// configuration keeps probing. A good file that adds one target and
// removes another, applied by SIGHUP, brings the gauge back to 1, the new
// target's series appear, the removed target's series disappear for good,
// and the unchanged target keeps running untouched (its counters are not
// reset and it does not warm up again).
func TestReload(t *testing.T) {
	_, simURL := startSim(t, "--sim.zero-latency")
	cfg := filepath.Join(t.TempDir(), "llmprobe.yml")
	vars := map[string]string{"SIM_URL": simURL}
	writeFileAtomic(t, cfg, renderFixture(t, "reload-initial.yml", vars))
	daemon, base := startDaemon(t, cfg)

	success := func(target string) map[string]string {
		return map[string]string{"target": target, "outcome": "success"}
	}
	target := func(name string) map[string]string { return map[string]string{"target": name} }
	mfs := pollScrape(t, base, 30*time.Second, "targets keep and drop are not both probing and out of warm-up", func(e exposition) bool {
		for _, tg := range []string{"keep", "drop"} {
			n, _ := e.sum("llmprobe_requests_total", success(tg))
			w, found := e.sum("llmprobe_warmup", target(tg))
			if n == 0 || !found || w != 0 {
				return false
			}
		}
		return true
	})
	if v, _ := mfs.sum("llmprobe_config_last_reload_successful", nil); v != 1 {
		t.Fatalf("llmprobe_config_last_reload_successful = %g after a good start, want 1", v)
	}
	loadedAt, _ := mfs.sum("llmprobe_config_last_reload_success_timestamp_seconds", nil)

	// A bad file: refused as a whole, the old configuration keeps running.
	bad := renderFixture(t, "reload-bad.yml", vars)
	writeFileAtomic(t, cfg, bad)
	line, col := keyPosition(t, bad, "rat")
	wantErr := position(cfg, line, col) + `: targets[1].arrival.rat: unknown field "rat"`
	code, _, body := httpDo(t, http.MethodPost, base+"/-/reload", nil)
	if code != http.StatusInternalServerError {
		t.Errorf("POST /-/reload with a bad file: HTTP %d, want 500; body: %s", code, body)
	}
	t.Logf("refused reload: HTTP %d: %s", code, strings.TrimSpace(body))
	if !strings.Contains(body, wantErr) {
		t.Errorf("POST /-/reload body does not name %q:\n%s", wantErr, body)
	}
	mfs, _ = scrape(t, base)
	if v, _ := mfs.sum("llmprobe_config_last_reload_successful", nil); v != 0 {
		t.Errorf("llmprobe_config_last_reload_successful = %g after a refused reload, want 0", v)
	}
	if v, _ := mfs.sum("llmprobe_config_last_reload_success_timestamp_seconds", nil); v != loadedAt {
		t.Errorf("llmprobe_config_last_reload_success_timestamp_seconds moved from %g to %g on a refused reload", loadedAt, v)
	}
	keepBefore, _ := mfs.sum("llmprobe_requests_total", success("keep"))
	dropBefore, _ := mfs.sum("llmprobe_requests_total", success("drop"))
	// At 10/s each, both old targets complete more requests within seconds.
	mfs = pollScrape(t, base, 15*time.Second, "the old configuration stopped probing after a refused reload", func(e exposition) bool {
		k, _ := e.sum("llmprobe_requests_total", success("keep"))
		d, _ := e.sum("llmprobe_requests_total", success("drop"))
		return k >= keepBefore+5 && d >= dropBefore+5
	})
	if got := targetsIn(mfs); !got["keep"] || !got["drop"] || got["add"] {
		t.Errorf("after a refused reload /metrics has targets %v, want keep and drop only", got)
	}
	if page := get(t, base+"/config"); !strings.Contains(page, "name: drop") || strings.Contains(page, "name: add") {
		t.Errorf("after a refused reload /config does not show the old configuration (drop, not add):\n%s", page)
	}
	if logs := daemon.Stderr(); !strings.Contains(logs, position(cfg, line, col)) {
		t.Errorf("the refused reload's error is not logged with its position %s", position(cfg, line, col))
	}

	// A good file, by SIGHUP: "drop" removed, "add" added, "keep" untouched.
	writeFileAtomic(t, cfg, renderFixture(t, "reload-changed.yml", vars))
	keepBefore, _ = mfs.sum("llmprobe_requests_total", success("keep"))
	hup := time.Now()
	daemon.Signal(t, syscall.SIGHUP)
	// (A scrape that overlaps the reload may show both old and new series:
	// collectors are gathered concurrently, not as one snapshot.)
	mfs = pollScrape(t, base, 15*time.Second, "SIGHUP did not apply the changed configuration: reload gauge 1, series of add, none of drop", func(e exposition) bool {
		ok, _ := e.sum("llmprobe_config_last_reload_successful", nil)
		_, added := e.sum("llmprobe_requests_total", target("add"))
		return ok == 1 && added && !targetsIn(e)["drop"]
	})
	seenAfter := time.Since(hup)
	if v, _ := mfs.sum("llmprobe_config_last_reload_success_timestamp_seconds", nil); v <= loadedAt {
		t.Errorf("llmprobe_config_last_reload_success_timestamp_seconds = %g after a good reload, want > %g", v, loadedAt)
	}
	if k, _ := mfs.sum("llmprobe_requests_total", success("keep")); k < keepBefore {
		t.Errorf("the unchanged target's llmprobe_requests_total went from %g to %g: it was restarted", keepBefore, k)
	}
	if w, _ := mfs.sum("llmprobe_warmup", target("keep")); w != 0 {
		t.Error("the unchanged target keep is warming up again after the reload")
	}
	// The new target warms up for 3s, its requests kept out of the latency
	// histograms; judge it only if the reload was seen well within that.
	if seenAfter < 2*time.Second {
		if w, _ := mfs.sum("llmprobe_warmup", target("add")); w != 1 {
			t.Errorf("the new target add is not in warm-up %s after it was added", seenAfter.Round(time.Millisecond))
		}
		if n, _ := mfs.sum("llmprobe_ttft_seconds", target("add")); n != 0 {
			t.Errorf("llmprobe_ttft_seconds has %g observations of the new target add during its warm-up", n)
		}
	} else {
		t.Logf("the reload was seen %s after SIGHUP: too late to check the new target's warm-up", seenAfter)
	}
	pollScrape(t, base, 15*time.Second, "the new target add completes no request", func(e exposition) bool {
		n, _ := e.sum("llmprobe_requests_total", success("add"))
		return n > 0
	})
	// Late results of the removed target must not bring its series back.
	time.Sleep(time.Second)
	mfs, _ = scrape(t, base)
	if got := targetsIn(mfs); got["drop"] || !got["keep"] || !got["add"] {
		t.Errorf("after the reload /metrics has targets %v, want keep and add; drop's series: %s", got, seriesOf(mfs, "drop"))
	}
	if page := get(t, base+"/config"); !strings.Contains(page, "name: add") || strings.Contains(page, "name: drop") {
		t.Errorf("after the reload /config does not show the new configuration (add, not drop):\n%s", page)
	}

	// And POST /-/reload of a good file answers 200.
	if code, _, body := httpDo(t, http.MethodPost, base+"/-/reload", nil); code != http.StatusOK {
		t.Errorf("POST /-/reload with a good file: HTTP %d: %s", code, body)
	}
}

// targetsIn returns the target label values of every llmprobe_ series.
func targetsIn(e exposition) map[string]bool {
	out := map[string]bool{}
	for name := range e {
		if !strings.HasPrefix(name, "llmprobe_") {
			continue
		}
		for v := range e.labelValues(name, "target") {
			out[v] = true
		}
	}
	return out
}

// seriesOf lists the families that still have series of target.
func seriesOf(e exposition, target string) string {
	var out []string
	for name := range e {
		if e.labelValues(name, "target")[target] {
			out = append(out, name)
		}
	}
	return strings.Join(out, ", ")
}
