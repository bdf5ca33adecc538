// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package exporter

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/llmprobe/llmprobe/probe/wire"
)

func failedResult(target, model, class string, i int) *wire.Result {
	r := successResult(target, model, class)
	r.Outcome, r.ErrorType, r.StatusCode = wire.OutcomeHTTPError, "http_429", 429
	r.Error = fmt.Sprintf("429 Too Many Requests (failure %d)", i)
	r.FirstToken, r.UsageReported, r.ITLs = false, false, nil
	return r
}

func TestRecentKeepsFailuresLonger(t *testing.T) {
	rec := NewRecent(nil)
	rec.SetConfig(mustConfig(t, testConfigYAML)) // recent_requests: 3

	base := time.Unix(1_700_000_000, 0)
	for i := range 2 {
		f := failedResult("alpha", "model-a", "chat", i)
		f.Dispatched = base.Add(time.Duration(i) * time.Second)
		rec.Observe(f)
	}
	for i := range 5 {
		r := successResult("alpha", "model-a", "agent")
		r.Dispatched = base.Add(time.Duration(10+i) * time.Second)
		r.ConversationID, r.Turn = "conv-1", i+1
		rec.Observe(r)
	}
	recent, failures := rec.Snapshot("alpha")
	if len(recent) != 3 {
		t.Fatalf("%d recent entries, want 3", len(recent))
	}
	for i, e := range recent {
		if want := base.Add(time.Duration(14-i) * time.Second); !e.Time.Equal(want) {
			t.Errorf("recent[%d].Time = %v, want %v (newest first)", i, e.Time, want)
		}
		if e.Outcome != wire.OutcomeSuccess || e.Failed() {
			t.Errorf("recent[%d] = %v, want success", i, e.Outcome)
		}
	}
	e := recent[0]
	if e.Class != "agent" || e.TTFT != 250*time.Millisecond || e.E2E != 620*time.Millisecond || e.PromptTokens != 100 ||
		e.OutputTokens != 16 || e.CachedTokens != 40 || !e.CachedReported || e.UsageEstimated || e.TraceID != testTraceID ||
		e.ConversationID != "conv-1" || e.Turn != 5 || e.ScheduleLag != time.Millisecond || e.StatusCode != 200 {
		t.Errorf("entry = %+v", e)
	}
	// The failures outlived the successes that pushed them out of recent.
	if len(failures) != 2 || failures[0].Error != "429 Too Many Requests (failure 1)" || failures[1].ErrorType != "http_429" || !failures[0].UsageEstimated {
		t.Errorf("failures = %+v", failures)
	}
	if r, f := rec.Snapshot("nope"); r != nil || f != nil {
		t.Errorf("unknown target snapshot = %v, %v", r, f)
	}
}

func TestRecentSetConfig(t *testing.T) {
	rec := NewRecent(nil)
	rec.Observe(successResult("alpha", "model-a", "chat")) // before any config: ignored
	cfg := mustConfig(t, testConfigYAML)
	rec.SetConfig(cfg)
	if r, _ := rec.Snapshot("alpha"); len(r) != 0 {
		t.Fatalf("kept %d entries from before the config", len(r))
	}
	for i := range 3 {
		r := successResult("alpha", "model-a", "chat")
		r.Turn = i
		rec.Observe(r)
		rec.Observe(successResult("beta", "model-b", "ping"))
	}
	rec.Observe(successResult("gamma", "model-a", "chat")) // unknown target

	// Shrink: the newest entry is kept.
	cfg.Global.RecentRequests = 1
	rec.SetConfig(cfg)
	if r, _ := rec.Snapshot("alpha"); len(r) != 1 || r[0].Turn != 2 {
		t.Errorf("after shrinking: %+v, want only the newest (turn 2)", r)
	}
	// Grow: entries kept, room for more.
	cfg.Global.RecentRequests = 4
	rec.SetConfig(cfg)
	for range 2 {
		rec.Observe(successResult("alpha", "model-a", "chat"))
	}
	if r, _ := rec.Snapshot("alpha"); len(r) != 3 || r[2].Turn != 2 {
		t.Errorf("after growing: %d entries, oldest %+v", len(r), r[len(r)-1])
	}
	// Zero keeps nothing.
	cfg.Global.RecentRequests = 0
	rec.SetConfig(cfg)
	rec.Observe(failedResult("alpha", "model-a", "chat", 0))
	if r, f := rec.Snapshot("alpha"); len(r) != 0 || len(f) != 0 {
		t.Errorf("recent_requests 0 kept %d/%d entries", len(r), len(f))
	}
	// A removed target is dropped.
	rec.SetConfig(mustConfig(t, alphaOnlyYAML))
	if r, _ := rec.Snapshot("beta"); r != nil {
		t.Error("removed target beta still has entries")
	}
}

func TestRecentLogsFailuresAtDebug(t *testing.T) {
	var buf bytes.Buffer
	var mu sync.Mutex
	logger := slog.New(slog.NewTextHandler(lockedWriter{&buf, &mu}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	rec := NewRecent(logger)
	rec.SetConfig(mustConfig(t, testConfigYAML))
	rec.Observe(successResult("alpha", "model-a", "chat"))
	f := failedResult("alpha", "model-a", "chat", 7)
	f.Error = "upstream said\nno\x00"
	rec.Observe(f)
	out := buf.String()
	if n := strings.Count(out, "\n"); n != 1 {
		t.Fatalf("logged %d lines, want 1 (the failure only):\n%s", n, out)
	}
	for _, want := range []string{"level=DEBUG", "request failed", "target=alpha", "outcome=http_error", "error_type=http_429", "status_code=429", "trace_id=" + testTraceID} {
		if !strings.Contains(out, want) {
			t.Errorf("log line lacks %q:\n%s", want, out)
		}
	}

	// At info level, nothing is logged.
	buf.Reset()
	quiet := NewRecent(slog.New(slog.NewTextHandler(lockedWriter{&buf, &mu}, &slog.HandlerOptions{Level: slog.LevelInfo})))
	quiet.SetConfig(mustConfig(t, testConfigYAML))
	quiet.Observe(f)
	if buf.Len() != 0 {
		t.Errorf("failure logged at info level: %s", buf.String())
	}
}

type lockedWriter struct {
	b  *bytes.Buffer
	mu *sync.Mutex
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func TestSanitize(t *testing.T) {
	for in, want := range map[string]string{
		"plain message":            "plain message",
		"two\nlines\r\tand\x00nul": "two lines  and nul",
		"bad \xff utf8":            "bad   utf8", // as every sanitised text (internal/scrub)
		"rtl \u202egnp.exe\u0085":  "rtl gnp.exe ",
	} {
		if got := sanitize(in); got != want {
			t.Errorf("sanitize(%q) = %q, want %q", in, got, want)
		}
	}
	long := sanitize(strings.Repeat("é", 2000))
	if len(long) > maxErrorLen || !utf8.ValidString(long) || !strings.HasSuffix(long, "…") {
		t.Errorf("long message: %d bytes, valid %v, suffix %q", len(long), utf8.ValidString(long), long[len(long)-6:])
	}
}

func TestRecentConcurrent(t *testing.T) {
	rec := NewRecent(nil)
	cfg := mustConfig(t, testConfigYAML)
	rec.SetConfig(cfg)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 1000 {
				if i%3 == 0 {
					rec.Observe(failedResult("alpha", "model-a", "chat", i))
				} else {
					rec.Observe(successResult("alpha", "model-a", "chat"))
				}
				if g == 0 && i%100 == 0 {
					rec.Snapshot("alpha")
				}
			}
		}()
	}
	for i := range 20 {
		cfg.Global.RecentRequests = 1 + i%5
		rec.SetConfig(cfg)
	}
	wg.Wait()
	if r, f := rec.Snapshot("alpha"); len(r) == 0 || len(f) == 0 {
		t.Errorf("snapshot after concurrent use: %d recent, %d failures", len(r), len(f))
	}
}

func BenchmarkRecentObserve(b *testing.B) {
	rec := NewRecent(nil)
	rec.SetConfig(mustConfig(b, testConfigYAML))
	ok, failed := successResult("alpha", "model-a", "chat"), failedResult("alpha", "model-a", "chat", 1)
	b.ReportAllocs()
	for b.Loop() {
		rec.Observe(ok)
		rec.Observe(failed)
	}
}
