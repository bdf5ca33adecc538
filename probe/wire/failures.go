// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package wire

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"golang.org/x/net/http2"

	"github.com/llmprobe/llmprobe/internal/httpclient"
)

// How a request that did not end well is classified: the outcome and
// the low-cardinality error type of a failed round trip, a broken
// stream, a cancelled context and a non-2xx answer, with the message
// the server gave (cleaned: servertext.go).

// HTTP/2 error types.
const (
	// ErrorTypeH2CRefused (connect_error): a client speaking h2c (HTTP/2
	// with prior knowledge) found a server that does not: its new
	// connection ended, or answered in HTTP/1.1, before any response.
	ErrorTypeH2CRefused = "h2c_refused"
	// ErrorTypeStreamReset (stream_error): the server reset the request's
	// HTTP/2 stream (RST_STREAM), before or during the response.
	ErrorTypeStreamReset = "stream_reset"
	// ErrorTypeGoAway (stream_error): the server sent GOAWAY and closed
	// the connection while the request's stream was open, or had not
	// begun the stream at its GOAWAY and had not begun the re-send
	// either (the client re-sends such a stream once, on a new
	// connection).
	ErrorTypeGoAway = "goaway"
	// ErrorTypeRefusedStream (stream_error): the server refused the
	// request's HTTP/2 stream (RST_STREAM REFUSED_STREAM before any
	// answer: it processed nothing), and refused it again when the
	// client re-sent it at once.
	ErrorTypeRefusedStream = "refused_stream"
)

// h2Failure classifies the HTTP/2 errors of net/http's transport, whose
// types are unexported: a stream error converts (errors.As) to
// x/net/http2's StreamError; a GOAWAY is known by its message, and so is
// a failure the transport would have re-sent the request for
// (h2Unsent).
func h2Failure(err error, res *Result) bool {
	var se http2.StreamError
	cause, unsent := h2Unsent(err)
	switch {
	case unsent:
		switch code := h2ResetCode(cause); {
		case code == http2.ErrCodeRefusedStream.String():
			res.fail(OutcomeStreamError, ErrorTypeRefusedStream, "the server refused the stream without processing the request (RST_STREAM REFUSED_STREAM)")
		case code != "":
			res.fail(OutcomeStreamError, ErrorTypeStreamReset, fmt.Sprintf("the server reset the stream before answering (RST_STREAM %s)", code))
		case strings.Contains(cause, "GOAWAY"):
			res.fail(OutcomeStreamError, ErrorTypeGoAway, "the server sent GOAWAY before it began the stream: "+SanitizeMessage(cause))
		default:
			res.fail(OutcomeStreamError, "read_error", SanitizeMessage(cause))
		}
	case errors.As(err, &se):
		from := "the server reset the stream"
		if se.Cause == nil || se.Cause.Error() != "received from peer" {
			from = "the HTTP/2 stream was reset"
		}
		res.fail(OutcomeStreamError, ErrorTypeStreamReset, fmt.Sprintf("%s (RST_STREAM %v)", from, se.Code))
	case strings.Contains(err.Error(), "server sent GOAWAY and closed the connection"):
		res.fail(OutcomeStreamError, ErrorTypeGoAway, "the server sent GOAWAY and closed the connection mid-stream: "+errorMessage(err))
	default:
		return false
	}
	return true
}

// h2Unsent returns the cause of a failure for which net/http's HTTP/2
// transport would have re-sent the request, had the request's body been
// rewindable (the client hands it none: client.go, noRewind): a stream
// the server refused (REFUSED_STREAM) or reset with PROTOCOL_ERROR before
// answering, or had not begun when it sent GOAWAY. The transport says so
// only in text: "http2: Transport: cannot retry err [CAUSE] after
// Request.Body was written; define Request.GetBody to avoid this error".
func h2Unsent(err error) (cause string, ok bool) {
	const pre, post = "http2: Transport: cannot retry err [", "] after Request.Body was written"
	_, rest, ok := strings.Cut(err.Error(), pre)
	if !ok {
		return "", false
	}
	if i := strings.LastIndex(rest, post); i >= 0 {
		rest = rest[:i]
	}
	return rest, true
}

// h2ResetCode is the error code's name in the text of an HTTP/2 stream
// error ("stream error: stream ID 3; REFUSED_STREAM; received from
// peer"), or "".
func h2ResetCode(text string) string {
	rest, ok := strings.CutPrefix(text, "stream error: stream ID ")
	if !ok {
		return ""
	}
	fields := strings.SplitN(rest, "; ", 3)
	if len(fields) < 2 {
		return ""
	}
	return fields[1]
}

// h2cRefused reports whether an h2c round trip that got no response
// failed because the server does not speak h2c: on a new connection
// (a reused one spoke HTTP/2 already) whose server sent no HTTP/2 frame
// (what it sent first is known where the client read it), it answered
// in HTTP/1.1
// (net/http: "the frame header looked like an HTTP/1.1 header"), or
// closed or reset it before any HTTP/2 (Go's HTTP/1.1-only server closes
// on the h2c preface, which the client sees as a broken pipe, a reset or
// an end of file, or as a connection that "could not be established",
// "is closed" or was "lost", by which of its goroutines saw it first).
func h2cRefused(err error, ct *connTrace) bool {
	if ct.reusedConn() {
		return false
	}
	if known, http1 := ct.serverSpoke(); known {
		// The server's first bytes say: HTTP/2 frames (a failure of a
		// connection that spoke h2c, as of any other), or HTTP/1.x.
		return http1
	}
	msg := err.Error()
	return strings.Contains(msg, "looked like an HTTP/1.1 header") ||
		strings.Contains(msg, "http2: client conn could not be established") ||
		strings.Contains(msg, "http2: client conn is closed") ||
		strings.Contains(msg, "http2: client connection lost") ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, net.ErrClosed)
}

// h2cRefusedMessage is what a user reads about an h2c refusal.
func h2cRefusedMessage(err error) string {
	return `server does not speak h2c (HTTP/2 with prior knowledge); set http_version: "1.1" or use https (` + errorMessage(err) + ")"
}

// protoOf is resp's protocol, from a bounded set.
func protoOf(resp *http.Response) string {
	switch {
	case resp.ProtoMajor == 2:
		return "HTTP/2.0"
	case resp.ProtoMajor == 1 && resp.ProtoMinor == 1:
		return "HTTP/1.1"
	case resp.ProtoMajor == 1 && resp.ProtoMinor == 0:
		return "HTTP/1.0"
	}
	return "other"
}

// fail ends r with outcome o, error type errType and message msg.
func (r *Result) fail(o Outcome, errType, msg string) {
	r.Outcome, r.ErrorType, r.Error = o, errType, msg
}

// roundTripFailed classifies an error from http.Client.Do (no response).
func (c *Client) roundTripFailed(parent, ctx context.Context, err error, ct *connTrace, res *Result) {
	msg := errorMessage(err)
	if httpclient.IsTokenError(err) {
		if !ctxFailed(parent, ctx, res) {
			res.fail(OutcomeConnectError, ErrorTypeOAuth2, msg)
		}
		return
	}
	var re *httpclient.RedirectError
	if errors.As(err, &re) {
		res.StatusCode = re.Status
		res.fail(OutcomeHTTPError, re.Kind, SanitizeMessage(re.Error()))
		return
	}
	if ctxFailed(parent, ctx, res) {
		return
	}
	gotConn, tlsFailed := ct.state()
	var ne net.Error
	isTimeout := errors.As(err, &ne) && ne.Timeout()
	var dnsErr *net.DNSError
	switch {
	case isTimeout || errors.As(err, &dnsErr) || errors.Is(err, syscall.ECONNREFUSED):
	case h2Failure(err, res):
		return
	case c.h2c && h2cRefused(err, ct):
		res.fail(OutcomeConnectError, ErrorTypeH2CRefused, h2cRefusedMessage(err))
		return
	}
	if !gotConn {
		switch {
		case errors.As(err, &dnsErr):
			res.fail(OutcomeConnectError, "dns", msg)
		case errors.Is(err, syscall.ECONNREFUSED):
			res.fail(OutcomeConnectError, "connection_refused", msg)
		case errors.Is(err, syscall.ECONNRESET):
			// The handshake completed (a refusal is ECONNREFUSED), then the
			// server reset the connection before the dial returned: the
			// same failure as a reset or close just after it, whichever
			// the client saw first (see below).
			res.fail(OutcomeStreamError, "no_response", msg)
		case tlsFailed || isTLSError(err):
			res.fail(OutcomeConnectError, "tls", msg)
		case isTimeout:
			res.fail(OutcomeConnectError, "dial_timeout", msg)
		default:
			res.fail(OutcomeConnectError, "dial", msg)
		}
		return
	}
	switch {
	case isTimeout:
		res.fail(OutcomeTimeout, "timeout", msg)
	case errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE),
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, net.ErrClosed),
		// HTTP/2: the connection under the stream ended.
		strings.Contains(err.Error(), "http2: client conn is closed"),
		strings.Contains(err.Error(), "http2: client connection lost"):
		// The connection ended before response headers. Reset or closed
		// is not something the client can tell here: a server that
		// resets every connection right after accepting it is seen as
		// ECONNRESET by the read, or, about once in a thousand, as a
		// plain EOF (the write went out, the read found the socket
		// already shut) or as the transport's own close after its write
		// failed (net.ErrClosed). One type for all, so one server gives
		// one outcome; a reset after the response began is
		// connection_reset.
		res.fail(OutcomeStreamError, "no_response", msg)
	default:
		res.fail(OutcomeStreamError, "read_error", msg)
	}
}

// streamFailed classifies an error reading the response body.
func streamFailed(parent, ctx context.Context, err error, res *Result) {
	msg := errorMessage(err)
	if ctxFailed(parent, ctx, res) {
		return
	}
	var ne net.Error
	switch {
	case errors.Is(err, ErrLineTooLong):
		res.fail(OutcomeStreamError, "line_too_long", fmt.Sprintf("an SSE line exceeds %d bytes", DefaultMaxSSELine))
	case errors.Is(err, ErrEventTooLong):
		res.fail(OutcomeStreamError, "event_too_long", fmt.Sprintf("an SSE event exceeds %d bytes", DefaultMaxSSELine))
	case errors.As(err, &ne) && ne.Timeout():
		res.fail(OutcomeTimeout, "timeout", msg)
	case h2Failure(err, res):
	case errors.Is(err, io.ErrUnexpectedEOF):
		res.fail(OutcomeStreamError, "unexpected_eof", "connection closed mid-stream: "+msg)
	case errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE):
		res.fail(OutcomeStreamError, "connection_reset", msg)
	default:
		res.fail(OutcomeStreamError, "read_error", msg)
	}
}

// ctxFailed classifies the failure as a timeout when a context ended.
func ctxFailed(parent, ctx context.Context, res *Result) bool {
	switch {
	case parent.Err() == context.Canceled:
		res.fail(OutcomeTimeout, ErrorTypeCancelled, "request cancelled")
	case parent.Err() != nil || ctx.Err() == context.DeadlineExceeded:
		res.fail(OutcomeTimeout, "timeout", "request timeout elapsed")
	default:
		return false
	}
	return true
}

func isTLSError(err error) bool {
	var (
		rh  tls.RecordHeaderError
		ae  tls.AlertError
		cv  *tls.CertificateVerificationError
		ua  x509.UnknownAuthorityError
		he  x509.HostnameError
		ci  x509.CertificateInvalidError
		ech *tls.ECHRejectionError
	)
	return errors.As(err, &rh) || errors.As(err, &ae) || errors.As(err, &cv) || errors.As(err, &ua) ||
		errors.As(err, &he) || errors.As(err, &ci) || errors.As(err, &ech)
}

// httpFailed fills an http_error from a non-2xx response.
func httpFailed(resp *http.Response, txt *serverText, res *Result) {
	res.RetryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	msg := "HTTP " + strconv.Itoa(resp.StatusCode)
	if text := http.StatusText(resp.StatusCode); text != "" {
		msg += " " + text
	}
	if m := errorBodyMessage(body); m != "" {
		msg += ": " + txt.clean(m)
	}
	res.fail(OutcomeHTTPError, "http_"+strconv.Itoa(resp.StatusCode), scrubCut(msg, maxErrorMessage, txt.secrets))
}

// errorBodyMessage extracts the message of an error body: OpenAI's
// {"error": {"message"}}, {"error": "..."} (TGI), {"message"} (older vLLM),
// {"detail": "..."} (FastAPI), or the body itself when it is short text.
func errorBodyMessage(body []byte) string {
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return ""
	}
	var v struct {
		Error   json.RawMessage `json:"error"`
		Message json.RawMessage `json:"message"`
		Detail  json.RawMessage `json:"detail"`
	}
	if json.Unmarshal(body, &v) == nil {
		var s string
		var inner struct {
			Message string `json:"message"`
		}
		switch {
		case json.Unmarshal(v.Error, &inner) == nil && inner.Message != "":
			return inner.Message
		case json.Unmarshal(v.Error, &s) == nil && s != "":
			return s
		case json.Unmarshal(v.Message, &s) == nil && s != "":
			return s
		case json.Unmarshal(v.Detail, &s) == nil && s != "":
			return s
		}
		return ""
	}
	if body[0] == '<' || !utf8.Valid(body) { // HTML error pages and binary say nothing useful
		return ""
	}
	return string(body)
}

// parseRetryAfter parses a Retry-After value: delay-seconds or an HTTP date.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n <= 0 {
			return 0
		}
		return time.Duration(min(n, int64(maxRetryAfter/time.Second))) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return min(t.Sub(now), maxRetryAfter)
	}
	return 0
}

// maxRetryAfter bounds a server's Retry-After, in either form.
const maxRetryAfter = 365 * 24 * time.Hour

// errorMessage renders a transport error without the request URL (which
// may hold credentials or a key in its query).
func errorMessage(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return SanitizeMessage(err.Error())
}
