// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"context"
	"net/http"
	"time"
)

// requestLifecycle is the server-side record of one completion request:
// its instants, its token counts and how it ended. It is the hook point
// for server-side instrumentation: begin runs when the handler receives
// the request and end when the response is over, whatever the outcome
// (a server span reading the W3C traceparent header starts in begin and
// ends in end, with the instants below as events).
type requestLifecycle struct {
	api      apiKind
	stream   bool
	toolCall bool // the answer is planned as a tool call (small fields together: no padding)
	model    string

	arrival    time.Time // the handler received the request
	queued     time.Time // handed to the engine (zero if it never was)
	scheduled  time.Time // left the waiting queue (zero if it never did)
	firstToken time.Time // first token flushed (streaming) or seen (non-streaming)
	lastToken  time.Time
	finished   time.Time // response over

	promptTokens     int
	cachedTokens     int
	completionTokens int
	finishReason     string // "stop", "length", "tool_calls", or "" when the response did not finish
	reasoning        int    // planned reasoning tokens (chat)
	imageTokens      int    // prompt tokens that are images' (images.go)
	baseModel        string // the adapter's base model, when model is an adapter

	fault  faultKind
	status int    // HTTP status sent (0 when the connection was reset before any)
	errMsg string // short reason when the request failed or was cut
	path   string
	proto  string // the request's protocol (r.Proto)

	// Request log (requestlog.go); log is nil when the server keeps none.
	log          *requestLog
	id           string    // response id the client was sent
	xRequestID   string    // the X-Request-Id header
	tokensOut    int       // tokens sent to the client
	lastOut      time.Time // last token flushed (streaming) or seen (non-streaming)
	firstAnswer  time.Time // first token after the reasoning ones flushed (streaming, with reasoning)
	engineCached int       // cached prompt tokens, once the engine reported progress
	completed    time.Time // the response completed (what the e2e histogram observes)

	// Tracing (tracing.go); tr is nil when the server does not trace.
	tr                  *tracing
	eng                 *engine
	parent              context.Context // carries the caller's trace context
	waitingAtArrival    int64           // sequences waiting in the engine's queue at arrival
	runningAtFirstToken int64           // running batch when the first token came out
}

// begin is called when the handler of s receives r.
func (lc *requestLifecycle) begin(s *Server, r *http.Request, api apiKind) {
	lc.api = api
	lc.arrival = time.Now()
	lc.path = r.URL.Path
	lc.proto = r.Proto
	if s.tracing != nil {
		lc.traceBegin(s, r)
	}
	if s.reqlog != nil {
		lc.log = s.reqlog
		lc.xRequestID = truncate(r.Header.Get("X-Request-Id"), maxRequestIDBytes)
		s.reqlog.begin()
	}
}

// firstTokenOut records the instant the first token went out (streaming)
// or was seen (non-streaming), once the engine has published progress for
// sq.
func (lc *requestLifecycle) firstTokenOut(now time.Time, sq *seq) {
	lc.markFirstToken(now)
	lc.engineCached = sq.cachedTokens
}

// end is called once when the response is over (or abandoned).
func (lc *requestLifecycle) end() {
	lc.finished = time.Now()
	if lc.tr != nil {
		lc.traceEnd()
	}
	if lc.log != nil {
		lc.log.record(lc)
	}
}
