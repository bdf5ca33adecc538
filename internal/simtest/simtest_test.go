// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package simtest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/llmprobe/llmprobe/sim"
)

func ptr(v float64) *float64 { return &v }

// TestCheck: a client instant may trail the server's by up to Late and
// precede it by up to Early; beyond either, or a first answer the server
// never logged, is an error naming the event.
func TestCheck(t *testing.T) {
	e := sim.RequestLogEntry{ID: "chatcmpl-1", TTFTSeconds: ptr(0.040), TPOTSeconds: ptr(0.010), TTFASeconds: ptr(0.070), CompletionTokens: 6, ReasoningTokens: 3}
	s := Slack{Early: time.Millisecond, Late: 10 * time.Millisecond}
	ms := time.Millisecond
	for _, tc := range []struct {
		name string
		got  Timing
		want string // "" for no error
	}{
		{"exact", Timing{TTFT: 40 * ms, TTFA: 70 * ms, Last: 90 * ms}, ""},
		{"late within", Timing{TTFT: 49 * ms, TTFA: 79 * ms, Last: 99 * ms}, ""},
		{"early within", Timing{TTFT: 39500 * time.Microsecond, Last: 90 * ms}, ""},
		{"first token early", Timing{TTFT: 30 * ms, Last: 90 * ms}, "first token at 30ms"},
		{"answer a step early", Timing{TTFT: 40 * ms, TTFA: 60 * ms, Last: 90 * ms}, "first answer token at 60ms"},
		{"answer a step late", Timing{TTFT: 40 * ms, TTFA: 81 * ms, Last: 90 * ms}, "first answer token at 81ms"},
		{"last token late", Timing{TTFT: 40 * ms, Last: 101 * ms}, "last token at 101ms, the server's at 90ms"},
	} {
		err := Check(tc.got, e, s)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.want)
		}
	}
	noAnswer := e
	noAnswer.TTFASeconds = nil
	if err := Check(Timing{TTFT: 40 * ms, TTFA: 70 * ms, Last: 90 * ms}, noAnswer, s); err == nil || !strings.Contains(err.Error(), "logged none") {
		t.Errorf("a first answer the server did not log: %v", err)
	}
	if err := Check(Timing{}, sim.RequestLogEntry{ID: "x", Status: 500}, s); err == nil {
		t.Error("a record without a first token passed")
	}
}

// fakeTB records what Retry tells it; Fatalf stops like t.Fatalf does.
type fakeTB struct {
	testing.TB
	logs  []string
	fatal string
}

type stopped struct{}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Logf(format string, args ...any) {
	f.logs = append(f.logs, fmt.Sprintf(format, args...))
}
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.fatal = fmt.Sprintf(format, args...)
	panic(stopped{})
}

func retry(f *fakeTB, attempts int, measure func(int) (int, string)) (v int) {
	defer func() {
		if r := recover(); r != nil && r != (stopped{}) {
			panic(r)
		}
	}()
	return Retry(f, attempts, measure)
}

// TestRetry: the first trusted attempt is returned; after the last
// untrusted one the test fails with its reason, never with its value.
func TestRetry(t *testing.T) {
	f := &fakeTB{TB: t}
	v := retry(f, 3, func(i int) (int, string) {
		if i < 2 {
			return -1, "harness saturated"
		}
		return i, ""
	})
	if v != 2 || f.fatal != "" || len(f.logs) != 1 {
		t.Errorf("value %d, fatal %q, logs %q; want 2 from the second attempt", v, f.fatal, f.logs)
	}
	f = &fakeTB{TB: t}
	calls := 0
	retry(f, 3, func(i int) (int, string) {
		calls++
		return i, fmt.Sprintf("reason %d", i)
	})
	if calls != 3 || !strings.Contains(f.fatal, "reason 3") {
		t.Errorf("%d calls, fatal %q; want 3 and the last reason", calls, f.fatal)
	}
	// Past its budget, RetryFor starts no new attempt.
	f = &fakeTB{TB: t}
	calls = 0
	func() {
		defer func() {
			if r := recover(); r != nil && r != (stopped{}) {
				panic(r)
			}
		}()
		RetryFor(f, 3, 10*time.Millisecond, func(i int) (int, string) {
			calls++
			time.Sleep(20 * time.Millisecond)
			return i, "slow and untrusted"
		})
	}()
	if calls != 1 || !strings.Contains(f.fatal, "1 attempts") {
		t.Errorf("%d calls, fatal %q; want 1 past the budget", calls, f.fatal)
	}
}

// TestServerRecord: a streamed request's line is found by its response
// id and by its X-Request-Id, and a client's reading of the stream agrees
// with it within the slack the lateness watch gives.
func TestServerRecord(t *testing.T) {
	cfg := sim.DefaultConfig()
	cfg.EOSProbability = 0
	cfg.DecodeBase = 10 * time.Millisecond
	srv := Start(t, cfg)
	lat := WatchLateness(t)
	body := `{"model":"sim-model","messages":[{"role":"user","content":"hi"}],"max_tokens":4,"stream":true}`
	req, err := http.NewRequest(http.MethodPost, srv.URL()+"/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Request-Id", "rec-1")
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got Timing
	var id string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		p, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || p == "[DONE]" {
			continue
		}
		var c struct {
			ID      string `json:"id"`
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(p), &c); err != nil {
			t.Fatal(err)
		}
		id = c.ID
		if len(c.Choices) > 0 && c.Choices[0].Delta.Content != "" {
			at := time.Since(start)
			if got.TTFT == 0 {
				got.TTFT = at
			}
			got.Last = at
		}
	}
	slack := lat.Slack()
	e := srv.Entry(t, id)
	if e.XRequestID != "rec-1" || srv.Entry(t, "rec-1").ID != id || e.CompletionTokens != 4 {
		t.Fatalf("entry %+v for %s", e, id)
	}
	if err := Check(got, e, slack); err != nil {
		t.Error(err)
	}
	if lat.Max() < 0 || slack.Late < 5*time.Millisecond {
		t.Errorf("lateness %v, slack %v", lat.Max(), slack)
	}
}
