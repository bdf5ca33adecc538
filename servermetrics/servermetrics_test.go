// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package servermetrics

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

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
	var res []Scrape
	for range 2 {
		res = append(res, Fetch(context.Background(), srv.Client(), srv.URL))
	}
	st := NewStats(srv.URL, res)
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
	one := NewStats(srv.URL, res[:1])
	if got := one.Unavailable["generation_tokens"]; got != "one successful scrape: no deltas" || one.Unavailable["requests_running"] != "" {
		t.Errorf("one scrape: %q", one.Unavailable)
	}
	none := NewStats(srv.URL, []Scrape{{err: errors.New("refused")}})
	if len(none.Unavailable) != len(serverFigureKeys) || none.Unavailable["requests_running"] != "no successful scrape" {
		t.Errorf("no scrape: %q", none.Unavailable)
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
			res := Fetch(context.Background(), client, srv.URL)
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
				if res := Fetch(context.Background(), client, srv.URL); res.err != nil {
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
	s := StartSampler(context.Background(), srv.Client(), srv.URL, time.Now(), 20*time.Millisecond)
	for n.Load() < 6 {
		time.Sleep(5 * time.Millisecond)
	}
	res := s.Results()
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
	st := NewStats(srv.URL, res)
	last := float64(len(res))
	want := (last*(last+1)/2 - 3) / (last - 1) // the mean of 1..last but the failed 3rd
	if st.RequestsRunning == nil || math.Abs(float64(*st.RequestsRunning)-want) > 1e-9 || *st.GenerationTokens != Float(10*(last-1)) || st.FailedScrapes != 1 {
		t.Errorf("running %v (want %g), generation %v, failed %d", st.RequestsRunning, want, st.GenerationTokens, st.FailedScrapes)
	}
}
