// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmprobe/llmprobe/bench/report"
	"github.com/llmprobe/llmprobe/internal/simtest"
	"github.com/llmprobe/llmprobe/sim"
)

// simRequest is what a recordingSim saw of one request.
type simRequest struct {
	path, authorization, apiKey string
	body                        map[string]any
}

// recordingSim is the simulator (with sim's default timing) behind a
// handler that keeps the path, the credentials' headers and the JSON body
// of every request before the simulator answers it.
func recordingSim(t *testing.T) (url string, seen func() []simRequest) {
	t.Helper()
	s, err := sim.New(sim.DefaultConfig(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var reqs []simRequest
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 16<<20))
		r.Body = io.NopCloser(bytes.NewReader(body))
		sr := simRequest{path: r.URL.Path, authorization: r.Header.Get("Authorization"), apiKey: r.Header.Get("X-Api-Key")}
		_ = json.Unmarshal(body, &sr.body)
		mu.Lock()
		reqs = append(reqs, sr)
		mu.Unlock()
		s.Handler().ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
	})
	return srv.URL, func() []simRequest {
		mu.Lock()
		defer mu.Unlock()
		return append([]simRequest(nil), reqs...)
	}
}

// readmeQuickStart is the README's quick start: the first line starting
// "bin/llmprobe bench --url=", without its comment, its URL replaced by
// url.
func readmeQuickStart(t *testing.T, url string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(moduleRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "bin/llmprobe bench --url=") {
			line, _, _ = strings.Cut(line, "#")
			args := strings.Fields(line)[1:]
			args[1] = "--url=" + url
			return args
		}
	}
	t.Fatal("the README has no bin/llmprobe bench --url= example")
	return nil
}

// TestBenchQuickStart: the newcomer's command, the README's bench
// --url=URL/v1 --model=M with nothing else and no file, against the
// simulator: one stage of 30 s at 1 req/s after a 5 s warm-up,
// 1024-token prompts and 128 output tokens on the chat API, the report
// printed (the stage's figures, trusted) and written. How long it took
// is logged (the < 60 s goal is measured, docs/bench.md "Quick start").
func TestBenchQuickStart(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the quick start's 30 s stage against the simulator")
	}
	bin := binary(t)
	_, base := simtest.Listen(t, sim.DefaultConfig())
	out := filepath.Join(t.TempDir(), "r.json")
	args := readmeQuickStart(t, base+"/v1")
	if len(args) != 3 || args[2] != "--model=sim-model" {
		t.Fatalf("the README's quick start is not bench --url --model=sim-model alone: %q", args)
	}
	r := runBinary(t, bin, nil, append(args, "--output="+out)...)
	t.Logf("bench --url --model took %v (exit code %d)", r.wall.Round(100*time.Millisecond), r.code)
	if r.code != 0 {
		t.Fatalf("exit code %d\n%s", r.code, r.stderr)
	}
	name := strings.TrimPrefix(base, "http://")
	rows := stageRows(t, r.stdout)
	if len(rows) != 1 || rows[0][1] != name || rows[0][2] != "1.0" || rows[0][len(rows[0])-1] != "yes" {
		t.Errorf("the stage table is not one trusted stage of %s at 1 req/s: %q\n%s", name, rows, r.stdout)
	}
	// vLLM's summary block, once, with its headline and the figures of
	// the one stage.
	if strings.Count(r.stdout, "============ Serving Benchmark Result ============") != 1 ||
		strings.Count(r.stdout, "\nOutput token throughput (tok/s):") != 1 ||
		!strings.Contains(r.stdout, "\nSuccessful requests:") || !strings.Contains(r.stdout, "\nMean TTFT (ms):") {
		t.Errorf("no summary block (one, with its output token throughput, successes and TTFT) on stdout:\n%s", r.stdout)
	}
	rep, err := report.ReadReport(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Stages) != 1 || len(rep.Workloads) != 1 {
		t.Fatalf("%d stages, %d workloads, want 1 and 1", len(rep.Stages), len(rep.Workloads))
	}
	s, wi := rep.Stages[0], rep.Workloads[0]
	if s.RequestedRate != 1 || s.PlannedDuration != 30*time.Second || s.Target != name || !s.Trusted {
		t.Errorf("stage: rate %v, planned %v, target %q, trusted %v; want 1, 30s, %q, true", s.RequestedRate, s.PlannedDuration, s.Target, s.Trusted, name)
	}
	// Poisson arrivals at 1 req/s for 30 s: 30 expected, below 15 or
	// above 50 about once in 10,000 runs.
	if s.Sent < 15 || s.Sent > 50 || s.Warmup == 0 || s.TTFT.Count == 0 || s.TTFT.Count+s.Warmup > s.Sent {
		t.Errorf("sent %d, warm-up %d, TTFT samples %d", s.Sent, s.Warmup, s.TTFT.Count)
	}
	if errs, _, _ := s.ErrorShare(); errs != 0 {
		t.Errorf("%d requests failed: %v", errs, s.Outcomes)
	}
	if wi.Model != "sim-model" || wi.API != "chat" || wi.URL != base+"/v1" || len(wi.Classes) != 1 ||
		wi.Classes[0].PromptTokens != "fixed value=1024" || wi.Classes[0].OutputTokens != "fixed value=128" {
		t.Errorf("workload %+v", wi)
	}
}

// TestBenchQuickStartWorkload: the workload flags vllm bench users know
// reach the wire: --api, --random-input-len/--random-output-len with
// --random-range-ratio (uniform within ±ratio), --ignore-eos in the body,
// --seed recorded, --request-rate with --num-prompts (the stage ends
// once N were sent, every one measured: no warm-up), and the API key of OPENAI_API_KEY as a bearer
// token; with --api=messages, --input-tokens/--output-tokens and
// --api-key-file, the key as X-Api-Key. No key is written anywhere.
func TestBenchQuickStartWorkload(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the quick start against the simulator")
	}
	bin := binary(t)
	const key = "sk-quickstart-secret-4711"
	dir := t.TempDir()
	url, seen := recordingSim(t)
	out, reqs := filepath.Join(dir, "r.json"), filepath.Join(dir, "req.jsonl")
	r := runBinary(t, bin, []string{"OPENAI_API_KEY=" + key}, "bench", "--url="+url+"/v1", "--model=sim-model", "--api=completions",
		"--random-input-len=64", "--random-output-len=8", "--random-range-ratio=0.5", "--ignore-eos", "--seed=7",
		"--request-rate=20", "--num-prompts=30", "--output="+out, "--requests="+reqs)
	if r.code != 0 {
		t.Fatalf("exit code %d\n%s", r.code, r.stderr)
	}
	var completions int
	for _, sr := range seen() {
		if sr.path != "/v1/completions" {
			continue
		}
		completions++
		mt, _ := sr.body["max_tokens"].(float64)
		if sr.body["model"] != "sim-model" || sr.body["ignore_eos"] != true || sr.body["stream"] != true || mt < 4 || mt > 12 {
			t.Errorf("a completion's body: %v", sr.body)
		}
		if sr.authorization != "Bearer "+key {
			t.Errorf("a completion's Authorization: %q", sr.authorization)
		}
	}
	// The preflight's, then 30 (the arrival loop may send one or two more).
	if completions < 31 || completions > 33 {
		t.Errorf("the simulator was sent %d completions, want 31 to 33", completions)
	}
	rep, err := report.ReadReport(out)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Run == nil || rep.Run.Seed != 7 || rep.Run.SeedSource != "flag" || len(rep.Stages) != 1 {
		t.Fatalf("run %+v, %d stages", rep.Run, len(rep.Stages))
	}
	// With --num-prompts and no --warmup, every request is measured.
	if s := rep.Stages[0]; s.RequestedRate != 20 || s.Sent < 30 || s.Sent > 32 || s.Interrupted || s.Warmup != 0 || s.TTFT.Count != s.Sent {
		t.Errorf("stage: rate %v, sent %d, interrupted %v, warm-up %d, TTFT samples %d", s.RequestedRate, s.Sent, s.Interrupted, s.Warmup, s.TTFT.Count)
	}
	f, err := os.Open(reqs)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	lines := 0
	for sc.Scan() {
		var l struct {
			Outcome      string `json:"outcome"`
			OutputTokens int    `json:"output_tokens"`
			PromptTokens int    `json:"prompt_tokens"`
		}
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatal(err)
		}
		lines++
		// ignore_eos: the server generates every token of max_tokens,
		// drawn uniformly in [4, 12]; prompts in [32, 96] (the tokenizer
		// may count a token more or less than planned).
		if l.Outcome != "success" || l.OutputTokens < 4 || l.OutputTokens > 12 || l.PromptTokens < 31 || l.PromptTokens > 97 {
			t.Errorf("request %s", sc.Text())
		}
	}
	if lines < 30 {
		t.Errorf("%d request lines", lines)
	}
	for what, text := range map[string]string{"stdout": r.stdout, "stderr": r.stderr, "report": readTestFile(t, out), "requests": readTestFile(t, reqs)} {
		if strings.Contains(text, key) {
			t.Errorf("the %s holds the API key", what)
		}
	}

	keyFile := filepath.Join(dir, "key")
	if err := os.WriteFile(keyFile, []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	before := len(seen())
	r = runBinary(t, bin, nil, "bench", "--url="+url+"/v1", "--model=sim-model", "--api=messages", "--api-key-file="+keyFile,
		"--input-tokens={dist: uniform, min: 10, max: 20}", "--output-tokens=5", "--request-rate=20", "--num-prompts=5", "--warmup=0s", "--output="+out)
	if r.code != 0 {
		t.Fatalf("--api=messages: exit code %d\n%s", r.code, r.stderr)
	}
	messages := 0
	for _, sr := range seen()[before:] {
		if sr.path != "/v1/messages" {
			continue
		}
		messages++
		if sr.apiKey != key || sr.authorization != "" || sr.body["max_tokens"] != 5.0 {
			t.Errorf("a message's X-Api-Key %q, Authorization %q, body %v", sr.apiKey, sr.authorization, sr.body)
		}
	}
	if messages < 6 {
		t.Errorf("the simulator was sent %d messages, want at least 6", messages)
	}
	if text := readTestFile(t, out); strings.Contains(text, key) || strings.Contains(text, keyFile) {
		t.Errorf("the report holds the API key or its file:\n%s", text)
	}
}

// TestBenchQuickStartUsage: the quick start's bad flags, values and
// combinations are usage errors naming the flag, before anything is sent
// (the simulator at --url counts no request).
func TestBenchQuickStartUsage(t *testing.T) {
	bin := binary(t)
	url, requests := countingSim(t)
	u := "--url=" + url + "/v1"
	m := "--model=sim-model"
	missing := filepath.Join(t.TempDir(), "missing")
	expectUsageErrors(t, bin, []string{"bench"}, []usageCase{
		{[]string{u}, "--url needs --model"},
		{[]string{m}, "--model needs --url"},
		{[]string{"--sim", "--random-input-len=10", "--stage=1:1s"}, "--random-input-len needs --url"},
		{[]string{"--sim", "--request-rate=5"}, "--request-rate needs --url"},
		{[]string{u, m, "--sim"}, "--url and --sim are exclusive"},
		{[]string{u, m, "--config.file=x.yml"}, "--url and --config.file are exclusive"},
		{[]string{u, m, "--target=x"}, "--target selects targets of --config.file"},
		{[]string{"--url=ftp://h/v1", m}, `--url: scheme must be http or https, got "ftp"`},
		{[]string{"--url=http://h/v1?key=1", m}, "--url: must be a base URL without query or fragment"},
		{[]string{u, m, "--api=grpc"}, "--api: enum value must be one of chat,completions,responses,messages,embeddings, got 'grpc'"},
		{[]string{u, m, "--random-input-len=0"}, "--random-input-len: must be at least 1 tokens, got 0"},
		{[]string{u, m, "--random-output-len=-3"}, "--random-output-len: must be at least 1 tokens, got -3"},
		{[]string{u, m, "--random-range-ratio=1"}, "--random-range-ratio must be in [0, 1), got 1"},
		{[]string{u, m, "--input-tokens=many"}, "--input-tokens \"many\": "},
		{[]string{u, m, "--input-tokens={dist: lognormal, median: 100}"}, `--input-tokens: dist lognormal needs either "median" and "p99"`},
		{[]string{u, m, "--input-tokens=100", "--random-input-len=50"}, "--input-tokens and --random-input-len both give the prompt lengths: give one"},
		{[]string{u, m, "--input-tokens=100", "--output-tokens=10", "--random-range-ratio=0.5"}, "--random-range-ratio applies to --random-input-len and --random-output-len"},
		{[]string{u, m, "--request-rate=inf"}, "--request-rate=inf"},
		{[]string{u, m, "--request-rate=0"}, "--request-rate must be a positive number of requests per second, got 0"},
		{[]string{u, m, "--request-rate=1e9"}, "--request-rate 1e+09 is above the arrival cap"},
		{[]string{u, m, "--request-rate=5", "--stage=1"}, "--request-rate and --stage both give the stages: give one"},
		{[]string{u, m, "--request-rate=5", "--find=capacity"}, "--request-rate cannot be combined with --find or --levels"},
		{[]string{u, m, "--burstiness=0"}, "--burstiness: must be positive, got 0"},
		{[]string{u, m, "--api-key-file=" + missing}, "--api-key-file: open " + missing},
		{[]string{u, m, "--stage=1:5"}, `--stage "1:5": missing unit in duration "5"`},
		{[]string{u, m, "--warmup=-1s"}, "--warmup must not be negative"},
		{[]string{u, m, "--api=embeddings", "--ignore-eos"}, "--ignore-eos does not apply to --api=embeddings: it generates no tokens"},
		{[]string{u, m, "--api=embeddings", "--random-output-len=8"}, "--random-output-len does not apply to --api=embeddings: it generates no tokens"},
		{[]string{u, m, "--api=embeddings", "--output-tokens=8"}, "--output-tokens does not apply to --api=embeddings"},
	})
	if n := requests.Load(); n != 0 {
		t.Errorf("the simulator was sent %d requests by command lines that are usage errors", n)
	}
}

// TestBenchNotFoundHint: a base URL without /v1 that answers 404 fails the
// preflight with the endpoint it asked and the URL to try (--url=URL/v1
// for the quick start, the target's url for a configuration); a /v1 URL
// answering 404 (a model the server does not serve) says where the
// served models are listed.
func TestBenchNotFoundHint(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the preflight against the simulator")
	}
	bin := binary(t)
	_, base := simtest.Listen(t, sim.DefaultConfig())
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--url=" + base, "--model=sim-model"},
			"the server answered 404 for " + base + "/chat/completions; OpenAI-compatible servers serve under /v1: try --url=" + base + "/v1"},
		{[]string{"--url=" + base + "/", "--model=sim-model", "--api=completions"},
			"the server answered 404 for " + base + "/completions; OpenAI-compatible servers serve under /v1: try --url=" + base + "/v1"},
		{[]string{"--url=" + base + "/v1", "--model=llama"},
			"The model `llama` does not exist.; the server answered 404 for " + base + "/v1/chat/completions; GET " + base + "/v1/models lists the models the server serves"},
		{[]string{"--config.file=" + benchConfig(t, base+"/openai")},
			"the server answered 404 for " + base + "/openai/v1/chat/completions; GET " + base + "/openai/v1/models lists the models the server serves"},
	} {
		r := runBinary(t, bin, nil, append([]string{"bench", "--stage=1:1s", "--log.level=error"}, tt.args...)...)
		if msg := lastLine(r.stderr); r.code != 1 || !strings.Contains(msg, "preflight request failed") || !strings.Contains(msg, tt.want) {
			t.Errorf("%q: exit code %d, want 1 and %q in:\n%s", tt.args, r.code, tt.want, msg)
		}
	}
	cfg := filepath.Join(t.TempDir(), "nov1.yml")
	if err := os.WriteFile(cfg, []byte(strings.ReplaceAll(readTestFile(t, benchConfig(t, base)), base+"/v1", base)), 0o600); err != nil {
		t.Fatal(err)
	}
	r := runBinary(t, bin, nil, "bench", "--config.file="+cfg, "--stage=1:1s", "--log.level=error")
	if want := "the server answered 404 for " + base + "/chat/completions; OpenAI-compatible servers serve under /v1: try url: " + base + "/v1 for target down"; r.code != 1 || !strings.Contains(r.stderr, want) {
		t.Errorf("a configuration's url without /v1: exit code %d, want 1 and %q in:\n%s", r.code, want, r.stderr)
	}
}

// TestBenchWarnings: a stage asking for more than the ceiling llmprobe
// selftest measured (--selftest.file), and a stage whose warm-up is as
// long as the stage, are warned of on standard error before the first
// stage, and the report carries the warnings (JSON run.warnings, the text
// and the Markdown); a stage below the ceiling with a measured window
// gets none.
func TestBenchWarnings(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two stages against the simulator")
	}
	bin := binary(t)
	_, base := simtest.Listen(t, sim.DefaultConfig())
	dir := t.TempDir()
	ceiling := filepath.Join(dir, "selftest.json")
	if err := os.WriteFile(ceiling, []byte(`{"ceiling_requests_per_second": 5, "measured_at": "2026-01-02T03:04:05Z"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	js, md := filepath.Join(dir, "r.json"), filepath.Join(dir, "r.md")
	r := runBinary(t, bin, nil, "bench", "--url="+base+"/v1", "--model=sim-model", "--random-input-len=16", "--random-output-len=4",
		"--stage=10:2s", "--stage=2:1s", "--warmup=1500ms", "--selftest.file="+ceiling, "--output="+js, "--output="+md)
	if r.code != 0 {
		t.Fatalf("exit code %d\n%s", r.code, r.stderr)
	}
	above := "stage 1 asks for 10 req/s, above the 5 req/s this host drives with an honest verdict (llmprobe selftest on 2026-01-02 (" + ceiling + "))"
	warmup := "stage 2: the warm-up (1.5s) is as long as the stage (1s): none of its requests is measured"
	first := strings.Index(r.stderr, `msg="bench stage"`)
	for _, w := range []string{above, warmup} {
		if i := strings.Index(r.stderr, w); i < 0 || i > first {
			t.Errorf("no warning %q on stderr before the first stage:\n%s", w, r.stderr)
		}
		if !strings.Contains(r.stdout, "warning: "+w) {
			t.Errorf("the text report has no %q:\n%s", "warning: "+w, r.stdout)
		}
		if !strings.Contains(readTestFile(t, md), "**warning**: "+w) {
			t.Errorf("the Markdown has no warning %q", w)
		}
	}
	rep, err := report.ReadReport(js)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Run == nil || len(rep.Run.Warnings) != 2 || !strings.HasPrefix(rep.Run.Warnings[0], above) || !strings.HasPrefix(rep.Run.Warnings[1], warmup) {
		t.Errorf("run.warnings: %q", rep.Run.Warnings)
	}
	if strings.Contains(r.stdout, "stage 2 asks") || strings.Contains(r.stdout, "stage 1: the warm-up") {
		t.Errorf("a warning of a stage below the ceiling, or with a measured window:\n%s", r.stdout)
	}
}
