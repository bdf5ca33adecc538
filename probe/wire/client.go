// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package wire

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/prometheus/common/version"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/llmprobe/llmprobe/internal/httpclient"
	"github.com/llmprobe/llmprobe/internal/scrub"
)

// The OpenAI streaming client.
//
// Timing (docs/design.md "Measurement definitions", matching vLLM's bench):
//
//   - Start is the instant the HTTP client handed over a connection
//     (httptrace GotConn, the last one when the request was retried), just
//     before the request is written. Everything before it (body encoding,
//     connection pool wait, DNS, dial, TLS) is Result.ClientWait.
//   - An event's arrival time is the instant the Read that delivered its
//     last data line returned (see SSEEvent.Time).
//   - TTFT = Start -> first token-bearing event; a token-bearing event is a
//     chunk one of whose choices has a non-empty delta.content,
//     delta.reasoning_content, delta.reasoning or (completions) text.
//     Role-only deltas, empty strings, usage-only chunks and [DONE] are not.
//   - ITLs are the gaps between consecutive token-bearing events.
//   - E2E = Start -> last token-bearing event, or Start -> end of the
//     response when there was none.
//   - TPOT = (E2E - TTFT) / (OutputTokens - 1) for OutputTokens >= 2.
//   - Token counts come from the last `usage` object seen (vLLM's
//     continuous_usage_stats repeats it, cumulative, on every chunk);
//     without one, OutputTokens is the number of token-bearing events and
//     PromptTokens the planned prompt length, and UsageReported is false.
//
// How a stream ends (Result.Outcome / ErrorType):
//
//   - `data: [DONE]` ends it; what follows is drained (bounded in bytes and
//     time) so the connection can be reused, and not measured.
//   - A clean end of the body without [DONE] is success when a choice
//     carried a finish_reason (TGI and llama.cpp variants omit [DONE]), and
//     stream_error "eof_without_done" otherwise.
//   - A successful end with no token-bearing event is invalid_response
//     "empty_completion", unless its finish_reason says the server meant
//     it (any reason but stop and length: content_filter, llm-d's
//     cache_threshold, ...; see deliberateEmpty), which is a success.
//   - The first `data:` payload that is not a JSON object stops the read:
//     invalid_response "malformed_event" (stream_error "eof_without_done"
//     when it is the unterminated tail of a stream that just ended).
//   - An error object in the stream (`{"error": ...}`, `{"object":
//     "error", ...}` or an `event: error`) stops the read:
//     invalid_response "error_event", its message in Result.Error.
//   - Data payloads that are empty or only whitespace are ignored, as are
//     events of types other than "message" and "error".
//
// ErrorType values: connect_error: dns, connection_refused, tls,
// dial_timeout, dial, oauth2 (no OAuth2 access token; nothing was sent),
// h2c_refused (an h2c client's new connection ended without HTTP/2: the
// server speaks only HTTP/1.1),
// invalid_request (the body could not be built; nothing was sent). http_error: http_<status>. timeout: timeout, cancelled.
// stream_error: connection_reset, stream_reset (HTTP/2 RST_STREAM),
// goaway (HTTP/2 GOAWAY, then the connection closed), refused_stream
// (HTTP/2 REFUSED_STREAM, the re-send too), unexpected_eof, eof_without_done,
// no_response (the connection ended before response headers), read_error,
// line_too_long, event_too_long. invalid_response: wrong_content_type,
// not_event_stream (binary before the first SSE field, no field or comment
// in the first 64 KiB, or bytes but no field at all), malformed_event,
// error_event, empty_completion, too_many_tokens, response_too_large.

// Defaults and bounds.
const (
	maxErrorBody      = 4 << 10          // bytes of a non-2xx body read for its message
	maxErrorMessage   = 256              // bytes of Result.Error
	maxResponseString = 256              // bytes kept of ResponseID / ResponseModel
	drainLimit        = 64 << 10         // bytes read after [DONE] looking for the end
	drainGrace        = time.Second      // time allowed for the end after [DONE]
	itlInitialCap     = 64               // ITL slice capacity preallocated (at most MaxTokens-1); append grows it
	pooledBufferLimit = 64 << 10         // larger stream buffers are not pooled
	defaultIdleConns  = 4096             // idle keep-alive connections per host (default client)
	defaultDialTO     = 30 * time.Second // dial timeout (default client)
)

// ClientConfig configures a Client.
type ClientConfig struct {
	// BaseURL is the OpenAI base URL, e.g. http://127.0.0.1:8000/v1;
	// "/chat/completions" or "/completions" is appended to its path (a query,
	// e.g. api-version, is kept).
	BaseURL string
	// HTTPClient sends the requests. It is built by the caller from
	// prometheus/common config.HTTPClientConfig (auth, TLS, proxy, headers).
	// nil selects a keep-alive client sized for high concurrency.
	HTTPClient *http.Client
	// H2C says HTTPClient speaks HTTP/2 with prior knowledge (h2c): a
	// server that closes a new connection without an answer is then
	// classified as one that does not speak h2c (h2c_refused).
	H2C bool
	// Timeout bounds a whole request, stream included (0: no bound). When
	// it elapses the outcome is timeout.
	Timeout time.Duration
	// UserAgent defaults to "llmprobe/<version>".
	UserAgent string
	// KeepText keeps the completion text (chat content or completions
	// text; reasoning is left out) in Result.Completion, for conversation
	// history. Otherwise the text is never accumulated.
	KeepText bool
	// RecordContent records prompt and completion text on the spans, as
	// the GenAI conventions' opt-in gen_ai.input.messages and
	// gen_ai.output.messages attributes (structured; each text cut at 16
	// KiB). It implies KeepText. Off by default: prompts may be private.
	RecordContent bool
	// Provider is the span's gen_ai.provider.name (DefaultProvider when
	// empty), e.g. "azure.ai.openai" for Azure OpenAI.
	Provider string
	// Tracer, when not nil, gets one CLIENT span per request.
	Tracer trace.Tracer
	// Propagator, when not nil, injects the span context (W3C traceparent)
	// into the request headers.
	Propagator propagation.TextMapPropagator
	// Redactor scrubs the target's secrets from everything the server
	// sends before it is stored (see redact.go); nil scrubs only the
	// header values each request carried.
	Redactor *Redactor
	// ConfiguredHeaders are the headers the target's http_client_config
	// sets (its transport adds them): the protocol's own defaults of the
	// same name (anthropic-version) are left out, so none is sent twice.
	ConfiguredHeaders []string
	// Inspect, when set, is called with every result once its response
	// has been read and cleaned, before its span ends: the span is the
	// request's (nil without a Tracer), for events that only the result
	// can reveal (a change of the target's identity). It runs on the
	// request's goroutine, on the hot path: it must be quick.
	Inspect func(span trace.Span, res *Result)
}

// Client sends streamed completion requests and measures them. It is safe
// for concurrent use.
type Client struct {
	http *http.Client
	h2c  bool
	// urls are the endpoints of the protocols, by API.
	urls map[API]string
	// configured are ClientConfig.ConfiguredHeaders, canonical.
	configured    []string
	timeout       time.Duration
	userAgent     string
	keepText      bool
	recordContent bool
	provider      string
	tracer        trace.Tracer
	propagator    propagation.TextMapPropagator
	serverAddress string
	serverPort    int
	redactor      *Redactor
	inspect       func(trace.Span, *Result)
	identity      identityCleaner
}

// NewClient validates cfg and returns a Client.
func NewClient(cfg ClientConfig) (*Client, error) {
	u, err := url.Parse(cfg.BaseURL)
	if err != nil {
		return nil, fmt.Errorf("invalid base URL: %s", SanitizeMessage(err.Error()))
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("base URL scheme must be http or https, got %q", u.Scheme)
	}
	if u.Host == "" {
		return nil, errors.New("base URL has no host")
	}
	if cfg.Timeout < 0 {
		return nil, fmt.Errorf("negative timeout %v", cfg.Timeout)
	}
	u.Fragment, u.RawFragment = "", ""
	endpoint := func(p string) string {
		e := *u
		e.Path = strings.TrimSuffix(u.Path, "/") + p
		e.RawPath = ""
		return e.String()
	}
	c := &Client{
		http:          cfg.HTTPClient,
		h2c:           cfg.H2C,
		urls:          make(map[API]string, len(protocols)),
		timeout:       cfg.Timeout,
		userAgent:     cfg.UserAgent,
		keepText:      cfg.KeepText || cfg.RecordContent,
		recordContent: cfg.RecordContent,
		provider:      cmp.Or(cfg.Provider, DefaultProvider),
		tracer:        cfg.Tracer,
		propagator:    cfg.Propagator,
		serverAddress: u.Hostname(),
		redactor:      cfg.Redactor,
		inspect:       cfg.Inspect,
	}
	for api, p := range protocols {
		c.urls[api] = endpoint(p.path())
	}
	for _, h := range cfg.ConfiguredHeaders {
		c.configured = append(c.configured, http.CanonicalHeaderKey(h))
	}
	if c.http == nil {
		c.http = defaultHTTPClient()
	}
	c.http = withoutRewind(c.http)
	if c.userAgent == "" {
		v := version.Version
		if v == "" {
			v = "dev"
		}
		c.userAgent = "llmprobe/" + v
	}
	c.serverPort, _ = strconv.Atoi(u.Port())
	if c.serverPort == 0 {
		c.serverPort = 80
		if u.Scheme == "https" {
			c.serverPort = 443
		}
	}
	return c, nil
}

// defaultHTTPClient returns the client used when ClientConfig.HTTPClient is
// nil: http.DefaultTransport's settings with a large keep-alive pool per
// host, so that thousands of concurrent streams reuse connections, and no
// transparent compression (a compressing proxy would buffer the stream),
// as in prometheus/common's client.
func defaultHTTPClient() *http.Client {
	return httpclient.FromTransport(&http.Transport{
		Proxy: http.ProxyFromEnvironment,
		DialContext: (&net.Dialer{
			Timeout:   defaultDialTO,
			KeepAlive: 30 * time.Second,
		}).DialContext,
		ForceAttemptHTTP2:     true,
		DisableCompression:    true,
		MaxIdleConns:          0, // no global bound; per host below
		MaxIdleConnsPerHost:   defaultIdleConns,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}, false, 0)
}

// streamState is the per-request parsing state, pooled.
type streamState struct {
	sr   SSEReader
	dec  chunkDecoder
	text []byte // kept completion text, or the window of an answer
	// answer is what an embeddings answer leaves while it is read.
	answer embeddingsAnswer
}

var streamStates = sync.Pool{New: func() any { return new(streamState) }}

// bodyBuffers size request bodies: one is taken to encode a body and put
// back as soon as the body is copied, so an open stream holds its body
// once (the transport's copy), not twice.
var bodyBuffers = sync.Pool{New: func() any { return new([]byte) }}

// putBodyBuffer returns an encoding buffer to bodyBuffers (unless it
// grew past pooledBufferLimit).
func putBodyBuffer(p *[]byte, b []byte) {
	if cap(b) > pooledBufferLimit {
		b = nil
	}
	*p = b[:0]
	bodyBuffers.Put(p)
}

func (st *streamState) release() {
	st.sr.Reset(nil, 0)
	if cap(st.sr.buf) > pooledBufferLimit {
		st.sr.buf = nil
	}
	if cap(st.sr.scratch) > pooledBufferLimit {
		st.sr.scratch = nil
	}
	if cap(st.text) > pooledBufferLimit {
		st.text = nil
	}
	if cap(st.answer.scratch) > pooledBufferLimit {
		st.answer.scratch = nil
	}
	st.dec.s.b = nil
	streamStates.Put(st)
}

// Do sends req and fills res: timing, outcome, token counts. It never
// returns an error and never panics on anything the server sends: every
// failure is an Outcome in res. Cancelling ctx ends the request with
// outcome timeout and ErrorType "cancelled".
//
// The caller sets res's identity and plan fields (Target, Model, Class,
// Planned, Dispatched, Planned*Tokens, ...); Do resets and fills the
// measured ones. When res.Dispatched is zero it is set to the time Do was
// called. Do reuses the backing array of res.ITLs.
func (c *Client) Do(ctx context.Context, req *Request, res *Result) {
	if res == nil {
		return
	}
	called := time.Now()
	if res.Dispatched.IsZero() {
		res.Dispatched = called
	}
	resetMeasurements(res)
	if req == nil {
		res.fail(OutcomeConnectError, "invalid_request", "nil request")
		return
	}
	res.MaxTokens, res.Sampling = req.MaxTokens, req.Sampling
	spanCtx, span := c.startSpan(ctx, req, res)
	c.do(ctx, spanCtx, span, req, res)
	if c.inspect != nil {
		c.inspect(span, res)
	}
	c.endSpan(span, res)
}

// resetMeasurements clears what Do fills.
func resetMeasurements(r *Result) {
	itls := r.ITLs[:0]
	r.Start, r.ClientWait, r.ConnReused, r.Retries = time.Time{}, 0, false, 0
	r.DNS, r.Connect, r.TLS = 0, 0, 0
	r.Outcome, r.ErrorType, r.Error, r.StatusCode, r.RetryAfter, r.Proto = "", "", "", 0, 0, ""
	r.FirstToken, r.TTFT, r.E2E, r.TPOT, r.ITLs, r.Chunks, r.CoalescedChunks = false, 0, 0, 0, itls, 0, 0
	r.FirstAnswer, r.TTFA, r.ReasoningChunks, r.ToolCall = false, 0, 0, false
	r.PromptTokens, r.OutputTokens, r.CachedTokens = 0, 0, 0
	r.ReasoningTokens, r.ReasoningReported = 0, false
	r.UsageReported, r.CachedTokensReported, r.Anomalies = false, false, 0
	r.FinishReason, r.ResponseModel, r.ResponseID, r.TraceID, r.Completion = "", "", "", "", ""
	r.SystemFingerprint, r.Server = "", ""
}

// do runs the request. parent is the caller's context (its cancellation
// means "cancelled"), ctx carries the span.
func (c *Client) do(parent, ctx context.Context, span trace.Span, req *Request, res *Result) {
	st := streamStates.Get().(*streamState)
	defer st.release()

	enc := bodyBuffers.Get().(*[]byte)
	encoded, err := EncodeBody((*enc)[:0], req)
	if err != nil {
		putBodyBuffer(enc, encoded)
		res.fail(OutcomeConnectError, "invalid_request", "building the request body: "+err.Error())
		return
	}
	// The transport may still hold the body after Do returns (a retry's
	// GetBody, a write racing an early response), so it gets its own copy;
	// the pooled buffer only sizes it.
	body := bytes.Clone(encoded)
	putBodyBuffer(enc, encoded)

	var cancel context.CancelFunc
	if c.timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
	} else {
		ctx, cancel = context.WithCancel(ctx)
	}
	defer cancel()

	proto := protocols[req.API]
	target := c.urls[req.API]
	var (
		resp *http.Response
		ct   *connTrace
		sent time.Time
	)
	// Whatever the server sends is scrubbed of the secrets this request
	// carried before anything downstream sees it.
	var auth [2]string
	var rawServer string
	defer func() {
		m := c.redactor.requestSet(auth)
		c.identity.clean(res, rawServer, m, req)
		c.scrubResult(res, m)
	}()
	for attempt := 0; ; attempt++ {
		ct = newConnTrace()
		actx := httptrace.WithClientTrace(ctx, &ct.hooks)
		hr, err := http.NewRequestWithContext(actx, http.MethodPost, target, bytes.NewReader(body))
		if err != nil {
			res.fail(OutcomeConnectError, "invalid_request", "building the request: "+SanitizeMessage(err.Error()))
			return
		}
		hr.Header["Content-Type"] = []string{"application/json"}
		if proto.streaming() {
			hr.Header["Accept"] = []string{"text/event-stream"}
		} else {
			hr.Header["Accept"] = []string{"application/json"}
		}
		hr.Header["User-Agent"] = []string{c.userAgent}
		proto.headers(hr.Header)
		for _, h := range c.configured {
			delete(hr.Header, h)
		}
		c.inject(actx, hr.Header)

		sent = time.Now()
		resp, err = c.http.Do(hr)
		ct.apply(res)
		auth = ct.sentAuth()
		res.Retries += ct.transportRetries()
		if err == nil {
			break
		}
		if attempt == 0 && resendable(err, ct) && parent.Err() == nil && ctx.Err() == nil {
			// The server answered nothing and processed nothing: one
			// more try, at once, counted so that it is never hidden.
			res.Retries++
			continue
		}
		end := time.Now()
		c.roundTripFailed(parent, ctx, err, ct, res)
		if !res.Start.IsZero() {
			res.E2E = end.Sub(res.Start)
		} else {
			res.ClientWait = end.Sub(res.Dispatched) // time spent trying to connect
		}
		return
	}
	defer resp.Body.Close()
	if res.Start.IsZero() { // the transport reported no connection (a custom RoundTripper)
		res.Start, res.ClientWait = sent, sent.Sub(res.Dispatched)
	}
	start := res.Start
	res.StatusCode = resp.StatusCode
	res.Proto = protoOf(resp)
	rawServer = resp.Header.Get("Server")
	txt := &serverText{secrets: c.redactor.requestSet(auth), req: req}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		httpFailed(resp, txt, res)
		res.E2E = time.Since(start)
		return
	}

	if ce := resp.Header.Get("Content-Encoding"); ce != "" && !strings.EqualFold(ce, "identity") {
		// llmprobe asks for no compression; a compressed body cannot be
		// timed event by event.
		res.fail(OutcomeInvalidResponse, "compressed_response",
			"response is compressed (Content-Encoding "+txt.quote(ce, 32)+") although none was accepted")
		res.E2E = time.Since(start)
		return
	}
	if !proto.streaming() {
		c.readAnswer(parent, ctx, st, req, txt, resp.Body, res, start)
		return
	}
	st.sr.Reset(resp.Body, DefaultMaxSSELine)
	if !isEventStream(resp.Header.Get("Content-Type")) {
		ok, err := st.sr.looksLikeSSE()
		switch {
		case err != nil:
			streamFailed(parent, ctx, err, res)
			res.E2E = time.Since(start)
			return
		case !ok:
			res.fail(OutcomeInvalidResponse, "wrong_content_type",
				"response is not an event stream (Content-Type "+txt.quote(resp.Header.Get("Content-Type"), 64)+")")
			res.E2E = time.Since(start)
			return
		}
	}
	c.readStream(parent, ctx, cancel, span, st, req, txt, res, start)
}

// readAnswer reads a non-streaming answer (embeddings) as it arrives,
// without keeping it (embeddings.go): E2E is the time to its last byte;
// it must hold one good result per input sent.
func (c *Client) readAnswer(parent, ctx context.Context, st *streamState, req *Request, txt *serverText, body io.Reader, res *Result, start time.Time) {
	lim := embeddingsLimits(req)
	if cap(st.text) < answerWindowBase {
		st.text = make([]byte, 0, answerWindowBase)
	}
	dec := &st.dec
	dec.begin()
	dec.s.b, dec.s.i = st.text[:0], 0
	a := answerReader{d: dec, src: body, buf: st.text[:0], limit: lim.total, window: lim.window}
	x := &st.answer
	x.begin(req, lim)
	err := x.read(&a)
	st.text = a.buf[:0]
	end := a.end
	if !a.eof {
		end = time.Now()
	}
	res.E2E = end.Sub(start)
	dims := fmt.Sprintf("up to %d dimensions", defaultEmbeddingDims)
	if lim.dims > 0 {
		dims = fmt.Sprintf("%d dimensions", lim.dims)
	}
	switch {
	case errors.Is(a.err, errAnswerTooLarge):
		res.fail(OutcomeInvalidResponse, "response_too_large",
			fmt.Sprintf("the answer passed %d bytes, the most %d inputs of %s allow; reading stopped", lim.total, lim.inputs, dims))
		return
	case errors.Is(a.err, errMemberTooLarge):
		res.fail(OutcomeInvalidResponse, "response_too_large",
			fmt.Sprintf("a member of the answer passed %d bytes, the most one embedding of %s allows; reading stopped", lim.window, dims))
		return
	case a.err != nil:
		streamFailed(parent, ctx, a.err, res)
		return
	case errors.Is(err, errTooDeep):
		res.fail(OutcomeInvalidResponse, "json_too_deep", fmt.Sprintf("the answer nests JSON deeper than %d levels", maxJSONDepth))
		return
	case errors.Is(err, errNotObject):
		res.fail(OutcomeInvalidResponse, "malformed_response", "the answer is not a JSON object")
		return
	case err != nil:
		res.fail(OutcomeInvalidResponse, "malformed_response", fmt.Sprintf("the answer is not valid JSON (byte %d)", a.pos()))
		return
	}
	if x.hasModel {
		setResponseString(&res.ResponseModel, jsonString{raw: x.model, esc: x.modelEsc, ok: true}, &dec.keyBuf)
	}
	if x.isError {
		msg := "error object in the answer"
		if x.hasErrMsg {
			msg += ": " + txt.clean(decodeString(jsonString{raw: x.errMsg, esc: x.errMsgEsc, ok: true}))
		}
		res.fail(OutcomeInvalidResponse, "error_event", msg)
		return
	}
	if x.errType != "" {
		res.fail(OutcomeInvalidResponse, x.errType, x.msg)
		return
	}
	if x.items != lim.inputs {
		res.fail(OutcomeInvalidResponse, "wrong_result_count", fmt.Sprintf("%d results for %d inputs", x.items, lim.inputs))
		return
	}
	res.PromptTokens = res.PlannedPromptTokens
	if x.hasUsage {
		applyUsage(res, x.usage, 0)
		res.OutputTokens, res.UsageReported = 0, x.usage.hasPrompt
	}
	res.Outcome = OutcomeSuccess
}

// Re-sends. The client re-sends a request itself, once, at once and
// counted (Result.Retries), when the server answered nothing and
// processed nothing (resendable), and never lets net/http's transport
// re-send one whose body it began to send: the transport gets each
// request without GetBody (noRewind). Left to itself, net/http's HTTP/2
// transport re-sends a request whose stream the server refused
// (RST_STREAM REFUSED_STREAM) or reset with PROTOCOL_ERROR before
// answering, or had not begun when it sent GOAWAY, up to seven times
// with a back-off of 1 s, 2 s, 4 s ...: a server that refuses every
// stream then held each request, and its in-flight slot, for the whole
// request timeout, to end as a timeout, and one that resets every stream
// with PROTOCOL_ERROR made it dial a new connection per re-send without
// pause. (Over HTTP/1.1 the transport re-sent a request of which nothing
// was written on a reused connection: the keep-alive race's re-send
// does that now.) Same-host redirects still re-send the body: the
// http.Client above the transport keeps GetBody.

// resendable reports whether a round trip failed in a way that the
// client re-sends once: the keep-alive race (closedBeforeResponse), an
// HTTP/2 failure the transport would have re-sent (h2Unsent), or an
// HTTP/2 connection from the pool that could not take the request after
// all (it filled up or closed first: nothing was sent), which the
// transport would have sent again elsewhere had it been able to rewind
// the body it had closed (net/http's "cannot rewind body"). The re-send
// goes where the transport's pool sends it (net/http offers no way to
// choose): a new connection after a close, a GOAWAY or a PROTOCOL_ERROR
// (the transport stops using that connection); after a refused stream,
// the same shared connection unless it is full.
func resendable(err error, ct *connTrace) bool {
	if closedBeforeResponse(err, ct) || strings.Contains(err.Error(), "net/http: cannot rewind body after connection loss") {
		return true
	}
	_, unsent := h2Unsent(err)
	return unsent
}

// noRewind is the round tripper of every request the client sends: it
// hands the transport below a shallow copy of each request without
// GetBody, so that the transport never re-sends it (see Re-sends).
type noRewind struct{ rt http.RoundTripper }

func (n noRewind) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.GetBody == nil {
		return n.rt.RoundTrip(req)
	}
	r := *req
	r.GetBody = nil
	return n.rt.RoundTrip(&r)
}

// CloseIdleConnections closes the idle connections of the transport
// below.
func (n noRewind) CloseIdleConnections() {
	if c, ok := n.rt.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// withoutRewind returns a copy of hc whose transport is wrapped in
// noRewind (hc itself is left as it is: the caller may share it).
func withoutRewind(hc *http.Client) *http.Client {
	c := *hc
	rt := c.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	c.Transport = noRewind{rt: rt}
	return &c
}

// closedBeforeResponse reports whether a round trip failed because the
// server closed or reset a reused keep-alive connection before a single
// byte of the response arrived: the keep-alive race, where a server's idle
// timer fires as the next request is written (Go's transport then says
// "server closed idle connection", or the read finds EOF or a reset), or
// a server that closes a reused connection when a request arrives. Go's
// transport retries this once itself for idempotent requests, not for a
// POST; the client does the same, once. A fresh connection that fails so
// is the server's answer (no_response), and once a byte arrived the
// server had the request: neither is retried.
func closedBeforeResponse(err error, ct *connTrace) bool {
	if !ct.reusedConn() || ct.gotResponseByte() {
		return false
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return false
	}
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, net.ErrClosed) || strings.Contains(err.Error(), "server closed idle connection")
}

// scrubResult cleans every server-supplied string of res of characters
// (the id, model and finish reason; the error was cleaned when it was
// written) and secrets.
// A cut secret is looked for at the end of the strings that can have
// been cut (messages, and id or model at their length limit).
func (c *Client) scrubResult(res *Result, m *matcher) {
	// Label values, span attributes and lines of the page: no control or
	// bidirectional formatting character (the secrets after, so that one
	// such character cannot split a secret out of sight).
	res.ResponseID, res.ResponseModel, res.FinishReason = scrub.Chars(res.ResponseID), scrub.Chars(res.ResponseModel), scrub.Chars(res.FinishReason)
	if m == nil {
		return
	}
	res.Error = scrubSecrets(res.Error, m, true)
	res.ResponseID = scrubSecrets(res.ResponseID, m, len(res.ResponseID) >= maxResponseString)
	res.ResponseModel = scrubSecrets(res.ResponseModel, m, len(res.ResponseModel) >= maxResponseString)
	res.FinishReason = scrubSecrets(res.FinishReason, m, len(res.FinishReason) >= maxResponseString)
	if c.recordContent {
		// Recorded on spans: scrub it too (history alone goes back only
		// to the server that wrote it).
		res.Completion = scrubSecrets(res.Completion, m, false)
	}
}

// Bounds on what one response may make the client hold (a server that
// ignores max_tokens would otherwise stream until the timeout, growing the
// ITL slice and, for conversations, the kept text without limit).
//
//   - token-bearing events: 4 × max_tokens + 64 (servers split a token
//     over several events only rarely; 4× leaves room for that and for
//     servers that count differently), else invalid_response
//     "too_many_tokens";
//   - bytes of the stream (all of them: comments, id, retry and blank
//     lines count too): 1 MiB + 4 KiB per allowed event, and kept
//     completion text: 64 KiB + 64 bytes per allowed event, else
//     invalid_response "response_too_large".
//
// Reading stops there and the connection is closed.
const (
	// sniffBytes: a body whose first 64 KiB hold no SSE field or comment
	// is not an event stream (invalid_response "not_event_stream"); nor is
	// one with binary lines before its first field (SSEReader.Bound).
	sniffBytes = 64 << 10
	// chunkTokenSlack: with usage in every chunk, a chunk carries at most
	// one token per byte of its generated text (content, reasoning, text,
	// tool arguments, as sent) plus this many that decode to no text
	// (special tokens a parser strips); a larger jump of completion_tokens
	// is an invalid_usage anomaly and the chunk counts as one gap.
	chunkTokenSlack  = 8
	tokenBoundFactor = 4
	tokenBoundSlack  = 64
	tokenBoundNoMax  = 1 << 16 // max_tokens not sent: the server's default applies
	streamBytesBase  = 1 << 20
	streamBytesPer   = 4 << 10
	textBytesBase    = 64 << 10
	textBytesPer     = 64
)

// responseBounds returns the most token-bearing events, stream bytes and
// kept text bytes a response to a request for maxTokens may bring.
func responseBounds(maxTokens int) (events, streamBytes, textBytes int) {
	events = tokenBoundNoMax
	if maxTokens > 0 {
		events = tokenBoundFactor*min(maxTokens, tokenBoundNoMax) + tokenBoundSlack
	}
	return events, streamBytesBase + streamBytesPer*events, textBytesBase + textBytesPer*events
}

// readStream consumes the event stream and fills the measurements.
func (c *Client) readStream(parent, ctx context.Context, cancel context.CancelFunc, span trace.Span, st *streamState, req *Request, txt *serverText, res *Result, start time.Time) {
	keepText := c.keepText || req.KeepText
	var (
		first, last time.Time
		end         time.Time
		chunks      int
		sawDone     bool
		sawFinish   bool
		hasUsage    bool
		usage       tokenUsage
		// completed is the last per-chunk completion_tokens seen
		// (continuous usage), -1 before any.
		completed = -1
	)
	maxEvents, maxBytes, maxText := responseBounds(req.MaxTokens)
	if cap(res.ITLs) == 0 && req.MaxTokens > 1 {
		res.ITLs = make([]time.Duration, 0, min(req.MaxTokens-1, itlInitialCap))
	}
	st.text = st.text[:0]
	sr, dec := &st.sr, &st.dec
	// Every byte counts against the bound, lines that make no event too.
	sr.Bound(int64(maxBytes), sniffBytes)
	proto := protocols[req.API]
	dec.begin()
loop:
	for {
		ev, err := sr.Next()
		if err != nil {
			end = time.Now()
			switch {
			case err == io.EOF:
			case errors.Is(err, ErrStreamTooLarge):
				res.fail(OutcomeInvalidResponse, "response_too_large",
					fmt.Sprintf("the stream passed %d bytes (%d token events so far), far more than max_tokens %d allows; reading stopped", maxBytes, chunks, req.MaxTokens))
			case errors.Is(err, errNoField):
				res.fail(OutcomeInvalidResponse, "not_event_stream",
					fmt.Sprintf("the response body is not an event stream: no SSE field or comment in its first %d bytes", sniffBytes))
			case errors.Is(err, ErrNotEventStream):
				res.fail(OutcomeInvalidResponse, "not_event_stream",
					fmt.Sprintf("the response body is not an event stream: binary data before its first SSE field (%d bytes read)", sr.BytesRead()))
			default:
				streamFailed(parent, ctx, err, res)
			}
			break
		}
		kind, err := proto.decode(dec, ev)
		switch {
		case kind == eventSkip:
			continue
		case kind == eventError:
			end = ev.Time
			res.fail(OutcomeInvalidResponse, "error_event", errorEventMessage(dec, ev.Data, txt))
			break loop
		case kind == eventDone:
			sawDone = true
			end = ev.Time
			break loop
		case err != nil:
			end = ev.Time
			switch {
			case ev.Partial:
				res.fail(OutcomeStreamError, "eof_without_done", "stream ended inside an event")
			case errors.Is(err, errTooDeep):
				res.fail(OutcomeInvalidResponse, "json_too_deep", fmt.Sprintf("event after %d token chunks nests JSON deeper than %d levels", chunks, maxJSONDepth))
			default:
				res.fail(OutcomeInvalidResponse, "malformed_event", malformedMessage(err, dec, chunks))
			}
			break loop
		}
		ch := &dec.c
		if ch.tokens {
			if chunks == maxEvents {
				end = ev.Time
				res.fail(OutcomeInvalidResponse, "too_many_tokens",
					fmt.Sprintf("more than %d token events for max_tokens %d: the server does not honour max_tokens; reading stopped", maxEvents, req.MaxTokens))
				break
			}
			if chunks == 0 {
				first = ev.Time
				spanFirstToken(span, first)
			} else {
				gap := ev.Time.Sub(last)
				// With usage in every chunk, a chunk of k tokens is k
				// gaps of gap/k (bounded like the events themselves),
				// as far as its text can carry k tokens: a larger jump
				// in completion_tokens cannot be right.
				k := 1
				if ch.hasUsage && ch.usage.hasCompletion && completed >= 0 {
					if jump := ch.usage.completion - completed; jump > ch.tokenBytes+chunkTokenSlack {
						res.Anomalies |= AnomalyInvalidUsage
					} else {
						k = min(max(jump, 1), maxEvents-len(res.ITLs))
					}
				}
				k = max(k, 1)
				q, rem := gap/time.Duration(k), int(gap%time.Duration(k))
				for j := range k {
					d := q
					if j < rem {
						d++ // the gaps add up to the chunk's gap exactly
					}
					res.ITLs = append(res.ITLs, d)
				}
				if ev.Time.Equal(last) {
					res.CoalescedChunks++
				}
			}
			if ch.answer && !res.FirstAnswer {
				res.FirstAnswer, res.TTFA = true, ev.Time.Sub(start)
			}
			if !ch.answer {
				res.ReasoningChunks++
			}
			res.ToolCall = res.ToolCall || ch.toolCall
			last = ev.Time
			chunks++
			if keepText {
				for _, t := range ch.texts {
					st.text = appendUnquoted(st.text, t.raw)
				}
				if len(st.text) > maxText {
					end = ev.Time
					res.fail(OutcomeInvalidResponse, "response_too_large",
						fmt.Sprintf("the completion passed %d bytes in %d token events, far more than max_tokens %d allows; reading stopped", maxText, chunks, req.MaxTokens))
					st.text = st.text[:0]
					break
				}
			}
		}
		if ch.finish.ok {
			sawFinish = true
			setResponseString(&res.FinishReason, ch.finish, &dec.keyBuf)
		}
		if ch.hasUsage {
			hasUsage, usage = true, ch.usage
			if ch.usage.hasCompletion {
				completed = ch.usage.completion
			}
		}
		if ch.id.ok {
			setResponseString(&res.ResponseID, ch.id, &dec.keyBuf)
		}
		if ch.model.ok {
			setResponseString(&res.ResponseModel, ch.model, &dec.keyBuf)
		}
		if ch.fingerprint.ok {
			setResponseString(&res.SystemFingerprint, ch.fingerprint, &dec.keyBuf)
		}
		if ch.isError {
			end = ev.Time
			msg := "error object in stream"
			if ch.errMsg.ok {
				msg = "error object in stream: " + txt.clean(decodeString(ch.errMsg))
			}
			res.fail(OutcomeInvalidResponse, "error_event", msg)
			break loop
		}
		if ch.end {
			// The event that ends the protocol's stream (Responses'
			// response.completed, Messages' message_stop).
			sawDone = true
			end = ev.Time
			break
		}
	}

	if res.Outcome == "" {
		switch {
		case !sawDone && !sawFinish && sr.Fields() == 0 && sr.BytesRead() > 0:
			// Bytes came, but not one event: not an event stream at all
			// (a compressed or binary body under an event-stream type).
			res.fail(OutcomeInvalidResponse, "not_event_stream",
				fmt.Sprintf("%d bytes of response body held no server-sent event", sr.BytesRead()))
		case !sawDone && !sawFinish:
			res.fail(OutcomeStreamError, "eof_without_done", "stream ended without [DONE] or a finish_reason")
		case chunks == 0 && !deliberateEmpty(res.FinishReason):
			msg := "stream ended without any generated text"
			if res.FinishReason != "" {
				msg += " (finish_reason " + strconv.Quote(res.FinishReason) + ")"
			}
			res.fail(OutcomeInvalidResponse, "empty_completion", msg)
		default:
			res.Outcome = OutcomeSuccess
		}
	}
	if sawDone {
		// Read on to the end of the body so that the connection is reused;
		// bounded, since a server may keep the stream open after [DONE].
		t := time.AfterFunc(drainGrace, cancel)
		sr.drain(drainLimit)
		t.Stop()
	}

	res.Chunks = chunks
	if chunks > 0 {
		res.FirstToken = true
		res.TTFT = first.Sub(start)
		res.E2E = last.Sub(start)
	} else {
		res.E2E = end.Sub(start)
	}
	res.OutputTokens, res.PromptTokens = chunks, res.PlannedPromptTokens
	if hasUsage {
		applyUsage(res, usage, req.MaxTokens)
	}
	if res.FirstToken && res.OutputTokens >= 2 {
		res.TPOT = (res.E2E - res.TTFT) / time.Duration(res.OutputTokens-1)
	}
	if res.ErrorType == "too_many_tokens" {
		res.Anomalies |= AnomalyOutputExceedsMaxTokens
	}
	if keepText {
		res.Completion = string(st.text)
	}
}

// deliberateEmpty reports whether a finish reason says the server meant
// to answer without generated text: any well-formed reason but stop and
// length (which end a generation that produced nothing), e.g.
// content_filter, or llm-d's cache_threshold (answered from its cache-hit
// threshold rule). Such an answer is a success, exported under its
// bounded finish reason label ("other" for the unknown ones).
func deliberateEmpty(reason string) bool {
	switch reason {
	case "", "stop", "length":
		return false
	}
	return true
}

// applyUsage takes the token counts of the server's usage into res,
// noting what cannot be right: a count that is not one (negative,
// fractional) is ignored, cached tokens above the prompt are clamped to
// it, output above max_tokens is kept (it is what the server did).
func applyUsage(res *Result, u tokenUsage, maxTokens int) {
	if u.badPrompt || u.badCompletion || u.badCached || u.badReasoning {
		res.Anomalies |= AnomalyInvalidUsage
	}
	if u.hasCompletion {
		res.OutputTokens, res.UsageReported = u.completion, true
		if maxTokens > 0 && u.completion > maxTokens {
			res.Anomalies |= AnomalyOutputExceedsMaxTokens
		}
	}
	if u.hasPrompt {
		res.PromptTokens = u.prompt
	}
	if u.hasReasoning {
		res.ReasoningTokens, res.ReasoningReported = u.reasoning, true
	}
	if u.hasCached {
		res.CachedTokens, res.CachedTokensReported = u.cached, true
		if u.hasPrompt && u.cached > u.prompt {
			res.CachedTokens = u.prompt
			res.Anomalies |= AnomalyCachedExceedsPrompt
		}
	}
}

// setResponseString stores a short string from the stream in *dst,
// allocating only when it changed (id and model repeat on every chunk).
func setResponseString(dst *string, s jsonString, scratch *[]byte) {
	b := s.raw
	if s.esc || !utf8.Valid(b) {
		*scratch = appendUnquoted((*scratch)[:0], b)
		b = *scratch
	}
	if len(b) > maxResponseString {
		b = b[:maxResponseString]
		for len(b) > 0 && !utf8.Valid(b) {
			b = b[:len(b)-1]
		}
	}
	if string(b) == *dst {
		return
	}
	switch string(b) { // common finish reasons, without allocating
	case "stop":
		*dst = "stop"
	case "length":
		*dst = "length"
	default:
		*dst = string(b)
	}
}

// errorEventMessage renders the data of an `event: error`: the message of
// a JSON error object ({"error": {"message"}}, {"error": "..."}, or a flat
// {"message"}), or the text itself.
func errorEventMessage(dec *chunkDecoder, data []byte, txt *serverText) string {
	if dec.decode(data) == nil {
		switch {
		case dec.c.errMsg.ok:
			return "error event: " + txt.clean(decodeString(dec.c.errMsg))
		case dec.c.message.ok:
			return "error event: " + txt.clean(decodeString(dec.c.message))
		}
		return "error event"
	}
	if len(data) == 0 || !utf8.Valid(data) {
		return "error event"
	}
	return "error event: " + txt.clean(string(data))
}

func decodeString(s jsonString) string {
	if !s.esc && utf8.Valid(s.raw) {
		return string(s.raw)
	}
	return string(appendUnquoted(nil, s.raw))
}

func malformedMessage(err error, dec *chunkDecoder, chunks int) string {
	if errors.Is(err, errNotObject) {
		return fmt.Sprintf("event after %d token chunks is not a JSON object", chunks)
	}
	return fmt.Sprintf("event after %d token chunks is not valid JSON (byte %d)", chunks, dec.errAt)
}

// isEventStream reports whether a Content-Type is text/event-stream.
func isEventStream(ct string) bool {
	const want = "text/event-stream"
	ct = strings.TrimLeft(ct, " \t")
	if len(ct) < len(want) || !strings.EqualFold(ct[:len(want)], want) {
		return false
	}
	rest := ct[len(want):]
	return rest == "" || rest[0] == ';' || rest[0] == ' ' || rest[0] == '\t'
}
