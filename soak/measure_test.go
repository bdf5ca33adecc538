// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package soak

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// sample is one scrape of the daemon's /metrics (and the simulator's
// queue), taken at an offset from the start of the soak.
type sample struct {
	slot time.Duration // planned offset from the start: k × interval
	at   time.Duration // actual offset (a little after slot), for rates

	rss        float64 // process_resident_memory_bytes
	heapInuse  float64 // go_memstats_heap_inuse_bytes
	heapGoal   float64 // go_memstats_next_gc_bytes
	goroutines float64 // go_goroutines
	cpu        float64 // process_cpu_seconds_total

	scheduled float64            // Σ llmprobe_requests_scheduled_total
	sent      float64            // Σ llmprobe_requests_sent_total (else scheduled − dropped)
	dropped   map[string]float64 // llmprobe_requests_dropped_total by reason
	outcomes  map[string]float64 // llmprobe_requests_total by outcome
	inflight  float64            // Σ llmprobe_inflight_requests
	requested float64            // Σ llmprobe_target_request_rate, req/s
	saturated float64            // max llmprobe_harness_saturated

	simWaiting float64 // the simulator's vllm:num_requests_waiting; NaN when unknown
	simCPU     float64 // the simulator's process_cpu_seconds_total; NaN when unknown
	load       float64 // the host's 1-minute load average; NaN when unknown
}

// ended is the number of requests that ended, all outcomes.
func (s sample) ended() float64 { return sumValues(s.outcomes) }

// droppedTotal is the number of scheduled requests never sent.
func (s sample) droppedTotal() float64 { return sumValues(s.dropped) }

func sumValues(m map[string]float64) float64 {
	total := 0.0
	for _, v := range m {
		total += v
	}
	return total
}

// families is a parsed text-format exposition.
type families map[string]*dto.MetricFamily

// parseExposition parses the Prometheus text format.
func parseExposition(r io.Reader) (families, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := parser.TextToMetricFamilies(r)
	if err != nil {
		return nil, err
	}
	return mfs, nil
}

// metricValue is a counter's, gauge's or untyped metric's value.
func metricValue(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.GetCounter().GetValue()
	case m.Gauge != nil:
		return m.GetGauge().GetValue()
	case m.Untyped != nil:
		return m.GetUntyped().GetValue()
	}
	return math.NaN()
}

// sum adds up every series of a family; ok is false when the family is
// absent.
func (f families) sum(name string) (total float64, ok bool) {
	mf := f[name]
	if mf == nil {
		return 0, false
	}
	for _, m := range mf.GetMetric() {
		total += metricValue(m)
	}
	return total, true
}

// max is the largest value among a family's series (NaN when absent).
func (f families) max(name string) float64 {
	mf := f[name]
	if mf == nil || len(mf.GetMetric()) == 0 {
		return math.NaN()
	}
	out := math.Inf(-1)
	for _, m := range mf.GetMetric() {
		out = math.Max(out, metricValue(m))
	}
	return out
}

// sumBy adds up a family's series grouped by one label's value.
func (f families) sumBy(name, label string) (map[string]float64, bool) {
	mf := f[name]
	if mf == nil {
		return nil, false
	}
	out := map[string]float64{}
	for _, m := range mf.GetMetric() {
		key := ""
		for _, l := range m.GetLabel() {
			if l.GetName() == label {
				key = l.GetValue()
			}
		}
		out[key] += metricValue(m)
	}
	return out, true
}

// daemonSample extracts a sample from the daemon's exposition. Every
// family the soak judges must be present: a missing one means the metrics
// contract changed, and the soak would otherwise judge zeros.
func daemonSample(f families) (sample, error) {
	s := sample{simWaiting: math.NaN(), simCPU: math.NaN(), load: math.NaN()}
	var missing []string
	need := func(name string) float64 {
		v, ok := f.sum(name)
		if !ok {
			missing = append(missing, name)
		}
		return v
	}
	s.rss = need("process_resident_memory_bytes")
	s.heapInuse = need("go_memstats_heap_inuse_bytes")
	s.heapGoal = need("go_memstats_next_gc_bytes")
	s.goroutines = need("go_goroutines")
	s.cpu = need("process_cpu_seconds_total")
	s.scheduled = need("llmprobe_requests_scheduled_total")
	s.inflight = need("llmprobe_inflight_requests")
	s.requested = need("llmprobe_target_request_rate")
	s.saturated = f.max("llmprobe_harness_saturated")
	var ok bool
	if s.outcomes, ok = f.sumBy("llmprobe_requests_total", "outcome"); !ok {
		missing = append(missing, "llmprobe_requests_total")
	}
	if s.dropped, ok = f.sumBy("llmprobe_requests_dropped_total", "reason"); !ok {
		missing = append(missing, "llmprobe_requests_dropped_total")
	}
	if len(missing) > 0 {
		return sample{}, fmt.Errorf("metrics missing from the exposition: %s", strings.Join(missing, ", "))
	}
	if s.sent, ok = f.sum("llmprobe_requests_sent_total"); !ok {
		s.sent = s.scheduled - s.droppedTotal()
	}
	return s, nil
}

// scrapeClient bounds every scrape.
var scrapeClient = &http.Client{Timeout: 10 * time.Second}

// scrape fetches and parses url (a /metrics endpoint) in the text format.
func scrape(ctx context.Context, url string) (families, error) {
	f, _, err := scrapeSized(ctx, url)
	return f, err
}

// scrapeSized is scrape that also says how many bytes the exposition
// had.
func scrapeSized(ctx context.Context, url string) (families, int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, 0, err
	}
	req.Header.Set("Accept", string(expfmt.NewFormat(expfmt.TypeTextPlain)))
	resp, err := scrapeClient.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, 0, fmt.Errorf("GET %s: HTTP %d", url, resp.StatusCode)
	}
	body := &countingReader{r: io.LimitReader(resp.Body, 64<<20)}
	f, err := parseExposition(body)
	if err != nil {
		return nil, 0, fmt.Errorf("parsing %s: %w", url, err)
	}
	return f, body.n, nil
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// judgedSpan is the tail of a run whose drift is judged: the last 30
// minutes of a run of an hour or more, the last half of a shorter one.
// By then start-up transients (warm-up, the multi-turn ramp, the heap and
// the connection pools growing to their working size) are over.
func judgedSpan(run time.Duration) time.Duration {
	if run >= time.Hour {
		return 30 * time.Minute
	}
	return run / 2
}

// minSpanSamples is the fewest samples a judged span may hold: two
// disjoint windows of at least 3 samples.
const minSpanSamples = 6

// rateSettle is the start of the window over which the achieved rate is
// measured: past the warm-up and the multi-turn ramp (a conversation's
// later turns are planned after earlier answers, so the request rate
// reaches its mean only once the first conversations have ended).
func rateSettle(run time.Duration) time.Duration {
	return min(time.Minute, run/4)
}

// spanSamples returns the samples planned within span of the last one.
func spanSamples(samples []sample, span time.Duration) []sample {
	if len(samples) == 0 {
		return nil
	}
	from := samples[len(samples)-1].slot - span
	i := sort.Search(len(samples), func(i int) bool { return samples[i].slot >= from })
	return samples[i:]
}

// driftStats describes how a series moved over the judged span.
type driftStats struct {
	n, window   int     // samples in the span; samples in each end window
	first, last float64 // means of the first and last windows
	drift       float64 // (last − first) / first
	min, max    float64
	median      float64
	spread      float64 // (max − min) / median
}

// windowSize is the number of samples averaged at each end of a span of
// n: 10% of it, at least 3. At the default 30 s interval the judged 30
// minutes hold 61 samples and each end window 6 (3 minutes): the goroutine
// count moves with the number of requests in flight, which is Poisson
// (σ ≈ √inflight), and averaging 6 samples instead of 3 keeps that noise
// well under the 10% threshold.
func windowSize(n int) int {
	return max(3, (n+5)/10)
}

// computeDrift computes driftStats of xs (in time order).
func computeDrift(xs []float64) (driftStats, error) {
	n := len(xs)
	if n < minSpanSamples {
		return driftStats{}, fmt.Errorf("%d samples in the judged span, need at least %d", n, minSpanSamples)
	}
	for _, x := range xs {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return driftStats{}, errors.New("a sample is not a finite number")
		}
	}
	d := driftStats{n: n, window: windowSize(n)}
	d.first = mean(xs[:d.window])
	d.last = mean(xs[n-d.window:])
	if d.first <= 0 {
		return driftStats{}, fmt.Errorf("the first window's mean is %g, not positive", d.first)
	}
	d.drift = (d.last - d.first) / d.first
	sorted := append([]float64(nil), xs...)
	sort.Float64s(sorted)
	d.min, d.max = sorted[0], sorted[n-1]
	if n%2 == 1 {
		d.median = sorted[n/2]
	} else {
		d.median = (sorted[n/2-1] + sorted[n/2]) / 2
	}
	if d.median > 0 {
		d.spread = (d.max - d.min) / d.median
	}
	return d, nil
}

func mean(xs []float64) float64 {
	total := 0.0
	for _, x := range xs {
		total += x
	}
	return total / float64(len(xs))
}

// achievedRate is the send rate between the first sample planned at or
// after from and the last sample: Δsent / Δt over their actual times.
// first is the first sample's actual time.
func achievedRate(samples []sample, from time.Duration) (rate float64, first, window time.Duration, err error) {
	i := sort.Search(len(samples), func(i int) bool { return samples[i].slot >= from })
	if i >= len(samples)-1 {
		return 0, 0, 0, fmt.Errorf("fewer than two samples after %s", from)
	}
	a, b := samples[i], samples[len(samples)-1]
	window = b.at - a.at
	return (b.sent - a.sent) / window.Seconds(), a.at, window, nil
}

const mib = 1 << 20

// formatTable renders the samples as a table: elapsed time, the daemon's
// memory and goroutines, requests (sent, and cumulative errors and drops),
// the send rate and the CPU use (cores) of the daemon and the simulator
// over the preceding interval, the simulator's waiting queue and the
// host's load average (other work on the machine shows there).
func formatTable(samples []sample) string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "time\tRSS MiB\theap MiB\theap goal MiB\tgoroutines\tinflight\tsent\trate req/s\terrors\tdropped\tCPU\tsim CPU\tsim wait\tload\t")
	for i, s := range samples {
		rate, cpu, simCPU := "-", "-", "-"
		if i > 0 {
			p := samples[i-1]
			dt := (s.at - p.at).Seconds()
			rate = fmt.Sprintf("%.1f", (s.sent-p.sent)/dt)
			cpu = fmt.Sprintf("%.2f", (s.cpu-p.cpu)/dt)
			if d := s.simCPU - p.simCPU; !math.IsNaN(d) {
				simCPU = fmt.Sprintf("%.2f", d/dt)
			}
		}
		wait, load := "-", "-"
		if !math.IsNaN(s.simWaiting) {
			wait = fmt.Sprintf("%.0f", s.simWaiting)
		}
		if !math.IsNaN(s.load) {
			load = fmt.Sprintf("%.2f", s.load)
		}
		fmt.Fprintf(w, "%s\t%.1f\t%.1f\t%.1f\t%.0f\t%.0f\t%.0f\t%s\t%.0f\t%.0f\t%s\t%s\t%s\t%s\t\n",
			clock(s.at), s.rss/mib, s.heapInuse/mib, s.heapGoal/mib, s.goroutines, s.inflight,
			s.sent, rate, s.ended()-s.outcomes["success"], s.droppedTotal(), cpu, simCPU, wait, load)
	}
	_ = w.Flush()
	return b.String()
}

// clock formats an offset as [h:]mm:ss.
func clock(d time.Duration) string {
	sec := int(d.Round(time.Second) / time.Second)
	if sec >= 3600 {
		return fmt.Sprintf("%d:%02d:%02d", sec/3600, sec/60%60, sec%60)
	}
	return fmt.Sprintf("%02d:%02d", sec/60, sec%60)
}

// The helpers' unit tests: fast, and run by `go test ./...`.

func TestComputeDrift(t *testing.T) {
	flat := []float64{100, 102, 98, 101, 99, 100, 103, 97, 100}
	d, err := computeDrift(flat)
	if err != nil {
		t.Fatal(err)
	}
	if d.window != 3 || d.first != 100 || d.last != 100 || d.drift != 0 {
		t.Errorf("flat: %+v", d)
	}
	if d.min != 97 || d.max != 103 || d.median != 100 || math.Abs(d.spread-0.06) > 1e-12 {
		t.Errorf("flat spread: %+v", d)
	}

	// A leak: +1 per sample from 100; first window mean 101, last 119.
	var leak []float64
	for i := range 21 {
		leak = append(leak, 100+float64(i))
	}
	d, err = computeDrift(leak)
	if err != nil {
		t.Fatal(err)
	}
	if d.window != 3 || d.first != 101 || d.last != 119 || math.Abs(d.drift-18.0/101) > 1e-12 {
		t.Errorf("leak: %+v", d)
	}
	if d.median != 110 || math.Abs(d.spread-20.0/110) > 1e-12 {
		t.Errorf("leak spread: %+v", d)
	}

	// 61 samples (30 minutes every 30 s): windows of 6; even-length median.
	xs := make([]float64, 61)
	for i := range xs {
		xs[i] = 50
	}
	for i := 55; i < 61; i++ {
		xs[i] = 60
	}
	d, err = computeDrift(xs)
	if err != nil {
		t.Fatal(err)
	}
	if d.window != 6 || d.first != 50 || d.last != 60 || math.Abs(d.drift-0.2) > 1e-12 {
		t.Errorf("61 samples: %+v", d)
	}
	if d, _ := computeDrift([]float64{1, 2, 3, 4, 5, 6}); d.median != 3.5 || d.window != 3 {
		t.Errorf("even median: %+v", d)
	}

	for _, bad := range [][]float64{
		{1, 2, 3, 4, 5},                     // too few
		{0, 0, 0, 1, 1, 1},                  // first window not positive
		{1, 2, math.NaN(), 4, 5, 6},         // not a number
		{1, 2, 3, 4, 5, math.Inf(1)},        // not finite
		{-1, -1, -1, -1, -1, -1, -1, -1, 0}, // negative
	} {
		if _, err := computeDrift(bad); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
}

func TestWindowSize(t *testing.T) {
	for n, want := range map[int]int{6: 3, 13: 3, 34: 3, 35: 4, 61: 6, 121: 12} {
		if got := windowSize(n); got != want {
			t.Errorf("windowSize(%d) = %d, want %d", n, got, want)
		}
	}
}

func TestSpans(t *testing.T) {
	if got := judgedSpan(time.Hour); got != 30*time.Minute {
		t.Errorf("judgedSpan(1h) = %s", got)
	}
	if got := judgedSpan(3 * time.Hour); got != 30*time.Minute {
		t.Errorf("judgedSpan(3h) = %s", got)
	}
	if got := judgedSpan(4 * time.Minute); got != 2*time.Minute {
		t.Errorf("judgedSpan(4m) = %s", got)
	}
	if got := rateSettle(time.Hour); got != time.Minute {
		t.Errorf("rateSettle(1h) = %s", got)
	}
	if got := rateSettle(2 * time.Minute); got != 30*time.Second {
		t.Errorf("rateSettle(2m) = %s", got)
	}

	// 4 minutes every 10 s, sent growing 200/s; the last half holds the
	// samples from 2:00 on (13 of them).
	var samples []sample
	for k := 0; k <= 24; k++ {
		slot := time.Duration(k) * 10 * time.Second
		at := slot + time.Duration(k)*time.Millisecond // each a little later
		samples = append(samples, sample{slot: slot, at: at, sent: 200 * at.Seconds()})
	}
	span := spanSamples(samples, judgedSpan(4*time.Minute))
	if len(span) != 13 || span[0].at.Round(time.Second) != 2*time.Minute {
		t.Errorf("span: %d samples from %s", len(span), span[0].at)
	}
	rate, from, window, err := achievedRate(samples, rateSettle(4*time.Minute))
	if err != nil || math.Abs(rate-200) > 1e-9 || from.Round(time.Second) != time.Minute || window.Round(time.Second) != 3*time.Minute {
		t.Errorf("achievedRate = %g from %s over %s, %v", rate, from, window, err)
	}
	if _, _, _, err := achievedRate(samples, time.Hour); err == nil {
		t.Error("achievedRate after the last sample: no error")
	}
}

// exposition is a trimmed scrape of the daemon: two targets, the families
// the soak reads, and a histogram it must skip.
const exposition = `# HELP go_goroutines Number of goroutines that currently exist.
# TYPE go_goroutines gauge
go_goroutines 1234
# TYPE go_memstats_heap_inuse_bytes gauge
go_memstats_heap_inuse_bytes 6.7108864e+07
# TYPE go_memstats_next_gc_bytes gauge
go_memstats_next_gc_bytes 1.34217728e+08
# TYPE process_resident_memory_bytes gauge
process_resident_memory_bytes 1.6777216e+08
# TYPE process_cpu_seconds_total counter
process_cpu_seconds_total 12.5
# TYPE llmprobe_requests_scheduled_total counter
llmprobe_requests_scheduled_total{class="chat",target="a"} 700
llmprobe_requests_scheduled_total{class="agent",target="a"} 300
llmprobe_requests_scheduled_total{class="summarize",target="b"} 100
# TYPE llmprobe_requests_sent_total counter
llmprobe_requests_sent_total{class="chat",target="a"} 699
llmprobe_requests_sent_total{class="agent",target="a"} 300
llmprobe_requests_sent_total{class="summarize",target="b"} 100
# TYPE llmprobe_requests_dropped_total counter
llmprobe_requests_dropped_total{reason="inflight_limit",target="a"} 0
llmprobe_requests_dropped_total{reason="late",target="a"} 1
llmprobe_requests_dropped_total{reason="late",target="b"} 0
# TYPE llmprobe_requests_total counter
llmprobe_requests_total{class="chat",model="m",outcome="success",target="a"} 650
llmprobe_requests_total{class="chat",model="m",outcome="timeout",target="a"} 2
llmprobe_requests_total{class="agent",model="m",outcome="success",target="a"} 280
llmprobe_requests_total{class="summarize",model="m",outcome="success",target="b"} 90
llmprobe_requests_total{class="summarize",model="m",outcome="http_error",target="b"} 1
# TYPE llmprobe_inflight_requests gauge
llmprobe_inflight_requests{target="a"} 67
llmprobe_inflight_requests{target="b"} 9
# TYPE llmprobe_target_request_rate gauge
llmprobe_target_request_rate{target="a"} 180
llmprobe_target_request_rate{target="b"} 20
# TYPE llmprobe_harness_saturated gauge
llmprobe_harness_saturated{target="a"} 0
llmprobe_harness_saturated{target="b"} 1
# TYPE llmprobe_e2e_seconds histogram
llmprobe_e2e_seconds_bucket{class="chat",model="m",target="a",le="1"} 600
llmprobe_e2e_seconds_bucket{class="chat",model="m",target="a",le="+Inf"} 650
llmprobe_e2e_seconds_sum{class="chat",model="m",target="a"} 400
llmprobe_e2e_seconds_count{class="chat",model="m",target="a"} 650
`

func TestDaemonSample(t *testing.T) {
	f, err := parseExposition(strings.NewReader(exposition))
	if err != nil {
		t.Fatal(err)
	}
	s, err := daemonSample(f)
	if err != nil {
		t.Fatal(err)
	}
	if s.goroutines != 1234 || s.heapInuse != 64*mib || s.heapGoal != 128*mib || s.rss != 160*mib || s.cpu != 12.5 {
		t.Errorf("process figures: %+v", s)
	}
	if s.scheduled != 1100 || s.sent != 1099 || s.droppedTotal() != 1 || s.dropped["late"] != 1 {
		t.Errorf("counts: %+v", s)
	}
	if s.ended() != 1023 || s.outcomes["success"] != 1020 || s.outcomes["timeout"] != 2 || s.outcomes["http_error"] != 1 {
		t.Errorf("outcomes: %v", s.outcomes)
	}
	if s.inflight != 76 || s.requested != 200 || s.saturated != 1 {
		t.Errorf("gauges: %+v", s)
	}
	if !math.IsNaN(s.simWaiting) {
		t.Errorf("simWaiting = %g, want NaN until the simulator is scraped", s.simWaiting)
	}

	// Without llmprobe_requests_sent_total, sent is scheduled − dropped.
	f, _ = parseExposition(strings.NewReader(exposition))
	delete(f, "llmprobe_requests_sent_total")
	if s, err := daemonSample(f); err != nil || s.sent != 1099 {
		t.Errorf("sent without the sent counter = %g, %v", s.sent, err)
	}

	// A family the verdict needs is missing: an error that names it.
	f, _ = parseExposition(strings.NewReader(exposition))
	delete(f, "go_memstats_next_gc_bytes")
	delete(f, "llmprobe_requests_total")
	if _, err := daemonSample(f); err == nil || !strings.Contains(err.Error(), "go_memstats_next_gc_bytes") || !strings.Contains(err.Error(), "llmprobe_requests_total") {
		t.Errorf("missing families: %v", err)
	}

	if _, err := parseExposition(strings.NewReader("not a metric line at all {")); err == nil {
		t.Error("garbage parsed")
	}
}

func TestFormatTable(t *testing.T) {
	a := sample{at: 0, rss: 100 * mib, heapInuse: 50 * mib, heapGoal: 80 * mib, goroutines: 900,
		outcomes: map[string]float64{"success": 0}, simWaiting: math.NaN(), simCPU: math.NaN(), load: math.NaN()}
	b := sample{at: 30 * time.Second, rss: 110 * mib, heapInuse: 60 * mib, heapGoal: 90 * mib, goroutines: 1000,
		sent: 6000, cpu: 15, inflight: 300, outcomes: map[string]float64{"success": 5600, "timeout": 1},
		dropped: map[string]float64{"late": 2}, simWaiting: 0, simCPU: 3, load: 1.5}
	c := b
	c.at, c.simCPU = time.Hour+30*time.Second, 3+3600*0.25
	out := formatTable([]sample{a, b, c})
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 {
		t.Fatalf("%d lines:\n%s", len(lines), out)
	}
	for _, want := range []string{"RSS MiB", "goroutines", "rate req/s"} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("header lacks %q: %s", want, lines[0])
		}
	}
	if f := strings.Fields(lines[2]); len(f) != 14 || f[0] != "00:30" || f[1] != "110.0" || f[6] != "6000" || f[7] != "200.0" || f[8] != "1" || f[9] != "2" || f[10] != "0.50" || f[11] != "-" || f[12] != "0" || f[13] != "1.50" {
		t.Errorf("row: %q", f)
	}
	if f := strings.Fields(lines[3]); f[0] != "1:00:30" || f[11] != "0.25" {
		t.Errorf("row past an hour: %q", f)
	}
}
