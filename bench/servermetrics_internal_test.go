// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmprobe/llmprobe/config"
)

// llamaCppPage is a llama.cpp server's /metrics at scrape i, with every
// family current builds export (tools/server/server-context.cpp, the
// metrics handler: "llamacpp:" + name, HELP, TYPE and one sample each) and
// nothing else: no KV-cache gauge (llamacpp:kv_cache_usage_ratio was
// dropped), no histograms.
func llamaCppPage(i int64) string {
	var b strings.Builder
	for _, m := range []struct {
		name, typ, help string
		v               float64
	}{
		{"prompt_tokens_total", "counter", "Number of prompt tokens processed.", float64(100 * i)},
		{"prompt_seconds_total", "counter", "Prompt process time", 0.5 * float64(i)},
		{"tokens_predicted_total", "counter", "Number of generation tokens processed.", float64(10 * i)},
		{"tokens_predicted_seconds_total", "counter", "Predict process time", float64(i)},
		{"n_decode_total", "counter", "Total number of llama_decode() calls", float64(7 * i)},
		{"n_tokens_max", "counter", "Largest observed n_tokens.", 512},
		{"n_busy_slots_per_decode", "counter", "Average number of busy slots per llama_decode() call", 1.5},
		{"prompt_tokens_seconds", "gauge", "Average prompt throughput in tokens/s.", 200},
		{"predicted_tokens_seconds", "gauge", "Average generation throughput in tokens/s.", 10},
		{"requests_processing", "gauge", "Number of requests processing.", float64(i)},
		{"requests_deferred", "gauge", "Number of requests deferred.", 0},
	} {
		fmt.Fprintf(&b, "# HELP llamacpp:%s %s\n# TYPE llamacpp:%s %s\nllamacpp:%s %g\n", m.name, m.help, m.name, m.typ, m.name, m.v)
	}
	return b.String()
}

// TestServerStatsLlamaCpp: against what current llama.cpp builds export,
// the figures it has are taken (its prompt-token counter as uncached
// prompt tokens: it counts only the tokens it computed, not those it
// reused from its cache) and every other figure is null with the reason
// "not exported by llama.cpp", in the JSON, the text and the Markdown:
// never a bare "-".
func TestServerStatsLlamaCpp(t *testing.T) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, llamaCppPage(n.Add(1)))
	}))
	defer srv.Close()
	var res []scrapeResult
	for range 3 {
		res = append(res, scrapeServer(context.Background(), srv.Client(), srv.URL))
		time.Sleep(10 * time.Millisecond)
	}
	st := serverStats(srv.URL, res)
	if st.Engine != "llama.cpp" || st.UncachedPromptTokens == nil || *st.UncachedPromptTokens != 200 || *st.GenerationTokens != 20 ||
		*st.RequestsRunning != 2 || *st.RequestsWaiting != 0 || st.UncachedPromptTokensPerSec == nil {
		t.Fatalf("%+v", st)
	}
	for _, key := range []string{"kv_cache_usage_ratio", "ttft_seconds", "queue_time_seconds", "prefix_cache_hit_ratio",
		"prompt_tokens", "prompt_tokens_per_second", "requests_finished"} {
		if why := st.Unavailable[key]; !strings.HasPrefix(why, "not exported by llama.cpp") {
			t.Errorf("%s: reason %q, want \"not exported by llama.cpp\"", key, why)
		}
	}
	if why := st.Unavailable["prompt_tokens"]; !strings.Contains(why, "llamacpp:prompt_tokens_total counts only") {
		t.Errorf("prompt tokens: %q does not say what llama.cpp's counter counts", why)
	}
	if st.PromptTokens != nil || st.KVCacheUsage != nil || st.TTFT != nil || st.RequestsFinished != nil || len(st.Errors) != 0 {
		t.Errorf("%+v", st)
	}
	for key := range st.Unavailable {
		if key == "uncached_prompt_tokens" || key == "requests_running" || key == "generation_tokens" {
			t.Errorf("%s has a value and a reason %q", key, st.Unavailable[key])
		}
	}

	rep := &Report{Stages: []*StageReport{{Stage: 1, Target: "llama", TTFT: Quantiles{Count: 3, P50: 0.1, P99: 0.2}, Server: st}}}
	var js, md, text bytes.Buffer
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	if err := rep.WriteMarkdown(&md, MarkdownOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s\n%s", text.String(), md.String())
	for _, want := range []string{`"kv_cache_usage_ratio": null`, `"kv_cache_usage_ratio": "not exported by llama.cpp"`, `"uncached_prompt_tokens": 200`} {
		if !strings.Contains(js.String(), want) {
			t.Errorf("the JSON lacks %s", want)
		}
	}
	section := md.String()[strings.Index(md.String(), "### Server metrics"):]
	for _, want := range []string{"| KV-cache usage | not exported by llama.cpp |", "| server TTFT p50 | not exported by llama.cpp |",
		"| uncached prompt tokens/s | ", "| prompt tokens/s | not exported by llama.cpp: ", "| probe − server TTFT p50 | no server TTFT: not exported by llama.cpp |"} {
		if !strings.Contains(section, want) {
			t.Errorf("the Markdown lacks %q", want)
		}
	}
	if strings.Contains(section, "| - |") {
		t.Errorf("the Markdown's server section has a bare -")
	}
	for _, want := range []string{"uncached/s", "n/e", "stage 1 llama server metrics: KV, prompt/s, finished, prefix, srv TTFT, queue: not exported by llama.cpp\n"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("the text lacks %q", want)
		}
	}
	for _, line := range strings.Split(text.String(), "\n") {
		if !strings.HasPrefix(line, "stage ") && len([]rune(line)) > 100 {
			t.Errorf("a %d-column line: %q", len([]rune(line)), line)
		}
		if f := strings.Fields(line); len(f) > 3 && f[2] == "llama.cpp" && slices.Contains(f, "-") {
			t.Errorf("a bare - in the text's server row: %q", line)
		}
	}
}

// TestServerStatsReasons: a figure an engine exports but the scrapes lack
// says which names were looked for; one left out says why; with one
// successful scrape the deltas say so; without any, every figure is null
// with the reason.
func TestServerStatsReasons(t *testing.T) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		i := n.Add(1)
		fmt.Fprintf(w, "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 1\n# TYPE vllm:generation_tokens_total counter\nvllm:generation_tokens_total %d\n", 10*i)
		fmt.Fprintf(w, "# TYPE vllm:num_requests_waiting gauge\n")
		for s := range serverMetricsMaxSamples + 1 {
			fmt.Fprintf(w, "vllm:num_requests_waiting{id=\"%d\"} 0\n", s)
		}
	}))
	defer srv.Close()
	var res []scrapeResult
	for range 2 {
		res = append(res, scrapeServer(context.Background(), srv.Client(), srv.URL))
	}
	st := serverStats(srv.URL, res)
	t.Logf("%+v", st.Unavailable)
	if st.Engine != "vllm" || *st.GenerationTokens != 10 {
		t.Fatalf("%+v", st)
	}
	for key, want := range map[string]string{
		"kv_cache_usage_ratio": "not in the scrapes: vllm:kv_cache_usage_perc or vllm:gpu_cache_usage_perc",
		"requests_waiting":     "vllm:num_requests_waiting left out: more than 10000 samples",
		"ttft_seconds":         "not in the scrapes: vllm:time_to_first_token_seconds",
	} {
		if got := st.Unavailable[key]; got != want {
			t.Errorf("%s: %q, want %q", key, got, want)
		}
	}
	one := serverStats(srv.URL, res[:1])
	if got := one.Unavailable["generation_tokens"]; got != "one successful scrape: no deltas" || one.Unavailable["requests_running"] != "" {
		t.Errorf("one scrape: %q", one.Unavailable)
	}
	none := serverStats(srv.URL, []scrapeResult{{err: errors.New("refused")}})
	if len(none.Unavailable) != len(serverFigureKeys) || none.Unavailable["requests_running"] != "no successful scrape" {
		t.Errorf("no scrape: %q", none.Unavailable)
	}
}

func TestResolveServerMetrics(t *testing.T) {
	ts := []*config.Target{{Name: "a"}, {Name: "b"}}
	for _, c := range []struct {
		specs []string
		want  map[string]string
	}{
		{[]string{"http://x/m"}, map[string]string{"a": "http://x/m", "b": "http://x/m"}},
		{[]string{"http://x/m,http://y/m"}, map[string]string{"a": "http://x/m", "b": "http://y/m"}},
		{[]string{"http://x/m", "https://y/m?a=b"}, map[string]string{"a": "http://x/m", "b": "https://y/m?a=b"}},
		{[]string{"b=http://y/m"}, map[string]string{"b": "http://y/m"}},
		{[]string{"http://x/m,b=http://y/m"}, nil},
		{[]string{"c=http://y/m"}, nil},
		{[]string{"x/m"}, nil},
		{[]string{"http://x/m,http://y/m,http://z/m"}, nil},
	} {
		got, err := resolveServerMetrics(c.specs, ts)
		if (err != nil) != (c.want == nil) || fmt.Sprint(got) != fmt.Sprint(c.want) && c.want != nil {
			t.Errorf("%q: %v %v, want %v", c.specs, got, err, c.want)
		}
	}
}

// distinctSeries writes about size bytes of name's samples, each series
// distinct.
func distinctSeries(b *bytes.Buffer, name string, size int) {
	fmt.Fprintf(b, "# HELP %s A family of distinct series.\n# TYPE %s gauge\n", name, name)
	for i := 0; b.Len() < size; i++ {
		fmt.Fprintf(b, "%s{model_name=\"m\",id=\"%09d\"} 1\n", name, i)
	}
}

// hostilePage is one of the pages TestScrapeHostilePages serves: all end
// with a well-formed vllm:num_requests_waiting 3.
func hostilePage(kind string) []byte {
	var b bytes.Buffer
	switch kind {
	case "distinct-unread":
		distinctSeries(&b, "junk_series", 31<<20)
	case "distinct-read":
		distinctSeries(&b, "vllm:num_requests_running", 31<<20)
	case "long-label-read", "long-label-unread":
		name := "vllm:num_requests_running"
		if kind == "long-label-unread" {
			name = "junk_info"
		}
		fmt.Fprintf(&b, "# TYPE %s gauge\n%s{model_name=\"", name, name)
		b.Write(bytes.Repeat([]byte("a"), 30<<20))
		b.WriteString("\"} 1\n")
	case "bad-syntax-read", "bad-syntax-unread":
		name := "vllm:num_requests_running"
		if kind == "bad-syntax-unread" {
			name = "junk_info"
		}
		fmt.Fprintf(&b, "# TYPE %s gauge\n%s{model_name=\"m\" 1\n", name, name)
	case "too-large":
		distinctSeries(&b, "junk_series", serverMetricsMaxBytes+1)
	}
	b.WriteString("# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{model_name=\"m\"} 3\n")
	return b.Bytes()
}

// TestScrapeHostilePages: a 31 MB page of distinct series (under the
// 32 MiB cap) and a 30 MB label value are read as a stream: what bench
// does not read is passed over, a family bench reads that has too many
// samples or too long a line is left out with a reason, the rest of the
// page is still read, and the scrape allocates a bounded amount whatever
// the page (before, it read the page whole, copied it and parsed every
// family: 600 MB for the first page, 393 MB for the second).
func TestScrapeHostilePages(t *testing.T) {
	for _, c := range []struct {
		kind    string
		dropped string // a family left out, and why
		err     string
	}{
		{kind: "distinct-unread"},
		{kind: "distinct-read", dropped: "more than 10000 samples"},
		{kind: "long-label-read", dropped: "a sample line longer than 16384 bytes"},
		{kind: "long-label-unread"},
		{kind: "bad-syntax-read", dropped: "does not parse"},
		{kind: "bad-syntax-unread"},
		{kind: "too-large", err: "larger than 33554432 bytes"},
	} {
		t.Run(c.kind, func(t *testing.T) {
			page := hostilePage(c.kind)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "text/plain; version=0.0.4")
				_, _ = w.Write(page)
			}))
			defer srv.Close()
			client := srv.Client()
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			res := scrapeServer(context.Background(), client, srv.URL)
			runtime.ReadMemStats(&after)
			allocated := after.TotalAlloc - before.TotalAlloc
			runtime.GC()
			var held runtime.MemStats
			runtime.ReadMemStats(&held)
			retained := int64(held.HeapAlloc) - int64(before.HeapAlloc)
			runtime.KeepAlive(res)
			t.Logf("%d-byte page: allocated %.1f MiB, retained %.1f MiB; err %v, dropped %v", len(page),
				float64(allocated)/(1<<20), float64(retained)/(1<<20), res.err, res.dropped)
			if c.err != "" {
				if res.err == nil || !strings.Contains(res.err.Error(), c.err) {
					t.Fatalf("err %v, want %q", res.err, c.err)
				}
			} else {
				if res.err != nil {
					t.Fatalf("the scrape failed: %v", res.err)
				}
				if f := res.families["vllm:num_requests_waiting"]; f == nil || len(f.Metric) != 1 || f.Metric[0].GetGauge().GetValue() != 3 {
					t.Errorf("the well-formed family after the hostile one: %v", f)
				}
				why := res.dropped["vllm:num_requests_running"]
				if c.dropped == "" && len(res.dropped) != 0 || c.dropped != "" && !strings.Contains(why, c.dropped) {
					t.Errorf("dropped %q, want %q", res.dropped, c.dropped)
				}
				if c.dropped != "" && res.families["vllm:num_requests_running"] != nil {
					t.Errorf("the family left out is in the families")
				}
			}
			// Generous structural bounds: a few buffers and the families
			// bench reads, not the page (31 MB) or its parse.
			if allocated > 48<<20 || retained > 16<<20 {
				t.Errorf("a scrape of a %d-byte page allocated %d bytes and retains %d", len(page), allocated, retained)
			}
		})
	}
}

// BenchmarkScrapeHostilePage measures one scrape of the 31 MB page of
// distinct series and of the 30 MB label value (B/op is what a scrape
// allocates).
func BenchmarkScrapeHostilePage(b *testing.B) {
	for _, kind := range []string{"distinct-unread", "distinct-read", "long-label-read"} {
		b.Run(kind, func(b *testing.B) {
			page := hostilePage(kind)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				_, _ = w.Write(page)
			}))
			defer srv.Close()
			client := srv.Client()
			b.SetBytes(int64(len(page)))
			b.ReportAllocs()
			for b.Loop() {
				if res := scrapeServer(context.Background(), client, srv.URL); res.err != nil {
					b.Fatal(res.err)
				}
			}
		})
	}
}

// TestScraperKeepsFirstAndLast: of a window's successful scrapes only the
// first and the last keep their families (the deltas are taken between
// them); the others keep their gauges' sums, all the gauge means need.
func TestScraperKeepsFirstAndLast(t *testing.T) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		i := n.Add(1)
		if i == 3 {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintf(w, "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running %d\n", i)
		fmt.Fprintf(w, "# TYPE vllm:generation_tokens_total counter\nvllm:generation_tokens_total %d\n", 10*i)
	}))
	defer srv.Close()
	s := startServerScraper(context.Background(), srv.Client(), srv.URL, time.Now(), 20*time.Millisecond)
	for n.Load() < 6 {
		time.Sleep(5 * time.Millisecond)
	}
	res := s.results()
	var kept []int
	for i, r := range res {
		if r.families != nil {
			kept = append(kept, i)
		}
		if r.err == nil && r.gauges["vllm:num_requests_running"].n != 1 {
			t.Errorf("scrape %d: gauges %v", i, r.gauges)
		}
	}
	if len(res) < 6 || len(kept) != 2 || kept[0] != 0 || kept[1] != len(res)-1 {
		t.Fatalf("%d scrapes, families kept by %v: want the first and the last", len(res), kept)
	}
	st := serverStats(srv.URL, res)
	last := float64(len(res))
	want := (last*(last+1)/2 - 3) / (last - 1) // the mean of 1..last but the failed 3rd
	if st.RequestsRunning == nil || math.Abs(float64(*st.RequestsRunning)-want) > 1e-9 || *st.GenerationTokens != Float(10*(last-1)) || st.FailedScrapes != 1 {
		t.Errorf("running %v (want %g), generation %v, failed %d", st.RequestsRunning, want, st.GenerationTokens, st.FailedScrapes)
	}
}
