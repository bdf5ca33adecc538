// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"
)

// The one request-handling shape of the generating APIs: chat and
// completions (completion.go), Responses (responses.go), Messages
// (messages.go) and Embeddings (embeddings.go). serve reads a request,
// has the API parse it into an exchange (the common description of what
// to generate: a templated prompt in a seq, max tokens, seed, reasoning
// and tool plan), admits it (the fault, if the API takes faults, then the
// engine), and writes the engine's progress as a stream or as one body.
// What is particular to an API is its apiSpec and the hooks of its api
// value: parsing, ids, stream events, unary body, error body. Waiting,
// timing, faults and completion bookkeeping are the shape's, so metrics
// and the request log see every API alike.

// apiSpec is what the shape knows of an API besides its hooks.
type apiSpec struct {
	kind apiKind
	// noun is what the shutdown errors call an answer ("The server shut
	// down before the completion started.").
	noun string
	// faults: X-Sim-Fault and the configured fault probabilities apply.
	faults bool
	// writeError answers with an error body in the API's shape and
	// returns the status sent.
	writeError func(w http.ResponseWriter, e *apiError) int
}

// An api is one request to one API: its own state, embedding the
// exchange the shape works on. exchange's own checkHeaders, admitted,
// done and cut do nothing; an API defines those it needs.
type api interface {
	base() *exchange
	// checkHeaders runs before the body is read.
	checkHeaders(r *http.Request) *apiError
	// parse decodes the body and fills the exchange: noteModel, seq,
	// tool, and the lifecycle's stream, token and plan fields. An error
	// answers the request.
	parse(body []byte) *apiError
	// admitted runs once the engine holds the sequence: the response ids.
	admitted()
	// unaryBody renders the non-streamed answer of gen tokens.
	unaryBody(gen, fin int) ([]byte, *apiError)
	// done runs when the response is over, whatever the outcome.
	done()
}

// A streamer is an api that streams (when its request asks to).
type streamer interface {
	api
	// open writes the opening events, after the stream's headers are set.
	open() bool
	// token writes the events of token i; last: it ends the answer at
	// max_tokens.
	token(i int, last bool) bool
	// close writes the closing events after the last token.
	close(fin int) bool
	// cut runs when the server shut down mid-stream.
	cut()
}

// exchange is the state of one request common to every API.
type exchange struct {
	s    *Server
	w    http.ResponseWriter
	ctx  context.Context
	spec *apiSpec
	lc   requestLifecycle

	// Set by parse.
	sq    *seq
	model int
	tool  *toolCall // the answer is this tool call (after the reasoning); nil: content

	flt        fault
	fromHeader bool // flt was asked for with X-Sim-Fault

	started   bool // the stream's headers and opening events are out
	faultDone bool
	written   int // tokens written
	lastFlush time.Time
}

func (x *exchange) base() *exchange                      { return x }
func (x *exchange) checkHeaders(*http.Request) *apiError { return nil }
func (x *exchange) admitted()                            {}
func (x *exchange) done()                                {}
func (x *exchange) cut()                                 {}

// serve handles one request to the API of spec; a is the request's
// fresh state.
func (s *Server) serve(w http.ResponseWriter, r *http.Request, spec *apiSpec, a api) {
	x := a.base()
	x.s, x.w, x.ctx, x.spec = s, w, r.Context(), spec
	x.lc.begin(s, r, spec.kind)
	defer x.lc.end()

	if spec.faults {
		if aerr := x.headerFault(r); aerr != nil {
			x.fail(aerr)
			return
		}
	}
	if aerr := a.checkHeaders(r); aerr != nil {
		x.fail(aerr)
		return
	}
	buf, aerr := s.readBody(w, r)
	if aerr != nil {
		x.fail(aerr)
		return
	}
	aerr = a.parse(buf.Bytes())
	putBody(buf)
	if aerr != nil {
		x.fail(aerr)
		return
	}
	x.lc.promptTokens = x.sq.promptTokens
	if spec.faults && !x.admitFault() {
		return
	}
	if !x.submit() {
		return
	}
	a.admitted()
	defer a.done()
	if st, ok := a.(streamer); ok && x.lc.stream { // parse noted the request's stream flag
		x.stream(st)
	} else {
		x.unary(a)
	}
}

// fail answers with an error in the API's shape and records it on the
// lifecycle.
func (x *exchange) fail(e *apiError) {
	x.lc.status = x.spec.writeError(x.w, e)
	x.lc.errMsg = e.message
}

func shuttingDown(msg string) *apiError {
	return &apiError{status: http.StatusServiceUnavailable, typ: "server_error", code: "service_unavailable", message: msg}
}

// useModel resolves the request's model the OpenAI way (resolveModel)
// and notes it.
func (x *exchange) useModel(name string) *apiError {
	modelIdx, aerr := x.s.resolveModel(name)
	if aerr != nil {
		return aerr
	}
	x.noteModel(modelIdx)
	return nil
}

// noteModel records the resolved model (or adapter) index.
func (x *exchange) noteModel(modelIdx int) {
	s := x.s
	x.model = modelIdx
	x.lc.model = s.modelName(modelIdx)
	if a := s.adapterOf(modelIdx); a != nil {
		x.lc.baseModel = s.cfg.Models[a.base]
	}
}

// newSeq returns the exchange's sequence, for the noted model.
func (x *exchange) newSeq() *seq {
	x.sq = &seq{notify: make(chan struct{}, 1), adapter: x.s.adapterOf(x.model)}
	x.sq.hasher = newBlockHasher(x.s.cfg.BlockSize, make([]uint64, 0, 8))
	return x.sq
}

// submit hands the sequence to the engine. It returns false when the
// request is over (refused, or its client went away).
func (x *exchange) submit() bool {
	x.lc.queued = time.Now()
	x.sq.queuedAt = x.lc.queued
	// A stream's inter-token latencies are timed at its flushes; the
	// engine times those of a response sent whole.
	x.sq.engineITL = !x.lc.stream
	if err := x.s.engine.submit(x.ctx, x.sq); err != nil {
		if errors.Is(err, errEngineStopped) {
			x.fail(shuttingDown("The server is shutting down."))
			return false
		}
		x.lc.errMsg = "client went away before admission"
		return false
	}
	return true
}

// wait blocks until the engine publishes progress. It returns false when
// the client went away (the sequence is then cancelled).
func (x *exchange) wait() bool {
	select {
	case <-x.sq.notify:
		return true
	case <-x.ctx.Done():
		x.sq.cancelled.Store(true)
		x.lc.errMsg = "client went away"
		return false
	case <-x.s.engine.done:
		return true
	}
}

// progress returns the published state; after the engine stopped, an
// unfinished sequence counts as aborted.
func (x *exchange) progress() (int, int) {
	gen, fin := x.sq.load()
	if fin == finishNone {
		select {
		case <-x.s.engine.done:
			fin = finishAborted
		default:
		}
	}
	return gen, fin
}

// sleep waits d unless the client goes away or the server stops.
func (x *exchange) sleep(d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-x.ctx.Done():
		x.sq.cancelled.Store(true)
		x.lc.errMsg = "client went away during a stall"
		return false
	case <-x.s.engine.quit:
		return true
	}
}

// write writes b and flushes it.
func (x *exchange) write(b []byte) bool {
	if _, err := x.w.Write(b); err != nil {
		x.sq.cancelled.Store(true)
		x.lc.errMsg = "write failed: client went away"
		return false
	}
	if f, ok := x.w.(http.Flusher); ok {
		f.Flush()
	}
	return true
}

// stream writes an SSE response token by token as the engine produces
// them.
func (x *exchange) stream(st streamer) {
	var gen, fin int
	for {
		gen, fin = x.progress()
		if fin == finishAborted {
			if !x.started {
				x.fail(shuttingDown("The server shut down before the " + x.spec.noun + " started."))
				return
			}
			x.lc.errMsg = "server shut down mid-stream"
			st.cut()
			return
		}
		for x.written < gen {
			if !x.started && !x.start(st) {
				return
			}
			if !x.midStreamFault(st, false) {
				return
			}
			if !st.token(x.written, fin == finishLength && x.written+1 == gen) {
				return
			}
			x.written++
			x.tokenOut(time.Now())
		}
		if fin != finishNone {
			break
		}
		if !x.wait() {
			return
		}
	}
	if !x.started && !x.start(st) {
		return
	}
	if !x.midStreamFault(st, true) {
		return
	}
	if !st.close(fin) {
		return
	}
	x.complete(fin)
}

// start sends the stream's headers and opening events, after a
// stall_first fault's wait.
func (x *exchange) start(st streamer) bool {
	x.started = true
	if x.flt.kind == faultStallFirst {
		x.faultDone = true
		if !x.sleep(x.flt.duration) {
			return false
		}
	}
	x.w.Header()["Content-Type"] = sseContentType
	x.lc.status = http.StatusOK
	return st.open()
}

// tokenOut records a token's server-side timing (TTFT for the first, ITL
// for the others).
func (x *exchange) tokenOut(now time.Time) {
	m := x.s.metrics
	if x.written == 1 {
		x.lc.firstTokenOut(now, x.sq)
		m.ttft.Observe(now.Sub(x.lc.arrival).Seconds())
	} else {
		m.itl.Observe(now.Sub(x.lastFlush).Seconds())
	}
	if r := x.sq.reasoning; r > 0 && x.written == r+1 {
		x.lc.firstAnswer = now
	}
	x.lastFlush = now
	x.lc.lastToken = now
	x.lc.lastOut = now
	x.lc.tokensOut = x.written
}

// unary waits for the whole generation and answers with one JSON body.
func (x *exchange) unary(a api) {
	if x.flt.kind == faultStallFirst && !x.sleep(x.flt.duration) {
		return
	}
	var gen, fin, seen int
	for {
		gen, fin = x.progress()
		if gen > seen {
			now := time.Now()
			if seen == 0 {
				x.lc.firstTokenOut(now, x.sq)
				x.s.metrics.ttft.Observe(now.Sub(x.lc.arrival).Seconds())
			}
			x.lc.lastOut = now
			seen = gen
		}
		if fin != finishNone {
			break
		}
		if !x.wait() {
			return
		}
	}
	if fin == finishAborted {
		x.fail(shuttingDown("The server shut down before the " + x.spec.noun + " finished."))
		return
	}
	x.written = gen
	if !x.unaryFault() {
		return
	}
	body, aerr := a.unaryBody(gen, fin)
	if aerr != nil {
		x.fail(aerr)
		return
	}
	if x.flt.kind == faultMalformed {
		body = body[:len(body)/2]
	}
	h := x.w.Header()
	h["Content-Type"] = jsonContentType
	h["Content-Length"] = []string{strconv.Itoa(len(body))}
	x.lc.status = http.StatusOK
	x.lc.tokensOut = gen
	if _, err := x.w.Write(body); err != nil {
		x.lc.errMsg = "write failed: client went away"
		return
	}
	x.complete(fin)
}

// complete records a response that ended normally.
func (x *exchange) complete(fin int) {
	lc, sq, m := &x.lc, x.sq, x.s.metrics
	now := time.Now()
	lc.completionTokens = x.written
	lc.cachedTokens = sq.cachedTokens
	lc.scheduled = sq.scheduledAt
	switch {
	case fin == finishStop:
		lc.finishReason = "stop"
		m.successStop.Inc()
	case x.tool != nil:
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
	m.observeFinished(sq)
	m.reqPrompt.Observe(float64(sq.promptTokens))
	m.reqGeneration.Observe(float64(x.written))
}

// word returns the text of the sequence's i-th token (" word").
func (x *exchange) word(i int) string {
	return outputWordText[outputWord(x.sq.seed, i)]
}

// textOf concatenates the words of tokens [from, to).
func (x *exchange) textOf(from, to int) string {
	n := 0
	for i := from; i < to; i++ {
		n += len(x.word(i))
	}
	b := make([]byte, 0, n)
	for i := from; i < to; i++ {
		b = append(b, x.word(i)...)
	}
	return string(b)
}

// toolArguments returns the arguments of tokens [from, to) of a tool
// call ({"q": "w1 … wN"} when complete), as appendArguments builds them
// token by token.
func (x *exchange) toolArguments(from, to int) string {
	var args []byte
	for i := from; i < to; i++ {
		args = appendArguments(args, x.word(i), i == x.sq.reasoning, i == x.sq.maxTokens-1, false)
	}
	return string(args)
}

// appendSSE appends one named SSE event: `event: name`, then data, the
// JSON encoding of v.
func appendSSE(b []byte, name string, v any) []byte {
	b = append(b, "event: "...)
	b = append(b, name...)
	b = append(b, "\ndata: "...)
	j, _ := json.Marshal(v)
	b = append(b, j...)
	return append(b, "\n\n"...)
}

// appendID appends a response id: prefix, the server's random hex prefix
// and a counter (32 hex digits in all).
func (s *Server) appendID(b []byte, prefix string) []byte {
	b = append(b, prefix...)
	b = append(b, s.idPrefix[:]...)
	n := s.idCounter.Add(1)
	const hexdigits = "0123456789abcdef"
	for shift := 60; shift >= 0; shift -= 4 {
		b = append(b, hexdigits[(n>>uint(shift))&0xf])
	}
	return b
}

// newID returns a response id (appendID).
func (s *Server) newID(prefix string) string {
	return string(s.appendID(make([]byte, 0, len(prefix)+32), prefix))
}

// seedFor chooses the seed of a sequence's words and early stops:
// derived from the prompt when the output must be reproducible
// (temperature 0, or an explicit seed), random otherwise.
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

// toolCall is the tool call an answer is.
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
