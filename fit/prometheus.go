// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package fit

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	"github.com/llmprobe/llmprobe/internal/bounded"
	"github.com/llmprobe/llmprobe/internal/httpclient"
	"github.com/llmprobe/llmprobe/internal/scrub"
)

// Engine names one serving engine's token histograms.
type Engine struct {
	Name             string
	PromptMetric     string
	CompletionMetric string
	// ModelLabel is the label that carries the served model's name.
	ModelLabel string
}

// Engines are tried in order when PromOptions names no metrics.
var Engines = []Engine{
	{Name: "vLLM", PromptMetric: "vllm:request_prompt_tokens", CompletionMetric: "vllm:request_generation_tokens", ModelLabel: "model_name"},
	{Name: "SGLang", PromptMetric: "sglang:prompt_tokens_histogram", CompletionMetric: "sglang:generation_tokens_histogram", ModelLabel: "model_name"},
}

// PromOptions configure FromPrometheus.
type PromOptions struct {
	// URL is Prometheus' base URL (http://prometheus:9090).
	URL string
	// Selector holds label matchers restricting the series, with or
	// without braces: `namespace="prod", model_name="llama"`.
	Selector string
	// Range is the time range before Time whose requests are fitted.
	Range time.Duration
	// Time is the end of the range; zero means now.
	Time time.Time
	// PromptMetric and CompletionMetric name the histograms (without
	// _bucket); both empty means: try Engines in order.
	PromptMetric, CompletionMetric string
	// By, when set, is a label whose values split the requests into
	// classes (one per value, weighted by share).
	By string
	// Timeout bounds each query on the server side (0: the server's).
	Timeout time.Duration
}

// histogramData is what one metric's queries return, per series group.
type histogramData struct {
	groups  map[groupID]*groupHist
	models  map[string]float64 // request count by model label value
	native  bool
	queries []string
}

// groupID identifies the series summed together: the By label's value
// and the model label's value. Series of different models can have
// different buckets (max_model_len sets vLLM's), so they are merged with
// mergeBins rather than summed by le.
type groupID struct{ by, model string }

type groupHist struct {
	cum    map[float64]float64 // classic: le → cumulative count
	native []Bin               // native: bins
	sum    float64
	hasSum bool
}

// MaxPrometheusAnswer bounds one answer of the Prometheus API: the client
// reads an answer whole before decoding it, so a larger one (a selector
// matching far too many series, or a hostile server) fails the query
// instead of growing the process. A fit's queries return a few series per
// bucket and model: kilobytes.
const MaxPrometheusAnswer = 8 << 20

// FromPrometheus fits the token histograms of a serving engine over
// opts.Range through the Prometheus HTTP API. client carries
// authentication and TLS (nil: a plain internal/httpclient client); each
// answer is bounded by MaxPrometheusAnswer. It queries the
// increase of the native histogram first, then of the classic _bucket
// series, summed over all matching series (by le, and by the By label
// when set).
func FromPrometheus(ctx context.Context, client *http.Client, opts PromOptions) (*Result, error) {
	if opts.URL == "" {
		return nil, errors.New("prometheus: no URL")
	}
	if opts.Range <= 0 {
		return nil, fmt.Errorf("prometheus: range must be positive, got %s", opts.Range)
	}
	if (opts.PromptMetric == "") != (opts.CompletionMetric == "") {
		return nil, errors.New("prometheus: give both the prompt and the completion metric, or neither")
	}
	if client == nil {
		var err error
		if client, err = httpclient.New(httpclient.Plain, "llmprobe_fit", httpclient.Options{}); err != nil {
			return nil, err
		}
	}
	client = bounded.Client(client, MaxPrometheusAnswer, "the answer of Prometheus")
	c, err := api.NewClient(api.Config{Address: opts.URL, Client: client})
	if err != nil {
		return nil, fmt.Errorf("prometheus client for %s: %s", scrub.URL(opts.URL), scrub.URLs(err.Error()))
	}
	q := &promQuerier{api: promv1.NewAPI(c), opts: opts, sel: normalizeSelector(opts.Selector), url: scrub.URL(opts.URL)}
	if q.opts.Time.IsZero() {
		q.opts.Time = time.Now()
	}

	engines := Engines
	if opts.PromptMetric != "" {
		engines = []Engine{{Name: "custom", PromptMetric: opts.PromptMetric, CompletionMetric: opts.CompletionMetric, ModelLabel: "model_name"}}
	}
	var tried []string
	for _, eng := range engines {
		prompt, err := q.histogram(ctx, eng.PromptMetric, eng.ModelLabel)
		if err != nil {
			return nil, err
		}
		if prompt == nil {
			tried = append(tried, eng.PromptMetric+"_bucket{"+q.sel+"}")
			continue
		}
		output, err := q.histogram(ctx, eng.CompletionMetric, eng.ModelLabel)
		if err != nil {
			return nil, err
		}
		if output == nil {
			return nil, q.noSamples(eng.CompletionMetric + "_bucket{" + q.sel + "}")
		}
		return q.result(eng, prompt, output)
	}
	return nil, q.noSamples(strings.Join(tried, " or "))
}

type promQuerier struct {
	api      promv1.API
	opts     PromOptions
	sel      string
	url      string // opts.URL masked (scrub.URL), for messages
	warnings []string
}

func (q *promQuerier) noSamples(what string) error {
	return fmt.Errorf("no samples for %s over %s at %s — check --selector and that Prometheus scrapes the server",
		what, model.Duration(q.opts.Range), q.url)
}

// normalizeSelector strips one pair of surrounding braces.
func normalizeSelector(s string) string {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "{") && strings.HasSuffix(s, "}") {
		s = strings.TrimSpace(s[1 : len(s)-1])
	}
	return s
}

func (q *promQuerier) query(ctx context.Context, expr string) (model.Vector, error) {
	var opts []promv1.Option
	if q.opts.Timeout > 0 {
		opts = append(opts, promv1.WithTimeout(q.opts.Timeout))
	}
	v, warnings, _, err := q.api.Query(ctx, expr, q.opts.Time, opts...)
	if err != nil {
		return nil, fmt.Errorf("prometheus query %s at %s: %s", expr, q.url, scrub.URLs(err.Error())) // it quotes the URL
	}
	for _, w := range warnings {
		q.warnings = append(q.warnings, "Prometheus: "+w)
	}
	vec, ok := v.(model.Vector)
	if !ok {
		return nil, fmt.Errorf("prometheus query %s at %s: want an instant vector, got %s", expr, q.url, valueType(v))
	}
	return vec, nil
}

// valueType names the type of a query result; an answer without a result
// ({"status": "success"} and no data) gives none.
func valueType(v model.Value) string {
	switch x := v.(type) {
	case nil:
		return "no result"
	case *model.Scalar:
		if x == nil {
			return "no result"
		}
	case *model.String:
		if x == nil {
			return "no result"
		}
	}
	return v.Type().String()
}

// histogram fetches one metric; nil (and no error) when nothing matches.
func (q *promQuerier) histogram(ctx context.Context, metric, modelLabel string) (*histogramData, error) {
	rng := model.Duration(q.opts.Range).String()
	by := []string{modelLabel}
	if q.opts.By != "" && q.opts.By != modelLabel {
		by = append(by, q.opts.By)
	}
	groupBy := strings.Join(by, ", ")
	d := &histogramData{groups: map[groupID]*groupHist{}, models: map[string]float64{}}
	key := func(m model.Metric) groupID {
		id := groupID{model: string(m[model.LabelName(modelLabel)])}
		if q.opts.By != "" {
			id.by = string(m[model.LabelName(q.opts.By)])
		}
		return id
	}
	group := func(m model.Metric) *groupHist {
		key := key(m)
		g := d.groups[key]
		if g == nil {
			g = &groupHist{cum: map[float64]float64{}}
			d.groups[key] = g
		}
		return g
	}

	// Native histograms.
	expr := fmt.Sprintf("sum by (%s) (increase(%s[%s]))", groupBy, selector(metric, q.sel), rng)
	vec, err := q.query(ctx, expr)
	if err != nil {
		return nil, err
	}
	for _, s := range vec {
		if s.Histogram == nil || !(float64(s.Histogram.Count) > 0) {
			continue
		}
		g := group(s.Metric)
		h := s.Histogram
		for _, b := range h.Buckets {
			lo, hi, c := float64(b.Lower), float64(b.Upper), float64(b.Count)
			if hi <= 0 || !(c > 0) {
				continue // negative buckets: lengths are not negative
			}
			g.native = append(g.native, Bin{Lo: max(lo, 0), Hi: hi, Count: c})
		}
		g.sum += float64(h.Sum)
		g.hasSum = true
		d.models[string(s.Metric[model.LabelName(modelLabel)])] += float64(h.Count)
		d.native = true
	}
	if d.native {
		d.queries = append(d.queries, expr)
		return d, nil
	}

	// Classic buckets.
	expr = fmt.Sprintf("sum by (le, %s) (increase(%s[%s]))", groupBy, selector(metric+"_bucket", q.sel), rng)
	if vec, err = q.query(ctx, expr); err != nil {
		return nil, err
	}
	total := 0.0
	for _, s := range vec {
		le, err := strconv.ParseFloat(string(s.Metric[model.BucketLabel]), 64)
		if err != nil || math.IsNaN(float64(s.Value)) {
			continue
		}
		g := group(s.Metric)
		g.cum[le] += float64(s.Value)
		if math.IsInf(le, 1) {
			total += float64(s.Value)
			d.models[string(s.Metric[model.LabelName(modelLabel)])] += float64(s.Value)
		}
	}
	if !(total > 0) {
		return nil, nil
	}
	d.queries = append(d.queries, expr)
	sumExpr := fmt.Sprintf("sum by (%s) (increase(%s[%s]))", groupBy, selector(metric+"_sum", q.sel), rng)
	if vec, err = q.query(ctx, sumExpr); err != nil {
		return nil, err
	}
	for _, s := range vec {
		if g := d.groups[key(s.Metric)]; g != nil && !math.IsNaN(float64(s.Value)) {
			g.sum += float64(s.Value)
			g.hasSum = true
		}
	}
	d.queries = append(d.queries, sumExpr)
	return d, nil
}

func selector(metric, sel string) string {
	if sel == "" {
		return metric
	}
	return metric + "{" + sel + "}"
}

// bins returns a group's histogram as bins.
func (g *groupHist) bins() ([]Bin, error) {
	if g.native != nil {
		return mergeBins([][]Bin{g.native}), nil
	}
	cum := make([]Cumulative, 0, len(g.cum))
	for le, c := range g.cum {
		cum = append(cum, Cumulative{LE: le, Count: c})
	}
	return BinsFromCumulative(cum)
}

func (g *groupHist) sumOrNaN() float64 {
	if !g.hasSum {
		return math.NaN()
	}
	return g.sum
}

// mergeBins adds up histograms whose bucket edges may differ, and closes
// the gaps between a native histogram's non-empty buckets with empty
// ones. Each histogram becomes its cumulative step function at its own
// bucket edges (lower and upper); the merged histogram has the union of
// the edges, and at each edge the sum of every histogram's cumulative
// count at its largest edge not above it. With equal edges this is the
// plain sum.
func mergeBins(hs [][]Bin) []Bin {
	type step struct{ le, cum float64 }
	var edges []float64
	steps := make([][]step, len(hs))
	for i, h := range hs {
		bs := slices.Clone(h)
		slices.SortFunc(bs, func(a, b Bin) int { return cmpFloat(a.Lo, b.Lo) })
		cum := 0.0
		for _, b := range bs {
			steps[i] = append(steps[i], step{b.Lo, cum})
			cum += b.Count
			steps[i] = append(steps[i], step{b.Hi, cum})
			edges = append(edges, b.Lo, b.Hi)
		}
	}
	slices.Sort(edges)
	edges = slices.Compact(edges)
	cumAt := func(e float64) float64 {
		total := 0.0
		for _, st := range steps {
			// The last step at or below e.
			j := len(st) - 1
			for j >= 0 && st[j].le > e {
				j--
			}
			if j >= 0 {
				total += st[j].cum
			}
		}
		return total
	}
	var out []Bin
	if len(edges) == 0 {
		return out
	}
	prev := cumAt(edges[0])
	for k := 1; k < len(edges); k++ {
		c := max(cumAt(edges[k]), prev)
		out = append(out, Bin{Lo: edges[k-1], Hi: edges[k], Count: c - prev})
		prev = c
	}
	return out
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// result assembles the fit of one engine's two histograms.
func (q *promQuerier) result(eng Engine, prompt, output *histogramData) (*Result, error) {
	end := q.opts.Time
	res := &Result{
		Source:     "Prometheus " + q.url,
		SourceKind: SourcePrometheus,
		Start:      end.Add(-q.opts.Range),
		End:        end,
		Queries:    append(slices.Clone(prompt.queries), output.queries...),
		By:         q.opts.By,
		Warnings:   slices.Clone(q.warnings),
	}
	// The model: the label value with most requests.
	bestN := 0.0
	for m, n := range prompt.models {
		if m != "" && (n > bestN || (n == bestN && m < res.Model)) {
			res.Model, bestN = m, n
		}
	}
	if len(prompt.models) > 1 && q.opts.By != eng.ModelLabel {
		res.Warnings = append(res.Warnings, fmt.Sprintf("the data mixes %d models (%s label); fit them one at a time with --selector, or split them with --by=%s", len(prompt.models), eng.ModelLabel, eng.ModelLabel))
	}

	fitGroup := func(metric string, gs []*groupHist) (*Lengths, error) {
		hs := make([][]Bin, 0, len(gs))
		sum, hasSum := 0.0, true
		for _, g := range gs {
			b, err := g.bins()
			if err != nil {
				return nil, fmt.Errorf("%s: %w", metric, err)
			}
			hs = append(hs, b)
			sum += g.sumOrNaN()
			hasSum = hasSum && g.hasSum
		}
		if !hasSum {
			sum = math.NaN()
		}
		l, err := FitHistogram(mergeBins(hs), sum)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", metric, err)
		}
		return l, nil
	}
	all := func(d *histogramData) []*groupHist {
		out := make([]*groupHist, 0, len(d.groups))
		for _, g := range d.groups {
			out = append(out, g)
		}
		return out
	}
	var err error
	if res.Prompt, err = fitGroup(eng.PromptMetric, all(prompt)); err != nil {
		return nil, err
	}
	if res.Output, err = fitGroup(eng.CompletionMetric, all(output)); err != nil {
		return nil, err
	}
	for _, l := range []*Lengths{res.Prompt, res.Output} {
		if math.IsInf(l.Max, 1) {
			res.Warnings = append(res.Warnings, "some lengths lie in the +Inf bucket: quantiles there are the largest finite bucket bound, and no max clamp is written")
			break
		}
	}
	if q.opts.By == "" {
		res.Classes = []*Class{{Name: DefaultClassName, Weight: 1, Prompt: res.Prompt, Output: res.Output}}
		return res, nil
	}

	// One class per By value, weighted by the prompt histogram's count.
	sizes := map[string]float64{}
	for id, g := range prompt.groups {
		if b, err := g.bins(); err == nil {
			for _, x := range b {
				sizes[id.by] += x.Count
			}
		}
	}
	keep, other := splitGroups(sizes)
	total := res.Prompt.Count
	addClass := func(value string, keys []string) error {
		var pg, og []*groupHist
		n := 0.0
		for _, k := range keys {
			n += sizes[k]
			for id, g := range prompt.groups {
				if id.by == k {
					pg = append(pg, g)
				}
			}
			for id, g := range output.groups {
				if id.by == k {
					og = append(og, g)
				}
			}
		}
		if len(pg) == 0 || len(og) == 0 || !(n > 0) {
			return nil
		}
		c := &Class{Value: value, Weight: n / total}
		var err error
		if c.Prompt, err = fitGroup(eng.PromptMetric, pg); err != nil {
			return fmt.Errorf("%s=%q: %w", q.opts.By, value, err)
		}
		if c.Output, err = fitGroup(eng.CompletionMetric, og); err != nil {
			return fmt.Errorf("%s=%q: %w", q.opts.By, value, err)
		}
		res.Classes = append(res.Classes, c)
		return nil
	}
	for _, k := range keep {
		value := k
		if value == "" {
			value = "none"
		}
		if err := addClass(value, []string{k}); err != nil {
			return nil, err
		}
	}
	if len(other) > 0 {
		if err := addClass(otherClass, other); err != nil {
			return nil, err
		}
		res.Warnings = append(res.Warnings, fmt.Sprintf("%d small %s group(s) merged into class %q", len(other), q.opts.By, otherClass))
	}
	if len(res.Classes) == 0 {
		return nil, fmt.Errorf("no %s group has both prompt and completion samples", q.opts.By)
	}
	nameClasses(res.Classes)
	return res, nil
}
