// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package report

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmprobe/llmprobe/servermetrics"
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
	var res []servermetrics.Scrape
	for range 3 {
		res = append(res, servermetrics.Fetch(context.Background(), srv.Client(), srv.URL))
		time.Sleep(10 * time.Millisecond)
	}
	st := servermetrics.NewStats(srv.URL, res)
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
