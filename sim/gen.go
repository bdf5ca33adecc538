// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"
)

// The driver shared by the Responses (responses.go), Messages
// (messages.go) and Embeddings (embeddings.go) handlers: they parse their
// request into a seq (a templated prompt, max tokens, reasoning and tool
// plan), submit it to the one engine like a chat completion, and write
// the engine's progress in their own wire format. They reuse the chat
// path's responseState for waiting, timing and completion bookkeeping, so
// metrics and the request log see them like any other request. Faults
// (X-Sim-Fault, configured probabilities) apply to chat and completions
// only.

// errStyle is the error body shape of an API.
type errStyle uint8

const (
	errOpenAI    errStyle = iota // {"error":{"message","type","param","code"}}
	errAnthropic                 // {"type":"error","error":{"type","message"}}
)

// fail answers with an error in style and records it on the lifecycle.
func (s *Server) fail(w http.ResponseWriter, lc *requestLifecycle, e *apiError, style errStyle) {
	if style == errAnthropic {
		e = anthropicStatus(e)
	}
	lc.status = e.status
	lc.errMsg = e.message
	if style == errAnthropic {
		writeAnthropicError(w, e)
		return
	}
	writeError(w, e)
}

// newSeq returns a sequence for the resolved model index.
func (s *Server) newSeq(modelIdx int) *seq {
	sq := &seq{notify: make(chan struct{}, 1), adapter: s.adapterOf(modelIdx)}
	sq.hasher = newBlockHasher(s.cfg.BlockSize, make([]uint64, 0, 8))
	return sq
}

// noteModel records the resolved model (or adapter) on the lifecycle.
func (s *Server) noteModel(lc *requestLifecycle, modelIdx int) {
	lc.model = s.modelName(modelIdx)
	if a := s.adapterOf(modelIdx); a != nil {
		lc.baseModel = s.cfg.Models[a.base]
	}
}

// submitGen hands sq to the engine. It returns false when the request is
// over (refused, or its client went away).
func (s *Server) submitGen(w http.ResponseWriter, r *http.Request, lc *requestLifecycle, sq *seq, style errStyle) bool {
	lc.promptTokens = sq.promptTokens
	lc.queued = time.Now()
	if err := s.engine.submit(r.Context(), sq); err != nil {
		if errors.Is(err, errEngineStopped) {
			s.fail(w, lc, shuttingDown("The server is shutting down."), style)
			return false
		}
		lc.errMsg = "client went away before admission"
		return false
	}
	return true
}

func shuttingDown(msg string) *apiError {
	return &apiError{status: http.StatusServiceUnavailable, typ: "server_error", code: "service_unavailable", message: msg}
}

// pump streams a generation: before the first event it sends the SSE
// headers and calls begin (the opening events); then emit(i) for each
// token i as the engine produces it. It returns the finish code, and true
// when the stream is to be closed normally (the caller writes its closing
// events, then calls complete). On false the response is over: an error
// answered before the stream began, a write error, the client gone, or
// the server shut down mid-stream (abortedMidStream then reports it).
func (rs *responseState) pump(style errStyle, begin func() bool, emit func(i int) bool) (int, bool) {
	for {
		gen, fin := rs.progress()
		if fin == finishAborted {
			if !rs.started {
				rs.s.fail(rs.w, rs.lc, shuttingDown("The server shut down before the response started."), style)
				return fin, false
			}
			rs.lc.errMsg = "server shut down mid-stream"
			return fin, false
		}
		for rs.written < gen {
			if !rs.started && !rs.beginStream(begin) {
				return fin, false
			}
			if !emit(rs.written) {
				return fin, false
			}
			rs.written++
			rs.tokenOut(time.Now())
		}
		if fin != finishNone {
			if !rs.started && !rs.beginStream(begin) {
				return fin, false
			}
			return fin, true
		}
		if !rs.wait() {
			return fin, false
		}
	}
}

func (rs *responseState) beginStream(begin func() bool) bool {
	rs.started = true
	rs.w.Header()["Content-Type"] = sseContentType
	rs.w.Header().Set("Cache-Control", "no-cache")
	rs.lc.status = http.StatusOK
	return begin()
}

// collect waits for the whole generation of a non-streamed response. It
// returns false when the response is over (error answered, client gone).
func (rs *responseState) collect(style errStyle) (gen, fin int, ok bool) {
	seen := 0
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
			return gen, fin, false
		}
	}
	if fin == finishAborted {
		rs.s.fail(rs.w, rs.lc, shuttingDown("The server shut down before the response finished."), style)
		return gen, fin, false
	}
	rs.written = gen
	return gen, fin, true
}

// writeBody answers a collected response with a JSON body and completes
// it.
func (rs *responseState) writeBody(body []byte, fin int) {
	h := rs.w.Header()
	h["Content-Type"] = jsonContentType
	h["Content-Length"] = []string{strconv.Itoa(len(body))}
	rs.lc.status = http.StatusOK
	rs.lc.tokensOut = rs.written
	if _, err := rs.w.Write(body); err != nil {
		rs.lc.errMsg = "write failed: client went away"
		return
	}
	rs.complete(fin)
}

// word returns the text of the sequence's i-th token (" word").
func (rs *responseState) word(i int) string {
	return outputWordText[outputWord(rs.sq.seed, i)]
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

// newID returns a response id: prefix, the server's random hex prefix and
// a counter (32 hex digits in all).
func (s *Server) newID(prefix string) string {
	b := make([]byte, 0, len(prefix)+32)
	b = append(b, prefix...)
	b = append(b, s.idPrefix[:]...)
	n := s.idCounter.Add(1)
	const hexdigits = "0123456789abcdef"
	for shift := 60; shift >= 0; shift -= 4 {
		b = append(b, hexdigits[(n>>uint(shift))&0xf])
	}
	return string(b)
}

// toolArguments returns the complete arguments of a tool call of n
// tokens ({"q": "w1 … wN"}), as appendArguments builds them token by
// token.
func (rs *responseState) toolArguments(from, to int) string {
	var args []byte
	for i := from; i < to; i++ {
		args = appendArguments(args, rs.word(i), i == rs.sq.reasoning, i == rs.sq.maxTokens-1, false)
	}
	return string(args)
}

// textOf concatenates the words of tokens [from, to).
func (rs *responseState) textOf(from, to int) string {
	n := 0
	for i := from; i < to; i++ {
		n += len(rs.word(i))
	}
	b := make([]byte, 0, n)
	for i := from; i < to; i++ {
		b = append(b, rs.word(i)...)
	}
	return string(b)
}
