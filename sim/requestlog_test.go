// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// readRequestLog parses a request log strictly: every line one
// RequestLogEntry with no unknown field.
func readRequestLog(t *testing.T, path string) []RequestLogEntry {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []RequestLogEntry
	for i, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		if line == "" {
			if len(data) == 0 {
				break
			}
			t.Fatalf("line %d is empty", i+1)
		}
		var e RequestLogEntry
		dec := json.NewDecoder(strings.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&e); err != nil || dec.More() {
			t.Fatalf("line %d is not one RequestLogEntry (%v): %q", i+1, err, line)
		}
		if _, err := time.Parse(time.RFC3339Nano, e.Arrival); err != nil {
			t.Errorf("line %d: arrival %q: %v", i+1, e.Arrival, err)
		}
		out = append(out, e)
	}
	return out
}

// shutdown stops s gracefully. The client's idle connections are closed
// first: a connection its transport dialed and never used would hold
// http.Server.Shutdown for 5 s.
func shutdown(t *testing.T, s *Server) {
	t.Helper()
	testClient.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
}

// unary posts a non-streaming body and decodes the answer.
func unary(t *testing.T, url string, body map[string]any, headers ...string) (int, completionJSON) {
	t.Helper()
	body["stream"] = false
	delete(body, "stream_options")
	resp := post(t, url, body, headers...)
	defer resp.Body.Close()
	var c completionJSON
	if resp.StatusCode == http.StatusOK {
		if err := json.NewDecoder(resp.Body).Decode(&c); err != nil {
			t.Fatalf("decoding the answer: %v", err)
		}
	}
	return resp.StatusCode, c
}

func TestRequestLogMatchesClient(t *testing.T) {
	path := filepath.Join(t.TempDir(), "requests.jsonl")
	cfg := DefaultConfig()
	cfg.EOSProbability = 0
	cfg.DecodeBase = 10 * time.Millisecond
	cfg.RequestLog = path
	base, s := startSim(t, cfg)
	chat, comp := base+"/v1/chat/completions", base+"/v1/completions"
	long := strings.Repeat("a shared prefix that the cache keeps ", 8)

	start := time.Now()
	r1 := stream(t, chat, chatBody(long+"first", 5), "X-Request-Id", "req-1")
	code2, u2 := unary(t, comp, completionBody("a plain completion", 4), "X-Request-Id", "req-2")
	r3 := stream(t, chat, chatBody(long+"second", 3)) // no X-Request-Id; hits the cache
	r4 := stream(t, chat, chatBody("x", 2), "X-Request-Id", "req-4", FaultHeader, "http_500")
	r5 := stream(t, comp, completionBody("cut", 6), "X-Request-Id", "req-5", FaultHeader, "reset:2")
	longID := strings.Repeat("z", 300)
	r7 := stream(t, chat, chatBody("bad", -1), "X-Request-Id", longID)

	// An abandoned stream: the client leaves during a stall after one token.
	req, _ := http.NewRequest(http.MethodPost, chat, strings.NewReader(mustJSON(chatBody("leave", 5))))
	req.Header.Set("X-Request-Id", "req-6")
	req.Header.Set(FaultHeader, "stall:1:5s")
	resp, err := testClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(resp.Body)
	var id6 string
	for events := 0; events < 2; { // the role delta, then the first token
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("abandoned stream: %v", err)
		}
		if p, ok := strings.CutPrefix(strings.TrimSpace(line), "data: "); ok {
			var c chunk
			_ = json.Unmarshal([]byte(p), &c)
			id6 = c.ID
			events++
		}
	}
	resp.Body.Close()

	if !r1.done || code2 != 200 || !r3.done || r4.status != 500 || r5.readErr == nil || len(r5.tokens) != 2 || r7.status != 400 {
		t.Fatalf("unexpected client results: %v %d %v %d %v/%d %d", r1.done, code2, r3.done, r4.status, r5.readErr, len(r5.tokens), r7.status)
	}
	if r3.usage.cached() == 0 {
		t.Fatalf("the second chat did not hit the prefix cache")
	}
	waitForMetric(t, base, `vllm:num_requests_running{engine="0",model_name="sim-model"}`, 0)
	exposition := scrape(t, base)
	shutdown(t, s)

	entries := readRequestLog(t, path)
	if len(entries) != 7 {
		t.Fatalf("%d lines, want 7: %+v", len(entries), entries)
	}
	byReqID := map[string]RequestLogEntry{}
	for _, e := range entries {
		byReqID[e.XRequestID] = e
	}
	check := func(name string, e RequestLogEntry, want RequestLogEntry) {
		t.Helper()
		if e.ID != want.ID || e.Path != want.Path || e.API != want.API || e.Stream != want.Stream || e.Model != want.Model ||
			e.PromptTokens != want.PromptTokens || e.CachedTokens != want.CachedTokens || e.CompletionTokens != want.CompletionTokens ||
			e.FinishReason != want.FinishReason || e.Status != want.Status || e.Fault != want.Fault {
			t.Errorf("%s: logged\n%+v\nwant\n%+v", name, e, want)
		}
		if (want.Error == "") != (e.Error == "") || !strings.Contains(e.Error, want.Error) {
			t.Errorf("%s: error %q, want %q", name, e.Error, want.Error)
		}
		arrival, _ := time.Parse(time.RFC3339Nano, e.Arrival)
		if arrival.Before(start.Add(-time.Millisecond)) || arrival.After(time.Now()) {
			t.Errorf("%s: arrival %v outside the test (started %v)", name, arrival, start)
		}
		if e.E2ESeconds <= 0 || (e.TTFTSeconds != nil && *e.TTFTSeconds > e.E2ESeconds) {
			t.Errorf("%s: ttft %v, e2e %v", name, e.TTFTSeconds, e.E2ESeconds)
		}
		if (e.TPOTSeconds != nil) != (e.CompletionTokens >= 2) {
			t.Errorf("%s: tpot %v with %d tokens", name, e.TPOTSeconds, e.CompletionTokens)
		}
	}
	chatPath, compPath := "/v1/chat/completions", "/v1/completions"
	check("streamed chat", byReqID["req-1"], RequestLogEntry{ID: r1.chunks[0].ID, Path: chatPath, API: "chat", Stream: true, Model: "sim-model",
		PromptTokens: r1.usage.PromptTokens, CachedTokens: r1.usage.cached(), CompletionTokens: 5, FinishReason: "length", Status: 200})
	check("unary completion", byReqID["req-2"], RequestLogEntry{ID: u2.ID, Path: compPath, API: "completions", Model: "sim-model",
		PromptTokens: u2.Usage.PromptTokens, CompletionTokens: 4, FinishReason: "length", Status: 200})
	check("cached chat", byReqID[""], RequestLogEntry{ID: r3.chunks[0].ID, Path: chatPath, API: "chat", Stream: true, Model: "sim-model",
		PromptTokens: r3.usage.PromptTokens, CachedTokens: r3.usage.cached(), CompletionTokens: 3, FinishReason: "length", Status: 200})
	check("http_500", byReqID["req-4"], RequestLogEntry{Path: chatPath, API: "chat", Stream: true, Model: "sim-model",
		PromptTokens: 8, Status: 500, Fault: "http_500", Error: "simulated fault"})
	check("reset", byReqID["req-5"], RequestLogEntry{ID: r5.chunks[0].ID, Path: compPath, API: "completions", Stream: true, Model: "sim-model",
		PromptTokens: 1, CompletionTokens: 2, Status: 200, Fault: "reset", Error: "connection reset"})
	check("abandoned", byReqID["req-6"], RequestLogEntry{ID: id6, Path: chatPath, API: "chat", Stream: true, Model: "sim-model",
		PromptTokens: 8, CompletionTokens: 1, Status: 200, Fault: "stall", Error: "client went away"})
	check("bad request", byReqID[truncate(longID, maxRequestIDBytes)], RequestLogEntry{Path: chatPath, API: "chat", Stream: true, Model: "sim-model",
		PromptTokens: 0, Status: 400, Error: "max_tokens"})

	// The client's TPOT over the same tokens matches the server's.
	e1 := byReqID["req-1"]
	clientTPOT := r1.tokenAt[4].Sub(r1.tokenAt[0]).Seconds() / 4
	if math.Abs(*e1.TPOTSeconds-clientTPOT) > 0.008 || *e1.TPOTSeconds < 0.009 {
		t.Errorf("tpot %.4fs, client's %.4fs (model: 10ms)", *e1.TPOTSeconds, clientTPOT)
	}
	if c := r1.ttft().Seconds(); *e1.TTFTSeconds > c {
		t.Errorf("server ttft %.4fs longer than the client's %.4fs", *e1.TTFTSeconds, c)
	}

	// The TTFTs are the histogram's observations, the completed requests'
	// e2e latencies too.
	var ttftSum, e2eSum float64
	var ttftN, e2eN int
	for _, e := range entries {
		if e.TTFTSeconds != nil {
			ttftSum += *e.TTFTSeconds
			ttftN++
		}
		if e.FinishReason != "" {
			e2eSum += e.E2ESeconds
			e2eN++
		}
	}
	const l = `{engine="0",model_name="sim-model"}`
	for _, c := range []struct {
		series string
		got    float64
	}{
		{"vllm:time_to_first_token_seconds_sum" + l, ttftSum},
		{"vllm:time_to_first_token_seconds_count" + l, float64(ttftN)},
		{"vllm:e2e_request_latency_seconds_sum" + l, e2eSum},
		{"vllm:e2e_request_latency_seconds_count" + l, float64(e2eN)},
	} {
		if want := metricValue(t, exposition, c.series); math.Abs(c.got-want) > 1e-9*math.Max(1, want) {
			t.Errorf("%s = %v, the log's %v", c.series, want, c.got)
		}
	}
	if ttftN != 5 || e2eN != 3 {
		t.Errorf("%d lines with a TTFT (want 5), %d completed (want 3)", ttftN, e2eN)
	}
	if v := metricValue(t, exposition, `llmprobe_sim_request_log_dropped_total{model_name="sim-model"}`); v != 0 {
		t.Errorf("%v lines dropped", v)
	}
}

func TestRequestLogConcurrent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "requests.jsonl")
	cfg := zeroConfig()
	cfg.MaxNumSeqs = 16
	cfg.RequestLog = path
	base, s := startSim(t, cfg)

	const clients, each = 16, 6
	type sent struct {
		id     string
		tokens int
	}
	var mu sync.Mutex
	got := map[string]sent{}
	var wg sync.WaitGroup
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				rid := fmt.Sprintf("c%d-%d", c, i)
				n := 1 + (c+i)%7
				var v sent
				if i%2 == 0 {
					r := stream(t, base+"/v1/completions", completionBody("concurrent "+rid, n), "X-Request-Id", rid)
					if !r.done || len(r.chunks) == 0 {
						t.Errorf("%s: stream failed: %v", rid, r.readErr)
						return
					}
					v = sent{r.chunks[0].ID, len(r.tokens)}
				} else {
					code, u := unary(t, base+"/v1/chat/completions", chatBody("concurrent "+rid, n), "X-Request-Id", rid)
					if code != 200 {
						t.Errorf("%s: status %d", rid, code)
						return
					}
					v = sent{u.ID, u.Usage.CompletionTokens}
				}
				mu.Lock()
				got[rid] = v
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	shutdown(t, s)

	entries := readRequestLog(t, path)
	if len(entries) != clients*each {
		t.Fatalf("%d lines, want %d", len(entries), clients*each)
	}
	ids := map[string]bool{}
	for _, e := range entries {
		want, ok := got[e.XRequestID]
		if !ok {
			t.Errorf("line for unknown request %q", e.XRequestID)
			continue
		}
		delete(got, e.XRequestID)
		if e.ID != want.id || e.CompletionTokens != want.tokens || e.Status != 200 || e.FinishReason != "length" {
			t.Errorf("%s: logged id %q, %d tokens, status %d; client saw %q, %d tokens", e.XRequestID, e.ID, e.CompletionTokens, e.Status, want.id, want.tokens)
		}
		if ids[e.ID] {
			t.Errorf("id %s logged twice", e.ID)
		}
		ids[e.ID] = true
	}
	if len(got) != 0 {
		t.Errorf("%d requests not logged", len(got))
	}
}

// TestRequestLogFlushesWhileServing checks that lines reach the file
// while the server runs, not only on shutdown, and that a line for a
// request still being answered at Shutdown is written before the file
// closes.
func TestRequestLogFlushesWhileServing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "requests.jsonl")
	cfg := zeroConfig()
	cfg.RequestLog = path
	base, s := startSim(t, cfg)
	stream(t, base+"/v1/completions", completionBody("one", 2), "X-Request-Id", "early")
	deadline := time.Now().Add(3 * time.Second)
	for {
		data, _ := os.ReadFile(path)
		if bytes.Count(data, []byte{'\n'}) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the line was not written within 3s (file: %q)", data)
		}
		time.Sleep(10 * time.Millisecond)
	}

	// A stalled response, still being answered when Shutdown's context
	// ends (stopping the engine ends the stall).
	done := make(chan struct{})
	go func() {
		defer close(done)
		req, _ := http.NewRequest(http.MethodPost, base+"/v1/completions", strings.NewReader(mustJSON(completionBody("two", 2))))
		req.Header.Set("X-Request-Id", "late")
		req.Header.Set(FaultHeader, "stall_first:10s")
		if resp, err := testClient.Do(req); err == nil { // the connection may be closed first
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
	waitForMetric(t, base, `vllm:num_requests_running{engine="0",model_name="sim-model"}`, 0)
	time.Sleep(50 * time.Millisecond) // the request is in its stall
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_ = s.Shutdown(ctx)
	<-done
	entries := readRequestLog(t, path)
	if len(entries) != 2 || entries[0].XRequestID != "early" || entries[1].XRequestID != "late" || entries[1].Fault != "stall_first" {
		t.Errorf("log after shutdown: %+v", entries)
	}
}

// captureHandler records log records.
type captureHandler struct {
	mu      sync.Mutex
	records []slog.Record
}

func (h *captureHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *captureHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	h.records = append(h.records, r)
	h.mu.Unlock()
	return nil
}
func (h *captureHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *captureHandler) WithGroup(string) slog.Handler      { return h }

func (h *captureHandler) count(level slog.Level, msgPart string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, r := range h.records {
		if r.Level == level && strings.Contains(r.Message, msgPart) {
			n++
		}
	}
	return n
}

func TestRequestLogWriteErrorLoggedOnce(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full")
	}
	cfg := zeroConfig()
	cfg.RequestLog = "/dev/full" // every write fails with ENOSPC
	h := &captureHandler{}
	s, base, err := Listen("127.0.0.1:0", cfg, slog.New(h))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(context.Background())
	const n = 3
	for i := 0; i < n; i++ {
		stream(t, base+"/v1/completions", completionBody("full", 2))
		time.Sleep(2 * requestLogFlushInterval) // one failed write each
	}
	series := `llmprobe_sim_request_log_dropped_total{model_name="sim-model"}`
	waitForMetric(t, base, series, n)
	shutdown(t, s)
	if got := h.count(slog.LevelError, "writing the request log failed"); got != 1 {
		t.Errorf("write error logged %d times, want once", got)
	}
	if got := h.count(slog.LevelWarn, "request log incomplete"); got != 1 {
		t.Errorf("summary at close logged %d times, want once", got)
	}
}

func TestRequestLogOpenError(t *testing.T) {
	cfg := zeroConfig()
	cfg.RequestLog = filepath.Join(t.TempDir(), "missing-dir", "requests.jsonl")
	_, err := New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err == nil || !strings.HasPrefix(err.Error(), "request_log: ") || !strings.Contains(err.Error(), "missing-dir") {
		t.Errorf("New with an unwritable request_log: %v", err)
	}
	cfg.RequestLog = "bad\x00path"
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "request_log:") {
		t.Errorf("NUL in request_log: %v", err)
	}
}

func TestRequestLogYAML(t *testing.T) {
	cfg, err := parseConfig([]byte("request_log: /tmp/requests.jsonl\n"))
	if err != nil || cfg.RequestLog != "/tmp/requests.jsonl" {
		t.Errorf("request_log: %v, %q", err, cfg.RequestLog)
	}
}

// TestRequestLogTTFA: a streamed response with reasoning logs the instant
// its first answer token went out, on the clock of ttft_seconds, in every
// API that reasons; without reasoning the field is absent. Three
// reasoning tokens come between the first token and the answer: the
// engine's absolute deadlines may shorten one of those steps by what the
// one before overslept, and the handler may flush the first token late,
// so the gap is at least one step; and the server's flush of the answer
// comes before the client reads it (the server stamps the instant right
// after the write; 5 ms covers that stamp running late).
func TestRequestLogTTFA(t *testing.T) {
	dir := t.TempDir()
	cfg := DefaultConfig()
	cfg.EOSProbability = 0
	cfg.ReasoningTokens = 3
	cfg.DecodeBase, cfg.DecodePerSeq = 20*time.Millisecond, 0
	cfg.RequestLog = filepath.Join(dir, "requests.jsonl")
	base, s := startSim(t, cfg)
	// The Messages API wants max_tokens above a budget of 1024: a fast
	// decode for it.
	fast := cfg
	fast.DecodeBase = time.Millisecond
	fast.RequestLog = filepath.Join(dir, "messages.jsonl")
	fastBase, fs := startSim(t, fast)

	r := stream(t, base+"/v1/chat/completions", chatBody("think first", 6), "X-Request-Id", "chat")
	if !r.done || r.reasoning != 3 || len(r.tokenAt) != 6 {
		t.Fatalf("chat: %d tokens, %d reasoning, done %v", len(r.tokenAt), r.reasoning, r.done)
	}
	clientTTFA := r.tokenAt[3].Sub(r.start)
	rs := streamNamed(t, base+"/v1/responses", responsesBody("think first", 6, "stream", true, "reasoning", map[string]any{"effort": "medium"}), "X-Request-Id", "responses")
	plain := stream(t, base+"/v1/chat/completions", chatBody("answer now", 4, "reasoning_effort", "none"), "X-Request-Id", "plain")
	ms := streamNamed(t, fastBase+"/v1/messages", messagesBody("think first", 1030, "stream", true,
		"thinking", map[string]any{"type": "enabled", "budget_tokens": 1024}), append([]string{"X-Request-Id", "messages"}, anthropicHeaders...)...)
	if ms.status != 200 || rs.status != 200 || !plain.done {
		t.Fatalf("messages %d, responses %d, plain done %v", ms.status, rs.status, plain.done)
	}
	shutdown(t, s)
	shutdown(t, fs)

	byID := map[string]RequestLogEntry{}
	for _, e := range append(readRequestLog(t, cfg.RequestLog), readRequestLog(t, fast.RequestLog)...) {
		byID[e.XRequestID] = e
	}
	for _, id := range []string{"chat", "responses", "messages"} {
		e := byID[id]
		if e.TTFTSeconds == nil || e.TTFASeconds == nil || e.ReasoningTokens != 3 {
			t.Errorf("%s: ttft %v ttfa %v reasoning %d, want both with 3 reasoning tokens", id, e.TTFTSeconds, e.TTFASeconds, e.ReasoningTokens)
			continue
		}
		step := cfg.DecodeBase
		if id == "messages" {
			step = fast.DecodeBase
		}
		if gap := time.Duration((*e.TTFASeconds - *e.TTFTSeconds) * float64(time.Second)); gap < step || *e.TTFASeconds > e.E2ESeconds {
			t.Errorf("%s: ttfa %.4fs is %v after ttft %.4fs (e2e %.4fs), want at least a decode step (%v) after and within the response",
				id, *e.TTFASeconds, gap, *e.TTFTSeconds, e.E2ESeconds, step)
		}
	}
	if e := byID["chat"]; e.TTFASeconds != nil {
		if got := time.Duration(*e.TTFASeconds * float64(time.Second)); got > clientTTFA+5*time.Millisecond {
			t.Errorf("chat: the server logged the answer %v after arrival, the client read it %v after sending", got, clientTTFA)
		}
	}
	if e, ok := byID["plain"]; !ok || e.TTFASeconds != nil || e.ReasoningTokens != 0 {
		t.Errorf("no reasoning: %+v, want no ttfa_seconds", e)
	}
}
