// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package bench

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmprobe/llmprobe/config"
)

// TestServerStatsLlamaCpp: llama.cpp's names are detected and its
// counters' deltas and gauges' means taken, over loopback.
func TestServerStatsLlamaCpp(t *testing.T) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		i := n.Add(1)
		fmt.Fprintf(w, "# TYPE llamacpp:prompt_tokens_total counter\nllamacpp:prompt_tokens_total %d\n", 100*i)
		fmt.Fprintf(w, "# TYPE llamacpp:tokens_predicted_total counter\nllamacpp:tokens_predicted_total %d\n", 10*i)
		fmt.Fprintf(w, "# TYPE llamacpp:requests_processing gauge\nllamacpp:requests_processing %d\n", i)
		fmt.Fprintf(w, "# TYPE llamacpp:kv_cache_usage_ratio gauge\nllamacpp:kv_cache_usage_ratio 0.5\n")
	}))
	defer srv.Close()
	var res []scrapeResult
	for range 3 {
		res = append(res, scrapeServer(context.Background(), srv.Client(), srv.URL))
	}
	st := serverStats(srv.URL, res)
	if st.Engine != "llama.cpp" || *st.PromptTokens != 200 || *st.GenerationTokens != 20 || *st.RequestsRunning != 2 ||
		*st.KVCacheUsage != 0.5 || st.TTFT != nil || st.RequestsWaiting != nil || st.RequestsFinished != nil {
		t.Errorf("%+v", st)
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
