// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/llmprobe/llmprobe/config"
	"github.com/llmprobe/llmprobe/exporter"
	"github.com/llmprobe/llmprobe/internal/proctest"
	"github.com/llmprobe/llmprobe/internal/simtest"
	"github.com/llmprobe/llmprobe/plan"
	"github.com/llmprobe/llmprobe/probe/wire"
	"github.com/llmprobe/llmprobe/sim"
)

const planConfig = `workloads:
  w:
    classes:
      - {name: chat, weight: 3, prompt_tokens: {dist: lognormal, median: 120, p99: 2048}, output_tokens: 60}
      - {name: long, weight: 1, prompt_tokens: 2000, output_tokens: 200}
targets:
  - name: t
    url: http://127.0.0.1:1/v1
    model: m
    workload: w
    arrival: {rate: 2}
    slo: {objective: 0.99, ttft: 1s}
    pricing: {input_per_million: 1, output_per_million: 4}
`

// TestPlanCommand: llmprobe plan writes one JSON document of the issue's
// shape (or text), contacting no target (the target's URL is a closed
// port); its usage errors name the flag and exit 2.
func TestPlanCommand(t *testing.T) {
	bin := binary(t)
	file := filepath.Join(t.TempDir(), "llmprobe.yml")
	writeTestFile(t, file, planConfig)
	r := runBinary(t, bin, nil, "plan", "--config.file="+file, "--format=json", "--trials=8", "--detect=ttft:+50%:15m")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	var rep plan.Report
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	if err := dec.Decode(&rep); err != nil {
		t.Fatalf("stdout is not a plan: %v\n%s", err, r.stdout)
	}
	if dec.More() {
		t.Errorf("more than one document on stdout")
	}
	if len(rep.Classes) != 2 || rep.Classes[0].Class != "chat" || rep.Classes[0].Rate != 1.5 || rep.Classes[1].Rate != 0.5 ||
		rep.Classes[0].Shape != plan.ShapeAssumed || rep.Classes[0].CostPerDay == nil || rep.Classes[0].SLO == nil ||
		len(rep.Classes[0].Detection) != len(plan.DefaultEffects) || len(rep.Classes[0].Goals) != 1 || rep.Classes[0].Goals[0].Rate == nil {
		t.Errorf("plan: %s", r.stdout)
	}
	r = runBinary(t, bin, nil, "plan", "--config.file="+file, "--trials=4")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "target t: 2 req/s") || !strings.Contains(r.stdout, "  class long: 0.5 req/s, shape assumed") {
		t.Errorf("text: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	bad := filepath.Join(t.TempDir(), "bad.yml")
	writeTestFile(t, bad, strings.Replace(planConfig, "output_per_million: 4", "output_per_million: -4", 1))
	if r := runBinary(t, bin, nil, "plan", "--config.file="+bad); r.code != 1 || !strings.Contains(r.stderr, "bad.yml:13:37: targets[0].pricing.output_per_million: must be a price of 0 or more, got -4") {
		t.Errorf("a bad configuration: exit %d: %s", r.code, r.stderr)
	}
	expectUsageErrors(t, bin, []string{"plan"}, []usageCase{
		{nil, "required flag(s) '--config.file' not provided"},
		{[]string{"--config.file=" + file, "--format=xml"}, "--format: enum value must be one of text,json, got 'xml'"},
		{[]string{"--config.file=" + file, "--detect=ttft:+25%"}, `--detect "ttft:+25%": want METRIC:EFFECT:WITHIN, e.g. ttft:+25%:10m`},
		{[]string{"--config.file=" + file, "--detect=itl:+25%:10m"}, `--detect "itl:+25%:10m": the metric must be ttft, tpot, e2e or errors`},
		{[]string{"--config.file=" + file, "--trials=0"}, "--trials must be from 1 to 100000, got 0"},
		{[]string{"--config.file=" + file, "--trials=many"}, "--trials: "},
		{[]string{"--config.file=" + file, "--from=ftp://x"}, `--from="ftp://x": want a running llmprobe's http or https URL`},
		{[]string{"--config.file=" + file, "--from=http://u:hunter2@h:1"}, `--from="http://xxxxx@h:1": want a running llmprobe's http or https URL`},
		{[]string{"--config.file=" + file, "--from.config.file=x.yml"}, "--from.config.file needs --from"},
	})
	r = runBinary(t, bin, nil, "plan", "--config.file="+file, "--from=http://u:hunter2@h:1")
	if strings.Contains(r.stderr, "hunter2") {
		t.Errorf("the --from password is shown: %s", r.stderr)
	}
}

// TestPlanFrom: --from reads a running daemon's recent requests through
// its own HTTP surface (/api/v1/recent of exporter's handler) and plans
// a class with enough of them on them; one with too few stays assumed.
// A daemon's route prefix is kept.
func TestPlanFrom(t *testing.T) {
	cfg, err := config.Load([]byte(planConfig), "llmprobe.yml")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Global.RecentRequests = 500
	recent := exporter.NewRecent(nil)
	recent.SetConfig(cfg)
	start := time.Unix(1_700_000_000, 0)
	for i := range 300 {
		r := &wire.Result{Target: "t", Class: "chat", Outcome: wire.OutcomeSuccess, Dispatched: start.Add(time.Duration(i) * time.Second),
			FirstToken: true, TTFT: time.Duration(40e6 * math.Exp(0.01*math.Sin(float64(i)))), E2E: time.Second, TPOT: 15 * time.Millisecond,
			PromptTokens: 120, OutputTokens: 60, UsageReported: true}
		if i%50 == 0 {
			r.Outcome, r.FirstToken = wire.OutcomeHTTPError, false
		}
		recent.Observe(r)
	}
	for i := range 5 {
		recent.Observe(&wire.Result{Target: "t", Class: "long", Outcome: wire.OutcomeSuccess, Dispatched: start.Add(time.Duration(400+i) * time.Second),
			FirstToken: true, TTFT: 300 * time.Millisecond, E2E: 3 * time.Second, TPOT: 14 * time.Millisecond, OutputTokens: 200})
	}
	srv := httptest.NewServer(exporter.NewHandler(exporter.WebOptions{Recent: recent, RoutePrefix: "/llmprobe"}))
	t.Cleanup(srv.Close)
	file := filepath.Join(t.TempDir(), "llmprobe.yml")
	writeTestFile(t, file, planConfig)

	var out bytes.Buffer
	f := &planFlags{configFile: file, from: srv.URL + "/llmprobe/", format: "json", trials: 6}
	if err := runPlan(context.Background(), f, &out); err != nil {
		t.Fatal(err)
	}
	var rep plan.Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	if c := rep.Classes[0]; c.Class != "chat" || c.Shape != plan.ShapeObserved {
		t.Errorf("chat: shape %s, notes %q", c.Shape, c.Notes)
	}
	if c := rep.Classes[1]; c.Shape != plan.ShapeAssumed || len(c.Notes) == 0 || !strings.Contains(c.Notes[0], "(5 requests)") {
		t.Errorf("long: shape %s, notes %q", c.Shape, c.Notes)
	}
}

// TestPlanFromHostile: a --from that is not a daemon fails plan with a
// plain error (exit 1, not a usage error), bounded: not found, not JSON,
// an endless body (cut at maxRecentAPI).
func TestPlanFromHostile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "llmprobe.yml")
	writeTestFile(t, file, planConfig)
	huge := strings.Repeat(" ", 1<<20)
	for _, c := range []struct {
		name    string
		handler http.HandlerFunc
		want    string
	}{
		{"not found", func(w http.ResponseWriter, _ *http.Request) { http.NotFound(w, nil) }, "answered 404 Not Found"},
		{"not json", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "<html>hello</html>") }, "did not answer JSON recent requests"},
		{"endless", func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprint(w, `{"targets":[{"target":"t","requests":[{"class":"`)
			for r.Context().Err() == nil {
				if _, err := fmt.Fprint(w, huge); err != nil {
					return
				}
			}
		}, "larger than"},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewServer(c.handler)
			t.Cleanup(srv.Close)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			err := runPlan(ctx, &planFlags{configFile: file, from: srv.URL, format: "json", trials: 2}, &bytes.Buffer{})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want %q", err, c.want)
			}
			var ue usageError
			if errors.As(err, &ue) {
				t.Errorf("a server's answer is not a usage error: %v", err)
			}
		})
	}
}

// TestRunPlans: the daemon exports the plan of its configuration once it
// is computed, and again after a reload that changes a rate; its
// /api/v1/recent gives llmprobe plan --from an observed shape.
func TestRunPlans(t *testing.T) {
	bin := binary(t)
	simCfg := sim.DefaultConfig()
	simCfg.ZeroLatency = true
	_, simBase := simtest.Listen(t, simCfg)
	dir := t.TempDir()
	file := filepath.Join(dir, "llmprobe.yml")
	config := func(rate int) string {
		return fmt.Sprintf(`global: {warmup: 0s, shutdown_grace_period: 2s, recent_requests: 500}
workloads:
  w: {classes: [{name: c, prompt_tokens: 8, output_tokens: 3}]}
targets:
  - name: t
    url: %s/v1
    model: sim-model
    workload: w
    arrival: {process: constant, rate: %d}
`, simBase, rate)
	}
	writeTestFile(t, file, config(4))
	daemon, base := proctest.StartDaemon(t, bin, proctest.Options{}, "--config.file="+file, "--web.enable-lifecycle", "--log.level=warn")
	defer func() { _ = daemon.Stop(20 * time.Second) }()
	get := func(path string) string {
		t.Helper()
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	outputTokens := func() string {
		m := regexp.MustCompile(`(?m)^llmprobe_probe_tokens_per_day\{class="c",kind="output",target="t"\} (\S+)$`).FindStringSubmatch(get("/metrics"))
		if m == nil {
			return ""
		}
		return m[1]
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(2 * time.Minute); !ok(); time.Sleep(100 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("no %s within 2 minutes:\n%s", what, daemon.Stderr())
			}
		}
	}
	// 4 req/s of 3 output tokens: 1036800 a day.
	waitFor("plan figures", func() bool { return outputTokens() == "1.0368e+06" })
	if m := get("/metrics"); !regexp.MustCompile(`(?m)^llmprobe_plan_detection_delay_seconds\{class="c",effect="\+25%",metric="ttft",target="t"\} \d`).MatchString(m) {
		t.Errorf("no TTFT +25%% delay:\n%s", m)
	}
	if page := get("/"); !strings.Contains(page, `id="plan-t-c"`) {
		t.Errorf("the status page has no plan row")
	}
	writeTestFile(t, file, config(8))
	resp, err := http.Post(base+"/-/reload", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	waitFor("the new plan", func() bool { return outputTokens() == "2.0736e+06" })

	// The daemon's recent requests make an observed shape.
	waitFor("30 recent requests", func() bool { return strings.Count(get("/api/v1/recent"), `"outcome":"success"`) >= 30 })
	r := runBinary(t, bin, nil, "plan", "--config.file="+file, "--from="+base, "--format=json", "--trials=4")
	var rep plan.Report
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || r.code != 0 {
		t.Fatalf("plan --from: exit %d, %v\n%s%s", r.code, err, r.stdout, r.stderr)
	}
	if c := rep.Classes[0]; c.Shape != plan.ShapeObserved {
		t.Errorf("plan --from the daemon: shape %s, notes %q", c.Shape, c.Notes)
	}
}
