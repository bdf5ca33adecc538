// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package report

import (
	"bufio"
	"encoding/json"
	"io"
	"math"
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
	TraceLine int       `json:"trace_line,omitempty"`
	Warmup    bool      `json:"warmup,omitempty"`
	Planned   time.Time `json:"planned"`
	Sent      time.Time `json:"sent"`
	// SentOffset is Sent in seconds from the stage's start, on the run's
	// own monotonic clock, which every other time of the record is
	// measured on: Planned and Sent are wall-clock times, which the
	// system may slew (a VM's ran 0.5% fast for minutes). Absent from
	// lines written before it was kept.
	SentOffset  *float64 `json:"sent_offset_seconds,omitempty"`
	ScheduleLag float64  `json:"schedule_lag_seconds"`
	// ClientWait is the time from Sent to the request's start (a
	// connection in hand: design.md "start"), from which TTFT and E2E
	// run; the request ended at Sent + ClientWait + E2E.
	ClientWait   float64   `json:"client_wait_seconds"`
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

func newRequestRecord(stage int, start time.Time, r *wire.Result) RequestRecord {
	offset := r.Dispatched.Sub(start).Seconds()
	rec := RequestRecord{
		SentOffset: &offset,
		Stage:      stage, Target: r.Target, Class: r.Class,
		Conversation: r.ConversationID, TraceLine: r.TraceLine, Warmup: r.Warmup,
		Planned: r.Planned, Sent: r.Dispatched,
		ScheduleLag:  r.ScheduleLag.Seconds(),
		ClientWait:   r.ClientWait.Seconds(),
		ITLs:         make([]float64, len(r.ITLs)),
		E2E:          r.E2E.Seconds(),
		PromptTokens: r.PromptTokens, OutputTokens: r.OutputTokens, CachedTokens: r.CachedTokens,
		UsageReported: r.UsageReported,
		Outcome:       OutcomeOf(r), ErrorType: r.ErrorType, StatusCode: r.StatusCode,
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

// OutcomeCancelledAtGrace is the outcome, in a report and its request
// lines, of a request bench cancelled because it was still running when
// the grace after its stage ran out: neither a success nor a failure of
// the server, it is in no figure (wire's outcome for it is timeout, with
// the error type cancelled).
const OutcomeCancelledAtGrace wire.Outcome = "cancelled_at_grace"

// OutcomeOf is r's outcome in a report: wire's, but
// OutcomeCancelledAtGrace for a request llmprobe cancelled (bench does so
// only at a grace's end).
func OutcomeOf(r *wire.Result) wire.Outcome {
	if r.ErrorType == wire.ErrorTypeCancelled {
		return OutcomeCancelledAtGrace
	}
	return r.Outcome
}

// Timing is the record's Timing (NewTiming's, read back), its start
// taken from the stage's start (SentOffset), or from origin by the
// wall clock in a line without SentOffset. Whether the request was good
// under an SLO is not in the record: Good is false.
func (rec *RequestRecord) Timing(origin time.Time) Timing {
	seconds := func(s float64) time.Duration { return time.Duration(math.Round(s * 1e9)) }
	sent := rec.Sent.Sub(origin)
	if rec.SentOffset != nil {
		sent = seconds(*rec.SentOffset)
	}
	t := Timing{
		Start: sent + seconds(rec.ClientWait), E2E: seconds(rec.E2E),
		FirstToken: rec.TTFT != nil, PromptTokens: rec.PromptTokens, OutputTokens: rec.OutputTokens,
		Success: rec.Outcome == wire.OutcomeSuccess, Warmup: rec.Warmup, Cancelled: rec.Outcome == OutcomeCancelledAtGrace,
	}
	if rec.TTFT != nil {
		t.TTFT = seconds(*rec.TTFT)
	}
	t.ITLs = make([]time.Duration, len(rec.ITLs))
	for i, g := range rec.ITLs {
		t.ITLs[i] = seconds(g)
	}
	return t
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

// Write writes r's line (a request of stage, which started at start),
// unless a write failed.
func (l *RequestLog) Write(stage int, start time.Time, r *wire.Result) {
	b, err := json.Marshal(newRequestRecord(stage, start, r))
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
