// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package servermetrics

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/llmprobe/llmprobe/internal/httpclient"
	"github.com/llmprobe/llmprobe/internal/scrub"
)

// Engine names one serving engine's metrics. Each field lists the
// names tried in order (the first present wins); empty: the engine does
// not export the figure, which the report says ("not exported by NAME").
// Counter fields also accept a histogram, whose sum is the counter (TGI
// counts tokens only in histograms). docs/bench.md defines every figure
// per engine; the names were checked against each engine's source (the
// paths are beside each table).
type Engine struct {
	Name string
	// Prefix begins every metric name of the engine.
	Prefix string

	KVCacheUsage     []string // gauge, ratio 0–1 (mean over series)
	Running          []string // gauge (sum over series)
	Waiting          []string // gauge (sum over series)
	TTFT             []string // histogram, seconds
	QueueTime        []string // histogram, seconds
	PrefixCacheHits  []string // counter (tokens)
	PrefixCacheQuery []string // counter (tokens)
	// PromptTokens counts every prompt token of the requests, those the
	// engine reused from its prefix cache included.
	PromptTokens []string // counter
	// UncachedPromptTokens counts only the prompt tokens the engine
	// computed, without those it reused from its cache: a different
	// figure, kept apart.
	UncachedPromptTokens []string // counter
	GenerationTokens     []string // counter
	RequestsFinished     []string // counter

	// Unexported says more, by figure (its JSON name), than "not exported
	// by NAME" about a figure the engine does not export.
	Unexported map[string]string
}

// Engines is the table of metric names per engine, in one place.
var Engines = []Engine{
	{
		// vllm/v1/metrics/loggers.py (PrometheusStatLogger; prometheus_client
		// adds _total to counters); the gpu_ names are the ones deprecated
		// in 0.9. vllm:prompt_tokens counts the whole prompt of each request
		// when its prefill ends (vllm/v1/metrics/stats.py), cached or not.
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
		// python/sglang/srt/metrics/collector.py (now
		// python/sglang/srt/observability/metrics_collector.py):
		// SchedulerMetricsCollector's gauges and queue time,
		// TokenizerMetricsCollector's TTFT and counters, which
		// observe_one_finished_request adds to when a request finishes
		// (prompt tokens cached or not; cached tokens apart).
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
		// tools/server/server-context.cpp (earlier tools/server/server.cpp,
		// examples/server/server.cpp), the /metrics handler: counters
		// prompt_tokens_total, prompt_seconds_total, tokens_predicted_total,
		// tokens_predicted_seconds_total, n_decode_total, n_tokens_max,
		// n_busy_slots_per_decode; gauges prompt_tokens_seconds,
		// predicted_tokens_seconds, requests_processing, requests_deferred.
		// prompt_tokens_total adds each slot's n_prompt_tokens_processed,
		// counted per prompt token put in a batch after the part of the
		// prompt the slot's cache already holds. kv_cache_usage_ratio and
		// kv_cache_tokens were exported by older builds only.
		Name: "llama.cpp", Prefix: "llamacpp:",
		Running:              []string{"llamacpp:requests_processing"},
		Waiting:              []string{"llamacpp:requests_deferred"},
		UncachedPromptTokens: []string{"llamacpp:prompt_tokens_total"},
		GenerationTokens:     []string{"llamacpp:tokens_predicted_total"},
		Unexported: map[string]string{
			"prompt_tokens": "llamacpp:prompt_tokens_total counts only the prompt tokens llama.cpp computed, not those it reused from its cache: see uncached prompt tokens",
		},
	},
	{
		// router/src: tgi_queue_size (infer/v3/queue.rs),
		// tgi_batch_current_size (the batching task), tgi_request_queue_duration,
		// tgi_request_generated_tokens and tgi_request_success when a
		// request succeeds (server.rs, infer), tgi_request_input_length
		// when a request is validated, on arrival (validation.rs).
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
)

// Quantiles are quantiles estimated from a histogram's bucket
// deltas over the stage (linear interpolation within a bucket, as
// histogram_quantile does), in seconds.
type Quantiles struct {
	Count Float `json:"count"`
	P50   Float `json:"p50"`
	P99   Float `json:"p99"`
}

// Stats is what the target server's own metrics say about a stage.
// A figure the server does not give is null (nil), and Unavailable says
// why, by its JSON name: "not exported by llama.cpp", "not in the scrapes:
// NAME", "NAME left out: ...", "one successful scrape: no deltas", ...
type Stats struct {
	URL    string `json:"url"`
	Engine string `json:"engine,omitempty"`
	// Scrapes and FailedScrapes count the scrapes of the window; Errors
	// are the distinct reasons of the failed ones, and the families a
	// scrape left out.
	Scrapes       int      `json:"scrapes"`
	FailedScrapes int      `json:"failed_scrapes"`
	Errors        []string `json:"errors,omitempty"`
	// Window is the time between the first and the last successful
	// scrape, which the deltas and rates cover.
	Window time.Duration `json:"window_ns"`

	// Gauges, averaged over the window's successful scrapes.
	KVCacheUsage    *Float `json:"kv_cache_usage_ratio"`
	RequestsRunning *Float `json:"requests_running"`
	RequestsWaiting *Float `json:"requests_waiting"`

	// From histogram deltas.
	TTFT      *Quantiles `json:"ttft_seconds"`
	QueueTime *Quantiles `json:"queue_time_seconds"`

	// From counter deltas. PromptTokens are all the prompt tokens of the
	// requests, cached or not; UncachedPromptTokens those the engine
	// computed (llama.cpp's only count).
	PrefixCacheHitRatio        *Float `json:"prefix_cache_hit_ratio"`
	PromptTokens               *Float `json:"prompt_tokens"`
	UncachedPromptTokens       *Float `json:"uncached_prompt_tokens"`
	GenerationTokens           *Float `json:"generation_tokens"`
	PromptTokensPerSec         *Float `json:"prompt_tokens_per_second"`
	UncachedPromptTokensPerSec *Float `json:"uncached_prompt_tokens_per_second"`
	GenerationTokensPerSec     *Float `json:"generation_tokens_per_second"`
	RequestsFinished           *Float `json:"requests_finished"`

	// Unavailable says, by JSON name, why a figure is null (or, for one
	// the server sent as NaN or ±Inf, why it is written as null).
	Unavailable map[string]string `json:"unavailable,omitempty"`
}

// serverFigureKeys are the JSON names of Stats' figures.
var serverFigureKeys = []string{"kv_cache_usage_ratio", "requests_running", "requests_waiting", "ttft_seconds", "queue_time_seconds",
	"prefix_cache_hit_ratio", "prompt_tokens", "uncached_prompt_tokens", "generation_tokens", "prompt_tokens_per_second",
	"uncached_prompt_tokens_per_second", "generation_tokens_per_second", "requests_finished"}

// Scrape is one scrape: the families bench reads, or why it failed.
type Scrape struct {
	at  time.Time
	err error
	// families are the families of Engines the page held, nil once
	// the scrape is neither the window's first nor its last successful
	// one (only gauges are read from the others).
	families map[string]*dto.MetricFamily
	// dropped are the families of Engines the page held but that
	// were left out, with why (too many samples, lines too long).
	dropped map[string]string
	// gauges are the sum and series count of every gauge Engines
	// names, by family.
	gauges map[string]gaugeValue
}

// gaugeValue is a gauge family's sum over its series, and their number.
type gaugeValue struct {
	sum float64
	n   int
}

// serverWanted is the set of families Engines names: the only ones
// a scrape keeps.
var serverWanted = sync.OnceValue(func() map[string]bool {
	w := map[string]bool{}
	for _, e := range Engines {
		for _, names := range e.figures() {
			for _, n := range names {
				w[n] = true
			}
		}
	}
	return w
})

// figures are the engine's name lists, every figure's.
func (e *Engine) figures() [][]string {
	return [][]string{e.KVCacheUsage, e.Running, e.Waiting, e.TTFT, e.QueueTime, e.PrefixCacheHits,
		e.PrefixCacheQuery, e.PromptTokens, e.UncachedPromptTokens, e.GenerationTokens, e.RequestsFinished}
}

// Fetch fetches and reads one text exposition, bounded in size,
// line length, samples kept and time (readExposition).
func Fetch(ctx context.Context, client *http.Client, u string) Scrape {
	ctx, cancel := context.WithTimeout(ctx, serverMetricsTimeout)
	defer cancel()
	res := Scrape{at: time.Now()}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		res.err = errors.New(scrub.URLs(err.Error())) // it quotes the URL
		return res
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := client.Do(req)
	if err != nil {
		res.err = errors.New(scrub.URLs(err.Error()))
		return res
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		res.err = fmt.Errorf("GET %s: %s", scrub.URL(u), resp.Status)
		return res
	}
	if res.families, res.dropped, err = readExposition(resp.Body, serverWanted()); err != nil {
		res.err = fmt.Errorf("GET %s: %w", scrub.URL(u), err)
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

// Sampler samples one URL over a window (bench: a stage's measured
// window): at the window's start, every interval, and at its end.
type Sampler struct {
	url  string
	stop chan struct{}
	done chan struct{}
	once sync.Once
	mu   sync.Mutex
	res  []Scrape
	// first and last index res's first and latest successful scrape, the
	// only ones that keep their families (-1: none yet).
	first, last int
}

// StartSampler begins sampling u at from (bench: the end of the stage's
// warm-up) until StopNow or Results is called.
func StartSampler(ctx context.Context, client *http.Client, u string, from time.Time, every time.Duration) *Sampler {
	s := &Sampler{url: u, stop: make(chan struct{}), done: make(chan struct{}), first: -1, last: -1}
	add := func() {
		r := Fetch(ctx, client, u)
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

// StopNow has the last sample taken now (without waiting for it).
func (s *Sampler) StopNow() {
	s.once.Do(func() { close(s.stop) })
}

// Results waits for the last sample and returns them all.
func (s *Sampler) Results() []Scrape {
	s.StopNow()
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.res
}

// NewStats turns a window's scrapes of u into the figures of the window.
func NewStats(u string, res []Scrape) *Stats {
	st := &Stats{URL: scrub.URL(u), Scrapes: len(res), Unavailable: map[string]string{}}
	var ok []Scrape
	note := func(msg string) {
		if !slices.Contains(st.Errors, msg) {
			st.Errors = append(st.Errors, msg)
		}
	}
	all := func(why string) *Stats {
		for _, k := range serverFigureKeys {
			st.Unavailable[k] = why
		}
		return st
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
		return all("no successful scrape")
	}
	first, last := ok[0], ok[len(ok)-1]
	eng := detectEngine(last)
	if eng == nil {
		var prefixes []string
		for _, e := range Engines {
			prefixes = append(prefixes, e.Prefix)
		}
		why := fmt.Sprintf("no known engine's metrics (%s)", strings.Join(prefixes, ", "))
		st.Errors = append(st.Errors, why)
		return all(why)
	}
	st.Engine = eng.Name
	st.Window = last.at.Sub(first.at)
	deltas := len(ok) >= 2
	if !deltas {
		st.Errors = append(st.Errors, "one successful scrape: no deltas")
	}
	// why is the reason a figure of names is missing: the engine does not
	// export it, a scrape left it out, it takes two scrapes, or the
	// scrapes do not have it.
	why := func(key string, names []string, delta bool) string {
		if len(names) == 0 {
			if more := eng.Unexported[key]; more != "" {
				return fmt.Sprintf("not exported by %s: %s", eng.Name, more)
			}
			return "not exported by " + eng.Name
		}
		for _, r := range ok {
			for _, n := range names {
				if d, ok := r.dropped[n]; ok {
					return fmt.Sprintf("%s left out: %s", n, d)
				}
			}
		}
		if delta && !deltas {
			return "one successful scrape: no deltas"
		}
		return "not in the scrapes: " + strings.Join(names, " or ")
	}
	figure := func(key string, v *Float, names []string, delta bool) *Float {
		switch {
		case v == nil:
			st.Unavailable[key] = why(key, names, delta)
		case !v.finite():
			st.Unavailable[key] = fmt.Sprintf("the server sent %s (written as null)", NonFinite(float64(*v)))
		}
		return v
	}
	quantiles := func(key string, q *Quantiles, names []string) *Quantiles {
		if q == nil {
			st.Unavailable[key] = why(key, names, true)
		}
		return q
	}
	rate := func(key string, v *Float, of string) *Float {
		secs := st.Window.Seconds()
		switch {
		case v != nil && secs > 0:
			return figure(key, ptr(float64(*v)/secs), nil, false)
		case v != nil:
			st.Unavailable[key] = "a window of 0s"
		default:
			st.Unavailable[key] = st.Unavailable[of]
		}
		return nil
	}

	st.KVCacheUsage = figure("kv_cache_usage_ratio", avgGauge(ok, eng.KVCacheUsage, true), eng.KVCacheUsage, false)
	st.RequestsRunning = figure("requests_running", avgGauge(ok, eng.Running, false), eng.Running, false)
	st.RequestsWaiting = figure("requests_waiting", avgGauge(ok, eng.Waiting, false), eng.Waiting, false)
	var hits, queries *Float
	if deltas {
		st.TTFT = histDelta(first.families, last.families, eng.TTFT)
		st.QueueTime = histDelta(first.families, last.families, eng.QueueTime)
		st.PromptTokens = counterDelta(first.families, last.families, eng.PromptTokens)
		st.UncachedPromptTokens = counterDelta(first.families, last.families, eng.UncachedPromptTokens)
		st.GenerationTokens = counterDelta(first.families, last.families, eng.GenerationTokens)
		st.RequestsFinished = counterDelta(first.families, last.families, eng.RequestsFinished)
		hits = counterDelta(first.families, last.families, eng.PrefixCacheHits)
		queries = counterDelta(first.families, last.families, eng.PrefixCacheQuery)
	}
	st.TTFT = quantiles("ttft_seconds", st.TTFT, eng.TTFT)
	st.QueueTime = quantiles("queue_time_seconds", st.QueueTime, eng.QueueTime)
	st.PromptTokens = figure("prompt_tokens", st.PromptTokens, eng.PromptTokens, true)
	st.UncachedPromptTokens = figure("uncached_prompt_tokens", st.UncachedPromptTokens, eng.UncachedPromptTokens, true)
	st.GenerationTokens = figure("generation_tokens", st.GenerationTokens, eng.GenerationTokens, true)
	st.RequestsFinished = figure("requests_finished", st.RequestsFinished, eng.RequestsFinished, true)
	switch {
	case hits == nil:
		st.Unavailable["prefix_cache_hit_ratio"] = why("prefix_cache_hit_ratio", eng.PrefixCacheHits, true)
	case queries == nil:
		st.Unavailable["prefix_cache_hit_ratio"] = why("prefix_cache_hit_ratio", eng.PrefixCacheQuery, true)
	case *queries > 0:
		st.PrefixCacheHitRatio = figure("prefix_cache_hit_ratio", ptr(float64(*hits / *queries)), nil, false)
	default:
		st.Unavailable["prefix_cache_hit_ratio"] = "no prefix-cache queries in the window"
	}
	st.PromptTokensPerSec = rate("prompt_tokens_per_second", st.PromptTokens, "prompt_tokens")
	st.UncachedPromptTokensPerSec = rate("uncached_prompt_tokens_per_second", st.UncachedPromptTokens, "uncached_prompt_tokens")
	st.GenerationTokensPerSec = rate("generation_tokens_per_second", st.GenerationTokens, "generation_tokens")
	return st
}

// detectEngine is the engine with the most of its families in a scrape
// (kept or left out).
func detectEngine(r Scrape) *Engine {
	best, bestN := -1, 0
	for i, e := range Engines {
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
	return &Engines[best]
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
func avgGauge(res []Scrape, names []string, mean bool) *Float {
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
func histDelta(start, end map[string]*dto.MetricFamily, names []string) *Quantiles {
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
	q := &Quantiles{Count: Float(count)}
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

// NewClient is a client for Fetch, named name (internal/httpclient: a
// redirect to another host is refused; Fetch bounds each scrape).
func NewClient(name string) *http.Client {
	c, err := httpclient.New(httpclient.Plain, name, httpclient.Options{})
	if err != nil {
		panic(err) // a fixed configuration without files cannot fail
	}
	return c
}
