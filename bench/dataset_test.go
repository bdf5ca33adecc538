// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package bench_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmprobe/llmprobe/bench"
	"github.com/llmprobe/llmprobe/bench/report"
	"github.com/llmprobe/llmprobe/config"
	"github.com/llmprobe/llmprobe/probe/workload"
	"github.com/llmprobe/llmprobe/sim"
)

// The fixtures under testdata were generated for these tests (no text
// from a real dataset): sharegpt-small.json has 12 conversations (every
// third with a second exchange, every fourth opening with a system turn)
// and one without a human turn; prompts.jsonl 8 prompts, half with
// output_tokens; messages.jsonl 6 chats, half ending with the assistant's
// reference answer.

func fixture(t *testing.T) (entries []struct {
	Conversations []struct{ From, Value string }
}) {
	t.Helper()
	data, err := os.ReadFile("testdata/sharegpt-small.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &entries); err != nil {
		t.Fatal(err)
	}
	return entries
}

// TestLoadDataset: the three formats give their prompts in order, the
// first human turn of a ShareGPT conversation as the prompt and the gpt
// turn after it as the output length (the workload's token estimate),
// output_tokens where given, a trailing assistant message as the
// reference answer (not sent), and the entries left out counted.
func TestLoadDataset(t *testing.T) {
	ctx := context.Background()
	d, err := bench.LoadDataset(ctx, "testdata/sharegpt-small.json", 0, "")
	if err != nil {
		t.Fatal(err)
	}
	entries := fixture(t)
	if d.Len() != 12 || d.Format != "sharegpt" || d.OutputLengths != report.DatasetOutputsDataset {
		t.Fatalf("sharegpt: %d prompts, format %q, outputs %q; want 12, sharegpt, dataset", d.Len(), d.Format, d.OutputLengths)
	}
	for i := range 12 {
		p, ok := d.Next("a")
		conv := entries[i].Conversations
		h := slices.IndexFunc(conv, func(c struct{ From, Value string }) bool { return c.From == "human" })
		if !ok || p.Text != conv[h].Value || len(p.Messages) != 0 {
			t.Errorf("prompt %d = %+v, want %q", i+1, p, conv[h].Value)
		}
		if want := workload.CountTokens(conv[h+1].Value); p.OutputTokens != want {
			t.Errorf("prompt %d: output tokens %d, want %d (the gpt answer's estimate)", i+1, p.OutputTokens, want)
		}
	}
	if p, _ := d.Next("a"); p.Text != entries[0].Conversations[0].Value {
		t.Errorf("after the last prompt: %q, want the first again", p.Text)
	}
	if p, _ := d.Next("b"); p.Text != entries[0].Conversations[0].Value {
		t.Errorf("another target starts at %q, want the first prompt", p.Text)
	}
	info := d.Info()
	if info.Skipped["no human turn"] != 1 || info.WithOutputLength != 12 || info.Sent["a"] != 13 || info.Sent["b"] != 1 {
		t.Errorf("info %+v", info)
	}

	d, err = bench.LoadDataset(ctx, "testdata/prompts.jsonl", 0, report.DatasetOutputsDataset)
	if err != nil {
		t.Fatal(err)
	}
	if d.Len() != 8 || d.Format != "jsonl" {
		t.Fatalf("prompts.jsonl: %d prompts, format %q", d.Len(), d.Format)
	}
	for i := range 8 {
		p, _ := d.Next("a")
		want := 0
		if i%2 == 0 {
			want = 12 + i
		}
		if !strings.HasPrefix(p.Text, "Write two sentences") || p.OutputTokens != want {
			t.Errorf("prompts.jsonl %d: %+v, want output tokens %d", i+1, p, want)
		}
	}

	d, err = bench.LoadDataset(ctx, "testdata/messages.jsonl", 0, report.DatasetOutputsWorkload)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		p, _ := d.Next("a")
		if len(p.Messages) != 2 || p.Messages[0].Role != "system" || p.Messages[1].Role != "user" {
			t.Errorf("messages.jsonl %d: %+v, want system and user (a trailing answer is not sent)", i+1, p.Messages)
		}
		if p.OutputTokens != 0 {
			t.Errorf("messages.jsonl %d: output tokens %d with --dataset.output-lengths=workload, want 0 (the class's)", i+1, p.OutputTokens)
		}
	}
	if info := d.Info(); info.WithOutputLength != 3 {
		t.Errorf("messages.jsonl: %d with an answer, want 3", info.WithOutputLength)
	}

	// Bounded: at most the prompts asked for, said so.
	d, err = bench.LoadDataset(ctx, "testdata/sharegpt-small.json", 5, "")
	if err != nil || d.Len() != 5 || !strings.Contains(d.Info().Truncated, "first 5") {
		t.Errorf("max 5 prompts: %v, %d prompts, %+v", err, d.Len(), d.Info())
	}
}

// TestLoadDatasetErrors: a broken dataset is refused with its file and
// the line of the fault.
func TestLoadDatasetErrors(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name, content, want string
	}{
		{"bad.jsonl", "{\"prompt\": \"a\"}\n{\"prompt\": \"b\"}\n{\"prompt\": \"c\"\n", ":3: "},
		{"noprompt.jsonl", "{\"prompt\": \"a\"}\n\n{\"text\": \"b\"}\n", `:3: no prompt: want "prompt", "messages" or "conversations"`},
		{"tokens.jsonl", "{\"prompt\": \"a\", \"output_tokens\": -4}\n", ":1: output_tokens -4: want a positive whole number"},
		{"role.jsonl", "{\"prompt\": \"a\"}\n{\"messages\": [{\"content\": \"hi\"}]}\n", ":2: message 1 has no role"},
		{"syntax.json", "[\n {\"conversations\": [{\"from\": \"human\", \"value\": \"a\"}]},\n {\"conversations\": [{\"from\": \"human\" \"value\": \"b\"}]}\n]\n", ":3: "},
		{"type.json", "[\n {\"conversations\": [\n  {\"from\": \"human\", \"value\": \"a\"}]},\n {\"conversations\": [\n  {\"from\": \"human\",\n   \"value\": 5}]}\n]\n", ":6: "},
		{"cut.json", "[\n {\"conversations\": [{\"from\": \"human\", \"value\": \"a\"}]},\n", "ends inside the JSON array"},
		{"empty.jsonl", "\n  \n", "empty dataset"},
		{"blank.jsonl", "\n\n{\"prompt\": \"a\"}\n{\"prompt\": 7}\n", ":4: "},
		{"blank.json", "\ufeff\n\n[{\"conversations\": [{\"from\": \"human\", \"value\": \"a\"}]},\n {\"conversations\": [{\"from\": \"human\", \"value\": 1}]}]", ":4: "},
		{"blanksyntax.json", "\n\n\n[{\"conversations\": [{\"from\": \"human\", \"value\": \"a\"}]},\n\n {\"conversations\": [}]}]", ":6: "},
		{"text.txt", "hello\n", ":1: want a JSON array (ShareGPT) or JSON Lines"},
		{"nohuman.json", "[{\"conversations\": [{\"from\": \"gpt\", \"value\": \"a\"}]}]", "no usable prompt (1 skipped: no human turn)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, tt.name)
			if err := os.WriteFile(path, []byte(tt.content), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := bench.LoadDataset(context.Background(), path, 0, "")
			if err == nil || !strings.HasPrefix(err.Error(), path) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want %s…%s", err, path, tt.want)
			}
		})
	}
	if _, err := bench.LoadDataset(context.Background(), filepath.Join(dir, "missing.json"), 0, ""); err == nil || !strings.Contains(err.Error(), "missing.json") {
		t.Errorf("a missing file: %v", err)
	}
	if _, err := bench.LoadDataset(context.Background(), "testdata/prompts.jsonl", 0, "answers"); err == nil {
		t.Error("output lengths \"answers\": no error")
	}
}

// bodySim is the simulator behind a handler that keeps every
// request's messages and max_tokens and the most requests it had in
// flight at once.
type bodySim struct {
	URL      string
	mu       sync.Mutex
	bodies   []recordedBody
	inflight atomic.Int64
	peak     atomic.Int64
}

type recordedBody struct {
	Messages []struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	} `json:"messages"`
	MaxTokens int `json:"max_tokens"`
}

func startBodySim(t *testing.T) *bodySim {
	t.Helper()
	cfg := sim.DefaultConfig()
	cfg.Seed = 1
	srv, err := sim.New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	rs := &bodySim{}
	h := srv.Handler()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/chat/completions") {
			n := rs.inflight.Add(1)
			defer rs.inflight.Add(-1)
			for p := rs.peak.Load(); n > p && !rs.peak.CompareAndSwap(p, n); p = rs.peak.Load() {
			}
			data, _ := io.ReadAll(r.Body)
			var b recordedBody
			_ = json.Unmarshal(data, &b)
			rs.mu.Lock()
			rs.bodies = append(rs.bodies, b)
			rs.mu.Unlock()
			r.Body = io.NopCloser(bytes.NewReader(data))
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	rs.URL = hs.URL
	return rs
}

func (rs *bodySim) take() ([]recordedBody, int) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	b := rs.bodies
	rs.bodies = nil
	return b, int(rs.peak.Swap(0))
}

func loadConfig(t *testing.T, base string) *config.Config {
	t.Helper()
	cfg, err := config.Load(fmt.Appendf(nil, `
global: {warmup: 0s, request_timeout: 20s, seed: 1}
workloads:
  w:
    classes:
      - {name: c, prompt_tokens: 20, output_tokens: 7}
targets:
  - name: sim
    url: %s/v1
    model: sim-model
    workload: w
    arrival: {process: constant, rate: 1}
    max_inflight: 256
    tokenize: off
    extra_body: {ignore_eos: true}
`, base), "load.yml")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestDatasetStageMaxRequestsPercentiles: an open-loop stage with a
// dataset sends its prompts in order with their output lengths as
// max_tokens, ends after --max-requests requests (long before its
// duration), and reports the percentiles asked for (p90 among them) in
// the JSON, the text and the Markdown.
func TestDatasetStageMaxRequestsPercentiles(t *testing.T) {
	rs := startBodySim(t)
	cfg := loadConfig(t, rs.URL)
	d, err := bench.LoadDataset(context.Background(), "testdata/sharegpt-small.json", 0, "")
	if err != nil {
		t.Fatal(err)
	}
	ps, err := report.ParsePercentiles("50,90,99")
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	rep, err := bench.Run(context.Background(), bench.Options{Config: cfg, Warmup: 0,
		Stages: []bench.Stage{{Rate: 40, Duration: time.Minute}}, Dataset: d, MaxRequests: 15, Percentiles: ps})
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(began)
	bodies, _ := rs.take()
	s := rep.Stages[0]
	// The arrival loop may send one or two more before it stops; every
	// one is counted.
	if s.Sent < 15 || s.Sent > 20 || len(bodies) != s.Sent {
		t.Errorf("sent %d (the server saw %d), want 15 and a few more at most", s.Sent, len(bodies))
	}
	if took > 30*time.Second {
		t.Errorf("the 1-minute stage with --max-requests=15 at 40 req/s took %v", took)
	}
	entries := fixture(t)
	var prompts []string
	var outputs []int
	for _, e := range entries[:12] {
		h := slices.IndexFunc(e.Conversations, func(c struct{ From, Value string }) bool { return c.From == "human" })
		prompts = append(prompts, e.Conversations[h].Value)
		outputs = append(outputs, workload.CountTokens(e.Conversations[h+1].Value))
	}
	seen := map[string]int{}
	for _, b := range bodies {
		if len(b.Messages) != 1 || b.Messages[0].Role != "user" {
			t.Fatalf("request messages %+v, want one user message from the dataset", b.Messages)
		}
		i := slices.Index(prompts, b.Messages[0].Content)
		if i < 0 {
			t.Fatalf("prompt %q is not the dataset's", b.Messages[0].Content)
		}
		if b.MaxTokens != outputs[i] {
			t.Errorf("prompt %d: max_tokens %d, want the answer's %d", i+1, b.MaxTokens, outputs[i])
		}
		seen[b.Messages[0].Content]++
	}
	if len(seen) != 12 {
		t.Errorf("%d distinct prompts of 12 in %d requests, want all (in order, wrapping)", len(seen), len(bodies))
	}
	if rep.Dataset == nil || rep.Dataset.Sent["sim"] != s.Sent || rep.Dataset.Format != "sharegpt" {
		t.Errorf("report dataset %+v", rep.Dataset)
	}
	if p, ok := s.TTFT.Percentiles["p90"]; !ok || !(p >= s.TTFT.P50 && p <= s.TTFT.Max) {
		t.Errorf("TTFT percentiles %v (p50 %g, max %g), want p90 between", s.TTFT.Percentiles, s.TTFT.P50, s.TTFT.Max)
	}
	var js bytes.Buffer
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back struct {
		Percentiles []float64 `json:"percentiles"`
		Stages      []struct {
			E2E struct {
				Percentiles map[string]float64 `json:"percentiles"`
			} `json:"e2e_seconds"`
		} `json:"stages"`
		Dataset *struct {
			Prompts int `json:"prompts"`
		} `json:"dataset"`
	}
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(back.Percentiles, []float64{50, 90, 99}) || len(back.Stages[0].E2E.Percentiles) != 3 || back.Dataset == nil || back.Dataset.Prompts != 12 {
		t.Errorf("JSON: percentiles %v, stage E2E %v, dataset %+v", back.Percentiles, back.Stages[0].E2E.Percentiles, back.Dataset)
	}
	var text, md strings.Builder
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if err := rep.WriteMarkdown(&md, report.MarkdownOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", text.String())
	for _, want := range []string{"p50  ", "p90  ", "p99  ", "dataset: testdata/sharegpt-small.json (sharegpt): 12 prompts"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text lacks %q", want)
		}
	}
	if strings.Contains(text.String(), "p95") {
		t.Error("text still shows p95, which was not asked for")
	}
	for _, want := range []string{"| metric | n | p50 | p90 | p99 | max |", "## Dataset"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("Markdown lacks %q", want)
		}
	}
}

// TestClosedLoopLevels: --concurrency=1,4 runs two closed-loop levels
// that keep that many requests in flight (never more, at the server),
// reported in their own section and field, never among the open-loop
// stages, labelled closed-loop with the note that it hides queueing;
// --max-requests ends a level too.
func TestClosedLoopLevels(t *testing.T) {
	rs := startBodySim(t)
	cfg := loadConfig(t, rs.URL)
	for _, c := range []int{1, 4} {
		rep, err := bench.Run(context.Background(), bench.Options{Config: cfg, Warmup: 0, Concurrency: []int{c},
			ClosedLoopDuration: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		bodies, peak := rs.take()
		if len(rep.Stages) != 0 || len(rep.ClosedLoop) != 1 {
			t.Fatalf("concurrency %d: %d open-loop stages, %d closed-loop levels; want 0 and 1", c, len(rep.Stages), len(rep.ClosedLoop))
		}
		l := rep.ClosedLoop[0]
		t.Logf("concurrency %d: sent %d, %.1f req/s, Little %.1f, E2E p50 %.3fs, peak in flight %d", c, l.Sent, l.Throughput, l.LittleRate, l.E2E.P50, peak)
		if peak != c {
			t.Errorf("concurrency %d: the server had at most %d in flight, want %d", c, peak, c)
		}
		if l.Concurrency != c || l.Sent != len(bodies) || l.Served == 0 || !(l.Throughput > 0) || !(l.LittleRate > 0) || l.Note != report.ClosedLoopNote {
			t.Errorf("level %+v", l)
		}
	}
	rep, err := bench.Run(context.Background(), bench.Options{Config: cfg, Warmup: 0, Concurrency: []int{2, 3},
		ClosedLoopDuration: time.Minute, MaxRequests: 9, Stages: []bench.Stage{{Rate: 10, Duration: time.Second}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Stages) != 1 || len(rep.ClosedLoop) != 2 {
		t.Fatalf("%d stages, %d levels; want 1 and 2", len(rep.Stages), len(rep.ClosedLoop))
	}
	for _, l := range rep.ClosedLoop {
		if l.Sent != 9 {
			t.Errorf("level %d: sent %d, want --max-requests' 9", l.Level, l.Sent)
		}
	}
	var text, md, js strings.Builder
	_ = rep.WriteText(&text)
	_ = rep.WriteMarkdown(&md, report.MarkdownOptions{})
	_ = rep.WriteJSON(&js)
	t.Logf("\n%s", text.String())
	for _, want := range []string{"CLOSED-LOOP levels (concurrency sweep), not open-loop stages", "hides queueing", "concurrency"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text lacks %q", want)
		}
	}
	for _, want := range []string{"## Closed-loop levels (not open-loop stages)", "hides queueing"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("Markdown lacks %q", want)
		}
	}
	var back struct {
		Stages     []map[string]any `json:"stages"`
		ClosedLoop []map[string]any `json:"closed_loop"`
	}
	if err := json.Unmarshal([]byte(js.String()), &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Stages) != 1 || len(back.ClosedLoop) != 2 || back.ClosedLoop[0]["concurrency"] != 2.0 {
		t.Errorf("JSON: %d stages, closed_loop %v", len(back.Stages), back.ClosedLoop)
	}
	for _, s := range back.Stages {
		if _, ok := s["concurrency"]; ok {
			t.Error("an open-loop stage has a concurrency")
		}
	}
	// Each level has vllm bench serve's figures, as a run of its with
	// --max-concurrency: every request it sent, at most that many at once.
	for i, l := range back.ClosedLoop {
		c := rep.ClosedLoop[i].Concurrency
		completed, _ := l["completed"].(float64)
		failed, _ := l["failed"].(float64)
		peak, _ := l["max_concurrent_requests"].(float64)
		if completed+failed != 9 || peak < 1 || int(peak) > c {
			t.Errorf("level %d: completed %v, failed %v, peak concurrency %v (concurrency %d)", i+1, completed, failed, peak, c)
		}
		if want := fmt.Sprintf("Maximum request concurrency:             %-10d\n", c); !strings.Contains(text.String(), want) {
			t.Errorf("text lacks %q", want)
		}
	}
}
