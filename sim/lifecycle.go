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
	api    apiKind
	model  string
	stream bool

	arrival    time.Time // the handler received the request
	queued     time.Time // handed to the engine (zero if it never was)
	scheduled  time.Time // left the waiting queue (zero if it never did)
	firstToken time.Time // first token flushed (streaming) or seen (non-streaming)
	lastToken  time.Time
	finished   time.Time // response over

	promptTokens     int
	cachedTokens     int
	completionTokens int
	finishReason     string // "stop", "length", or "" when the response did not finish

	fault  faultKind
	status int    // HTTP status sent (0 when the connection was reset before any)
	errMsg string // short reason when the request failed or was cut

	// Tracing (tracing.go); tr is nil when the server does not trace.
	tr                  *tracing
	eng                 *engine
	parent              context.Context // carries the caller's trace context
	path                string
	waitingAtArrival    int64 // sequences waiting in the engine's queue at arrival
	runningAtFirstToken int64 // running batch when the first token came out
}

// begin is called when the handler of s receives r.
func (lc *requestLifecycle) begin(s *Server, r *http.Request, api apiKind) {
	lc.api = api
	lc.arrival = time.Now()
	if s.tracing != nil {
		lc.traceBegin(s, r)
	}
}

// end is called once when the response is over (or abandoned).
func (lc *requestLifecycle) end() {
	lc.finished = time.Now()
	if lc.tr != nil {
		lc.traceEnd()
	}
}
