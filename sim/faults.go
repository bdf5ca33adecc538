// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// FaultHeader is the request header that asks for one fault exactly. Its
// value (case-insensitive) is one of:
//
//	http_500        500 with an OpenAI-style error body
//	http_503        503 with an OpenAI-style error body
//	http_429        429 with Retry-After and an OpenAI-style error body
//	reset:K         abort the TCP connection (RST) after K tokens
//	stall_first:D   wait D (a Go duration) before the first token
//	stall:K:D       wait D after K tokens
//	malformed:K     after K tokens, send an event that is not valid JSON,
//	                then go on normally
//	no_done:K       after K tokens, end the response cleanly without the
//	                finish event, usage and [DONE] (streaming only)
//	empty           a normal response with no generated token, finish
//	                reason "stop" and completion_tokens 0
//
// When fewer than K tokens are generated, the fault fires after the last
// one (before the finish event). Any other value is answered with 400.
const FaultHeader = "X-Sim-Fault"

// maxFaultDuration bounds injected stalls.
const maxFaultDuration = time.Hour

// maxFaultAfterTokens bounds K in fault specifications.
const maxFaultAfterTokens = 1 << 24

type faultKind uint8

const (
	faultNone faultKind = iota
	faultHTTP500
	faultHTTP503
	faultHTTP429
	faultReset
	faultStallFirst
	faultStall
	faultMalformed
	faultNoDone
	faultEmpty
	numFaultKinds
)

var faultKindName = [numFaultKinds]string{
	faultNone:       "none",
	faultHTTP500:    "http_500",
	faultHTTP503:    "http_503",
	faultHTTP429:    "http_429",
	faultReset:      "reset",
	faultStallFirst: "stall_first",
	faultStall:      "stall",
	faultMalformed:  "malformed",
	faultNoDone:     "no_done",
	faultEmpty:      "empty",
}

func (k faultKind) String() string {
	if k < numFaultKinds {
		return faultKindName[k]
	}
	return "unknown"
}

// faultKindNames lists the kinds a client or config can ask for.
func faultKindNames() []string {
	return faultKindName[faultHTTP500:]
}

// fault is the fault chosen for one request.
type fault struct {
	kind       faultKind
	after      int           // reset, stall, malformed, no_done: tokens before it fires
	duration   time.Duration // stall_first, stall
	retryAfter time.Duration // http_429
}

// firesAfter reports whether the fault fires once tokens have been written
// (and nothing else remains to be written when final is true).
func (f *fault) firesAt(written int, final bool) bool {
	return written == f.after || (final && written < f.after)
}

// maxHeaderEcho bounds how much of a bad header value is echoed in errors.
const maxHeaderEcho = 64

// parseFaultHeader parses an X-Sim-Fault value. retryAfter is the
// configured Retry-After for http_429.
func parseFaultHeader(v string, retryAfter time.Duration) (fault, error) {
	orig := v
	v = strings.ToLower(strings.TrimSpace(v))
	name, rest, hasArgs := strings.Cut(v, ":")
	bad := func(why string) (fault, error) {
		return fault{}, fmt.Errorf("invalid %s value %q: %s", FaultHeader, truncate(orig, maxHeaderEcho), why)
	}
	noArgs := func(k faultKind) (fault, error) {
		if hasArgs {
			return bad(name + " takes no argument")
		}
		return fault{kind: k, retryAfter: retryAfter}, nil
	}
	switch name {
	case "http_500":
		return noArgs(faultHTTP500)
	case "http_503":
		return noArgs(faultHTTP503)
	case "http_429":
		return noArgs(faultHTTP429)
	case "empty":
		return noArgs(faultEmpty)
	case "reset", "malformed", "no_done":
		if !hasArgs {
			return bad(name + " needs a token count, e.g. " + name + ":3")
		}
		k, err := parseAfterTokens(rest)
		if err != nil {
			return bad(err.Error())
		}
		kind := map[string]faultKind{"reset": faultReset, "malformed": faultMalformed, "no_done": faultNoDone}[name]
		return fault{kind: kind, after: k}, nil
	case "stall_first":
		if !hasArgs {
			return bad("stall_first needs a duration, e.g. stall_first:2s")
		}
		d, err := parseFaultDuration(rest)
		if err != nil {
			return bad(err.Error())
		}
		return fault{kind: faultStallFirst, duration: d}, nil
	case "stall":
		ks, ds, ok := strings.Cut(rest, ":")
		if !hasArgs || !ok {
			return bad("stall needs a token count and a duration, e.g. stall:3:2s")
		}
		k, err := parseAfterTokens(ks)
		if err != nil {
			return bad(err.Error())
		}
		d, err := parseFaultDuration(ds)
		if err != nil {
			return bad(err.Error())
		}
		return fault{kind: faultStall, after: k, duration: d}, nil
	}
	return bad("unknown fault (valid: http_500, http_503, http_429, reset:K, stall_first:D, stall:K:D, malformed:K, no_done:K, empty)")
}

func parseAfterTokens(s string) (int, error) {
	k, err := strconv.Atoi(s)
	if err != nil || k < 0 || k > maxFaultAfterTokens {
		return 0, fmt.Errorf("token count must be an integer between 0 and %d", maxFaultAfterTokens)
	}
	return k, nil
}

func parseFaultDuration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 || d > maxFaultDuration {
		return 0, fmt.Errorf("duration must be a Go duration between 0s and %s", maxFaultDuration)
	}
	return d, nil
}

// faultTable is the configured random faults, as cumulative probabilities.
type faultTable struct {
	any    bool
	cum    [numFaultKinds]float64
	faults [numFaultKinds]fault
}

func newFaultTable(c *FaultConfig) *faultTable {
	t := &faultTable{}
	sum := 0.0
	for _, s := range c.specs() {
		sum += s.spec.Probability
		t.cum[s.kind] = sum
		t.faults[s.kind] = fault{
			kind:       s.kind,
			after:      s.spec.AfterTokens,
			duration:   s.spec.Duration,
			retryAfter: s.spec.RetryAfter,
		}
		if s.spec.Probability > 0 {
			t.any = true
		}
	}
	return t
}

// pick maps a uniform draw u in [0,1) to a fault (or none).
func (t *faultTable) pick(u float64) fault {
	for k := faultHTTP500; k < numFaultKinds; k++ {
		if u < t.cum[k] && t.faults[k].kind != faultNone {
			return t.faults[k]
		}
	}
	return fault{}
}

// How the request-handling shape (exchange.go) applies a fault to the
// APIs whose apiSpec takes faults: before the engine (the HTTP faults,
// empty), before the first stream event (stall_first), at a token of a
// stream (reset, stall, malformed, no_done), or around a unary body.

// headerFault reads the X-Sim-Fault header, if any, into x.flt.
func (x *exchange) headerFault(r *http.Request) *apiError {
	vals, ok := r.Header[FaultHeader]
	if !ok {
		return nil
	}
	if len(vals) != 1 {
		return badRequest(FaultHeader, "give exactly one %s header, got %d", FaultHeader, len(vals))
	}
	f, err := parseFaultHeader(vals[0], x.s.cfg.Faults.HTTP429.RetryAfter)
	if err != nil {
		return badRequest(FaultHeader, "%s", err.Error())
	}
	x.flt, x.fromHeader = f, true
	return nil
}

// admitFault settles the request's fault (the header's, or one drawn
// from the configured probabilities) and answers the HTTP faults. It
// returns false when the request is over.
func (x *exchange) admitFault() bool {
	s := x.s
	if !x.fromHeader {
		x.flt = s.drawFault()
		if x.flt.kind == faultNoDone && !x.lc.stream {
			x.flt = fault{} // meaningless without a stream
		}
	} else if x.flt.kind == faultNoDone && !x.lc.stream {
		x.fail(badRequest(FaultHeader, "%s no_done applies to streaming requests only", FaultHeader))
		return false
	}
	if x.flt.kind != faultNone {
		x.lc.fault = x.flt.kind
		s.metrics.faults[x.flt.kind].Inc()
	}
	switch x.flt.kind {
	case faultHTTP500:
		x.fail(&apiError{status: http.StatusInternalServerError, typ: "server_error", code: "internal_error",
			message: "The server had an error while processing your request (simulated fault)."})
		return false
	case faultHTTP503:
		x.fail(&apiError{status: http.StatusServiceUnavailable, typ: "server_error", code: "service_unavailable",
			message: "The server is overloaded or not ready yet (simulated fault)."})
		return false
	case faultHTTP429:
		x.w.Header().Set("Retry-After", retryAfterSeconds(x.flt.retryAfter))
		x.fail(&apiError{status: http.StatusTooManyRequests, typ: "requests", code: "rate_limit_exceeded",
			message: "Rate limit reached for requests (simulated fault)."})
		return false
	case faultEmpty:
		x.sq.empty = true
	}
	return true
}

// A malformer is a streamer that can write the malformed fault's event:
// the start of one of its events, cut short. The APIs that take faults
// are malformers.
type malformer interface {
	malformedEvent() []byte
}

// midStreamFault applies a token-positioned fault (reset, stall,
// malformed, no_done) if it fires now. It returns false when the response
// must end here.
func (x *exchange) midStreamFault(st streamer, final bool) bool {
	if x.flt.kind == faultNone || x.faultDone || !x.flt.firesAt(x.written, final) {
		return true
	}
	switch x.flt.kind {
	case faultReset:
		x.faultDone = true
		x.lc.errMsg = "connection reset (simulated fault)"
		x.resetConnection()
		return false
	case faultStall:
		x.faultDone = true
		return x.sleep(x.flt.duration)
	case faultMalformed:
		x.faultDone = true
		return x.write(st.(malformer).malformedEvent())
	case faultNoDone:
		x.faultDone = true
		x.lc.errMsg = "stream ended without [DONE] (simulated fault)"
		x.sq.cancelled.Store(true)
		return false
	}
	return true
}

// unaryFault applies a stall or a reset to a collected unary response.
// It returns false when the response must end here.
func (x *exchange) unaryFault() bool {
	switch x.flt.kind {
	case faultStall:
		return x.sleep(x.flt.duration)
	case faultReset:
		x.lc.errMsg = "connection reset (simulated fault)"
		x.resetConnection()
		return false
	}
	return true
}

// resetConnection aborts the TCP connection with a RST so that the client
// sees a reset (or an unexpected EOF) instead of a clean end.
func (x *exchange) resetConnection() {
	x.sq.cancelled.Store(true)
	rc := http.NewResponseController(x.w)
	_ = rc.Flush()
	conn, _, err := rc.Hijack()
	if err != nil {
		// Not hijackable (HTTP/2, or a test recorder): let net/http abort
		// the stream.
		panic(http.ErrAbortHandler)
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

// retryAfterSeconds renders a Retry-After value: whole seconds, at least 1.
func retryAfterSeconds(d time.Duration) string {
	s := int64((d + time.Second - 1) / time.Second)
	if s < 1 {
		s = 1
	}
	return strconv.FormatInt(s, 10)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
