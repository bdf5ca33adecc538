// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The request log (Config.RequestLog) is the simulator's own per-request
// truth, for tests that compare a client's per-request judgement with the
// server's: one JSON object per line, RequestLogEntry, appended when a
// completion request is over, whether it finished, failed or was
// abandoned. It holds no prompt or completion text.
//
// Handlers encode their line and append it to an in-memory buffer under a
// mutex; a writer goroutine writes the buffer to the file at most
// requestLogFlushInterval after a line arrived (sooner once
// requestLogFlushBytes are waiting) and on Shutdown. The buffer is
// bounded: a line that finds requestLogMaxBytes waiting is dropped and
// counted (llmprobe_sim_request_log_dropped_total), so a stuck disk never
// blocks a response or grows the heap. A write error is logged once.

// RequestLogEntry is one line of the request log.
type RequestLogEntry struct {
	// ID is the response id the client saw ("chatcmpl-…", "cmpl-…");
	// absent when the client got no response body carrying one (an error
	// status, or a request abandoned before its stream began).
	ID string `json:"id,omitempty"`
	// XRequestID is the request's X-Request-Id header (at most 256
	// bytes), absent when it had none.
	XRequestID string `json:"x_request_id,omitempty"`
	Path       string `json:"path"` // "/v1/chat/completions", "/v1/completions", "/v1/responses", "/v1/messages" or "/v1/embeddings"
	// Proto is the protocol the request came over: "HTTP/1.1" or
	// "HTTP/2.0" (h2c, or HTTP/2 over TLS).
	Proto  string `json:"proto,omitempty"`
	API    string `json:"api"`             // "chat", "completions", "responses", "messages" or "embeddings"
	Stream bool   `json:"stream"`          // the request asked for a stream
	Model  string `json:"model,omitempty"` // the served model or adapter, absent when it was not resolved
	// BaseModel is the adapter's base model when Model is a LoRA
	// adapter; absent otherwise.
	BaseModel string `json:"base_model,omitempty"`
	// Arrival is when the handler received the request (RFC 3339, UTC,
	// nanoseconds).
	Arrival string `json:"arrival"`
	// TTFTSeconds is arrival → first token flushed (streaming) or seen
	// by the handler (non-streaming): exactly what the request added to
	// vllm:time_to_first_token_seconds. Absent without a first token.
	TTFTSeconds *float64 `json:"ttft_seconds,omitempty"`
	// E2ESeconds is arrival → end of the response: for a completed
	// response, exactly what vllm:e2e_request_latency_seconds observed;
	// otherwise when the handler gave up on it.
	E2ESeconds float64 `json:"e2e_seconds"`
	// TPOTSeconds is (last token − first token) / (tokens − 1), over the
	// instants TTFT uses, when at least 2 tokens went out.
	TPOTSeconds *float64 `json:"tpot_seconds,omitempty"`
	// TTFASeconds is arrival → the first answer token (the first after
	// the reasoning tokens) flushed, on the clock TTFT uses: what a
	// client's time to first answer token is to be compared with. Only
	// streamed responses with reasoning have it, once an answer token went
	// out (without reasoning it would equal TTFTSeconds).
	TTFASeconds *float64 `json:"ttfa_seconds,omitempty"`
	// PromptTokens, CachedTokens and CompletionTokens are as in usage;
	// CompletionTokens counts the tokens the client was sent (token
	// events of a stream, the tokens in a non-streamed body), also when
	// the response was cut. CachedTokens is 0 when the request ended
	// before the engine reported progress.
	PromptTokens     int `json:"prompt_tokens"`
	CachedTokens     int `json:"cached_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	// ImageTokens is how many of PromptTokens were images' tokens;
	// absent when the prompt had no image.
	ImageTokens int `json:"image_tokens,omitempty"`
	// ReasoningTokens is how many of CompletionTokens were reasoning
	// tokens (as usage.completion_tokens_details.reasoning_tokens);
	// absent when none were.
	ReasoningTokens int `json:"reasoning_tokens,omitempty"`
	// ToolCall is true when the answer was a tool call and the client
	// was sent at least one of its tokens; absent otherwise. The call
	// itself (name, arguments) is not logged.
	ToolCall bool `json:"tool_call,omitempty"`
	// FinishReason is "stop", "length" or "tool_calls"; absent when the
	// response did not finish (rejected, cut by a fault, abandoned, shut
	// down).
	FinishReason string `json:"finish_reason,omitempty"`
	// Status is the HTTP status sent; 0 when none was (the client went
	// away first, or a reset fault cut a non-streamed response).
	Status int `json:"status"`
	// Fault is the injected fault's kind (as in X-Sim-Fault), if any.
	Fault string `json:"fault,omitempty"`
	// Error is a short reason when the request failed or was cut.
	Error string `json:"error,omitempty"`
}

const (
	requestLogFlushInterval = 100 * time.Millisecond
	requestLogFlushBytes    = 64 << 10
	requestLogMaxBytes      = 4 << 20
	maxRequestIDBytes       = 256
)

// requestLog appends RequestLogEntry lines to a file.
type requestLog struct {
	path    string
	f       *os.File
	logger  *slog.Logger
	dropped prometheus.Counter

	mu         sync.Mutex
	buf        []byte // lines waiting for the writer
	spare      []byte // the writer's previous buffer, for reuse
	closed     bool
	open       int           // requests begun and not yet recorded
	idle       chan struct{} // closed when open reaches 0 during close
	lost       int64         // lines dropped or not written
	warnedFull bool

	kick   chan struct{} // capacity 1: lines are waiting
	urgent chan struct{} // capacity 1: requestLogFlushBytes are waiting
	quit   chan struct{}
	done   chan struct{}

	// Writer-owned.
	errLogged bool
	partial   bool // a write stopped inside a line
}

// openRequestLog opens (creating, appending) path and starts the writer.
func openRequestLog(path string, logger *slog.Logger, reg prometheus.Registerer, labels prometheus.Labels) (*requestLog, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("request_log: %w", err)
	}
	l := &requestLog{
		path:   path,
		f:      f,
		logger: logger,
		dropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name:        "llmprobe_sim_request_log_dropped_total",
			Help:        "Request log lines lost: dropped while the write buffer was full or after shutdown, or not written because of a write error.",
			ConstLabels: labels,
		}),
		kick:   make(chan struct{}, 1),
		urgent: make(chan struct{}, 1),
		quit:   make(chan struct{}),
		done:   make(chan struct{}),
	}
	reg.MustRegister(l.dropped)
	go l.run()
	return l, nil
}

// begin counts a request whose line is to come, so that close can wait
// for it.
func (l *requestLog) begin() {
	l.mu.Lock()
	l.open++
	l.mu.Unlock()
}

// record appends lc's line; it is called once per begin.
func (l *requestLog) record(lc *requestLifecycle) {
	line, err := json.Marshal(lc.logEntry())
	if err != nil { // unreachable: the entry has no unencodable field
		line = nil
	}
	line = append(line, '\n')

	l.mu.Lock()
	l.open--
	if l.open == 0 && l.idle != nil {
		close(l.idle)
		l.idle = nil
	}
	if len(line) == 1 || l.closed || len(l.buf)+len(line) > requestLogMaxBytes {
		l.lost++
		warn := !l.warnedFull && !l.closed
		l.warnedFull = l.warnedFull || warn
		closed := l.closed
		l.mu.Unlock()
		l.dropped.Inc()
		if warn {
			l.logger.Warn("request log buffer full; dropping lines until the writer catches up", "path", l.path, "buffered_bytes", requestLogMaxBytes)
		} else if closed {
			l.logger.Debug("request finished after the request log was closed; line dropped", "path", l.path)
		}
		return
	}
	wasEmpty := len(l.buf) == 0
	l.buf = append(l.buf, line...)
	big := len(l.buf) >= requestLogFlushBytes
	l.mu.Unlock()
	if wasEmpty {
		signal(l.kick)
	}
	if big {
		signal(l.urgent)
	}
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// run is the writer: it flushes requestLogFlushInterval after the first
// waiting line, sooner when the buffer is large, and once more on close.
func (l *requestLog) run() {
	defer close(l.done)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		select {
		case <-l.kick:
		case <-l.urgent:
		case <-l.quit:
			l.flush()
			return
		}
		timer.Reset(requestLogFlushInterval)
		select {
		case <-timer.C:
		case <-l.urgent:
			timer.Stop()
		case <-l.quit:
			timer.Stop()
		}
		l.flush()
	}
}

// flush writes the waiting lines.
func (l *requestLog) flush() {
	l.mu.Lock()
	b := l.buf
	l.buf, l.spare = l.spare[:0], nil
	l.mu.Unlock()
	if len(b) > 0 {
		l.write(b)
	}
	if cap(b) > 2*requestLogMaxBytes {
		b = nil
	}
	l.mu.Lock()
	l.spare = b[:0]
	l.mu.Unlock()
}

func (l *requestLog) write(b []byte) {
	if l.partial {
		// The previous write stopped inside a line: end it, so that the
		// lines below parse.
		if _, err := l.f.Write([]byte{'\n'}); err != nil {
			l.writeFailed(err, b)
			return
		}
		l.partial = false
	}
	n, err := l.f.Write(b)
	if err != nil {
		l.partial = n > 0 && b[n-1] != '\n'
		l.writeFailed(err, b[n:])
	}
}

// writeFailed counts the lines of unwritten (a cut line included) as lost
// and logs the first error.
func (l *requestLog) writeFailed(err error, unwritten []byte) {
	lost := bytes.Count(unwritten, []byte{'\n'})
	l.mu.Lock()
	l.lost += int64(lost)
	l.mu.Unlock()
	l.dropped.Add(float64(lost))
	if !l.errLogged {
		l.errLogged = true
		l.logger.Error("writing the request log failed; its lines are lost until writes succeed again (logged once)", "path", l.path, "err", err)
	}
}

// close waits up to wait for the requests still being answered, writes
// what is buffered and closes the file. Lines recorded later are dropped.
func (l *requestLog) close(wait time.Duration) {
	l.mu.Lock()
	var idle chan struct{}
	if l.open > 0 {
		idle = make(chan struct{})
		l.idle = idle
	}
	l.mu.Unlock()
	if idle != nil {
		t := time.NewTimer(wait)
		select {
		case <-idle:
		case <-t.C:
		}
		t.Stop()
	}
	l.mu.Lock()
	l.closed = true
	open := l.open
	l.mu.Unlock()
	close(l.quit)
	<-l.done
	if err := l.f.Close(); err != nil && !l.errLogged {
		l.logger.Error("closing the request log failed", "path", l.path, "err", err)
	}
	l.mu.Lock()
	lost := l.lost
	l.mu.Unlock()
	if lost > 0 || open > 0 {
		l.logger.Warn("request log incomplete", "path", l.path, "lines_lost", lost, "requests_unfinished_at_close", open)
	}
}

// logEntry builds the request's log line.
func (lc *requestLifecycle) logEntry() *RequestLogEntry {
	e := &RequestLogEntry{
		ID:               lc.id,
		XRequestID:       lc.xRequestID,
		Path:             lc.path,
		Proto:            lc.proto,
		API:              lc.api.String(),
		Stream:           lc.stream,
		Model:            lc.model,
		BaseModel:        lc.baseModel,
		ImageTokens:      lc.imageTokens,
		Arrival:          lc.arrival.UTC().Format(time.RFC3339Nano),
		PromptTokens:     lc.promptTokens,
		CachedTokens:     lc.engineCached,
		CompletionTokens: lc.tokensOut,
		FinishReason:     lc.finishReason,
		Status:           lc.status,
		Error:            lc.errMsg,
	}
	if lc.finishReason != "" {
		e.CachedTokens = lc.cachedTokens
	}
	if lc.reasoning > 0 {
		e.ReasoningTokens = min(lc.tokensOut, lc.reasoning)
	}
	e.ToolCall = lc.toolCall && lc.tokensOut > lc.reasoning
	if lc.fault != faultNone {
		e.Fault = lc.fault.String()
	}
	end := lc.completed
	if end.IsZero() {
		end = lc.finished
	}
	e.E2ESeconds = end.Sub(lc.arrival).Seconds()
	if !lc.firstToken.IsZero() {
		ttft := lc.firstToken.Sub(lc.arrival).Seconds()
		e.TTFTSeconds = &ttft
		if lc.tokensOut >= 2 && !lc.lastOut.IsZero() {
			tpot := lc.lastOut.Sub(lc.firstToken).Seconds() / float64(lc.tokensOut-1)
			e.TPOTSeconds = &tpot
		}
	}
	if !lc.firstAnswer.IsZero() {
		ttfa := lc.firstAnswer.Sub(lc.arrival).Seconds()
		e.TTFASeconds = &ttfa
	}
	return e
}
