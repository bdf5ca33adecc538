// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package bench_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/llmprobe/llmprobe/bench"
	"github.com/llmprobe/llmprobe/bench/report"
	"github.com/llmprobe/llmprobe/config"
	"github.com/llmprobe/llmprobe/internal/promtest"
	"github.com/llmprobe/llmprobe/servermetrics"
	"github.com/llmprobe/llmprobe/sim"
)

// recordingSim is an in-process simulator whose /metrics is served from
// its registry by the test, which keeps every snapshot it served: the
// test reads the simulator's own counters at exactly the instants the
// bench scraped them.
type recordingSim struct {
	srv  *sim.Server
	url  string
	mu   sync.Mutex
	snap []map[string]*dto.MetricFamily
}

func startRecordingSim(t *testing.T, cfg sim.Config) *recordingSim {
	t.Helper()
	srv, err := sim.New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	rs := &recordingSim{srv: srv}
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) {
		fams, err := srv.Registry().Gather()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		byName := map[string]*dto.MetricFamily{}
		for _, f := range fams {
			byName[f.GetName()] = f
		}
		rs.mu.Lock()
		rs.snap = append(rs.snap, byName)
		rs.mu.Unlock()
		format := expfmt.NewFormat(expfmt.TypeTextPlain)
		w.Header().Set("Content-Type", string(format))
		enc := expfmt.NewEncoder(w, format)
		for _, f := range fams {
			_ = enc.Encode(f)
		}
	})
	mux.Handle("/", srv.Handler())
	hs := httptest.NewServer(mux)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		hs.Close()
	})
	rs.url = hs.URL
	return rs
}

func (rs *recordingSim) snapshots() []map[string]*dto.MetricFamily {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return slices.Clone(rs.snap)
}

// sumValues sums a family's counter or gauge values over its series.
func sumValues(f *dto.MetricFamily) float64 {
	v := 0.0
	for _, m := range f.GetMetric() {
		v += m.GetCounter().GetValue() + m.GetGauge().GetValue()
	}
	return v
}

// bucketAround is the histogram bucket [lower, upper] the q-quantile of
// the histogram's delta between two snapshots falls in.
func bucketAround(t *testing.T, first, last *dto.MetricFamily, q float64) (lower, upper float64) {
	t.Helper()
	h0, h1 := first.GetMetric()[0].GetHistogram(), last.GetMetric()[0].GetHistogram()
	total := float64(h1.GetSampleCount() - h0.GetSampleCount())
	rank := q * total
	lower = 0
	for i, b := range h1.GetBucket() {
		c := float64(b.GetCumulativeCount() - h0.GetBucket()[i].GetCumulativeCount())
		if c >= rank {
			return lower, b.GetUpperBound()
		}
		lower = b.GetUpperBound()
	}
	return lower, math.Inf(1)
}

func serverConfig(t *testing.T, targets string) *config.Config {
	t.Helper()
	cfg, err := config.Load([]byte(`
global: {warmup: 1s, request_timeout: 30s, seed: 1}
workloads:
  w:
    classes:
      - name: c
        prompt_tokens: 64
        output_tokens: 12
        prefix: {groups: 2, tokens: 32, probability: 0.8}
        sampling: {temperature: 0.7}
targets:
`+targets), "servermetrics.yml")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func simTarget(name, base string) string {
	return fmt.Sprintf(`  - {name: %s, url: %s/v1, model: sim-model, workload: w, arrival: {process: poisson, rate: 1}, max_inflight: 1024, extra_body: {ignore_eos: true}}
`, name, base)
}

// TestServerMetricsMatchSimulator: a stage's server figures are the
// simulator's own counters over the stage's window, read at the instants
// bench scraped them: tokens, requests and prefix-cache figures exactly,
// gauges as the mean of the scraped values, TTFT and queue-time
// quantiles inside the bucket the true quantile falls in; the TTFT gap
// is the probe's quantile minus the server's.
func TestServerMetricsMatchSimulator(t *testing.T) {
	if testing.Short() {
		t.Skip("a stage against a simulator")
	}
	scfg := sim.DefaultConfig()
	scfg.Seed = 1
	scfg.MaxNumSeqs = 4 // queues at 25 req/s: queue time and waiting requests
	scfg.MaxModelLen = 512
	scfg.NumKVBlocks = 128
	rs := startRecordingSim(t, scfg)
	cfg := serverConfig(t, simTarget("sim", rs.url))
	rep, err := bench.Run(context.Background(), bench.Options{
		Config: cfg, Stages: []bench.Stage{{Rate: 25, Duration: 4 * time.Second}}, Warmup: time.Second,
		Grace: 20 * time.Second, ServerMetrics: []string{rs.url + "/metrics"}, ServerMetricsInterval: 500 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	text := logReport(t, rep)
	s := rep.Stages[0]
	ss := s.Server
	if ss == nil {
		t.Fatal("no server metrics in the stage")
	}
	snaps := rs.snapshots()
	if ss.Scrapes != len(snaps) || ss.FailedScrapes != 0 || len(ss.Errors) != 0 || len(snaps) < 6 {
		t.Fatalf("scrapes %d failed %d errors %q; simulator served %d", ss.Scrapes, ss.FailedScrapes, ss.Errors, len(snaps))
	}
	if ss.Engine != "vllm" {
		t.Errorf("engine %q, want vllm", ss.Engine)
	}
	first, last := snaps[0], snaps[len(snaps)-1]
	delta := func(name string) float64 { return sumValues(last[name]) - sumValues(first[name]) }
	mean := func(name string) float64 {
		v := 0.0
		for _, sn := range snaps {
			v += sumValues(sn[name])
		}
		return v / float64(len(snaps))
	}
	// check compares a report's figure with the simulator's: equal, or
	// with a relative tolerance tol > 0 within it.
	check := func(what string, got *servermetrics.Float, want, tol float64) {
		t.Helper()
		if got == nil {
			t.Errorf("%s: missing, want %g", what, want)
			return
		}
		t.Logf("%s: report %g, simulator %g", what, *got, want)
		off := float64(*got) != want
		if tol > 0 {
			off = math.Abs(float64(*got)-want) > tol*math.Max(1, math.Abs(want))
		}
		if off {
			t.Errorf("%s = %g, simulator's %g", what, *got, want)
		}
	}
	exact := func(what string, got *servermetrics.Float, want float64) { t.Helper(); check(what, got, want, 0) }
	near := func(what string, got *servermetrics.Float, want float64) { t.Helper(); check(what, got, want, 1e-9) }
	exact("prompt tokens", ss.PromptTokens, delta("vllm:prompt_tokens_total"))
	exact("generation tokens", ss.GenerationTokens, delta("vllm:generation_tokens_total"))
	exact("requests finished", ss.RequestsFinished, delta("vllm:request_success_total"))
	near("prefix-cache hit ratio", ss.PrefixCacheHitRatio, delta("vllm:prefix_cache_hits_total")/delta("vllm:prefix_cache_queries_total"))
	secs := ss.Window.Seconds()
	near("generation tokens/s", ss.GenerationTokensPerSec, delta("vllm:generation_tokens_total")/secs)
	near("prompt tokens/s", ss.PromptTokensPerSec, delta("vllm:prompt_tokens_total")/secs)
	near("KV-cache usage", ss.KVCacheUsage, mean("vllm:kv_cache_usage_perc"))
	near("requests running", ss.RequestsRunning, mean("vllm:num_requests_running"))
	near("requests waiting", ss.RequestsWaiting, mean("vllm:num_requests_waiting"))
	if *ss.GenerationTokens <= 0 || *ss.RequestsFinished <= 0 || *ss.RequestsWaiting <= 0 {
		t.Errorf("the stage should have generated, finished and queued: %+v", ss)
	}
	// The simulator generates output_tokens for each request it finishes
	// (ignore_eos), so the stage's tokens follow from its requests
	// within the requests in flight at either end.
	t.Logf("probe served %d, server finished %g; window %s of a %s stage", s.Served, *ss.RequestsFinished, ss.Window, s.Duration)

	for _, h := range []struct {
		name string
		q    *servermetrics.Quantiles
	}{{"vllm:time_to_first_token_seconds", ss.TTFT}, {"vllm:request_queue_time_seconds", ss.QueueTime}} {
		if h.q == nil {
			t.Errorf("%s: missing", h.name)
			continue
		}
		wantCount := float64(last[h.name].GetMetric()[0].GetHistogram().GetSampleCount() - first[h.name].GetMetric()[0].GetHistogram().GetSampleCount())
		if float64(h.q.Count) != wantCount {
			t.Errorf("%s count %g, simulator's %g", h.name, h.q.Count, wantCount)
		}
		for _, qq := range []struct {
			q   float64
			got float64
		}{{0.5, float64(h.q.P50)}, {0.99, float64(h.q.P99)}} {
			lo, hi := bucketAround(t, first[h.name], last[h.name], qq.q)
			t.Logf("%s p%g: report %.4fs, simulator's bucket (%gs, %gs]", h.name, 100*qq.q, qq.got, lo, hi)
			if qq.got < lo || qq.got > hi {
				t.Errorf("%s p%g = %g outside the simulator's bucket (%g, %g]", h.name, 100*qq.q, qq.got, lo, hi)
			}
		}
	}
	g := s.TTFTGap
	if g == nil || float64(g.P50) != s.TTFT.P50-float64(ss.TTFT.P50) || float64(g.P99) != s.TTFT.P99-float64(ss.TTFT.P99) {
		t.Errorf("TTFT gap %+v, want probe %g/%g minus server %g/%g", g, s.TTFT.P50, s.TTFT.P99, ss.TTFT.P50, ss.TTFT.P99)
	} else {
		t.Logf("probe − server TTFT: p50 %+.4fs, p99 %+.4fs", g.P50, g.P99)
	}

	for _, want := range []string{"srv TTFT p50", "probe-srv p50", "vllm"} {
		if !strings.Contains(text, want) {
			t.Errorf("text output lacks %q", want)
		}
	}
	var js, md bytes.Buffer
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"server_metrics"`, `"probe_minus_server_ttft_seconds"`, `"kv_cache_usage_ratio"`, `"queue_time_seconds"`, `"requests_finished"`} {
		if !strings.Contains(js.String(), want) {
			t.Errorf("JSON lacks %s", want)
		}
	}
	if err := rep.WriteMarkdown(&md, report.MarkdownOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"### Server metrics (vllm)", "| probe − server TTFT p50 | ", "| requests finished | "} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("Markdown lacks %q", want)
		}
	}
	// The JSON reads back with the server figures (what compare loads).
	f := filepath.Join(t.TempDir(), "r.json")
	if err := os.WriteFile(f, js.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	back, err := report.ReadReport(f)
	if err != nil {
		t.Fatal(err)
	}
	if b := back.Stages[0].Server; b == nil || *b.GenerationTokens != *ss.GenerationTokens || back.Stages[0].TTFTGap == nil {
		t.Errorf("server figures lost in the JSON round trip: %+v", b)
	}
}

// TestServerMetricsFailedScrape: a metrics URL that answers 404 or
// refuses connections is reported in the stage; the run succeeds and the
// probe's figures are unaffected.
func TestServerMetricsFailedScrape(t *testing.T) {
	if testing.Short() {
		t.Skip("a stage against a simulator")
	}
	rs := startRecordingSim(t, sim.DefaultConfig())
	notFound := httptest.NewServer(http.NotFoundHandler())
	defer notFound.Close()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + l.Addr().String() + "/metrics"
	l.Close()
	cfg := serverConfig(t, simTarget("a", rs.url)+simTarget("b", rs.url))
	rep, err := bench.Run(context.Background(), bench.Options{
		Config: cfg, Stages: []bench.Stage{{Rate: 5, Duration: 2 * time.Second}}, Warmup: 500 * time.Millisecond,
		ServerMetrics: []string{"a=" + notFound.URL + "/metrics,b=" + refused}, ServerMetricsInterval: 500 * time.Millisecond,
	})
	if err != nil {
		t.Fatalf("a failing metrics URL failed the run: %v", err)
	}
	text := logReport(t, rep)
	for _, s := range rep.Stages {
		ss := s.Server
		if ss == nil {
			t.Fatalf("target %s: no server metrics entry", s.Target)
		}
		if ss.Scrapes == 0 || ss.FailedScrapes != ss.Scrapes || len(ss.Errors) == 0 || ss.Engine != "" || ss.TTFT != nil || s.TTFTGap != nil {
			t.Errorf("target %s: %+v", s.Target, ss)
		}
		if s.Sent == 0 || s.TTFT.Count == 0 {
			t.Errorf("target %s: the probe's figures are missing: sent %d", s.Target, s.Sent)
		}
		want := map[string]string{"a": "404 Not Found", "b": "refused"}[s.Target]
		if !strings.Contains(strings.Join(ss.Errors, " "), want) {
			t.Errorf("target %s: errors %q lack %q", s.Target, ss.Errors, want)
		}
	}
	if !strings.Contains(text, "server metrics (") || !strings.Contains(text, "404 Not Found") {
		t.Errorf("the text does not report the failed scrapes")
	}
	if len(rs.snapshots()) != 0 {
		t.Errorf("the simulator's metrics were scraped")
	}
	// A bad specification is refused before anything runs.
	if _, err := bench.Run(context.Background(), bench.Options{Config: cfg, Stages: []bench.Stage{{Rate: 1, Duration: time.Second}},
		ServerMetrics: []string{"http://x/metrics", "http://y/metrics", "http://z/metrics"}}); err == nil {
		t.Error("3 URLs for 2 targets accepted")
	}
}

// TestGPUFromPrometheus: a real Prometheus scrapes the recorded
// dcgm-exporter exposition; each stage's GPU figures (avg_over_time over
// the stage) are the fixture's values, for the GPUs the selector picks.
func TestGPUFromPrometheus(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Prometheus")
	}
	fixture, err := os.ReadFile(filepath.Join("..", "dashboards", "testdata", "dcgm-exporter.prom"))
	if err != nil {
		t.Fatal(err)
	}
	dcgm := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		_, _ = w.Write(fixture)
	}))
	defer dcgm.Close()
	prom := promtest.Start(t, promtest.Options{
		Targets:        []promtest.ScrapeTarget{{JobName: "dcgm", Address: dcgm.Listener.Addr().String()}},
		ScrapeInterval: 500 * time.Millisecond,
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := prom.WaitFor(ctx, `count(DCGM_FI_PROF_SM_ACTIVE) == 2`, func(r *promtest.Result) bool { return !r.Empty() }); err != nil {
		t.Fatal(err)
	}

	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(fixture))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string]float64{} // gpu → metric → value
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			gpu := ""
			for _, l := range m.GetLabel() {
				if l.GetName() == "gpu" {
					gpu = l.GetValue()
				}
			}
			if want[gpu] == nil {
				want[gpu] = map[string]float64{}
			}
			want[gpu][name] = m.GetGauge().GetValue()
		}
	}

	rs := startRecordingSim(t, sim.DefaultConfig())
	cfg := serverConfig(t, simTarget("sim", rs.url))
	rep, err := bench.Run(context.Background(), bench.Options{
		Config: cfg, Stages: []bench.Stage{{Rate: 5, Duration: 2500 * time.Millisecond}, {Rate: 10, Duration: 2 * time.Second}},
		Warmup: 500 * time.Millisecond, PrometheusURL: prom.URL, GPUSelector: `Hostname="gpu-node-1"`,
	})
	if err != nil {
		t.Fatal(err)
	}
	text := logReport(t, rep)
	for _, s := range rep.Stages {
		g := s.GPU
		if g == nil || len(g.Errors) != 0 || len(g.Devices) != 2 {
			t.Fatalf("stage %d: GPU %+v", s.Stage, g)
		}
		if !strings.Contains(g.Query, `[`) || g.Window < time.Second {
			t.Errorf("stage %d: query %q window %s", s.Stage, g.Query, g.Window)
		}
		for _, d := range g.Devices {
			w := want[d.GPU]
			for _, c := range []struct {
				metric string
				got    *servermetrics.Float
			}{
				{servermetrics.GPUMetrics.Util, d.UtilPercent}, {servermetrics.GPUMetrics.SMActive, d.SMActive},
				{servermetrics.GPUMetrics.FBUsed, d.FBUsedMiB}, {servermetrics.GPUMetrics.Power, d.PowerWatts},
			} {
				if c.got == nil {
					t.Errorf("stage %d GPU %s: no %s", s.Stage, d.GPU, c.metric)
					continue
				}
				t.Logf("stage %d GPU %s %s: report %g, fixture %g", s.Stage, d.GPU, c.metric, *c.got, w[c.metric])
				if math.Abs(float64(*c.got)-w[c.metric]) > 1e-9*math.Max(1, math.Abs(w[c.metric])) {
					t.Errorf("stage %d GPU %s %s = %g, fixture %g", s.Stage, d.GPU, c.metric, *c.got, w[c.metric])
				}
			}
			if d.Hostname != "gpu-node-1" || d.Model != "NVIDIA A100-SXM4-80GB" || d.UUID == "" {
				t.Errorf("stage %d: device labels %+v", s.Stage, d)
			}
		}
	}
	if !strings.Contains(text, "SM active") || !strings.Contains(text, "312.5 W") {
		t.Error("the text lacks the GPU table")
	}
	var md bytes.Buffer
	if err := rep.WriteMarkdown(&md, report.MarkdownOptions{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "### GPU (averaged over") || !strings.Contains(md.String(), "73214 MiB") {
		t.Error("the Markdown lacks the GPU section")
	}

	// A selector matching nothing is reported, not fatal.
	rep, err = bench.Run(context.Background(), bench.Options{
		Config: cfg, Stages: []bench.Stage{{Rate: 5, Duration: time.Second}}, Warmup: 0,
		PrometheusURL: prom.URL, GPUSelector: `{Hostname="nowhere"}`,
	})
	if err != nil {
		t.Fatal(err)
	}
	if g := rep.Stages[0].GPU; g == nil || len(g.Devices) != 0 || len(g.Errors) == 0 {
		t.Errorf("no GPU matched, got %+v", g)
	}
}
