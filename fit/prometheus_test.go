// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package fit

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/llmprobe/llmprobe/config"
	"github.com/llmprobe/llmprobe/dist"
	"github.com/llmprobe/llmprobe/internal/promtest"
	"github.com/llmprobe/llmprobe/internal/simtest"
	"github.com/llmprobe/llmprobe/sim"
)

// plannedRequest is one request of the end-to-end load: its exact prompt
// and completion lengths.
type plannedRequest struct{ prompt, output int }

func planRequests(n int) []plannedRequest {
	r := rand.New(rand.NewPCG(42, 42))
	draw := func(median, sigma, hi float64) int {
		return int(min(max(math.Round(median*math.Exp(sigma*r.NormFloat64())), 1), hi))
	}
	out := make([]plannedRequest, n)
	for i := range out {
		out[i] = plannedRequest{prompt: draw(150, 1.0, 4000), output: draw(60, 0.9, 1500)}
	}
	return out
}

// sendCompletions sends every planned request to the simulator's
// completions endpoint (prompt as token ids, so its length is exact;
// ignore_eos, so the completion is exactly max_tokens), 8 at a time, and
// checks the usage each answer reports.
func sendCompletions(t *testing.T, ctx context.Context, baseURL string, reqs []plannedRequest) {
	t.Helper()
	client := &http.Client{Timeout: 30 * time.Second}
	work := make(chan plannedRequest)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for pr := range work {
				if err := sendOne(ctx, client, baseURL, pr); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		}()
	}
	for _, pr := range reqs {
		work <- pr
	}
	close(work)
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d of %d requests failed; first: %v", len(errs), len(reqs), errs[0])
	}
}

func sendOne(ctx context.Context, client *http.Client, baseURL string, pr plannedRequest) error {
	ids := make([]int, pr.prompt)
	for i := range ids {
		ids[i] = 100 + i%30000
	}
	body, _ := json.Marshal(map[string]any{"model": "sim-model", "prompt": ids, "max_tokens": pr.output, "ignore_eos": true})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, baseURL+"/v1/completions", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var out struct {
		Usage struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP %d, %v", resp.StatusCode, err)
	}
	if out.Usage.PromptTokens != pr.prompt || out.Usage.CompletionTokens != pr.output {
		return fmt.Errorf("usage %+v, planned %+v", out.Usage, pr)
	}
	return nil
}

// lastScrape returns the timestamp of the latest sample of expr.
func lastScrape(t *testing.T, ctx context.Context, prom *promtest.Server, expr string) time.Time {
	t.Helper()
	r, err := prom.Query(ctx, "timestamp("+expr+")", time.Time{})
	if err != nil || len(r.Vector) != 1 {
		t.Fatalf("timestamp(%s) = %v, %v", expr, r, err)
	}
	return time.UnixMilli(int64(math.Round(r.Vector[0].Value * 1000)))
}

// checkAgainstTruth compares fitted lengths with the lengths that were
// sent: the count and mean are exact, and every table quantile lies in
// the bucket that holds the true quantile (the order statistic of rank
// ceil(p·n)), the resolution the histogram allows.
func checkAgainstTruth(t *testing.T, what string, l *Lengths, truth []float64) {
	t.Helper()
	sorted := slices.Sorted(slices.Values(truth))
	n := float64(len(sorted))
	if math.Abs(l.Count-n) > 1e-6 {
		t.Errorf("%s: count %g, want %g", what, l.Count, n)
	}
	sum := 0.0
	for _, v := range sorted {
		sum += v
	}
	if relErr(l.Mean, sum/n) > 1e-9 {
		t.Errorf("%s: mean %g, want %g", what, l.Mean, sum/n)
	}
	for _, p := range []float64{0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99} {
		q := l.Quantile(p)
		tq := sorted[int(math.Ceil(p*n))-1]
		b := bucketOf(l.bins, q)
		t.Logf("%s p%-4g fitted %7.1f  true %5g  bucket (%g, %g]", what, p*100, q, tq, b.Lo, b.Hi)
		if !(tq > b.Lo && tq <= b.Hi) {
			t.Errorf("%s p%g: fitted %g lies in bucket (%g, %g], the true quantile %g does not", what, p*100, q, b.Lo, b.Hi, tq)
		}
	}
	if l.Min > sorted[0] || l.Max < sorted[len(sorted)-1] {
		t.Errorf("%s: min/max %g/%g do not bound the data %g/%g", what, l.Min, l.Max, sorted[0], sorted[len(sorted)-1])
	}
	mu, sigma, _ := dist.FitLogNormal(sorted)
	t.Logf("%s log-normal: binned fit mu %.3f sigma %.3f (median %.1f); exact-data fit mu %.3f sigma %.3f (median %.1f)",
		what, l.Mu, l.Sigma, math.Exp(l.Mu), mu, sigma, math.Exp(mu))
	if relErr(math.Exp(l.Mu), math.Exp(mu)) > 0.1 || relErr(l.Sigma, sigma) > 0.15 {
		t.Errorf("%s: binned log-normal (mu %g, sigma %g) far from the data's (mu %g, sigma %g)", what, l.Mu, l.Sigma, mu, sigma)
	}
}

// TestFromPrometheusEndToEnd drives known lengths through the simulator,
// has a real Prometheus scrape its vllm:* histograms (classic buckets)
// and an exporter of native histograms of the same lengths, and fits both
// through the HTTP API.
func TestFromPrometheusEndToEnd(t *testing.T) {
	promtest.PrometheusBinary(t) // skip (or fail under LLMPROBE_REQUIRE_TOOLS=1) before starting anything
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	begin := time.Now()

	cfg := sim.DefaultConfig()
	cfg.ZeroLatency = true
	cfg.Seed = 1
	_, baseURL := simtest.Listen(t, cfg)

	// The same lengths as native histograms (exponential buckets, factor
	// 1.1), under custom names.
	reg := prometheus.NewRegistry()
	native := func(name string) prometheus.Histogram {
		h := prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:                            name,
			Help:                            "Token lengths as a native histogram.",
			NativeHistogramBucketFactor:     1.1,
			NativeHistogramMaxBucketNumber:  1000,
			NativeHistogramMinResetDuration: time.Hour,
		})
		reg.MustRegister(h)
		return h
	}
	nativePrompt, nativeOutput := native("fittest_prompt_tokens"), native("fittest_output_tokens")
	exp := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer exp.Close()

	prom := promtest.Start(t, promtest.Options{
		Targets: []promtest.ScrapeTarget{
			{JobName: "sim", Address: strings.TrimPrefix(baseURL, "http://")},
			{JobName: "native", Address: exp.Listener.Addr().String()},
		},
		ScrapeInterval: time.Second,
	})
	// Both sources scraped at zero before any request: the increase over
	// a range starting before them is then exact.
	for _, expr := range []string{`vllm:request_prompt_tokens_count{job="sim"}`, `fittest_prompt_tokens{job="native"}`} {
		if _, err := prom.WaitFor(ctx, expr, nil); err != nil {
			t.Fatal(err)
		}
	}

	reqs := planRequests(300)
	sendCompletions(t, ctx, baseURL, reqs)
	var prompts, outputs []float64
	for _, pr := range reqs {
		prompts = append(prompts, float64(pr.prompt))
		outputs = append(outputs, float64(pr.output))
		nativePrompt.Observe(float64(pr.prompt))
		nativeOutput.Observe(float64(pr.output))
	}

	// Wait for a scrape that saw every request, then for one more.
	full := func(r *promtest.Result) bool {
		return len(r.Vector) == 2 && r.Vector[0].Value == float64(len(reqs)) && r.Vector[1].Value == float64(len(reqs))
	}
	if _, err := prom.WaitFor(ctx, `vllm:request_prompt_tokens_count{job="sim"} or histogram_count(fittest_prompt_tokens{job="native"})`, full); err != nil {
		t.Fatal(err)
	}
	first := lastScrape(t, ctx, prom, `vllm:request_prompt_tokens_count{job="sim"}`)
	for lastScrape(t, ctx, prom, `vllm:request_prompt_tokens_count{job="sim"}`).Equal(first) && ctx.Err() == nil {
		time.Sleep(200 * time.Millisecond)
	}

	// Classic buckets, metrics found by default (vLLM's names).
	end := lastScrape(t, ctx, prom, `vllm:request_prompt_tokens_count{job="sim"}`)
	rng := end.Sub(begin).Truncate(time.Second) + 5*time.Second
	res, err := FromPrometheus(ctx, nil, PromOptions{URL: prom.URL, Selector: `{job="sim"}`, Range: rng, Time: end})
	if err != nil {
		t.Fatal(err)
	}
	if res.SourceKind != SourcePrometheus || res.Model != "sim-model" || !res.End.Equal(end) || res.End.Sub(res.Start) != rng {
		t.Errorf("result: kind %v, model %q, range %v .. %v", res.SourceKind, res.Model, res.Start, res.End)
	}
	if len(res.Queries) != 4 || !strings.Contains(res.Queries[0], `increase(vllm:request_prompt_tokens_bucket{job="sim"}[`) {
		t.Errorf("queries = %q, want the classic bucket and sum queries", res.Queries)
	}
	checkAgainstTruth(t, "classic prompt", res.Prompt, prompts)
	checkAgainstTruth(t, "classic output", res.Output, outputs)
	if res.Prompt.Max > 5000 || res.Output.Min < 0 {
		t.Errorf("bucket bounds: prompt max %g, output min %g", res.Prompt.Max, res.Output.Min)
	}
	cfgFile := checkWorkloadLoads(t, res)
	if got := cfgFile.Targets[0].Model; got != "sim-model" {
		t.Errorf("example target model = %q, want sim-model", got)
	}

	// Native histograms, metrics named explicitly, split by a label. The
	// range ends at that job's own last scrape (the timestamp of its up
	// series).
	nativeEnd := lastScrape(t, ctx, prom, `up{job="native"}`)
	res, err = FromPrometheus(ctx, http.DefaultClient, PromOptions{
		URL: prom.URL, Selector: `job="native"`, Range: nativeEnd.Sub(begin).Truncate(time.Second) + 5*time.Second, Time: nativeEnd,
		PromptMetric: "fittest_prompt_tokens", CompletionMetric: "fittest_output_tokens", By: "job",
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Queries) != 2 || strings.Contains(res.Queries[0], "_bucket") {
		t.Errorf("queries = %q, want the two native histogram queries", res.Queries)
	}
	if len(res.Classes) != 1 || res.Classes[0].Name != "native" || res.Classes[0].Weight != 1 {
		t.Errorf("classes = %+v, want one class named native", res.Classes)
	}
	checkAgainstTruth(t, "native prompt", res.Prompt, prompts)
	checkAgainstTruth(t, "native output", res.Output, outputs)
	checkWorkloadLoads(t, res)

	// Nothing matches: the error says what was asked and what to check.
	_, err = FromPrometheus(ctx, nil, PromOptions{URL: prom.URL, Selector: `job="nope"`, Range: time.Hour, Time: end})
	for _, want := range []string{`no samples for vllm:request_prompt_tokens_bucket{job="nope"} or sglang:prompt_tokens_histogram_bucket{job="nope"} over 1h at ` + prom.URL, "check --selector"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("no match: err = %v, want it to contain %q", err, want)
		}
	}
	// A malformed selector is Prometheus' error, passed on.
	_, err = FromPrometheus(ctx, nil, PromOptions{URL: prom.URL, Selector: `job=`, Range: time.Hour, Time: end})
	if err == nil || !strings.Contains(err.Error(), "bad_data") {
		t.Errorf("bad selector: err = %v, want Prometheus' bad_data error", err)
	}
}

// checkWorkloadLoads writes the workload of a Prometheus fit and loads it
// with the config package; the samplers reproduce the table points.
func checkWorkloadLoads(t *testing.T, res *Result) *config.Config {
	t.Helper()
	var b bytes.Buffer
	if err := WriteWorkload(&b, res, WorkloadOptions{}); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(b.Bytes(), "prom.yml")
	if err != nil {
		t.Fatalf("written workload does not load: %v\n%s", err, b.String())
	}
	for i, c := range cfg.Workloads["fitted"].Classes {
		for _, pt := range res.Classes[i].Prompt.Table {
			if got := c.PromptTokens.Sampler().Quantile(pt.P); math.Abs(got-pt.V) > 1e-6*pt.V {
				t.Errorf("loaded prompt p%g = %g, table %g", pt.P, got, pt.V)
			}
		}
	}
	return cfg
}

func TestFromPrometheusOptions(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		opts PromOptions
		want string
	}{
		{PromOptions{Range: time.Hour}, "no URL"},
		{PromOptions{URL: "http://127.0.0.1:1", Range: 0}, "range must be positive"},
		{PromOptions{URL: "http://127.0.0.1:1", Range: time.Hour, PromptMetric: "a"}, "both the prompt and the completion metric"},
	} {
		if _, err := FromPrometheus(ctx, nil, c.opts); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: err = %v, want %q", c.opts, err, c.want)
		}
	}
	// An unreachable server is an error naming the query and the URL.
	l := httptest.NewServer(http.NotFoundHandler())
	url := l.URL
	l.Close()
	_, err := FromPrometheus(ctx, nil, PromOptions{URL: url, Range: time.Hour})
	if err == nil || !strings.Contains(err.Error(), url) {
		t.Errorf("unreachable: err = %v", err)
	}
	// A password in the URL never shows.
	withPassword := strings.Replace(url, "http://", "http://probe:s3cr3t-pw@", 1)
	_, err = FromPrometheus(ctx, nil, PromOptions{URL: withPassword, Range: time.Hour})
	if err == nil || strings.Contains(err.Error(), "s3cr3t-pw") {
		t.Errorf("err = %v, want an error without the password", err)
	}
}

func TestMergeBins(t *testing.T) {
	inf := math.Inf(1)
	// Equal edges: a plain sum.
	a := []Bin{{0, 1, 1}, {1, 10, 2}, {10, inf, 3}}
	got := mergeBins([][]Bin{a, a})
	want := []Bin{{0, 1, 2}, {1, 10, 4}, {10, inf, 6}}
	if !slices.Equal(got, want) {
		t.Errorf("equal edges: %v, want %v", got, want)
	}
	// Different edges (two max_model_len values): the union of edges, the
	// coarser histogram's mass staying where its buckets put it.
	b := []Bin{{0, 5, 4}, {5, inf, 1}}
	got = mergeBins([][]Bin{a, b})
	total := 0.0
	for i, x := range got {
		total += x.Count
		if i > 0 && x.Lo != got[i-1].Hi {
			t.Fatalf("merged bins not contiguous: %v", got)
		}
	}
	if total != 11 || len(got) != 4 {
		t.Errorf("merged %v: want 4 buckets holding 11", got)
	}
	// A native histogram's sparse buckets: the gap stays empty rather
	// than widening the next bucket.
	got = mergeBins([][]Bin{{{69.8, 76.1, 3}, {32, 34.9, 5}}})
	want = []Bin{{32, 34.9, 5}, {34.9, 69.8, 0}, {69.8, 76.1, 3}}
	if !slices.Equal(got, want) {
		t.Errorf("sparse buckets: %v, want %v", got, want)
	}
	if q := HistogramQuantile(got, 0.9); !(q > 69.8 && q <= 76.1) {
		t.Errorf("p90 of sparse buckets = %g, want it in (69.8, 76.1]", q)
	}
}

// TestFromPrometheusAnswerBound: a Prometheus (or a proxy before it) that
// answers without end — here a vector of 400 MB — fails the fit once the
// answer passes 8 MiB, instead of growing the process while it reads.
func TestFromPrometheusAnswerBound(t *testing.T) {
	const answer = 400 << 20
	sent := make(chan int64, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		item := []byte(`{"metric":{"le":"1","model_name":"m"},"value":[1,"1"]},`)
		var n int64
		defer func() { sent <- n }()
		m, _ := w.Write([]byte(`{"status":"success","data":{"resultType":"vector","result":[`))
		n += int64(m)
		for n < answer {
			m, err := w.Write(item)
			n += int64(m)
			if err != nil {
				return
			}
		}
	}))
	defer srv.Close()
	_, err := FromPrometheus(context.Background(), nil, PromOptions{URL: srv.URL, Range: time.Hour})
	if err == nil || !strings.Contains(err.Error(), "larger than 8 MiB") {
		t.Fatalf("err = %v, want the answer refused past 8 MiB", err)
	}
	srv.CloseClientConnections()
	if n := <-sent; n > 64<<20 {
		t.Errorf("the server wrote %d MiB before the client gave up", n>>20)
	}
}
