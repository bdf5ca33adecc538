// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package bench

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

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
