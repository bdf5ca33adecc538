// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestChatStreamFormat(t *testing.T) {
	base, _ := startSim(t, zeroConfig())
	content := "Tell me about continuous batching, in 3 sentences please!"
	r := stream(t, base+"/v1/chat/completions", chatBody(content, 16))
	if r.status != http.StatusOK {
		t.Fatalf("status %d: %s", r.status, r.errorBody)
	}
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Errorf("Content-Type %q, want text/event-stream", ct)
	}
	if r.readErr != nil || !r.done || len(r.malformed) > 0 {
		t.Fatalf("stream not clean: err=%v done=%v malformed=%v", r.readErr, r.done, r.malformed)
	}
	// role event, 16 token events, usage event, [DONE]
	if got, want := len(r.events), 1+16+1+1; got != want {
		t.Fatalf("%d events, want %d:\n%s", got, want, strings.Join(r.events, "\n"))
	}
	first := r.chunks[0]
	if !r.roleFirst || *first.Choices[0].Delta.Role != "assistant" {
		t.Errorf("first event is not the role delta: %s", r.events[0])
	}
	if c := first.Choices[0].Delta.Content; c != nil && *c != "" {
		t.Errorf("role event carries content %q", *c)
	}
	id := first.ID
	if !strings.HasPrefix(id, "chatcmpl-") {
		t.Errorf("id %q lacks the chatcmpl- prefix", id)
	}
	for i, c := range r.chunks[:len(r.chunks)-1] {
		if c.ID != id || c.Object != "chat.completion.chunk" || c.Model != "sim-model" || c.Created == 0 {
			t.Errorf("event %d: id/object/model/created = %q/%q/%q/%d", i, c.ID, c.Object, c.Model, c.Created)
		}
		if i < len(r.chunks)-2 {
			if len(c.Choices) != 1 || c.Choices[0].Index != 0 || string(c.Choices[0].Logprobs) != "null" {
				t.Errorf("event %d: bad choices: %s", i, r.events[i])
			}
			if c.Usage != nil {
				t.Errorf("event %d carries usage without continuous_usage_stats", i)
			}
			wantFinish := i == 16
			if got := c.Choices[0].FinishReason != nil; got != wantFinish {
				t.Errorf("event %d: finish_reason present=%v, want %v", i, got, wantFinish)
			}
		}
	}
	if r.finish != "length" {
		t.Errorf("finish_reason %q, want length", r.finish)
	}
	last := r.chunks[len(r.chunks)-2]
	if len(last.Choices) != 0 || last.Usage == nil {
		t.Fatalf("usage event: %s", r.events[len(r.events)-2])
	}
	u := r.usage
	if u.CompletionTokens != len(r.tokens) || u.CompletionTokens != 16 {
		t.Errorf("completion_tokens %d, streamed tokens %d, want 16", u.CompletionTokens, len(r.tokens))
	}
	wantPrompt := CountChatTokens([]ChatMessage{{Role: "user", Content: content}}, true)
	if u.PromptTokens != wantPrompt {
		t.Errorf("prompt_tokens %d, want %d", u.PromptTokens, wantPrompt)
	}
	if u.TotalTokens != u.PromptTokens+u.CompletionTokens || u.cached() != 0 {
		t.Errorf("total_tokens %d, cached %d", u.TotalTokens, u.cached())
	}
	// Every token is " word", so the text re-tokenises to completion_tokens.
	for _, tok := range r.tokens {
		if len(tok) < 2 || tok[0] != ' ' || CountTokens(tok) != 1 {
			t.Errorf("token %q is not a single-token word with a leading space", tok)
		}
	}
	if n := CountTokens(r.text()); n != u.CompletionTokens {
		t.Errorf("completion text re-tokenises to %d tokens, want %d", n, u.CompletionTokens)
	}
}

func TestCompletionsStreamFormat(t *testing.T) {
	base, _ := startSim(t, zeroConfig())
	r := stream(t, base+"/v1/completions", completionBody("The capital of France is", 8))
	if r.status != http.StatusOK || r.readErr != nil || !r.done || len(r.malformed) > 0 {
		t.Fatalf("status %d err %v done %v malformed %v body %s", r.status, r.readErr, r.done, r.malformed, r.errorBody)
	}
	if got, want := len(r.events), 8+1+1; got != want {
		t.Fatalf("%d events, want %d", got, want)
	}
	for i, c := range r.chunks[:8] {
		if c.Object != "text_completion" || !strings.HasPrefix(c.ID, "cmpl-") || c.Choices[0].Text == nil {
			t.Errorf("event %d: %s", i, r.events[i])
		}
	}
	if r.finish != "length" || r.usage.CompletionTokens != 8 || len(r.tokens) != 8 {
		t.Errorf("finish %q, completion_tokens %d, tokens %d", r.finish, r.usage.CompletionTokens, len(r.tokens))
	}
	if r.usage.PromptTokens != CountTokens("The capital of France is") {
		t.Errorf("prompt_tokens %d, want %d", r.usage.PromptTokens, CountTokens("The capital of France is"))
	}
}

func TestNonStreaming(t *testing.T) {
	base, _ := startSim(t, zeroConfig())
	t.Run("chat", func(t *testing.T) {
		body := chatBody("hello there", 12)
		delete(body, "stream")
		delete(body, "stream_options")
		resp := post(t, base+"/v1/chat/completions", body)
		defer resp.Body.Close()
		var out struct {
			ID      string `json:"id"`
			Object  string `json:"object"`
			Model   string `json:"model"`
			Choices []struct {
				Message struct {
					Role    string `json:"role"`
					Content string `json:"content"`
				} `json:"message"`
				FinishReason string `json:"finish_reason"`
			} `json:"choices"`
			Usage usage `json:"usage"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 200 {
			t.Fatalf("status %d, decode: %v", resp.StatusCode, err)
		}
		if out.Object != "chat.completion" || !strings.HasPrefix(out.ID, "chatcmpl-") || out.Model != "sim-model" {
			t.Errorf("object %q id %q model %q", out.Object, out.ID, out.Model)
		}
		c := out.Choices[0]
		if c.Message.Role != "assistant" || c.FinishReason != "length" || CountTokens(c.Message.Content) != 12 {
			t.Errorf("choice %+v", c)
		}
		if out.Usage.CompletionTokens != 12 || out.Usage.PromptTokens != CountTokens("hello there")+7 || out.Usage.cached() != 0 {
			t.Errorf("usage %+v", out.Usage)
		}
	})
	t.Run("completions", func(t *testing.T) {
		resp := post(t, base+"/v1/completions", map[string]any{"prompt": []int{1, 2, 3, 31999}, "max_tokens": 5})
		defer resp.Body.Close()
		var out struct {
			Object  string `json:"object"`
			Choices []struct {
				Text         string `json:"text"`
				FinishReason string `json:"finish_reason"`
			} `json:"choices"`
			Usage usage `json:"usage"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 200 {
			t.Fatalf("status %d, decode: %v", resp.StatusCode, err)
		}
		if out.Object != "text_completion" || CountTokens(out.Choices[0].Text) != 5 || out.Usage.PromptTokens != 4 || out.Usage.CompletionTokens != 5 {
			t.Errorf("%+v", out)
		}
	})
}

func TestContinuousUsageStats(t *testing.T) {
	base, _ := startSim(t, zeroConfig())
	body := chatBody("count with me", 6)
	body["stream_options"] = map[string]any{"include_usage": true, "continuous_usage_stats": true}
	r := stream(t, base+"/v1/chat/completions", body)
	if !r.done {
		t.Fatalf("no [DONE]: %v %s", r.readErr, r.errorBody)
	}
	for i, c := range r.chunks[:len(r.chunks)-1] {
		if c.Usage == nil {
			t.Fatalf("event %d has no usage: %s", i, r.events[i])
		}
		want := min(i, 6) // role event: 0, then 1..6, then the final usage
		if c.Usage.CompletionTokens != want || c.Usage.PromptTokens != r.usage.PromptTokens {
			t.Errorf("event %d: completion_tokens %d, want %d", i, c.Usage.CompletionTokens, want)
		}
	}
}

func TestTokenizeMatchesUsage(t *testing.T) {
	base, _ := startSim(t, zeroConfig())
	texts := []string{
		"a",
		"Hello, world!",
		"supercalifragilistic 1234567 ünïcödé  \t\n tabs",
		"multi\nline\n\n  text with    spaces and 3.14159 and $100,000.00",
		strings.Repeat("token ", 300),
	}
	for _, text := range texts {
		resp := post(t, base+"/tokenize", map[string]any{"model": "sim-model", "prompt": text})
		var tok struct {
			Count       int   `json:"count"`
			MaxModelLen int   `json:"max_model_len"`
			Tokens      []int `json:"tokens"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&tok); err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if tok.Count != CountTokens(text) || len(tok.Tokens) != tok.Count || tok.MaxModelLen != 8192 {
			t.Errorf("tokenize %q: count %d, %d ids, want %d", text, tok.Count, len(tok.Tokens), CountTokens(text))
		}
		r := stream(t, base+"/v1/completions", completionBody(text, 1))
		if r.usage == nil || r.usage.PromptTokens != tok.Count {
			t.Errorf("completions usage for %q: %+v, /tokenize says %d", text, r.usage, tok.Count)
		}
		// The same ids as a token-id prompt count the same.
		r = stream(t, base+"/v1/completions", completionBody(tok.Tokens, 1))
		if r.usage == nil || r.usage.PromptTokens != tok.Count {
			t.Errorf("token-id prompt usage: %+v, want %d", r.usage, tok.Count)
		}
	}

	messages := []map[string]any{
		{"role": "system", "content": "You are terse."},
		{"role": "user", "content": []map[string]any{{"type": "text", "text": "Part one."}, {"type": "text", "text": "Part two!"}}},
		{"role": "assistant", "content": nil},
		{"role": "user", "content": "And now?"},
	}
	for _, addGen := range []bool{true, false} {
		resp := post(t, base+"/tokenize", map[string]any{"messages": messages, "add_generation_prompt": addGen})
		var tok struct {
			Count  int   `json:"count"`
			Tokens []int `json:"tokens"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&tok); err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		want := CountTokens("You are terse.") + CountTokens("Part one.") + CountTokens("Part two!") + CountTokens("And now?") + 4*4
		if addGen {
			want += 3
		}
		if tok.Count != want || len(tok.Tokens) != want {
			t.Errorf("add_generation_prompt=%v: count %d (%d ids), want %d", addGen, tok.Count, len(tok.Tokens), want)
		}
		if addGen {
			r := stream(t, base+"/v1/chat/completions", map[string]any{"messages": messages, "max_tokens": 1, "stream": true, "stream_options": map[string]any{"include_usage": true}})
			if r.usage == nil || r.usage.PromptTokens != tok.Count {
				t.Errorf("chat usage %+v, /tokenize says %d", r.usage, tok.Count)
			}
		}
	}
}

func TestModelsHealthAndRouting(t *testing.T) {
	cfg := zeroConfig()
	cfg.Models = []string{"alpha", "beta"}
	base, _ := startSim(t, cfg)

	resp, err := testClient.Get(base + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	var models struct {
		Object string `json:"object"`
		Data   []struct {
			ID     string `json:"id"`
			Object string `json:"object"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&models); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if models.Object != "list" || len(models.Data) != 2 || models.Data[0].ID != "alpha" || models.Data[1].ID != "beta" || models.Data[0].Object != "model" {
		t.Errorf("models: %+v", models)
	}

	resp, err = testClient.Get(base + "/health")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("health: %v %v", err, resp)
	}
	resp.Body.Close()

	// The second model is served; no model means the first.
	r := stream(t, base+"/v1/chat/completions", map[string]any{"model": "beta", "messages": []map[string]string{{"role": "user", "content": "hi"}}, "max_tokens": 2, "stream": true})
	if !r.done || r.chunks[0].Model != "beta" {
		t.Errorf("model beta: done=%v events=%v", r.done, r.events)
	}
	r = stream(t, base+"/v1/chat/completions", map[string]any{"messages": []map[string]string{{"role": "user", "content": "hi"}}, "max_tokens": 2, "stream": true})
	if !r.done || r.chunks[0].Model != "alpha" {
		t.Errorf("no model: done=%v events=%v", r.done, r.events)
	}
}

func TestPrefixCache(t *testing.T) {
	base, _ := startSim(t, zeroConfig())
	rng := rand.New(rand.NewPCG(1, 2))
	randomWords := func(n int) string {
		var b strings.Builder
		for i := 0; i < n; i++ {
			fmt.Fprintf(&b, "w%x ", rng.Uint64())
		}
		return b.String()
	}
	system := "You are a helpful assistant. " + randomWords(100)
	ask := func(user string) *streamResult {
		body := chatBody("", 4)
		body["messages"] = []map[string]any{{"role": "system", "content": system}, {"role": "user", "content": user}}
		r := stream(t, base+"/v1/chat/completions", body)
		if r.usage == nil {
			t.Fatalf("no usage: %s %v", r.errorBody, r.readErr)
		}
		return r
	}
	first := ask("first question " + randomWords(5))
	if c := first.usage.cached(); c != 0 {
		t.Errorf("fresh prompt: cached_tokens %d, want 0", c)
	}
	second := ask("second question " + randomWords(5))
	// Shared: the system message (content + 4 template tokens) and the
	// start of the user message (3 template tokens); its full blocks hit.
	shared := CountTokens(system) + 4 + 3
	if c, want := second.usage.cached(), shared/16*16; c != want {
		t.Errorf("shared system prompt (%d tokens): cached_tokens %d, want %d", shared, c, want)
	}
	other := stream(t, base+"/v1/chat/completions", chatBody(randomWords(200), 4))
	if c := other.usage.cached(); c != 0 {
		t.Errorf("fresh random prompt: cached_tokens %d, want 0", c)
	}
	// The engine's counters agree with usage.
	m := scrape(t, base)
	wantQueries := first.usage.PromptTokens + second.usage.PromptTokens + other.usage.PromptTokens
	if !strings.Contains(m, fmt.Sprintf("vllm:prefix_cache_queries_total{engine=\"0\",model_name=\"sim-model\"} %d\n", wantQueries)) ||
		!strings.Contains(m, fmt.Sprintf("vllm:prefix_cache_hits_total{engine=\"0\",model_name=\"sim-model\"} %d\n", second.usage.cached())) {
		t.Errorf("prefix cache counters do not match usage (queries %d, hits %d):\n%s", wantQueries, second.usage.cached(), grepLines(m, "prefix_cache"))
	}
}

func TestPrefixCacheMultiTurn(t *testing.T) {
	base, _ := startSim(t, zeroConfig())
	user1 := strings.Repeat("alpha beta gamma delta ", 20)
	body := chatBody(user1, 40, "temperature", 0)
	r1 := stream(t, base+"/v1/chat/completions", body)
	if r1.usage == nil {
		t.Fatal("no usage")
	}
	// Turn 2 sends the first answer back: the prompt of turn 1 and the
	// generated tokens are in the cache.
	body2 := chatBody("", 4)
	body2["messages"] = []map[string]any{
		{"role": "user", "content": user1},
		{"role": "assistant", "content": r1.text()},
		{"role": "user", "content": "and then?"},
	}
	r2 := stream(t, base+"/v1/chat/completions", body2)
	turn1 := r1.usage.PromptTokens + r1.usage.CompletionTokens
	if c := r2.usage.cached(); c < turn1-16 || c > turn1 {
		t.Errorf("turn 2: cached_tokens %d, want the full blocks of turn 1's prompt+answer (%d tokens)", c, turn1)
	}
	if want := turn1 + 1 + CountTokens("and then?") + 4 + 3; r2.usage.PromptTokens != want {
		t.Errorf("turn 2 prompt_tokens %d, want %d", r2.usage.PromptTokens, want)
	}
}

func TestPrefixCacheFullHitComputesLastBlock(t *testing.T) {
	base, _ := startSim(t, zeroConfig())
	ids := make([]int, 64) // exactly 4 blocks
	for i := range ids {
		ids[i] = 100 + i
	}
	stream(t, base+"/v1/completions", completionBody(ids, 1))
	r := stream(t, base+"/v1/completions", completionBody(ids, 1))
	if c := r.usage.cached(); c != 48 {
		t.Errorf("identical 64-token prompt: cached_tokens %d, want 48 (the last block is recomputed)", c)
	}
	r = stream(t, base+"/v1/completions", completionBody(append(ids, 7), 1))
	if c := r.usage.cached(); c != 64 {
		t.Errorf("65-token prompt extending a cached 64: cached_tokens %d, want 64", c)
	}
}

func TestPrefixCacheEviction(t *testing.T) {
	cfg := zeroConfig()
	cfg.MaxModelLen = 128
	cfg.NumKVBlocks = 16 // 256 tokens
	base, _ := startSim(t, cfg)
	prompt := func(seed int) []int {
		ids := make([]int, 65)
		for i := range ids {
			ids[i] = (seed*1000 + i) % VocabSize
		}
		return ids
	}
	stream(t, base+"/v1/completions", completionBody(prompt(1), 1))
	if r := stream(t, base+"/v1/completions", completionBody(prompt(1), 1)); r.usage.cached() != 64 {
		t.Fatalf("repeat: cached %d, want 64", r.usage.cached())
	}
	// Four other prompts of 5 blocks each overflow 16 blocks: prompt 1,
	// the least recently used, is evicted.
	for s := 2; s <= 5; s++ {
		stream(t, base+"/v1/completions", completionBody(prompt(s), 1))
	}
	if r := stream(t, base+"/v1/completions", completionBody(prompt(1), 1)); r.usage.cached() != 0 {
		t.Errorf("after eviction: cached %d, want 0", r.usage.cached())
	}
	if r := stream(t, base+"/v1/completions", completionBody(prompt(5), 1)); r.usage.cached() != 64 {
		t.Errorf("most recent prompt: cached %d, want 64", r.usage.cached())
	}
}

func TestEarlyStopAndLimits(t *testing.T) {
	cfg := zeroConfig()
	cfg.EOSProbability = 1 // stop as soon as allowed
	base, _ := startSim(t, cfg)

	r := stream(t, base+"/v1/chat/completions", chatBody("hi", 10))
	if r.finish != "stop" || len(r.tokens) != 0 || r.usage.CompletionTokens != 0 || !r.done {
		t.Errorf("eos: finish %q tokens %d usage %+v", r.finish, len(r.tokens), r.usage)
	}
	r = stream(t, base+"/v1/chat/completions", chatBody("hi", 10, "min_tokens", 4))
	if r.finish != "stop" || len(r.tokens) != 4 || r.usage.CompletionTokens != 4 {
		t.Errorf("min_tokens 4: finish %q tokens %d usage %+v", r.finish, len(r.tokens), r.usage)
	}
	r = stream(t, base+"/v1/chat/completions", chatBody("hi", 10, "ignore_eos", true))
	if r.finish != "length" || len(r.tokens) != 10 || r.usage.CompletionTokens != 10 {
		t.Errorf("ignore_eos: finish %q tokens %d usage %+v", r.finish, len(r.tokens), r.usage)
	}
	// The stop event is separate and carries no text.
	r = stream(t, base+"/v1/completions", completionBody("hi", 3, "min_tokens", 2))
	if r.finish != "stop" || len(r.tokens) != 2 || len(r.events) != 2+1+1+1 {
		t.Errorf("completions stop: finish %q tokens %d events %d", r.finish, len(r.tokens), len(r.events))
	}

	// Without max_tokens: the default, capped by max_model_len.
	cfg = zeroConfig()
	cfg.MaxModelLen = 100
	cfg.NumKVBlocks = 64
	base, _ = startSim(t, cfg)
	body := completionBody(strings.Repeat("x ", 90), 0)
	delete(body, "max_tokens")
	r = stream(t, base+"/v1/completions", body)
	if r.usage == nil || r.usage.CompletionTokens != 10 || r.finish != "length" {
		t.Errorf("default max_tokens near max_model_len: %+v %s", r.usage, r.errorBody)
	}
}

func TestEarlyStopRate(t *testing.T) {
	cfg := zeroConfig()
	cfg.EOSProbability = 0.05
	base, _ := startSim(t, cfg)
	stops, tokens := 0, 0
	for i := 0; i < 40; i++ {
		r := stream(t, base+"/v1/completions", completionBody("go", 50))
		tokens += len(r.tokens)
		if r.finish == "stop" {
			stops++
		}
	}
	// P(stop within 50 tokens) = 1 - 0.95^50 ≈ 0.92.
	if stops < 25 || stops == 40 && tokens == 0 {
		t.Errorf("%d of 40 requests stopped early (%d tokens); want about 37", stops, tokens)
	}
}

func TestReasoningTokens(t *testing.T) {
	cfg := zeroConfig()
	cfg.ReasoningTokens = 3
	base, _ := startSim(t, cfg)
	r := stream(t, base+"/v1/chat/completions", chatBody("think first", 8))
	if r.reasoning != 3 || len(r.tokens) != 8 || r.usage.CompletionTokens != 8 {
		t.Errorf("reasoning %d, tokens %d, usage %+v", r.reasoning, len(r.tokens), r.usage)
	}
	for i, c := range r.chunks[1:4] {
		if d := c.Choices[0].Delta; d.ReasoningContent == nil || d.Content != nil {
			t.Errorf("token %d is not reasoning_content: %s", i, r.events[i+1])
		}
	}
	// Completions have no reasoning channel.
	rc := stream(t, base+"/v1/completions", completionBody("think", 4))
	if rc.reasoning != 0 || len(rc.tokens) != 4 {
		t.Errorf("completions: reasoning %d tokens %d", rc.reasoning, len(rc.tokens))
	}
}

func TestDeterminism(t *testing.T) {
	base, _ := startSim(t, zeroConfig())
	get := func(extra ...any) string {
		return stream(t, base+"/v1/chat/completions", chatBody("same prompt", 12, extra...)).text()
	}
	if a, b := get("temperature", 0), get("temperature", 0); a != b {
		t.Errorf("temperature 0 differs: %q vs %q", a, b)
	}
	if a, b := get("temperature", 0.7, "seed", 42), get("temperature", 0.7, "seed", 42); a != b {
		t.Errorf("same seed differs: %q vs %q", a, b)
	}
	if a, b := get("temperature", 0.7), get("temperature", 0.7); a == b {
		t.Errorf("temperature 0.7 without seed gave the same 12 words twice: %q", a)
	}
}

func TestServersAreIndependent(t *testing.T) {
	baseA, a := startSim(t, zeroConfig())
	_, b := startSim(t, zeroConfig())
	stream(t, baseA+"/v1/completions", completionBody("one two three", 3))
	count := func(s *Server) float64 {
		mfs, err := s.Registry().Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == "vllm:generation_tokens_total" {
				return mf.GetMetric()[0].GetCounter().GetValue()
			}
		}
		t.Fatal("vllm:generation_tokens_total not found")
		return 0
	}
	if ga, gb := count(a), count(b); ga != 3 || gb != 0 {
		t.Errorf("generation tokens: server A %v (want 3), server B %v (want 0)", ga, gb)
	}
}

func TestHandlerWithoutServe(t *testing.T) {
	s, err := New(zeroConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(t.Context())
	req, _ := http.NewRequest(http.MethodPost, "/v1/completions", strings.NewReader(`{"prompt":"hi","max_tokens":2}`))
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, req)
	body, _ := io.ReadAll(rec.Result().Body)
	if rec.Code != 200 || !strings.Contains(string(body), `"completion_tokens":2`) {
		t.Errorf("status %d body %s", rec.Code, body)
	}
}
