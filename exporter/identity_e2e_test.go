// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package exporter

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/llmprobe/llmprobe/config"
	"github.com/llmprobe/llmprobe/internal/otlptest"
	"github.com/llmprobe/llmprobe/internal/simtest"
	"github.com/llmprobe/llmprobe/internal/testio"
	"github.com/llmprobe/llmprobe/probe"
	"github.com/llmprobe/llmprobe/sim"
)

// TestIdentityChangeEndToEnd wires the daemon as it runs against a
// simulator whose build (fingerprint, version, Server header) changes 3 s
// after its start, and reads the change back everywhere it shows:
// llmprobe_target_info switches to the new identity (one series),
// llmprobe_target_changes_total counts one change of each (none of the
// model), the last-change gauge is set, the status page has the change
// line, the log has "target identity changed", and the request that
// revealed it carries the span event, received over OTLP.
func TestIdentityChangeEndToEnd(t *testing.T) {
	clearOTelEnv(t)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
	var logs testio.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	recv := otlptest.Start(t)
	simCfg := sim.DefaultConfig()
	simCfg.Seed, simCfg.ZeroLatency, simCfg.EOSProbability = 1, true, 0
	simCfg.Identity = sim.Identity{Fingerprint: "fp-a", Version: "0.1.0", Server: "sim/1"}
	simCfg.IdentitySteps = []sim.IdentityStep{{After: 3 * time.Second, Fingerprint: "fp-b", Version: "0.2.0", Server: "sim/2"}}
	_, base := simtest.Listen(t, simCfg)

	path := filepath.Join(t.TempDir(), "llmprobe.yml")
	writeFile(t, path, fmt.Sprintf(`
global: {warmup: 0s}
workloads:
  w:
    classes:
      - {name: chat, prompt_tokens: 16, output_tokens: 4}
targets:
  - name: sim
    url: %s/v1
    model: sim-model
    workload: w
    arrival: {process: constant, rate: 40}
    identity: {poll_interval: 1s}
tracing:
  endpoint: %s
  insecure: true
`, base, recv.Addr))
	cfg, err := config.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := NewTracing(context.Background(), TracingOptions{Config: cfg.Tracing, DefaultServiceName: "llmprobe", ServiceVersion: "e2e", Logger: logger})
	if err != nil || tr == nil {
		t.Fatalf("tracing: %v %v", tr, err)
	}
	d := startDaemon(t, path, logger, probe.Options{Tracer: tr.Tracer(), Propagator: tr.Propagator()})
	d.reload(t)

	info := func() map[string]string {
		mfs := gather(t, d.reg)
		if n := countSeries(mfs, "llmprobe_target_info", map[string]string{"target": "sim"}); n != 1 {
			t.Fatalf("%d llmprobe_target_info series for the target, want 1", n)
		}
		out := map[string]string{}
		for _, lp := range series(mfs, "llmprobe_target_info", map[string]string{"target": "sim"}).GetLabel() {
			out[lp.GetName()] = lp.GetValue()
		}
		return out
	}
	var first map[string]string
	if !waitUntil(30*time.Second, 50*time.Millisecond, func() bool { first = info(); return first["version"] != "" }) {
		t.Fatalf("no version learned: %v", first)
	}
	if first["fingerprint"] != "fp-a" || first["version"] != "0.1.0" || first["server"] != "sim/1" || first["model"] != "sim-model" {
		t.Skipf("the machine is too slow for this test: the first identity seen was %v, after the step", first)
	}
	if v := series(gather(t, d.reg), "llmprobe_target_last_change_timestamp_seconds", map[string]string{"target": "sim"}).GetGauge().GetValue(); v != 0 {
		t.Errorf("last change %v before any change, want 0", v)
	}
	var now map[string]string
	if !waitUntil(60*time.Second, 50*time.Millisecond, func() bool {
		now = info()
		return now["version"] == "0.2.0" && now["fingerprint"] == "fp-b" && now["server"] == "sim/2"
	}) {
		t.Fatalf("identity never changed: %v", now)
	}
	mfs := gather(t, d.reg)
	for what, want := range map[string]float64{"model": 0, "fingerprint": 1, "server": 1, "version": 1} {
		if v := series(mfs, "llmprobe_target_changes_total", map[string]string{"target": "sim", "what": what}).GetCounter().GetValue(); v != want {
			t.Errorf("llmprobe_target_changes_total{what=%q} = %v, want %v", what, v, want)
		}
	}
	if v := series(mfs, "llmprobe_target_last_change_timestamp_seconds", map[string]string{"target": "sim"}).GetGauge().GetValue(); v < float64(time.Now().Add(-time.Minute).Unix()) {
		t.Errorf("last change at %v", v)
	}
	_, _, page := d.web.do(t, "GET", "/", nil)
	for _, want := range []string{
		`id="identity-sim"`, "fingerprint <code>fp-b</code>", "version <code>0.2.0</code>", "(version from <code>/version</code>)",
		"<strong>fingerprint changed at", "<code>fp-a</code> → <code>fp-b</code>", "<strong>version changed at", "<strong>server changed at",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("status page lacks %q", want)
		}
	}
	d.stop(t, tr)
	if !strings.Contains(logs.String(), `msg="target identity changed" target=sim what=fingerprint from=fp-a to=fp-b`) {
		t.Errorf("no log line for the change in\n%s", logs.String())
	}
	found := map[string]bool{}
	for _, s := range recv.Spans() {
		for _, ev := range s.Span.GetEvents() {
			if ev.GetName() != probe.IdentityChangedEvent {
				continue
			}
			attrs := map[string]string{}
			for _, kv := range ev.GetAttributes() {
				attrs[kv.GetKey()] = kv.GetValue().GetStringValue()
			}
			found[attrs["llmprobe.identity.what"]+":"+attrs["llmprobe.identity.from"]+"->"+attrs["llmprobe.identity.to"]] = true
		}
	}
	for _, want := range []string{"fingerprint:fp-a->fp-b", "server:sim/1->sim/2"} {
		if !found[want] {
			t.Errorf("no span event %s among %v", want, found)
		}
	}
}
