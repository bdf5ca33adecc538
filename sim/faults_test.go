// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestFaultHeader(t *testing.T) {
	base, _ := startSim(t, zeroConfig())
	chat := base + "/v1/chat/completions"

	t.Run("http errors", func(t *testing.T) {
		for _, tt := range []struct {
			value  string
			status int
			code   string
		}{
			{"http_500", 500, "internal_error"},
			{"HTTP_503", 503, "service_unavailable"},
			{" http_429 ", 429, "rate_limit_exceeded"},
		} {
			r := stream(t, chat, chatBody("hi", 4), FaultHeader, tt.value)
			if r.status != tt.status {
				t.Errorf("%s: status %d, want %d", tt.value, r.status, tt.status)
				continue
			}
			e := decodeError(t, r.errorBody)
			if e.Error.Code == nil || *e.Error.Code != tt.code {
				t.Errorf("%s: error %+v, want code %s", tt.value, e.Error, tt.code)
			}
			if tt.status == 429 && r.header.Get("Retry-After") != "1" {
				t.Errorf("429 Retry-After = %q, want 1", r.header.Get("Retry-After"))
			}
		}
	})

	t.Run("reset", func(t *testing.T) {
		r := stream(t, chat, chatBody("hi", 10), FaultHeader, "reset:3")
		if r.status != 200 || len(r.tokens) != 3 || r.readErr == nil || r.done {
			t.Errorf("reset:3: status %d, %d tokens, read error %v, done %v", r.status, len(r.tokens), r.readErr, r.done)
		}
		// reset:0 on completions: a 200 that breaks before any token.
		r = stream(t, base+"/v1/completions", completionBody("hi", 10), FaultHeader, "reset:0")
		if r.status != 200 || len(r.tokens) != 0 || r.readErr == nil {
			t.Errorf("reset:0: status %d, %d tokens, read error %v", r.status, len(r.tokens), r.readErr)
		}
		// More than the tokens generated: fires after the last one.
		r = stream(t, chat, chatBody("hi", 4), FaultHeader, "reset:100")
		if len(r.tokens) != 4 || r.readErr == nil || r.done || r.usage != nil {
			t.Errorf("reset:100 with 4 tokens: %d tokens, read error %v, done %v", len(r.tokens), r.readErr, r.done)
		}
		// The server is fine afterwards.
		if r := stream(t, chat, chatBody("hi", 2)); !r.done {
			t.Errorf("request after a reset failed: %v", r.readErr)
		}
	})

	t.Run("stall_first", func(t *testing.T) {
		r := stream(t, chat, chatBody("hi", 3), FaultHeader, "stall_first:300ms")
		if !r.done || r.ttft() < 300*time.Millisecond {
			t.Errorf("stall_first:300ms: done %v, TTFT %v", r.done, r.ttft())
		}
	})

	t.Run("stall", func(t *testing.T) {
		r := stream(t, chat, chatBody("hi", 5), FaultHeader, "stall:2:300ms")
		if !r.done || len(r.tokenAt) != 5 {
			t.Fatalf("done %v, %d tokens", r.done, len(r.tokenAt))
		}
		// The client may read token 2 late, so the gap it sees can be a
		// little shorter than the stall; token 3 cannot come early.
		if gap := r.tokenAt[2].Sub(r.tokenAt[1]); gap < 200*time.Millisecond || r.tokenAt[2].Sub(r.start) < 300*time.Millisecond {
			t.Errorf("gap after token 2 = %v, token 3 at %v; want a 300ms stall", gap, r.tokenAt[2].Sub(r.start))
		}
		// The stall is between tokens 2 and 3, not before the first: the
		// first comes well before token 3 (a bound on TTFT itself failed
		// when a busy machine delayed the first token).
		if d := r.tokenAt[2].Sub(r.tokenAt[0]); d < 200*time.Millisecond {
			t.Errorf("TTFT %v, token 3 only %v after the first: the stall came too early", r.ttft(), d)
		}
	})

	t.Run("malformed", func(t *testing.T) {
		r := stream(t, chat, chatBody("hi", 5), FaultHeader, "malformed:2")
		if !r.done || len(r.malformed) != 1 || r.malformed[0] != 3 || len(r.tokens) != 5 || r.usage == nil || r.usage.CompletionTokens != 5 {
			t.Errorf("malformed:2: done %v, malformed events %v, tokens %d, usage %+v", r.done, r.malformed, len(r.tokens), r.usage)
		}
		if len(r.malformed) == 1 && !strings.HasPrefix(r.events[r.malformed[0]], "{") {
			t.Errorf("malformed event %q does not start like JSON", r.events[r.malformed[0]])
		}
	})

	t.Run("no_done", func(t *testing.T) {
		r := stream(t, chat, chatBody("hi", 6), FaultHeader, "no_done:2")
		if r.status != 200 || r.readErr != nil || r.done || len(r.tokens) != 2 || r.usage != nil || r.finish != "" {
			t.Errorf("no_done:2: read error %v, done %v, %d tokens, usage %+v, finish %q", r.readErr, r.done, len(r.tokens), r.usage, r.finish)
		}
	})

	t.Run("empty", func(t *testing.T) {
		r := stream(t, chat, chatBody("hi", 6), FaultHeader, "empty")
		if !r.done || !r.roleFirst || len(r.tokens) != 0 || r.finish != "stop" || r.usage == nil || r.usage.CompletionTokens != 0 || len(r.events) != 4 {
			t.Errorf("empty: done %v, role first %v, tokens %d, finish %q, usage %+v, events %q", r.done, r.roleFirst, len(r.tokens), r.finish, r.usage, r.events)
		}
	})

	t.Run("invalid values", func(t *testing.T) {
		for _, v := range []string{"bogus", "reset", "reset:x", "reset:-1", "stall:1", "stall:1:forever", "stall_first", "stall_first:-1s", "http_500:3", "empty:1", ""} {
			r := stream(t, chat, chatBody("hi", 2), FaultHeader, v)
			if r.status != 400 {
				t.Errorf("%q: status %d, want 400", v, r.status)
				continue
			}
			e := decodeError(t, r.errorBody)
			if !strings.Contains(e.Error.Message, FaultHeader) || (v != "" && !strings.Contains(e.Error.Message, v)) {
				t.Errorf("%q: message %q does not name the header and the value", v, e.Error.Message)
			}
		}
	})
}

func TestFaultHeaderNonStreaming(t *testing.T) {
	base, _ := startSim(t, zeroConfig())
	url := base + "/v1/chat/completions"
	body := map[string]any{"messages": []map[string]string{{"role": "user", "content": "hi"}}, "max_tokens": 4}
	do := func(fault string) (*http.Response, []byte, error) {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(mustJSON(body)))
		req.Header.Set(FaultHeader, fault)
		resp, err := testClient.Do(req)
		if err != nil {
			return nil, nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp, b, err
	}
	if _, _, err := do("reset:1"); err == nil {
		t.Error("reset: the request succeeded")
	}
	resp, b, err := do("malformed:1")
	if err != nil || resp.StatusCode != 200 || json.Valid(b) {
		t.Errorf("malformed: err %v status %v valid JSON %v", err, resp, json.Valid(b))
	}
	start := time.Now()
	resp, b, err = do("stall_first:200ms")
	if err != nil || resp.StatusCode != 200 || !json.Valid(b) || time.Since(start) < 200*time.Millisecond {
		t.Errorf("stall_first: err %v, took %v", err, time.Since(start))
	}
	resp, _, err = do("no_done:1")
	if err != nil || resp.StatusCode != 400 {
		t.Errorf("no_done on a non-streaming request: err %v, status %v; want 400", err, resp)
	}
	resp, b, err = do("empty")
	if err != nil || resp.StatusCode != 200 || !strings.Contains(string(b), `"content":""`) || !strings.Contains(string(b), `"completion_tokens":0`) {
		t.Errorf("empty: err %v body %s", err, b)
	}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func TestConfiguredFaults(t *testing.T) {
	t.Run("always", func(t *testing.T) {
		cfg := zeroConfig()
		cfg.Faults.Reset = FaultSpec{Probability: 1, AfterTokens: 2}
		base, _ := startSim(t, cfg)
		for i := 0; i < 3; i++ {
			r := stream(t, base+"/v1/chat/completions", chatBody("hi", 8))
			if len(r.tokens) != 2 || r.readErr == nil {
				t.Errorf("reset with probability 1: %d tokens, read error %v", len(r.tokens), r.readErr)
			}
		}
		// A header overrides the configured draw.
		if r := stream(t, base+"/v1/chat/completions", chatBody("hi", 3), FaultHeader, "empty"); !r.done {
			t.Errorf("header fault: %v", r.readErr)
		}
		if m := scrape(t, base); !strings.Contains(m, `llmprobe_sim_faults_injected_total{fault="reset",model_name="sim-model"} 3`) ||
			!strings.Contains(m, `llmprobe_sim_faults_injected_total{fault="empty",model_name="sim-model"} 1`) {
			t.Errorf("fault counters:\n%s", grepLines(m, "faults_injected"))
		}
	})
	t.Run("mixed", func(t *testing.T) {
		cfg := zeroConfig()
		cfg.Seed = 7
		cfg.Faults.HTTP503.Probability = 0.25
		cfg.Faults.HTTP429 = FaultSpec{Probability: 0.25, RetryAfter: 3 * time.Second}
		base, _ := startSim(t, cfg)
		counts := map[int]int{}
		for i := 0; i < 80; i++ {
			r := stream(t, base+"/v1/completions", completionBody("x", 1))
			counts[r.status]++
			if r.status == 429 && r.header.Get("Retry-After") != "3" {
				t.Errorf("Retry-After %q, want 3", r.header.Get("Retry-After"))
			}
		}
		// Each outcome has probability 1/4 or 1/2: far from 0 and 80.
		if counts[503] < 5 || counts[429] < 5 || counts[200] < 20 || counts[503]+counts[429]+counts[200] != 80 {
			t.Errorf("status counts %v for probabilities 503: 0.25, 429: 0.25", counts)
		}
	})
}

func TestParseFaultHeader(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want fault
	}{
		{"http_429", fault{kind: faultHTTP429, retryAfter: time.Second}},
		{"RESET:7", fault{kind: faultReset, after: 7}},
		{"stall:0:1.5s", fault{kind: faultStall, duration: 1500 * time.Millisecond}},
		{"Stall_First:250MS", fault{kind: faultStallFirst, duration: 250 * time.Millisecond}},
		{"no_done:3", fault{kind: faultNoDone, after: 3}},
		{"malformed:0", fault{kind: faultMalformed}},
	} {
		got, err := parseFaultHeader(tt.in, time.Second)
		if err != nil || got != tt.want {
			t.Errorf("parseFaultHeader(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
		}
	}
	long := strings.Repeat("x", 1000)
	_, err := parseFaultHeader(long, time.Second)
	if err == nil || len(err.Error()) > 400 {
		t.Errorf("long value: error %v (should be short)", err)
	}
	if got := fmt.Sprint(faultKindNames()); got != "[http_500 http_503 http_429 reset stall_first stall malformed no_done empty]" {
		t.Errorf("fault kinds %s", got)
	}
}
