// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/llmprobe/llmprobe/config"
)

// Server metrics: bench scrapes the target server's own Prometheus
// exposition (--server-metrics) beside every stage, so the report puts
// the server's view (its TTFT histogram, queue time, KV-cache usage,
// batch and queue sizes, token counters) next to the probe's.
//
// Counters and histograms are taken as the difference between the first
// and the last successful scrape of the stage's measured window (the
// first right after the warm-up, the last when the stage ends, before the
// grace period); gauges are averaged over every successful scrape of the
// window (at its start, every ServerMetricsInterval, and at its end).

// ServerEngine names one serving engine's metrics. Each field lists the
// names tried in order (the first present wins); empty: the engine has
// none. Counter fields also accept a histogram, whose sum is the counter
// (TGI counts tokens only in histograms).
type ServerEngine struct {
	Name string
	// Prefix detects the engine: the one with the most families with its
	// prefix in a scrape is taken.
	Prefix string

	KVCacheUsage     []string // gauge, ratio 0–1 (mean over series)
	Running          []string // gauge (sum over series)
	Waiting          []string // gauge (sum over series)
	TTFT             []string // histogram, seconds
	QueueTime        []string // histogram, seconds
	PrefixCacheHits  []string // counter (tokens)
	PrefixCacheQuery []string // counter (tokens)
	PromptTokens     []string // counter
	GenerationTokens []string // counter
	RequestsFinished []string // counter
}

// ServerEngines is the table of metric names per engine, in one place.
var ServerEngines = []ServerEngine{
	{
		Name: "vllm", Prefix: "vllm:",
		KVCacheUsage:     []string{"vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"},
		Running:          []string{"vllm:num_requests_running"},
		Waiting:          []string{"vllm:num_requests_waiting"},
		TTFT:             []string{"vllm:time_to_first_token_seconds"},
		QueueTime:        []string{"vllm:request_queue_time_seconds"},
		PrefixCacheHits:  []string{"vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"},
		PrefixCacheQuery: []string{"vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total"},
		PromptTokens:     []string{"vllm:prompt_tokens_total"},
		GenerationTokens: []string{"vllm:generation_tokens_total"},
		RequestsFinished: []string{"vllm:request_success_total"},
	},
	{
		Name: "sglang", Prefix: "sglang:",
		KVCacheUsage:     []string{"sglang:token_usage"},
		Running:          []string{"sglang:num_running_reqs"},
		Waiting:          []string{"sglang:num_queue_reqs"},
		TTFT:             []string{"sglang:time_to_first_token_seconds"},
		QueueTime:        []string{"sglang:queue_time_seconds"},
		PrefixCacheHits:  []string{"sglang:cached_tokens_total"},
		PrefixCacheQuery: []string{"sglang:prompt_tokens_total"},
		PromptTokens:     []string{"sglang:prompt_tokens_total"},
		GenerationTokens: []string{"sglang:generation_tokens_total"},
		RequestsFinished: []string{"sglang:num_requests_total"},
	},
	{
		Name: "llama.cpp", Prefix: "llamacpp:",
		KVCacheUsage:     []string{"llamacpp:kv_cache_usage_ratio"},
		Running:          []string{"llamacpp:requests_processing"},
		Waiting:          []string{"llamacpp:requests_deferred"},
		PromptTokens:     []string{"llamacpp:prompt_tokens_total"},
		GenerationTokens: []string{"llamacpp:tokens_predicted_total"},
	},
	{
		Name: "tgi", Prefix: "tgi_",
		Running:          []string{"tgi_batch_current_size"},
		Waiting:          []string{"tgi_queue_size"},
		QueueTime:        []string{"tgi_request_queue_duration"},
		PromptTokens:     []string{"tgi_request_input_length"},
		GenerationTokens: []string{"tgi_request_generated_tokens"},
		RequestsFinished: []string{"tgi_request_success"},
	},
}

const (
	// serverMetricsMaxBytes bounds a scrape's body.
	serverMetricsMaxBytes = 32 << 20
	// serverMetricsTimeout bounds one scrape.
	serverMetricsTimeout = 5 * time.Second
	// defaultServerMetricsInterval is how often gauges are sampled.
	defaultServerMetricsInterval = 2 * time.Second
)

// ServerQuantiles are quantiles estimated from a histogram's bucket
// deltas over the stage (linear interpolation within a bucket, as
// histogram_quantile does), in seconds.
type ServerQuantiles struct {
	Count Float `json:"count"`
	P50   Float `json:"p50"`
	P99   Float `json:"p99"`
}

// ServerStats is what the target server's own metrics say about a stage.
// A figure the server does not expose is absent (nil).
type ServerStats struct {
	URL    string `json:"url"`
	Engine string `json:"engine,omitempty"`
	// Scrapes and FailedScrapes count the scrapes of the window; Errors
	// are the distinct reasons of the failed ones.
	Scrapes       int      `json:"scrapes"`
	FailedScrapes int      `json:"failed_scrapes"`
	Errors        []string `json:"errors,omitempty"`
	// Window is the time between the first and the last successful
	// scrape, which the deltas and rates cover.
	Window time.Duration `json:"window_ns"`

	// Gauges, averaged over the window's successful scrapes.
	KVCacheUsage    *Float `json:"kv_cache_usage_ratio,omitempty"`
	RequestsRunning *Float `json:"requests_running,omitempty"`
	RequestsWaiting *Float `json:"requests_waiting,omitempty"`

	// From histogram deltas.
	TTFT      *ServerQuantiles `json:"ttft_seconds,omitempty"`
	QueueTime *ServerQuantiles `json:"queue_time_seconds,omitempty"`

	// From counter deltas.
	PrefixCacheHitRatio    *Float `json:"prefix_cache_hit_ratio,omitempty"`
	PromptTokens           *Float `json:"prompt_tokens,omitempty"`
	GenerationTokens       *Float `json:"generation_tokens,omitempty"`
	PromptTokensPerSec     *Float `json:"prompt_tokens_per_second,omitempty"`
	GenerationTokensPerSec *Float `json:"generation_tokens_per_second,omitempty"`
	RequestsFinished       *Float `json:"requests_finished,omitempty"`
}

// TTFTGap is the probe's TTFT quantile minus the server's over the same
// stage window (seconds): what the network, the gateway and the client
// add to what the engine measures.
type TTFTGap struct {
	P50 Float `json:"p50"`
	P99 Float `json:"p99"`
}

// resolveServerMetrics maps each target to the metrics URL it is
// scraped at. Each spec is a URL or a comma-separated list of them, each
// either http(s)://… or TARGET=http(s)://…. Plain URLs: one applies to
// every target, or as many as the targets, in the targets' order. Named
// ones apply to their target; the two forms cannot be mixed.
func resolveServerMetrics(specs []string, targets []*config.Target) (map[string]string, error) {
	var plain []string
	named := map[string]string{}
	for _, spec := range specs {
		for s := range strings.SplitSeq(spec, ",") {
			s = strings.TrimSpace(s)
			if s == "" {
				continue
			}
			name, u := "", s
			if !strings.HasPrefix(s, "http://") && !strings.HasPrefix(s, "https://") {
				var ok bool
				if name, u, ok = strings.Cut(s, "="); !ok {
					return nil, fmt.Errorf("server metrics %q: want http(s)://HOST/metrics or TARGET=URL", s)
				}
			}
			if pu, err := url.Parse(u); err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" {
				return nil, fmt.Errorf("server metrics %q: not an http(s) URL", s)
			}
			if name == "" {
				plain = append(plain, u)
				continue
			}
			if !slices.ContainsFunc(targets, func(t *config.Target) bool { return t.Name == name }) {
				return nil, fmt.Errorf("server metrics %q: no selected target %q", s, name)
			}
			named[name] = u
		}
	}
	out := map[string]string{}
	switch {
	case len(plain) > 0 && len(named) > 0:
		return nil, errors.New("server metrics: give either plain URLs or TARGET=URL, not both")
	case len(named) > 0:
		return named, nil
	case len(plain) == 1:
		for _, t := range targets {
			out[t.Name] = plain[0]
		}
	case len(plain) == len(targets):
		for i, t := range targets {
			out[t.Name] = plain[i]
		}
	case len(plain) > 0:
		return nil, fmt.Errorf("server metrics: %d URLs for %d targets (give one for all, one per target in order, or TARGET=URL)", len(plain), len(targets))
	}
	return out, nil
}

// scrapeResult is one scrape: the families bench reads, or why it failed.
type scrapeResult struct {
	at  time.Time
	err error
	// families are the families of ServerEngines the page held, nil once
	// the scrape is neither the window's first nor its last successful
	// one (only gauges are read from the others).
	families map[string]*dto.MetricFamily
	// dropped are the families of ServerEngines the page held but that
	// were left out, with why (too many samples, lines too long).
	dropped map[string]string
	// gauges are the sum and series count of every gauge ServerEngines
	// names, by family.
	gauges map[string]gaugeValue
}

// gaugeValue is a gauge family's sum over its series, and their number.
type gaugeValue struct {
	sum float64
	n   int
}

// serverWanted is the set of families ServerEngines names: the only ones
// a scrape keeps.
var serverWanted = sync.OnceValue(func() map[string]bool {
	w := map[string]bool{}
	for _, e := range ServerEngines {
		for _, names := range e.figures() {
			for _, n := range names {
				w[n] = true
			}
		}
	}
	return w
})

// figures are the engine's name lists, every figure's.
func (e *ServerEngine) figures() [][]string {
	return [][]string{e.KVCacheUsage, e.Running, e.Waiting, e.TTFT, e.QueueTime, e.PrefixCacheHits,
		e.PrefixCacheQuery, e.PromptTokens, e.GenerationTokens, e.RequestsFinished}
}

// scrapeServer fetches and reads one text exposition, bounded in size,
// line length, samples kept and time (readExposition).
func scrapeServer(ctx context.Context, client *http.Client, u string) scrapeResult {
	ctx, cancel := context.WithTimeout(ctx, serverMetricsTimeout)
	defer cancel()
	res := scrapeResult{at: time.Now()}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		res.err = err
		return res
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := client.Do(req)
	if err != nil {
		res.err = err
		return res
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		res.err = fmt.Errorf("GET %s: %s", redactURL(u), resp.Status)
		return res
	}
	if res.families, res.dropped, err = readExposition(resp.Body, serverWanted()); err != nil {
		res.err = fmt.Errorf("GET %s: %w", redactURL(u), err)
		return res
	}
	res.gauges = map[string]gaugeValue{}
	for name, f := range res.families {
		if f.GetType() == dto.MetricType_GAUGE || f.GetType() == dto.MetricType_UNTYPED {
			g := gaugeValue{n: len(f.Metric)}
			for _, m := range f.Metric {
				g.sum += scalarValue(m)
			}
			res.gauges[name] = g
		}
	}
	return res
}

// redactURL hides a password in a URL.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

// serverScraper samples one URL during a stage: at the window's start,
// every interval, and at its end.
type serverScraper struct {
	url  string
	stop chan struct{}
	done chan struct{}
	once sync.Once
	mu   sync.Mutex
	res  []scrapeResult
	// first and last index res's first and latest successful scrape, the
	// only ones that keep their families (-1: none yet).
	first, last int
}

// startServerScraper begins sampling u at from (the end of the warm-up)
// until stop is called.
func startServerScraper(ctx context.Context, client *http.Client, u string, from time.Time, every time.Duration) *serverScraper {
	s := &serverScraper{url: u, stop: make(chan struct{}), done: make(chan struct{}), first: -1, last: -1}
	add := func() {
		r := scrapeServer(ctx, client, u)
		s.mu.Lock()
		defer s.mu.Unlock()
		s.res = append(s.res, r)
		if r.err != nil {
			return
		}
		i := len(s.res) - 1
		switch {
		case s.first < 0:
			s.first = i
		case s.last != s.first:
			s.res[s.last].families = nil // a scrape in between: its gauges are enough
		}
		s.last = i
	}
	go func() {
		defer close(s.done)
		wait := time.NewTimer(time.Until(from))
		defer wait.Stop()
		select {
		case <-s.stop:
			add() // the stage ended within its warm-up: one sample
			return
		case <-ctx.Done():
			return
		case <-wait.C:
		}
		add()
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-s.stop:
				add()
				return
			case <-ctx.Done():
				add()
				return
			case <-tick.C:
				add()
			}
		}
	}()
	return s
}

// stopNow has the last sample taken now (without waiting for it).
func (s *serverScraper) stopNow() {
	s.once.Do(func() { close(s.stop) })
}

// results waits for the last sample and returns them all.
func (s *serverScraper) results() []scrapeResult {
	s.stopNow()
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.res
}

// serverStats turns a window's scrapes into the stage's figures.
func serverStats(u string, res []scrapeResult) *ServerStats {
	st := &ServerStats{URL: redactURL(u), Scrapes: len(res)}
	var ok []scrapeResult
	note := func(msg string) {
		if !slices.Contains(st.Errors, msg) {
			st.Errors = append(st.Errors, msg)
		}
	}
	for _, r := range res {
		if r.err != nil {
			st.FailedScrapes++
			note(r.err.Error())
			continue
		}
		for _, name := range slices.Sorted(maps.Keys(r.dropped)) {
			note(fmt.Sprintf("%s left out: %s", name, r.dropped[name]))
		}
		ok = append(ok, r)
	}
	if len(ok) == 0 {
		if st.Scrapes == 0 {
			st.Errors = append(st.Errors, "no scrape in the stage's window")
		}
		return st
	}
	first, last := ok[0], ok[len(ok)-1]
	eng := detectEngine(last)
	if eng == nil {
		st.Errors = append(st.Errors, "no known engine's metrics (vllm:, sglang:, llamacpp:, tgi_)")
		return st
	}
	st.Engine = eng.Name
	st.Window = last.at.Sub(first.at)

	st.KVCacheUsage = avgGauge(ok, eng.KVCacheUsage, true)
	st.RequestsRunning = avgGauge(ok, eng.Running, false)
	st.RequestsWaiting = avgGauge(ok, eng.Waiting, false)
	if len(ok) >= 2 {
		st.TTFT = histDelta(first.families, last.families, eng.TTFT)
		st.QueueTime = histDelta(first.families, last.families, eng.QueueTime)
		st.PromptTokens = counterDelta(first.families, last.families, eng.PromptTokens)
		st.GenerationTokens = counterDelta(first.families, last.families, eng.GenerationTokens)
		st.RequestsFinished = counterDelta(first.families, last.families, eng.RequestsFinished)
		hits := counterDelta(first.families, last.families, eng.PrefixCacheHits)
		queries := counterDelta(first.families, last.families, eng.PrefixCacheQuery)
		if hits != nil && queries != nil && *queries > 0 {
			st.PrefixCacheHitRatio = ptr(float64(*hits / *queries))
		}
		if secs := st.Window.Seconds(); secs > 0 {
			if st.PromptTokens != nil {
				st.PromptTokensPerSec = ptr(float64(*st.PromptTokens) / secs)
			}
			if st.GenerationTokens != nil {
				st.GenerationTokensPerSec = ptr(float64(*st.GenerationTokens) / secs)
			}
		}
	} else {
		st.Errors = append(st.Errors, "one successful scrape: no deltas")
	}
	return st
}

// detectEngine is the engine with the most of its families in a scrape
// (kept or left out).
func detectEngine(r scrapeResult) *ServerEngine {
	best, bestN := -1, 0
	for i, e := range ServerEngines {
		seen := map[string]bool{}
		for _, names := range e.figures() {
			for _, n := range names {
				if _, dropped := r.dropped[n]; r.families[n] != nil || dropped {
					seen[n] = true
				}
			}
		}
		if len(seen) > bestN {
			best, bestN = i, len(seen)
		}
	}
	if best < 0 {
		return nil
	}
	return &ServerEngines[best]
}

// family is the first of names present in fams.
func family(fams map[string]*dto.MetricFamily, names []string) *dto.MetricFamily {
	for _, n := range names {
		if f := fams[n]; f != nil && len(f.Metric) > 0 {
			return f
		}
	}
	return nil
}

// avgGauge averages, over the scrapes, the gauge's mean (mean) or sum
// over its series (the first of names a scrape has).
func avgGauge(res []scrapeResult, names []string, mean bool) *Float {
	total, n := 0.0, 0
	for _, r := range res {
		for _, name := range names {
			g, ok := r.gauges[name]
			if !ok || g.n == 0 {
				continue
			}
			v := g.sum
			if mean {
				v /= float64(g.n)
			}
			total += v
			n++
			break
		}
	}
	if n == 0 {
		return nil
	}
	return ptr(total / float64(n))
}

// scalarValue is a gauge's, counter's or untyped sample's value, or a
// histogram's or summary's sum.
func scalarValue(m *dto.Metric) float64 {
	switch {
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Untyped != nil:
		return m.Untyped.GetValue()
	case m.Histogram != nil:
		return m.Histogram.GetSampleSum()
	case m.Summary != nil:
		return m.Summary.GetSampleSum()
	}
	return 0
}

// seriesKey identifies a series by its labels.
func seriesKey(m *dto.Metric) string {
	var b strings.Builder
	for _, l := range m.Label {
		b.WriteString(l.GetName())
		b.WriteByte(0)
		b.WriteString(l.GetValue())
		b.WriteByte(0)
	}
	return b.String()
}

// counterDelta sums, over the series, end − start (end when the series
// is new or was reset).
func counterDelta(start, end map[string]*dto.MetricFamily, names []string) *Float {
	fe := family(end, names)
	if fe == nil {
		return nil
	}
	before := map[string]float64{}
	if fs := start[fe.GetName()]; fs != nil {
		for _, m := range fs.Metric {
			before[seriesKey(m)] = scalarValue(m)
		}
	}
	d := 0.0
	for _, m := range fe.Metric {
		v := scalarValue(m)
		if b, ok := before[seriesKey(m)]; ok && v >= b {
			v -= b
		}
		d += v
	}
	return ptr(d)
}

// histDelta sums the histogram's bucket deltas over its series and
// estimates p50 and p99 from them.
func histDelta(start, end map[string]*dto.MetricFamily, names []string) *ServerQuantiles {
	fe := family(end, names)
	if fe == nil || fe.GetType() != dto.MetricType_HISTOGRAM {
		return nil
	}
	before := map[string]*dto.Histogram{}
	if fs := start[fe.GetName()]; fs != nil {
		for _, m := range fs.Metric {
			if m.Histogram != nil {
				before[seriesKey(m)] = m.Histogram
			}
		}
	}
	cum := map[float64]float64{} // upper bound → cumulative count delta
	count := 0.0
	for _, m := range fe.Metric {
		h := m.Histogram
		if h == nil {
			continue
		}
		b := before[seriesKey(m)]
		reset := b != nil && h.GetSampleCount() < b.GetSampleCount()
		prev := map[float64]float64{}
		prevCount := 0.0
		if b != nil && !reset {
			for _, bk := range b.Bucket {
				prev[bk.GetUpperBound()] = float64(bk.GetCumulativeCount())
			}
			prevCount = float64(b.GetSampleCount())
		}
		for _, bk := range h.Bucket {
			if ub := bk.GetUpperBound(); !math.IsInf(ub, 1) { // +Inf is the count, below
				cum[ub] += float64(bk.GetCumulativeCount()) - prev[ub]
			}
		}
		c := float64(h.GetSampleCount()) - prevCount
		cum[math.Inf(1)] += c
		count += c
	}
	q := &ServerQuantiles{Count: Float(count)}
	if count > 0 {
		q.P50 = Float(bucketQuantile(0.5, cum))
		q.P99 = Float(bucketQuantile(0.99, cum))
	}
	return q
}

// bucketQuantile estimates the q-quantile from cumulative bucket counts
// by upper bound (+Inf included) as histogram_quantile does: linear
// interpolation within the bucket, from 0 for the first; in the +Inf
// bucket, the highest finite bound.
func bucketQuantile(q float64, cum map[float64]float64) float64 {
	bounds := make([]float64, 0, len(cum))
	for b := range cum {
		bounds = append(bounds, b)
	}
	sort.Float64s(bounds)
	total := cum[bounds[len(bounds)-1]]
	if total <= 0 {
		return 0
	}
	rank := q * total
	i := sort.Search(len(bounds), func(i int) bool { return cum[bounds[i]] >= rank })
	if i >= len(bounds) {
		i = len(bounds) - 1
	}
	if math.IsInf(bounds[i], 1) {
		if i == 0 {
			return 0 // no finite bound
		}
		return bounds[i-1]
	}
	lower, below := 0.0, 0.0
	if i > 0 {
		lower, below = bounds[i-1], cum[bounds[i-1]]
	}
	in := cum[bounds[i]] - below
	if in <= 0 {
		return bounds[i]
	}
	return lower + (bounds[i]-lower)*(rank-below)/in
}

// fmtOpt formats an optional figure ("-" when absent).
func fmtOpt(v *Float, format string, scale float64) string {
	if v == nil {
		return "-"
	}
	return fmtFloat(float64(*v), format, scale)
}

// fmtServerQ formats a server quantile ("-" without observations).
func fmtServerQ(q *ServerQuantiles, v func(*ServerQuantiles) float64) string {
	if q == nil || q.Count == 0 {
		return "-"
	}
	return fmtSeconds(v(q))
}

func p50(q *ServerQuantiles) float64 { return float64(q.P50) }
func p99(q *ServerQuantiles) float64 { return float64(q.P99) }

// fmtGap formats a signed difference of seconds.
func fmtGap(f Float) string {
	v := float64(f)
	if s := nonFinite(v); s != "" {
		return s
	}
	if v < 0 {
		return "-" + fmtSeconds(-v)
	}
	return "+" + fmtSeconds(v)
}

// writeServerMetrics writes the server's figures per stage and target
// (nothing when no stage has them).
func writeServerMetrics(w io.Writer, stages []*StageReport) {
	if !slices.ContainsFunc(stages, func(s *StageReport) bool { return s.Server != nil }) {
		return
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "stage\ttarget\tserver\tKV\trun\twait\tprompt/s\tgen/s\tfinished\tprefix\t")
	for _, s := range stages {
		if ss := s.Server; ss != nil {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", s.Stage, s.Target, cmp.Or(ss.Engine, "?"),
				fmtOpt(ss.KVCacheUsage, "%.1f%%", 100), fmtOpt(ss.RequestsRunning, "%.1f", 1), fmtOpt(ss.RequestsWaiting, "%.1f", 1),
				fmtOpt(ss.PromptTokensPerSec, "%.0f", 1), fmtOpt(ss.GenerationTokensPerSec, "%.0f", 1),
				fmtOpt(ss.RequestsFinished, "%.0f", 1), fmtOpt(ss.PrefixCacheHitRatio, "%.1f%%", 100))
		}
	}
	_ = tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "stage\ttarget\tsrv TTFT p50\tp99\tprobe-srv p50\tp99\tqueue p50\tp99\t")
	for _, s := range stages {
		if ss := s.Server; ss != nil {
			gap50, gap99 := "-", "-"
			if g := s.TTFTGap; g != nil {
				gap50, gap99 = fmtGap(g.P50), fmtGap(g.P99)
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", s.Stage, s.Target,
				fmtServerQ(ss.TTFT, p50), fmtServerQ(ss.TTFT, p99), gap50, gap99,
				fmtServerQ(ss.QueueTime, p50), fmtServerQ(ss.QueueTime, p99))
		}
	}
	_ = tw.Flush()
	for _, s := range stages {
		if ss := s.Server; ss != nil {
			for _, e := range ss.Errors {
				fmt.Fprintf(w, "stage %d %s server metrics (%d of %d scrapes failed): %s\n", s.Stage, s.Target, ss.FailedScrapes, ss.Scrapes, e)
			}
		}
	}
}

// writeServerMarkdown adds a stage's server and GPU figures to the
// Markdown report (nothing without them).
func writeServerMarkdown(b *strings.Builder, s *StageReport) {
	if ss := s.Server; ss != nil {
		fmt.Fprintf(b, "### Server metrics (%s)\n\n", mdEscape(cmp.Or(ss.Engine, "engine not recognised")))
		fmt.Fprintf(b, "Scraped %s %d times over %s (%d failed); gauges are averaged over the scrapes, the rest are deltas between the first and the last.\n\n",
			mdEscape(ss.URL), ss.Scrapes, ss.Window.Round(time.Millisecond), ss.FailedScrapes)
		for _, e := range ss.Errors {
			fmt.Fprintf(b, "- scrape: %s\n", mdEscape(e))
		}
		if len(ss.Errors) > 0 {
			b.WriteString("\n")
		}
		b.WriteString("| figure | value |\n|---|--:|\n")
		odd := false
		row := func(name, v string) {
			odd = odd || isNonFinite(v)
			fmt.Fprintf(b, "| %s | %s |\n", name, v)
		}
		row("KV-cache usage", fmtOpt(ss.KVCacheUsage, "%.1f%%", 100))
		row("requests running", fmtOpt(ss.RequestsRunning, "%.1f", 1))
		row("requests waiting", fmtOpt(ss.RequestsWaiting, "%.1f", 1))
		row("server TTFT p50", fmtServerQ(ss.TTFT, p50))
		row("server TTFT p99", fmtServerQ(ss.TTFT, p99))
		gap50, gap99 := "-", "-"
		if g := s.TTFTGap; g != nil {
			gap50, gap99 = fmtGap(g.P50), fmtGap(g.P99)
		}
		row("probe − server TTFT p50", gap50)
		row("probe − server TTFT p99", gap99)
		row("queue time p50", fmtServerQ(ss.QueueTime, p50))
		row("queue time p99", fmtServerQ(ss.QueueTime, p99))
		row("prefix-cache hit rate", fmtOpt(ss.PrefixCacheHitRatio, "%.1f%%", 100))
		row("prompt tokens/s", fmtOpt(ss.PromptTokensPerSec, "%.0f", 1))
		row("generation tokens/s", fmtOpt(ss.GenerationTokensPerSec, "%.0f", 1))
		row("requests finished", fmtOpt(ss.RequestsFinished, "%.0f", 1))
		b.WriteString("\n")
		if odd {
			b.WriteString(nonFiniteNote)
		}
	}
	if g := s.GPU; g != nil {
		fmt.Fprintf(b, "### GPU (averaged over %s)\n\n", g.Window.Round(time.Millisecond))
		for _, e := range g.Errors {
			fmt.Fprintf(b, "- %s\n", mdEscape(e))
		}
		if len(g.Errors) > 0 {
			b.WriteString("\n")
		}
		if len(g.Devices) > 0 {
			b.WriteString("| host | GPU | model | util | SM active | FB used | power |\n|---|---|---|--:|--:|--:|--:|\n")
			odd := false
			for _, d := range g.Devices {
				vals := []string{fmtOpt(d.UtilPercent, "%.1f%%", 1), fmtOpt(d.SMActive, "%.1f%%", 100),
					fmtOpt(d.FBUsedMiB, "%.0f MiB", 1), fmtOpt(d.PowerWatts, "%.1f W", 1)}
				odd = odd || slices.ContainsFunc(vals, isNonFinite)
				fmt.Fprintf(b, "| %s | %s | %s | %s |\n", mdEscape(d.Hostname), mdEscape(d.GPU), mdEscape(d.Model), strings.Join(vals, " | "))
			}
			b.WriteString("\n")
			if odd {
				b.WriteString(nonFiniteNote)
			}
		}
	}
}
