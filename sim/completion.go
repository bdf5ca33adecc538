// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// handleCompletion serves POST /v1/chat/completions and /v1/completions.
func (s *Server) handleCompletion(w http.ResponseWriter, r *http.Request, api apiKind) {
	var lc requestLifecycle
	lc.begin(s, r, api)
	defer lc.end()

	var flt fault
	faultVals, fromHeader := r.Header[FaultHeader]
	if fromHeader {
		if len(faultVals) != 1 {
			s.reject(w, &lc, badRequest(FaultHeader, "give exactly one %s header, got %d", FaultHeader, len(faultVals)))
			return
		}
		f, err := parseFaultHeader(faultVals[0], s.cfg.Faults.HTTP429.RetryAfter)
		if err != nil {
			s.reject(w, &lc, badRequest(FaultHeader, "%s", err.Error()))
			return
		}
		flt = f
	}

	buf, aerr := s.readBody(w, r)
	if aerr != nil {
		s.reject(w, &lc, aerr)
		return
	}
	var req completionRequest
	aerr = decodeJSON(buf.Bytes(), &req)
	putBody(buf)
	if aerr != nil {
		s.reject(w, &lc, aerr)
		return
	}
	modelIdx, aerr := s.resolveModel(req.Model)
	if aerr != nil {
		s.reject(w, &lc, aerr)
		return
	}
	lc.model = s.modelName(modelIdx)
	if a := s.adapterOf(modelIdx); a != nil {
		lc.baseModel = s.cfg.Models[a.base]
	}
	lc.stream = req.Stream
	if aerr = validateSampling(&req); aerr != nil {
		s.reject(w, &lc, aerr)
		return
	}

	sq := &seq{notify: make(chan struct{}, 1), ignoreEOS: req.IgnoreEOS, adapter: s.adapterOf(modelIdx)}
	sq.hasher = newBlockHasher(s.cfg.BlockSize, make([]uint64, 0, 8))
	effort := 1.0
	var tools *toolRequest
	switch api {
	case apiChat:
		if len(req.Messages) == 0 {
			s.reject(w, &lc, badRequest("messages", "messages is required and must not be empty"))
			return
		}
		if aerr = validateMessages(req.Messages); aerr != nil {
			s.reject(w, &lc, aerr)
			return
		}
		if effort, aerr = reasoningEffortFactor(req.ReasoningEffort); aerr != nil {
			s.reject(w, &lc, aerr)
			return
		}
		if tools, aerr = parseTools(&req); aerr != nil {
			s.reject(w, &lc, aerr)
			return
		}
		if lc.imageTokens, aerr = s.checkImageBudget(req.Messages, "messages"); aerr != nil {
			s.reject(w, &lc, aerr)
			return
		}
		sq.promptTokens = s.tok.emitChat(&sq.hasher, req.Messages, true)
	case apiCompletions:
		p, aerr := parsePrompt(req.Prompt)
		if aerr != nil {
			s.reject(w, &lc, aerr)
			return
		}
		if p.isIDs {
			for _, id := range p.ids {
				sq.hasher.add(id)
			}
			sq.promptTokens = len(p.ids)
		} else {
			sq.promptTokens = s.tok.emitText(&sq.hasher, p.text)
		}
		if sq.promptTokens == 0 {
			s.reject(w, &lc, badRequest("prompt", "prompt must contain at least one token"))
			return
		}
	}
	if sq.maxTokens, aerr = resolveMaxTokens(&req, sq.promptTokens, &s.cfg); aerr != nil {
		s.reject(w, &lc, aerr)
		return
	}
	if req.MinTokens != nil {
		sq.minTokens = *req.MinTokens
	}
	sq.seed = s.sequenceSeed(&req, sq)
	var call *toolCall
	if tools != nil {
		call = s.planToolCall(tools, sq.seed)
	}
	if api == apiChat {
		sq.toolCall = call != nil
		sq.reasoning = s.cfg.plannedReasoning(sq.maxTokens, effort, sq.toolCall)
		lc.reasoning, lc.toolCall = sq.reasoning, sq.toolCall
	}
	lc.promptTokens = sq.promptTokens

	if !fromHeader {
		flt = s.drawFault()
		if flt.kind == faultNoDone && !req.Stream {
			flt = fault{} // meaningless without a stream
		}
	} else if flt.kind == faultNoDone && !req.Stream {
		s.reject(w, &lc, badRequest(FaultHeader, "%s no_done applies to streaming requests only", FaultHeader))
		return
	}
	if flt.kind != faultNone {
		lc.fault = flt.kind
		s.metrics.faults[flt.kind].Inc()
	}
	switch flt.kind {
	case faultHTTP500:
		s.reject(w, &lc, &apiError{status: http.StatusInternalServerError, typ: "server_error", code: "internal_error",
			message: "The server had an error while processing your request (simulated fault)."})
		return
	case faultHTTP503:
		s.reject(w, &lc, &apiError{status: http.StatusServiceUnavailable, typ: "server_error", code: "service_unavailable",
			message: "The server is overloaded or not ready yet (simulated fault)."})
		return
	case faultHTTP429:
		w.Header().Set("Retry-After", retryAfterSeconds(flt.retryAfter))
		s.reject(w, &lc, &apiError{status: http.StatusTooManyRequests, typ: "requests", code: "rate_limit_exceeded",
			message: "Rate limit reached for requests (simulated fault)."})
		return
	case faultEmpty:
		sq.empty = true
	}

	lc.queued = time.Now()
	if err := s.engine.submit(r.Context(), sq); err != nil {
		if errors.Is(err, errEngineStopped) {
			s.reject(w, &lc, &apiError{status: http.StatusServiceUnavailable, typ: "server_error", code: "service_unavailable",
				message: "The server is shutting down."})
			return
		}
		lc.errMsg = "client went away before admission"
		return
	}

	rs := responseState{s: s, w: w, ctx: r.Context(), lc: &lc, sq: sq, api: api, flt: flt, model: modelIdx, tool: call}
	if req.Stream {
		if so := req.StreamOptions; so != nil {
			rs.includeUsage = so.IncludeUsage
			rs.continuous = so.IncludeUsage && so.ContinuousUsageStats
		}
		rs.stream()
	} else {
		rs.unary()
	}
}

// reject answers with an error and records it on the lifecycle.
func (s *Server) reject(w http.ResponseWriter, lc *requestLifecycle, e *apiError) {
	lc.status = e.status
	lc.errMsg = e.message
	writeError(w, e)
}

// sequenceSeed chooses the seed of a sequence's words and early stops:
// derived from the prompt when the output must be reproducible
// (temperature 0, or an explicit seed), random otherwise.
func (s *Server) sequenceSeed(req *completionRequest, sq *seq) uint64 {
	return s.seedFor(req.Seed, req.Temperature, sq)
}

// seedFor is sequenceSeed for the given seed and temperature.
func (s *Server) seedFor(seed *int64, temperature *float64, sq *seq) uint64 {
	h := &sq.hasher
	promptHash := splitmix64(h.prev ^ h.cur*chainPrime ^ uint64(h.n)<<32 ^ uint64(sq.promptTokens))
	switch {
	case seed != nil:
		return splitmix64(uint64(*seed)) ^ promptHash
	case temperature != nil && *temperature == 0:
		return promptHash
	}
	return s.randomSeed()
}

// responseState writes one completion response from the engine's progress.
type responseState struct {
	s     *Server
	w     http.ResponseWriter
	ctx   context.Context
	lc    *requestLifecycle
	sq    *seq
	api   apiKind
	flt   fault
	model int
	tool  *toolCall // the answer is this tool call (after the reasoning); nil: content

	includeUsage bool
	continuous   bool

	ev        *eventBuf
	started   bool // headers and (chat) the role event are out
	written   int  // tokens written
	faultDone bool
	lastFlush time.Time
}

// eventBuf holds a response's pre-formatted event prefix and the scratch
// buffer events are built in; pooled, so that streaming a token allocates
// nothing.
type eventBuf struct {
	prefix []byte // `data: {"id":…,"object":…,"created":…,"model":…,"choices":[`
	buf    []byte
	id     []byte
}

var eventBufPool = sync.Pool{New: func() any {
	return &eventBuf{prefix: make([]byte, 0, 256), buf: make([]byte, 0, 512), id: make([]byte, 0, 48)}
}}

// wait blocks until the engine publishes progress. It returns false when
// the client went away (the sequence is then cancelled).
func (rs *responseState) wait() bool {
	select {
	case <-rs.sq.notify:
		return true
	case <-rs.ctx.Done():
		rs.sq.cancelled.Store(true)
		rs.lc.errMsg = "client went away"
		return false
	case <-rs.s.engine.done:
		return true
	}
}

// progress returns the published state; after the engine stopped, an
// unfinished sequence counts as aborted.
func (rs *responseState) progress() (int, int) {
	gen, fin := rs.sq.load()
	if fin == finishNone {
		select {
		case <-rs.s.engine.done:
			fin = finishAborted
		default:
		}
	}
	return gen, fin
}

// sleep waits d unless the client goes away or the server stops.
func (rs *responseState) sleep(d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-rs.ctx.Done():
		rs.sq.cancelled.Store(true)
		rs.lc.errMsg = "client went away during a stall"
		return false
	case <-rs.s.engine.quit:
		return true
	}
}

func (rs *responseState) initEvents() {
	ev := eventBufPool.Get().(*eventBuf)
	rs.ev = ev
	ev.id = rs.s.appendID(ev.id[:0], rs.api)
	p := append(ev.prefix[:0], `data: {"id":"`...)
	p = append(p, ev.id...)
	if rs.api == apiChat {
		p = append(p, `","object":"chat.completion.chunk","created":`...)
	} else {
		p = append(p, `","object":"text_completion","created":`...)
	}
	p = strconv.AppendInt(p, rs.lc.arrival.Unix(), 10)
	p = append(p, `,"model":`...)
	p = append(p, rs.s.modelJSON[rs.model]...)
	p = append(p, `,"choices":[`...)
	ev.prefix = p
}

func (rs *responseState) releaseEvents() {
	if rs.ev != nil && cap(rs.ev.buf) <= 64<<10 {
		eventBufPool.Put(rs.ev)
	}
	rs.ev = nil
}

// appendID appends a response id: chatcmpl-/cmpl- and 32 hex digits.
func (s *Server) appendID(b []byte, api apiKind) []byte {
	if api == apiChat {
		b = append(b, "chatcmpl-"...)
	} else {
		b = append(b, "cmpl-"...)
	}
	b = append(b, s.idPrefix[:]...)
	n := s.idCounter.Add(1)
	const hexdigits = "0123456789abcdef"
	for shift := 60; shift >= 0; shift -= 4 {
		b = append(b, hexdigits[(n>>uint(shift))&0xf])
	}
	return b
}

// appendUsage appends an OpenAI usage object.
func (rs *responseState) appendUsage(b []byte, completion int) []byte {
	p := rs.sq.promptTokens
	b = append(b, `{"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(p), 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, int64(p+completion), 10)
	b = append(b, `,"completion_tokens":`...)
	b = strconv.AppendInt(b, int64(completion), 10)
	b = append(b, `,"prompt_tokens_details":{"cached_tokens":`...)
	b = strconv.AppendInt(b, int64(rs.sq.cachedTokens), 10)
	if r := rs.sq.reasoning; r > 0 {
		b = append(b, `},"completion_tokens_details":{"reasoning_tokens":`...)
		b = strconv.AppendInt(b, int64(min(completion, r)), 10)
	}
	return append(b, `}}`...)
}

// event starts an event in the scratch buffer.
func (rs *responseState) event() []byte {
	return append(rs.ev.buf[:0], rs.ev.prefix...)
}

// send closes the choices array (adding usage when continuous usage stats
// are on), writes the event and flushes it.
func (rs *responseState) send(b []byte, completion int) bool {
	b = append(b, ']')
	if rs.continuous {
		b = append(b, `,"usage":`...)
		b = rs.appendUsage(b, completion)
	}
	b = append(b, "}\n\n"...)
	rs.ev.buf = b
	return rs.write(b)
}

func (rs *responseState) write(b []byte) bool {
	if _, err := rs.w.Write(b); err != nil {
		rs.sq.cancelled.Store(true)
		rs.lc.errMsg = "write failed: client went away"
		return false
	}
	if f, ok := rs.w.(http.Flusher); ok {
		f.Flush()
	}
	return true
}

// start sends the stream's headers and, for chat, the role-only delta,
// after a stall_first fault's wait.
func (rs *responseState) start() bool {
	rs.started = true
	if rs.flt.kind == faultStallFirst {
		rs.faultDone = true
		if !rs.sleep(rs.flt.duration) {
			return false
		}
	}
	rs.w.Header()["Content-Type"] = sseContentType
	rs.lc.status = http.StatusOK
	if rs.lc.log != nil {
		rs.lc.id = string(rs.ev.id) // goes out with the first event
	}
	if rs.api != apiChat {
		return true
	}
	b := rs.event()
	b = append(b, `{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}`...)
	return rs.send(b, 0)
}

// midStreamFault applies a token-positioned fault (reset, stall,
// malformed, no_done) if it fires now. It returns false when the response
// must end here.
func (rs *responseState) midStreamFault(final bool) bool {
	if rs.faultDone || !rs.flt.firesAt(rs.written, final) {
		return true
	}
	switch rs.flt.kind {
	case faultReset:
		rs.faultDone = true
		rs.lc.errMsg = "connection reset (simulated fault)"
		rs.resetConnection()
		return false
	case faultStall:
		rs.faultDone = true
		return rs.sleep(rs.flt.duration)
	case faultMalformed:
		rs.faultDone = true
		b := append(rs.ev.buf[:0], rs.ev.prefix...)
		b = append(b, `{"index":0,"delta":{"cont`...)
		b = append(b, "\n\n"...)
		rs.ev.buf = b
		return rs.write(b)
	case faultNoDone:
		rs.faultDone = true
		rs.lc.errMsg = "stream ended without [DONE] (simulated fault)"
		rs.sq.cancelled.Store(true)
		return false
	}
	return true
}

// resetConnection aborts the TCP connection with a RST so that the client
// sees a reset (or an unexpected EOF) instead of a clean end.
func (rs *responseState) resetConnection() {
	rs.sq.cancelled.Store(true)
	rc := http.NewResponseController(rs.w)
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

// stream writes an SSE response token by token as the engine produces
// them.
func (rs *responseState) stream() {
	rs.initEvents()
	defer rs.releaseEvents()
	var gen, fin int
	for {
		gen, fin = rs.progress()
		if fin == finishAborted {
			if !rs.started {
				rs.s.reject(rs.w, rs.lc, &apiError{status: http.StatusServiceUnavailable, typ: "server_error", code: "service_unavailable",
					message: "The server shut down before the completion started."})
				return
			}
			rs.lc.errMsg = "server shut down mid-stream"
			return
		}
		for rs.written < gen {
			if !rs.started && !rs.start() {
				return
			}
			if !rs.midStreamFault(false) {
				return
			}
			last := fin == finishLength && rs.written+1 == gen
			if !rs.sendToken(last) {
				return
			}
		}
		if fin != finishNone {
			break
		}
		if !rs.wait() {
			return
		}
	}
	if !rs.started && !rs.start() {
		return
	}
	if !rs.midStreamFault(true) {
		return
	}
	if fin == finishStop {
		b := rs.event()
		if rs.api == apiChat {
			b = append(b, `{"index":0,"delta":{"content":""},"logprobs":null,"finish_reason":"stop"}`...)
		} else {
			b = append(b, `{"index":0,"text":"","logprobs":null,"finish_reason":"stop","stop_reason":null}`...)
		}
		if !rs.send(b, rs.written) {
			return
		}
	}
	if rs.includeUsage {
		b := append(rs.ev.buf[:0], rs.ev.prefix...)
		b = append(b, `],"usage":`...)
		b = rs.appendUsage(b, rs.written)
		b = append(b, "}\n\n"...)
		rs.ev.buf = b
		if !rs.write(b) {
			return
		}
	}
	if !rs.write(doneEvent) {
		return
	}
	rs.complete(fin)
}

var doneEvent = []byte("data: [DONE]\n\n")

// sendToken writes the next token's event and records its timing. The
// first token of a tool call is preceded by the call's header event
// (id, type, name), which carries no token.
func (rs *responseState) sendToken(last bool) bool {
	i := rs.written
	word := outputWordText[outputWord(rs.sq.seed, i)]
	if rs.tool != nil && i == rs.sq.reasoning && !rs.sendToolHeader() {
		return false
	}
	b := rs.event()
	if rs.api == apiChat {
		switch {
		case i < rs.sq.reasoning:
			b = append(b, rs.s.reasoningDelta...)
			b = append(b, word...)
			b = append(b, `"},"logprobs":null,"finish_reason":`...)
		case rs.tool != nil:
			b = append(b, `{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"`...)
			b = appendArguments(b, word, i == rs.sq.reasoning, i == rs.sq.maxTokens-1, true)
			b = append(b, `"}}]},"logprobs":null,"finish_reason":`...)
		default:
			b = append(b, `{"index":0,"delta":{"content":"`...)
			b = append(b, word...)
			b = append(b, `"},"logprobs":null,"finish_reason":`...)
		}
		switch {
		case !last:
			b = append(b, `null}`...)
		case rs.tool != nil && i >= rs.sq.reasoning:
			b = append(b, `"tool_calls"}`...)
		default:
			b = append(b, `"length"}`...)
		}
	} else {
		b = append(b, `{"index":0,"text":"`...)
		b = append(b, word...)
		b = append(b, `","logprobs":null,"finish_reason":`...)
		if last {
			b = append(b, `"length","stop_reason":null}`...)
		} else {
			b = append(b, `null,"stop_reason":null}`...)
		}
	}
	if !rs.send(b, i+1) {
		return false
	}
	rs.written++
	rs.tokenOut(time.Now())
	return true
}

// tokenOut records a token's server-side timing (TTFT for the first, ITL
// for the others).
func (rs *responseState) tokenOut(now time.Time) {
	m := rs.s.metrics
	if rs.written == 1 {
		rs.lc.firstTokenOut(now, rs.sq)
		m.ttft.Observe(now.Sub(rs.lc.arrival).Seconds())
	} else {
		m.itl.Observe(now.Sub(rs.lastFlush).Seconds())
	}
	if r := rs.sq.reasoning; r > 0 && rs.written == r+1 {
		rs.lc.firstAnswer = now
	}
	rs.lastFlush = now
	rs.lc.lastToken = now
	rs.lc.lastOut = now
	rs.lc.tokensOut = rs.written
}

// complete records a response that ended normally.
func (rs *responseState) complete(fin int) {
	lc, sq, m := rs.lc, rs.sq, rs.s.metrics
	now := time.Now()
	lc.completionTokens = rs.written
	lc.cachedTokens = sq.cachedTokens
	lc.scheduled = sq.scheduledAt
	switch {
	case fin == finishStop:
		lc.finishReason = "stop"
		m.successStop.Inc()
	case rs.tool != nil:
		// A tool call is planned to end at max_tokens with its arguments
		// complete: the model ended its turn, which vLLM counts as stop.
		lc.finishReason = "tool_calls"
		m.successStop.Inc()
	default:
		lc.finishReason = "length"
		m.successLength.Inc()
	}
	lc.completed = now
	m.e2e.Observe(now.Sub(lc.arrival).Seconds())
	if !lc.scheduled.IsZero() {
		m.queueTime.Observe(lc.scheduled.Sub(lc.arrival).Seconds())
	}
	m.reqPrompt.Observe(float64(sq.promptTokens))
	m.reqGeneration.Observe(float64(rs.written))
}

// unary waits for the whole completion and answers with one JSON object.
func (rs *responseState) unary() {
	if rs.flt.kind == faultStallFirst && !rs.sleep(rs.flt.duration) {
		return
	}
	var gen, fin, seen int
	for {
		gen, fin = rs.progress()
		if gen > seen {
			now := time.Now()
			if seen == 0 {
				rs.lc.firstTokenOut(now, rs.sq)
				rs.s.metrics.ttft.Observe(now.Sub(rs.lc.arrival).Seconds())
			}
			rs.lc.lastOut = now
			seen = gen
		}
		if fin != finishNone {
			break
		}
		if !rs.wait() {
			return
		}
	}
	if fin == finishAborted {
		rs.s.reject(rs.w, rs.lc, &apiError{status: http.StatusServiceUnavailable, typ: "server_error", code: "service_unavailable",
			message: "The server shut down before the completion finished."})
		return
	}
	rs.written = gen
	switch rs.flt.kind {
	case faultStall:
		if !rs.sleep(rs.flt.duration) {
			return
		}
	case faultReset:
		rs.lc.errMsg = "connection reset (simulated fault)"
		rs.resetConnection()
		return
	}
	body := rs.unaryBody(gen, fin)
	if rs.flt.kind == faultMalformed {
		body = body[:len(body)/2]
	}
	h := rs.w.Header()
	h["Content-Type"] = jsonContentType
	h["Content-Length"] = []string{strconv.Itoa(len(body))}
	rs.lc.status = http.StatusOK
	rs.lc.tokensOut = gen
	if _, err := rs.w.Write(body); err != nil {
		rs.lc.errMsg = "write failed: client went away"
		return
	}
	rs.complete(fin)
}

type usageJSON struct {
	PromptTokens        int `json:"prompt_tokens"`
	TotalTokens         int `json:"total_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	PromptTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	// Only for requests that reason.
	CompletionTokensDetails *completionTokensDetailsJSON `json:"completion_tokens_details,omitempty"`
}

type completionTokensDetailsJSON struct {
	ReasoningTokens int `json:"reasoning_tokens"`
}

type chatChoiceJSON struct {
	Index   int `json:"index"`
	Message struct {
		Role             string  `json:"role"`
		Content          string  `json:"content"`
		ReasoningContent *string `json:"reasoning_content,omitempty"`
		Reasoning        *string `json:"reasoning,omitempty"`
	} `json:"message"`
	Logprobs     *struct{} `json:"logprobs"`
	FinishReason string    `json:"finish_reason"`
	StopReason   *string   `json:"stop_reason"`
}

// chatToolChoiceJSON is a chat choice whose answer is a tool call:
// content null, message.tool_calls.
type chatToolChoiceJSON struct {
	Index   int `json:"index"`
	Message struct {
		Role             string         `json:"role"`
		Content          *string        `json:"content"`
		ToolCalls        []toolCallJSON `json:"tool_calls"`
		ReasoningContent *string        `json:"reasoning_content,omitempty"`
		Reasoning        *string        `json:"reasoning,omitempty"`
	} `json:"message"`
	Logprobs     *struct{} `json:"logprobs"`
	FinishReason string    `json:"finish_reason"`
	StopReason   *string   `json:"stop_reason"`
}

type toolCallJSON struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type textChoiceJSON struct {
	Index        int       `json:"index"`
	Text         string    `json:"text"`
	Logprobs     *struct{} `json:"logprobs"`
	FinishReason string    `json:"finish_reason"`
	StopReason   *string   `json:"stop_reason"`
}

type completionJSON struct {
	ID      string    `json:"id"`
	Object  string    `json:"object"`
	Created int64     `json:"created"`
	Model   string    `json:"model"`
	Choices any       `json:"choices"`
	Usage   usageJSON `json:"usage"`
}

// unaryBody renders a non-streaming chat.completion or text_completion.
func (rs *responseState) unaryBody(gen, fin int) []byte {
	finish := "length"
	if fin == finishStop {
		finish = "stop"
	}
	var reasoning, content strings.Builder
	var args []byte
	for i := 0; i < gen; i++ {
		word := outputWordText[outputWord(rs.sq.seed, i)]
		switch {
		case rs.api == apiChat && i < rs.sq.reasoning:
			reasoning.WriteString(word)
		case rs.tool != nil:
			args = appendArguments(args, word, i == rs.sq.reasoning, i == rs.sq.maxTokens-1, false)
		default:
			content.WriteString(word)
		}
	}
	rs.lc.id = string(rs.s.appendID(nil, rs.api))
	resp := completionJSON{
		ID:      rs.lc.id,
		Created: rs.lc.arrival.Unix(),
		Model:   rs.s.modelName(rs.model),
	}
	resp.Usage.PromptTokens = rs.sq.promptTokens
	resp.Usage.CompletionTokens = gen
	resp.Usage.TotalTokens = rs.sq.promptTokens + gen
	resp.Usage.PromptTokensDetails.CachedTokens = rs.sq.cachedTokens
	if rs.sq.reasoning > 0 {
		resp.Usage.CompletionTokensDetails = &completionTokensDetailsJSON{ReasoningTokens: min(gen, rs.sq.reasoning)}
	}
	switch {
	case rs.api == apiChat && len(args) > 0:
		resp.Object = "chat.completion"
		if fin == finishLength {
			finish = "tool_calls"
		}
		c := chatToolChoiceJSON{FinishReason: finish}
		c.Message.Role = "assistant"
		tc := toolCallJSON{ID: rs.tool.id, Type: "function"}
		tc.Function.Name = rs.tool.name
		tc.Function.Arguments = string(args)
		c.Message.ToolCalls = []toolCallJSON{tc}
		if reasoning.Len() > 0 {
			c.Message.ReasoningContent, c.Message.Reasoning = rs.reasoningText(reasoning.String())
		}
		resp.Choices = []chatToolChoiceJSON{c}
	case rs.api == apiChat:
		resp.Object = "chat.completion"
		c := chatChoiceJSON{FinishReason: finish}
		c.Message.Role = "assistant"
		c.Message.Content = content.String()
		if reasoning.Len() > 0 {
			c.Message.ReasoningContent, c.Message.Reasoning = rs.reasoningText(reasoning.String())
		}
		resp.Choices = []chatChoiceJSON{c}
	default:
		resp.Object = "text_completion"
		resp.Choices = []textChoiceJSON{{Text: content.String(), FinishReason: finish}}
	}
	b, _ := json.Marshal(resp)
	return append(b, '\n')
}

// reasoningText returns the message's reasoning_content and reasoning
// fields: the text in the configured one, nil in the other.
func (rs *responseState) reasoningText(text string) (reasoningContent, reasoning *string) {
	if rs.s.cfg.ReasoningField == reasoningField {
		return nil, &text
	}
	return &text, nil
}

// toolCall is the tool call a chat completion answers with.
type toolCall struct {
	id   string // "call_" and 24 random letters and digits
	name string // one of the request's tools; needs no JSON escaping
}

// toolSalt separates the tool-call draws from the word choice.
const toolSalt = 0x2545f4914f6cdd1d

// planToolCall decides whether a request offering tools is answered with
// a tool call, and of which tool: tool_choice "required" always (a tool
// chosen by the sequence seed), a named function always (that one),
// "auto" with probability tool_call_probability (drawn from the seed, so
// reproducible with the words). nil: the answer is content.
func (s *Server) planToolCall(tr *toolRequest, seed uint64) *toolCall {
	h := splitmix64(seed ^ toolSalt)
	name := ""
	switch tr.choice {
	case toolChoiceAuto:
		p := s.cfg.ToolCallProbability
		if p <= 0 || float64(h>>11)/(1<<53) >= p {
			return nil
		}
		name = tr.names[splitmix64(h)%uint64(len(tr.names))]
	case toolChoiceRequired:
		name = tr.names[splitmix64(h)%uint64(len(tr.names))]
	case toolChoiceNamed:
		name = tr.named
	default:
		return nil
	}
	const alnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	id := make([]byte, 0, len("call_")+24)
	id = append(id, "call_"...)
	r := s.randomSeed()
	for i := 0; i < 24; i++ {
		r = splitmix64(r)
		id = append(id, alnum[r%uint64(len(alnum))])
	}
	return &toolCall{id: string(id), name: name}
}

// sendToolHeader writes the tool call's first event, vLLM/OpenAI style:
// index, id, type and name, with empty arguments. It carries no token.
func (rs *responseState) sendToolHeader() bool {
	b := rs.event()
	b = append(b, `{"index":0,"delta":{"tool_calls":[{"index":0,"id":"`...)
	b = append(b, rs.tool.id...)
	b = append(b, `","type":"function","function":{"name":"`...)
	b = append(b, rs.tool.name...)
	b = append(b, `","arguments":""}}]},"logprobs":null,"finish_reason":null}`...)
	return rs.send(b, rs.written)
}

// appendArguments appends one token's fragment of a tool call's arguments,
// which concatenate to {"q": "w1 w2 … wN"} (one word per token): the first
// fragment opens the object, the last closes it. quoted escapes the
// quotes, for a fragment inside a JSON string.
func appendArguments(b []byte, word string, first, last, quoted bool) []byte {
	if first {
		if quoted {
			b = append(b, `{\"q\": \"`...)
		} else {
			b = append(b, `{"q": "`...)
		}
		word = word[1:] // no space before the first word
	}
	b = append(b, word...)
	if last {
		if quoted {
			b = append(b, `\"}`...)
		} else {
			b = append(b, `"}`...)
		}
	}
	return b
}
