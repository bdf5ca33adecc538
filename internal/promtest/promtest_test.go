// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package promtest

import (
	"context"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// TestStartScrapeQueryExemplars proves the test Prometheus scrapes a native
// histogram (protobuf negotiated), keeps the classic buckets next to it,
// stores exemplars, evaluates loaded rule files, and answers instant, range
// and exemplar queries.
func TestStartScrapeQueryExemplars(t *testing.T) {
	reg := prometheus.NewRegistry()
	hist := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:                            "promtest_latency_seconds",
		Help:                            "A latency histogram with classic and native buckets.",
		Buckets:                         []float64{0.1, 0.5, 1, 5},
		NativeHistogramBucketFactor:     1.1,
		NativeHistogramMaxBucketNumber:  100,
		NativeHistogramMinResetDuration: time.Hour,
	}, []string{"target"})
	reg.MustRegister(hist)
	obs := hist.WithLabelValues("sim").(prometheus.ExemplarObserver)
	for i := 0; i < 20; i++ {
		obs.ObserveWithExemplar(0.2+float64(i)*0.01, prometheus.Labels{"trace_id": "4bf92f3577b34da6a3ce929d0e0e4736"})
	}
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{EnableOpenMetrics: true}))
	defer srv.Close()
	// Keep observing while Prometheus scrapes, so rate() has an increase.
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-tick.C:
				obs.ObserveWithExemplar(0.3, prometheus.Labels{"trace_id": "00f067aa0ba902b7a3ce929d0e0e4736"})
			}
		}
	}()

	rules := filepath.Join(t.TempDir(), "rules.yml")
	if err := os.WriteFile(rules, []byte(`groups:
  - name: promtest
    rules:
      - record: job:promtest_latency_seconds:p50_rate10s
        expr: histogram_quantile(0.5, sum by (job) (rate(promtest_latency_seconds[10s])))
`), 0o644); err != nil {
		t.Fatal(err)
	}
	CheckRules(t, rules)

	prom := Start(t, Options{
		Targets:        []ScrapeTarget{{JobName: "promtest", Address: srv.Listener.Addr().String()}},
		ScrapeInterval: time.Second,
		RuleFiles:      []string{rules},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// Native histogram series: a histogram sample, not a float.
	r, err := prom.WaitFor(ctx, `promtest_latency_seconds{job="promtest"}`, func(r *Result) bool {
		return len(r.Vector) == 1 && r.Vector[0].Histogram != nil
	})
	if err != nil {
		targets, _ := prom.Targets(context.Background())
		t.Fatalf("native histogram not scraped: %v\ntargets: %+v", err, targets)
	}
	if h := r.Vector[0].Histogram; h.Count < 20 || len(h.Buckets) == 0 {
		t.Errorf("native histogram = %+v, want count >= 20 and buckets", h)
	}
	// Classic buckets kept alongside (always_scrape_classic_histograms).
	if _, err := prom.WaitFor(ctx, `promtest_latency_seconds_bucket{job="promtest", le="0.5"}`, func(r *Result) bool {
		return len(r.Vector) == 1 && r.Vector[0].Value >= 20
	}); err != nil {
		t.Fatalf("classic buckets not scraped: %v", err)
	}
	// rate() over the native histogram yields a quantile in the observed range.
	r, err = prom.WaitFor(ctx, `histogram_quantile(0.5, sum(rate(promtest_latency_seconds{job="promtest"}[10s])))`, (*Result).HasFinite)
	if err != nil {
		t.Fatal(err)
	}
	if v := r.Vector[0].Value; v < 0.25 || v > 0.35 {
		t.Errorf("native p50 = %g, want ~0.3 (all recent observations are 0.3)", v)
	}
	// The loaded recording rule evaluates.
	if _, err := prom.WaitFor(ctx, `job:promtest_latency_seconds:p50_rate10s`, (*Result).HasFinite); err != nil {
		t.Fatalf("recording rule not evaluated: %v", err)
	}
	// Range query over the last seconds returns points.
	end := time.Now()
	rr, err := prom.QueryRange(ctx, `sum(rate(promtest_latency_seconds_count{job="promtest"}[5s]))`, end.Add(-10*time.Second), end, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if rr.Type != "matrix" || !rr.HasFinite() {
		t.Errorf("range query = %s, want a matrix with points", rr)
	}

	// Exemplars with the trace_id label, from the native or classic series.
	var found bool
	deadline := time.Now().Add(30 * time.Second)
	for !found && time.Now().Before(deadline) {
		ex, err := prom.QueryExemplars(ctx, `promtest_latency_seconds{job="promtest"} or promtest_latency_seconds_bucket{job="promtest"}`,
			time.Now().Add(-time.Minute), time.Now())
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range ex {
			for _, e := range s.Exemplars {
				if len(e.Labels["trace_id"]) == 32 && e.Value > 0 {
					found = true
				}
			}
		}
		if !found {
			time.Sleep(250 * time.Millisecond)
		}
	}
	if !found {
		t.Fatal("no exemplar with a trace_id came back from query_exemplars")
	}

	// A bad query is an API error naming the problem, not a panic or an
	// empty result.
	_, err = prom.Query(ctx, `sum(`, time.Time{})
	var apiErr *APIError
	if err == nil || !strings.Contains(err.Error(), "bad_data") {
		t.Errorf("bad query: err = %v, want a bad_data API error", err)
	} else if !errors.As(err, &apiErr) || apiErr.Type != v1.ErrBadData {
		t.Errorf("bad query: err = %#v, want *APIError of type bad_data (HTTP 400)", err)
	}

	if err := prom.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if err := prom.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	if _, err := prom.Query(context.Background(), "1", time.Time{}); err == nil {
		t.Error("query after Stop succeeded; the server should be gone")
	}
}

func TestRenderConfig(t *testing.T) {
	b, err := RenderConfig(Options{
		Targets:   []ScrapeTarget{{JobName: "llmprobe", Address: "127.0.0.1:9477", Interval: 500 * time.Millisecond}},
		RuleFiles: []string{"/abs/rules.yml"},
	})
	if err != nil {
		t.Fatal(err)
	}
	got := string(b)
	for _, want := range []string{
		"scrape_interval: 1s", "evaluation_interval: 1s", "- /abs/rules.yml", "job_name: llmprobe",
		"scrape_native_histograms: true", "always_scrape_classic_histograms: true", "scrape_interval: 500ms",
		"- 127.0.0.1:9477",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("config lacks %q:\n%s", want, got)
		}
	}
	for _, bad := range []Options{
		{Targets: []ScrapeTarget{{Address: "127.0.0.1:1"}}},
		{Targets: []ScrapeTarget{{JobName: "a", Address: "x:1"}, {JobName: "a", Address: "y:1"}}},
	} {
		if _, err := RenderConfig(bad); err == nil {
			t.Errorf("RenderConfig(%+v) accepted an invalid target", bad)
		}
	}
}

func TestLookupTool(t *testing.T) {
	t.Setenv("PROMTOOL", filepath.Join(t.TempDir(), "missing"))
	if _, err := LookupTool(PromtoolName); err == nil || !strings.Contains(err.Error(), "$PROMTOOL") {
		t.Errorf("LookupTool with a missing $PROMTOOL: err = %v, want one naming $PROMTOOL", err)
	}
	dir := t.TempDir()
	notExec := filepath.Join(dir, "promtool")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PROMTOOL", notExec)
	if _, err := LookupTool(PromtoolName); err == nil || !strings.Contains(err.Error(), "not executable") {
		t.Errorf("LookupTool with a non-executable file: err = %v", err)
	}
	if err := os.Chmod(notExec, 0o755); err != nil {
		t.Fatal(err)
	}
	if p, err := LookupTool(PromtoolName); err != nil || p != notExec {
		t.Errorf("LookupTool = %q, %v; want %q", p, err, notExec)
	}
}

func TestCheckRulesRejectsInvalid(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.yml")
	if err := os.WriteFile(bad, []byte("groups:\n  - name: g\n    rules:\n      - record: x:y:z\n        expr: sum(\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := RunPromtool(t, "", "check", "rules", bad)
	if err == nil {
		t.Fatalf("promtool accepted an unparsable expression:\n%s", out)
	}
	if !strings.Contains(out, "parse error") && !strings.Contains(out, "unclosed") && !strings.Contains(out, "unexpected") {
		t.Errorf("promtool output does not explain the parse error:\n%s", out)
	}
}
