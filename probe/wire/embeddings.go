// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package wire

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"time"
)

// The OpenAI embeddings API (POST /v1/embeddings), which vLLM, TEI and
// hosted APIs serve. It does not stream: the client times the whole
// answer (E2E; no TTFT), counts its embeddings against the inputs sent,
// and takes the prompt tokens from usage.
//
// Body: {"model", "input" (Inputs as a list when set, else PromptIDs as
// a list of token ids, else Prompt), then ExtraBody ("dimensions",
// "encoding_format")}.
//
// Answer: {"object": "list", "data": [{"object": "embedding", "index",
// "embedding"}...], "model", "usage": {"prompt_tokens", "total_tokens"}},
// or an error object.
//
// The answer is read as it arrives, through a window that holds one
// member of it at a time (one embedding, or the model, or usage), and is
// never kept: each embedding is checked and counted, then dropped (see
// "Bounds of an answer" below). Checked: each item of data is an object;
// its index, when present, is an integer naming one of the inputs, and no
// two items name the same; its embedding is a non-empty list of numbers or
// a base64 string of finite little-endian float32s (encoding_format
// "base64"); every embedding has the same length, the dimensions asked
// for when the body sets "dimensions". The first problem found is the
// outcome (invalid_response "invalid_index" or "invalid_embedding"),
// after the whole answer was read.

type embeddingsAPI struct{}

func (embeddingsAPI) path() string          { return "/embeddings" }
func (embeddingsAPI) streaming() bool       { return false }
func (embeddingsAPI) headers(h http.Header) {}

func (embeddingsAPI) encode(dst []byte, req *Request) ([]byte, error) {
	w := newBodyWriter(dst, req.ExtraBody)
	w.str("model", req.Model)
	if w.member("input") {
		switch {
		case len(req.Inputs) > 0:
			w.dst = append(w.dst, '[')
			for i, in := range req.Inputs {
				if i > 0 {
					w.dst = append(w.dst, ',')
				}
				w.dst = appendJSONString(w.dst, in)
			}
			w.dst = append(w.dst, ']')
		case req.PromptIDs != nil:
			w.dst = appendTokenIDs(w.dst, req.PromptIDs)
		default:
			w.dst = appendJSONString(w.dst, req.Prompt)
		}
	}
	return w.close()
}

// decode reads a whole answer (ev.Data) into d.c: c.items is the number
// of items in data. It returns an error only when ev.Data is not a JSON
// object; what is wrong with the embeddings is the client's to judge
// (Client.readAnswer).
func (embeddingsAPI) decode(d *chunkDecoder, ev SSEEvent) (eventKind, error) {
	var x embeddingsAnswer
	x.begin(nil, answerLimits{})
	a := answerReader{d: d, eof: true}
	d.s.b, d.s.i = ev.Data, 0
	err := x.read(&a)
	x.result(d)
	return eventChunk, err
}

// Bounds of an answer. A server may send anything; the client holds at
// most one window of it (the embedding being read) and reads at most
// total bytes of it, both sized from what the request asked for:
//
//   - window: 64 KiB + 32 B per dimension (one embedding written as JSON
//     numbers; vLLM writes a float32 in about 22 bytes, base64 in 5.3);
//   - total: 1 MiB + per input 1 KiB + 32 B per dimension.
//
// The dimensions are the body's "dimensions" when it sets them, else
// defaultEmbeddingDims (larger than any embedding model served). An
// answer past total, or a member of it past the window, ends as
// invalid_response "response_too_large" and reading stops. The window is
// what an in-flight embeddings request reserves from the process-wide
// answer budget (budget.go) before it is sent.
const (
	defaultEmbeddingDims = 16384
	maxEmbeddingDims     = 1 << 16
	embeddingDimBytes    = 32
	embeddingItemBytes   = 1 << 10
	answerBytesBase      = 1 << 20
	answerWindowBase     = 64 << 10
)

// answerLimits are the bounds of one answer.
type answerLimits struct {
	inputs int   // inputs sent
	dims   int   // dimensions asked for (0: none)
	window int   // most bytes held at once
	total  int64 // most bytes read
}

// embeddingsLimits returns the bounds of the answer to req.
func embeddingsLimits(req *Request) answerLimits {
	l := answerLimits{inputs: max(len(req.Inputs), 1), dims: requestedDims(req.ExtraBody)}
	dims := l.dims
	if dims == 0 {
		dims = defaultEmbeddingDims
	}
	l.window = answerWindowBase + embeddingDimBytes*dims
	l.total = answerBytesBase + int64(l.inputs)*int64(embeddingItemBytes+embeddingDimBytes*dims)
	return l
}

// AnswerReservation is what an in-flight request of req holds from the
// answer budget: the window of a non-streamed answer, nothing for a
// stream (its buffers are bounded per request, see docs/design.md).
func AnswerReservation(req *Request) int64 {
	if p, ok := protocols[req.API]; !ok || p.streaming() {
		return 0
	}
	return int64(embeddingsLimits(req).window)
}

// requestedDims is the body's "dimensions" when it is a whole number of
// them, else 0.
func requestedDims(body map[string]any) int {
	var f float64
	switch v := body["dimensions"].(type) {
	case int:
		f = float64(v)
	case int64:
		f = float64(v)
	case uint64:
		f = float64(v)
	case float64:
		f = v
	default:
		return 0
	}
	if f < 1 || f > maxEmbeddingDims || f != math.Trunc(f) {
		return 0
	}
	return int(f)
}

// Errors of reading an answer (answerReader.err).
var (
	errAnswerTooLarge = errors.New("the answer passed its bound")
	errMemberTooLarge = errors.New("a member of the answer passed the window")
)

// answerReader feeds a non-streamed answer from src to the decoder's
// scanner one unit (a member of the answer, or an item of data) at a
// time. The scanner works on whole text: a unit is scanned from its
// start again when it ran out of bytes, after more were read; what came
// before it is dropped from the window first. With src nil the whole
// answer is in d.s.b (eof).
type answerReader struct {
	d      *chunkDecoder
	src    io.Reader
	buf    []byte // the window's storage; d.s.b is buf[:n]
	base   int64  // offset in the answer of d.s.b[0]
	read   int64  // bytes read from src
	limit  int64  // most bytes to read
	window int    // most bytes to hold
	eof    bool
	end    time.Time // when the end of the answer was read
	err    error     // why reading stopped (not io.EOF)
}

// unitSlack: a scan that failed this close to the end of the window may
// have failed for want of bytes (a cut escape or literal).
const unitSlack = 8

// unit runs f, which scans one unit from the scanner's position and has
// no effect but on its own variables until it succeeds. f is run again
// with more of the answer when it failed at the end of the window, or
// succeeded right at it (a number may go on).
func (a *answerReader) unit(f func() error) error {
	s := &a.d.s
	for {
		start := s.i
		err := f()
		switch {
		case err == nil && (s.i < len(s.b) || a.eof):
			return nil
		case err != nil && (a.eof || errors.Is(err, errTooDeep) || s.i+unitSlack < len(s.b)):
			return err
		}
		s.i = start
		if err := a.more(start); err != nil {
			return err
		}
	}
}

// skipWS skips whitespace, reading on while the window holds nothing
// else (whitespace never accumulates in it).
func (a *answerReader) skipWS() error {
	s := &a.d.s
	for {
		s.ws()
		if s.i < len(s.b) || a.eof {
			return nil
		}
		if err := a.more(s.i); err != nil {
			return err
		}
	}
}

// more drops the window's first keep bytes and reads on until the window
// is full (growing it, up to a.window, when keep is 0) or the answer
// ends.
func (a *answerReader) more(keep int) error {
	if a.err != nil {
		return a.err
	}
	s := &a.d.s
	n := len(s.b)
	if keep > 0 {
		copy(a.buf, a.buf[keep:n])
		n -= keep
		a.base += int64(keep)
		s.i -= keep
	}
	if n == cap(a.buf) {
		if n >= a.window {
			a.err = errMemberTooLarge
			return a.err
		}
		grown := make([]byte, n, min(max(2*cap(a.buf), answerWindowBase), a.window))
		copy(grown, a.buf[:n])
		a.buf = grown
	}
	buf := a.buf[:cap(a.buf)]
	for empty := 0; n < len(buf); {
		room := buf[n:]
		if left := a.limit + 1 - a.read; int64(len(room)) > left {
			room = room[:left]
		}
		m, err := a.src.Read(room)
		n += m
		a.read += int64(m)
		if a.read > a.limit {
			a.err = errAnswerTooLarge
			break
		}
		if err == io.EOF {
			a.eof, a.end = true, time.Now()
			break
		}
		if err != nil {
			a.err = err
			break
		}
		if m > 0 {
			empty = 0
		} else if empty++; empty == 100 {
			a.err = io.ErrNoProgress
			break
		}
	}
	a.buf = buf[:n]
	s.b = a.buf
	return a.err
}

// pos is the offset in the answer of the scanner's position.
func (a *answerReader) pos() int64 { return a.base + int64(a.d.s.i) }

// embeddingsAnswer is what the client keeps of an answer while reading
// it: counts, the first problem, and short copies of what it reports.
type embeddingsAnswer struct {
	lim   answerLimits
	items int
	// dims is the length of the first good embedding, firstAt its item.
	dims, firstAt int
	seen          []uint64 // indexes seen, a bit each
	// errType and msg are the first problem found ("" none).
	errType, msg string

	model, errMsg       []byte // raw JSON string text, cut
	modelEsc, errMsgEsc bool
	hasModel, isError   bool
	hasErrMsg           bool
	hasUsage            bool
	usage               tokenUsage
	scratch             []byte
}

// Copies of server strings are cut to this many bytes (the client keeps
// at most maxResponseString of a model and maxErrorMessage of a message).
const answerStringBytes = 4 << 10

func (x *embeddingsAnswer) begin(req *Request, lim answerLimits) {
	*x = embeddingsAnswer{
		lim: lim, seen: x.seen[:0], model: x.model[:0], errMsg: x.errMsg[:0], scratch: x.scratch[:0],
	}
	words := (lim.inputs + 63) / 64
	x.seen = slices.Grow(x.seen, words)[:words]
	clear(x.seen)
}

// result puts what the answer reported into d.c.
func (x *embeddingsAnswer) result(d *chunkDecoder) {
	d.c.items = x.items
	d.c.model = jsonString{raw: x.model, esc: x.modelEsc, ok: x.hasModel}
	d.c.hasUsage, d.c.usage = x.hasUsage, x.usage
	d.c.isError = x.isError
	d.c.errMsg = jsonString{raw: x.errMsg, esc: x.errMsgEsc, ok: x.hasErrMsg}
}

func keepString(dst []byte, s jsonString) []byte {
	raw := s.raw
	if len(raw) > answerStringBytes {
		raw = raw[:answerStringBytes]
	}
	return append(dst[:0], raw...)
}

// read reads the answer: it returns a syntax error (errMalformedJSON,
// errNotObject, errTooDeep) or why reading stopped (a.err).
func (x *embeddingsAnswer) read(a *answerReader) error {
	d := a.d
	s := &d.s
	d.c = streamChunk{texts: d.c.texts[:0]}
	if err := a.skipWS(); err != nil {
		return err
	}
	if s.i >= len(s.b) {
		return errMalformedJSON
	}
	if s.b[s.i] != '{' {
		return errNotObject
	}
	s.i++
	for first := true; ; first = false {
		if err := a.skipWS(); err != nil {
			return err
		}
		var end, data bool
		err := a.unit(func() error {
			var k jsonString
			var more bool
			var err error
			if first {
				k, more, err = s.objectStart()
			} else {
				k, more, err = s.objectNext(nil)
			}
			end, data = !more, false
			if err != nil || !more {
				return err
			}
			switch string(d.key(k)) {
			case "data":
				data = true
				return nil
			case "model":
				m, err := s.stringValue(1)
				if err == nil && m.ok {
					x.model, x.modelEsc, x.hasModel = keepString(x.model, m), m.esc, true
				}
				return err
			case "usage":
				x.usage = tokenUsage{}
				x.hasUsage, err = d.object(1, func(k []byte) error {
					if string(k) == "prompt_tokens" {
						var err error
						x.usage.prompt, x.usage.hasPrompt, x.usage.badPrompt, err = s.usageCount(2)
						return err
					}
					return s.skip(2)
				})
				return err
			case "error":
				isErr, msg, err := d.errorValue()
				if err == nil {
					x.isError, x.hasErrMsg = isErr, msg.ok
					x.errMsg, x.errMsgEsc = keepString(x.errMsg, msg), msg.esc
				}
				return err
			}
			return s.skip(1)
		})
		if err != nil {
			return err
		}
		if end {
			break
		}
		if data {
			if err := x.data(a); err != nil {
				return err
			}
		}
	}
	// Only whitespace may follow the object.
	if err := a.skipWS(); err != nil {
		return err
	}
	if s.i < len(s.b) {
		return errMalformedJSON
	}
	x.result(d)
	return nil
}

// data reads the value of "data", item by item.
func (x *embeddingsAnswer) data(a *answerReader) error {
	s := &a.d.s
	if err := a.skipWS(); err != nil {
		return err
	}
	if s.i >= len(s.b) {
		return errMalformedJSON
	}
	if s.b[s.i] != '[' { // null, or not what an answer holds: no items
		return a.unit(func() error { return s.skip(1) })
	}
	s.i++
	var more bool
	if err := a.unit(func() (err error) { more, err = s.arrayStart(); return err }); err != nil {
		return err
	}
	for more {
		if err := a.skipWS(); err != nil {
			return err
		}
		var it embeddingItem
		err := a.unit(func() error {
			it = embeddingItem{}
			err := x.item(a.d, &it)
			more, err = s.arrayNext(err)
			return err
		})
		if err != nil {
			return err
		}
		x.add(&it)
	}
	return nil
}

// embeddingItem is what one item of data held.
type embeddingItem struct {
	object             bool
	hasIndex, badIndex bool
	index              int
	indexText          [24]byte // the index as written, cut
	indexLen           int
	vector             vectorKind
	dims               int
	// bad says what is wrong with the vector: badComponent (at
	// component), badBase64, badBytes (bytes), nonFinite (at component).
	bad       vectorProblem
	component int
	bytes     int
}

type vectorKind uint8

const (
	vectorNone   vectorKind = iota // no "embedding"
	vectorFloats                   // a list
	vectorBase64                   // a string
	vectorOther                    // something else
)

type vectorProblem uint8

const (
	vectorOK vectorProblem = iota
	badComponent
	badBase64
	badBytes
	nonFinite
)

// item reads one item of data (depth 2).
func (x *embeddingsAnswer) item(d *chunkDecoder, it *embeddingItem) error {
	s := &d.s
	s.ws()
	if s.i >= len(s.b) {
		return errMalformedJSON
	}
	if s.b[s.i] != '{' {
		return s.skip(2)
	}
	it.object = true
	s.i++
	k, more, err := s.objectStart()
	for ; more && err == nil; k, more, err = s.objectNext(err) {
		switch string(d.key(k)) {
		case "index":
			err = it.readIndex(s)
		case "embedding":
			err = x.readVector(s, it)
		default:
			err = s.skip(3)
		}
	}
	return err
}

func (it *embeddingItem) readIndex(s *jsonScanner) error {
	s.ws()
	it.hasIndex, it.badIndex, it.indexLen = true, true, 0
	if s.i >= len(s.b) || (s.b[s.i] != '-' && !isDigit(s.b[s.i])) {
		return s.skip(3)
	}
	start := s.i
	if err := s.number(); err != nil {
		return err
	}
	raw := s.b[start:s.i]
	it.indexLen = copy(it.indexText[:], raw)
	it.index, it.badIndex = 0, false
	n, ok := parseCount(raw)
	if !ok {
		it.badIndex = true
	}
	it.index = n
	return nil
}

func (x *embeddingsAnswer) readVector(s *jsonScanner, it *embeddingItem) error {
	s.ws()
	if s.i >= len(s.b) {
		return errMalformedJSON
	}
	it.dims, it.bad = 0, vectorOK
	switch s.b[s.i] {
	case '[':
		it.vector = vectorFloats
		s.i++
		more, err := s.arrayStart()
		n := 0
		for ; more && err == nil; more, err = s.arrayNext(err) {
			s.ws()
			if s.i < len(s.b) && (s.b[s.i] == '-' || isDigit(s.b[s.i])) {
				err = s.number()
			} else {
				if it.bad == vectorOK {
					it.bad, it.component = badComponent, n
				}
				err = s.skip(4)
			}
			n++
		}
		it.dims = n
		return err
	case '"':
		str, err := s.str()
		if err != nil {
			return err
		}
		it.vector = vectorBase64
		x.checkBase64(str, it)
		return nil
	}
	it.vector = vectorOther
	return s.skip(3)
}

// base64Chunk is how much of a base64 embedding is decoded at a time (a
// multiple of 4 characters, decoding to whole float32s).
const base64Chunk = 4 << 10

// checkBase64 checks a base64 embedding (standard alphabet, padded or
// not): little-endian float32s, each finite. Nothing of it is kept.
func (x *embeddingsAnswer) checkBase64(str jsonString, it *embeddingItem) {
	raw := str.raw
	if str.esc { // JSON may escape '/' as "\/"
		x.scratch = appendUnquoted(x.scratch[:0], raw)
		raw = x.scratch
	}
	enc := base64.StdEncoding
	if len(raw)%4 != 0 {
		enc = base64.RawStdEncoding
	}
	var out [base64Chunk / 4 * 3]byte
	n := 0
	for len(raw) > 0 {
		c := raw[:min(len(raw), base64Chunk)]
		raw = raw[len(c):]
		m, err := enc.Decode(out[:], c)
		// Padding or line breaks (which the decoder skips) before the end
		// would shift the float32s of the next chunk.
		if err != nil || (len(raw) > 0 && m != len(out)) || bytes.ContainsAny(c, "\r\n") {
			it.bad = badBase64
			return
		}
		for j := 0; j+4 <= m; j += 4 {
			if binary.LittleEndian.Uint32(out[j:])>>23&0xff == 0xff {
				it.bad, it.component = nonFinite, (n+j)/4
				return
			}
		}
		n += m
	}
	if n%4 != 0 {
		it.bad, it.bytes = badBytes, n
		return
	}
	it.dims = n / 4
}

// add counts an item and notes its problem when it is the first.
func (x *embeddingsAnswer) add(it *embeddingItem) {
	i := x.items
	x.items++
	if x.errType != "" {
		return
	}
	if it.hasIndex {
		switch {
		case it.badIndex && it.indexLen == 0:
			x.fail("invalid_index", fmt.Sprintf("data[%d]: the index is not a number", i))
			return
		case it.badIndex || it.index >= x.lim.inputs:
			x.fail("invalid_index", fmt.Sprintf("data[%d]: index %s is not one of the %d inputs' (0 to %d)",
				i, it.indexText[:it.indexLen], x.lim.inputs, x.lim.inputs-1))
			return
		case x.seen[it.index/64]&(1<<(it.index%64)) != 0:
			x.fail("invalid_index", fmt.Sprintf("data[%d]: index %d twice", i, it.index))
			return
		}
		x.seen[it.index/64] |= 1 << (it.index % 64)
	}
	var msg string
	switch {
	case !it.object:
		msg = fmt.Sprintf("data[%d] is not an embedding object", i)
	case it.vector == vectorNone:
		msg = fmt.Sprintf("data[%d] has no embedding", i)
	case it.vector == vectorOther:
		msg = fmt.Sprintf("data[%d]: the embedding is neither a list of numbers nor a base64 string", i)
	case it.bad == badComponent:
		msg = fmt.Sprintf("data[%d]: component %d of the embedding is not a number", i, it.component)
	case it.bad == badBase64:
		msg = fmt.Sprintf("data[%d]: the embedding is not base64", i)
	case it.bad == badBytes:
		msg = fmt.Sprintf("data[%d]: the embedding's %d bytes are not float32s", i, it.bytes)
	case it.bad == nonFinite:
		msg = fmt.Sprintf("data[%d]: component %d of the embedding is not finite", i, it.component)
	case it.dims == 0:
		msg = fmt.Sprintf("data[%d]: the embedding is empty", i)
	case x.lim.dims > 0 && it.dims != x.lim.dims:
		msg = fmt.Sprintf("data[%d]: %d dimensions, %d requested", i, it.dims, x.lim.dims)
	case x.dims > 0 && it.dims != x.dims:
		msg = fmt.Sprintf("data[%d]: %d dimensions, data[%d] has %d", i, it.dims, x.firstAt, x.dims)
	}
	if msg != "" {
		x.fail("invalid_embedding", msg)
		return
	}
	if x.dims == 0 {
		x.dims, x.firstAt = it.dims, i
	}
}

func (x *embeddingsAnswer) fail(errType, msg string) {
	x.errType, x.msg = errType, msg
}
