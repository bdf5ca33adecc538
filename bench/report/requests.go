// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package report

import (
	"bufio"
	"encoding/json"
	"io"
	"sync"
	"time"

	"github.com/llmprobe/llmprobe/probe/wire"
)

// RequestRecord is one line of the per-request export: what was measured
// of a request, never its prompt or completion text. Durations are in
// seconds; TTFT is null when no token arrived.
type RequestRecord struct {
	Stage        int    `json:"stage"`
	Target       string `json:"target"`
	Class        string `json:"class"`
	Conversation string `json:"conversation,omitempty"`
	Turn         int    `json:"turn,omitempty"`
	// TraceLine is the line of the trace record a replay's request
	// replays (--replay; absent otherwise).
	TraceLine    int       `json:"trace_line,omitempty"`
	Warmup       bool      `json:"warmup,omitempty"`
	Planned      time.Time `json:"planned"`
	Sent         time.Time `json:"sent"`
	ScheduleLag  float64   `json:"schedule_lag_seconds"`
	TTFT         *float64  `json:"ttft_seconds"`
	ITLs         []float64 `json:"itl_seconds"`
	E2E          float64   `json:"e2e_seconds"`
	PromptTokens int       `json:"prompt_tokens"`
	OutputTokens int       `json:"output_tokens"`
	CachedTokens int       `json:"cached_tokens"`
	// UsageReported is false when the token counts are estimates.
	UsageReported bool         `json:"usage_reported"`
	Outcome       wire.Outcome `json:"outcome"`
	ErrorType     string       `json:"error_type,omitempty"`
	StatusCode    int          `json:"status_code,omitempty"`
}

func newRequestRecord(stage int, r *wire.Result) RequestRecord {
	rec := RequestRecord{
		Stage: stage, Target: r.Target, Class: r.Class,
		Conversation: r.ConversationID, TraceLine: r.TraceLine, Warmup: r.Warmup,
		Planned: r.Planned, Sent: r.Dispatched,
		ScheduleLag:  r.ScheduleLag.Seconds(),
		ITLs:         make([]float64, len(r.ITLs)),
		E2E:          r.E2E.Seconds(),
		PromptTokens: r.PromptTokens, OutputTokens: r.OutputTokens, CachedTokens: r.CachedTokens,
		UsageReported: r.UsageReported,
		Outcome:       r.Outcome, ErrorType: r.ErrorType, StatusCode: r.StatusCode,
	}
	if r.ConversationID != "" {
		rec.Turn = r.Turn
	}
	if r.FirstToken {
		v := r.TTFT.Seconds()
		rec.TTFT = &v
	}
	for i, g := range r.ITLs {
		rec.ITLs[i] = g.Seconds()
	}
	return rec
}

// RequestLog streams one JSON line per request (RequestRecord) to a
// writer as results arrive, through a fixed-size buffer: its memory does
// not grow with the run. The first write error is kept (Err) and later
// lines are discarded.
type RequestLog struct {
	mu    sync.Mutex
	w     *bufio.Writer
	lines int
	err   error
}

// NewRequestLog writes to w; call Flush at the end.
func NewRequestLog(w io.Writer) *RequestLog {
	return &RequestLog{w: bufio.NewWriterSize(w, 64<<10)}
}

// Write writes r's line (a request of stage), unless a write failed.
func (l *RequestLog) Write(stage int, r *wire.Result) {
	b, err := json.Marshal(newRequestRecord(stage, r))
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return
	}
	if err != nil {
		l.err = err
		return
	}
	b = append(b, '\n')
	if _, l.err = l.w.Write(b); l.err == nil {
		l.lines++
	}
}

// Flush writes out what is buffered and returns the first error.
func (l *RequestLog) Flush() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err == nil {
		l.err = l.w.Flush()
	}
	return l.err
}

// Lines is the number of lines written so far.
func (l *RequestLog) Lines() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lines
}
