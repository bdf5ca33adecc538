// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package wire

// OpenAI stream chunk decoding: a chat or completions chunk read by the
// JSON scanner (json.go) into a streamChunk the client consumes; the
// other protocols share the decoder and its usage reading.

// tokenUsage is the `usage` object of a chunk.
type tokenUsage struct {
	prompt, completion, cached, reasoning             int
	hasPrompt, hasCompletion, hasCached, hasReasoning bool
	// bad*: the field held a number that is not a count (negative,
	// fractional, above 1e9); has* is false then.
	badPrompt, badCompletion, badCached, badReasoning bool
}

// streamChunk is what the client takes from one chunk. Slices alias the
// payload (or the decoder) and are valid until the next decode.
type streamChunk struct {
	id, model jsonString
	// fingerprint is the top-level system_fingerprint (OpenAI, llama.cpp,
	// TGI; vLLM sends null), a name of the serving build.
	fingerprint jsonString
	// tokens is true when a choice carries generated text: delta.content,
	// delta.reasoning_content or delta.reasoning, a delta.tool_calls
	// arguments fragment (chat), or text (completions), non-empty.
	tokens bool
	// answer is true when those tokens include the answer (content, text
	// or a tool call), not only reasoning; toolCall when a tool call.
	answer, toolCall bool
	// texts are the content / text pieces in choice order (reasoning is not
	// part of the completion kept for conversation history).
	texts []jsonString
	// tokenBytes is the length, as sent, of the generated text the chunk
	// carries (content, reasoning, text, tool arguments): it bounds how
	// many tokens the chunk can hold.
	tokenBytes int
	finish     jsonString // the last non-null finish_reason among the choices

	hasUsage bool
	usage    tokenUsage

	// isError is set by a non-null top-level "error" (OpenAI, vLLM >= 0.5,
	// SGLang, TGI) or by "object": "error" (older vLLM, whose error body is
	// an ErrorResponse at top level). errMsg is its message when found.
	isError bool
	errMsg  jsonString
	// message is a top-level "message" string: the text of an error
	// event in the flat {"code", "message", "type"} shape (llama.cpp).
	message jsonString

	// end is set by the event that ends a protocol's stream when it also
	// carries data (Responses' response.completed).
	end bool
	// items counts the results of a non-streaming answer (embeddings).
	items int
}

// chunkDecoder decodes stream chunks; it keeps scratch buffers across calls.
type chunkDecoder struct {
	s      jsonScanner
	c      streamChunk
	keyBuf []byte
	errAt  int // byte offset of the last syntax error

	// prompt is the prompt side of usage that a protocol reports in one
	// event and completes in a later one (Messages: message_start, then
	// message_delta); reset by begin.
	prompt tokenUsage
	// toolCalled is set when the stream carried a tool call's arguments
	// (Responses: its final event says only "completed"); reset by begin.
	toolCalled bool
}

// begin resets the state a protocol keeps across the events of a stream.
func (d *chunkDecoder) begin() { d.prompt, d.toolCalled = tokenUsage{}, false }

// decode parses data into d.c. It returns errMalformedJSON (offset in
// d.errAt) when data is not valid JSON, errTooDeep when it nests deeper
// than maxJSONDepth, and errNotObject when it is valid JSON but not an
// object.
func (d *chunkDecoder) decode(data []byte) error {
	s := &d.s
	s.b, s.i = data, 0
	texts := d.c.texts[:0]
	d.c = streamChunk{texts: texts}
	s.ws()
	if s.i < len(s.b) && s.b[s.i] != '{' {
		if err := s.skip(0); err != nil {
			return d.fail(err)
		}
		if s.ws(); s.i != len(s.b) {
			return d.fail(errMalformedJSON)
		}
		return errNotObject
	}
	s.i++ // '{' (or past the end of an empty payload, which objectStart rejects)
	if err := d.top(); err != nil {
		return d.fail(err)
	}
	if s.ws(); s.i != len(s.b) {
		return d.fail(errMalformedJSON)
	}
	return nil
}

func (d *chunkDecoder) fail(err error) error {
	d.errAt = d.s.i
	if err == errTooDeep {
		return errTooDeep
	}
	return errMalformedJSON
}

// key returns an object key ready to compare.
func (d *chunkDecoder) key(k jsonString) []byte {
	if !k.esc {
		return k.raw
	}
	d.keyBuf = appendUnquoted(d.keyBuf[:0], k.raw)
	return d.keyBuf
}

func (d *chunkDecoder) top() error {
	s, c := &d.s, &d.c
	var errVal, objectErr bool
	var errMsg, topMsg jsonString
	k, more, err := s.objectStart()
	for ; more && err == nil; k, more, err = s.objectNext(err) {
		switch string(d.key(k)) {
		case "id":
			c.id, err = s.stringValue(1)
		case "model":
			c.model, err = s.stringValue(1)
		case "system_fingerprint":
			c.fingerprint, err = s.stringValue(1)
		case "choices":
			c.tokens, c.texts, c.finish, c.tokenBytes = false, c.texts[:0], jsonString{}, 0
			err = d.choices()
		case "usage":
			c.hasUsage, c.usage = false, tokenUsage{}
			err = d.usage()
		case "error":
			errVal, errMsg, err = d.errorValue()
		case "object":
			var o jsonString
			o, err = s.stringValue(1)
			objectErr = o.ok && !o.esc && string(o.raw) == "error"
		case "message":
			topMsg, err = s.stringValue(1)
		default:
			err = s.skip(1)
		}
	}
	if err != nil {
		return err
	}
	c.message = topMsg
	switch {
	case errVal:
		c.isError, c.errMsg = true, errMsg
	case objectErr:
		c.isError, c.errMsg = true, topMsg
	}
	return nil
}

// errorValue reads the value of "error": null means no error; an object's
// "message" or a bare string is the message.
func (d *chunkDecoder) errorValue() (bool, jsonString, error) {
	s := &d.s
	s.ws()
	if s.i >= len(s.b) {
		return false, jsonString{}, errMalformedJSON
	}
	switch s.b[s.i] {
	case 'n':
		return false, jsonString{}, s.skip(1)
	case '"':
		str, err := s.stringValue(1)
		return true, str, err
	case '{':
		s.i++
		var msg jsonString
		k, more, err := s.objectStart()
		for ; more && err == nil; k, more, err = s.objectNext(err) {
			if string(d.key(k)) == "message" {
				msg, err = s.stringValue(2)
			} else {
				err = s.skip(2)
			}
		}
		return true, msg, err
	}
	return true, jsonString{}, s.skip(1)
}

func (d *chunkDecoder) choices() error {
	s := &d.s
	s.ws()
	if s.i >= len(s.b) || s.b[s.i] != '[' {
		return s.skip(1) // null, or not what a chunk carries: ignored
	}
	s.i++
	more, err := s.arrayStart()
	for ; more && err == nil; more, err = s.arrayNext(err) {
		err = d.choice()
	}
	return err
}

func (d *chunkDecoder) choice() error {
	s, c := &d.s, &d.c
	s.ws()
	if s.i >= len(s.b) || s.b[s.i] != '{' {
		return s.skip(2)
	}
	s.i++
	var content, reasoningContent, reasoning, text, finish jsonString
	var toolBytes int
	k, more, err := s.objectStart()
	for ; more && err == nil; k, more, err = s.objectNext(err) {
		switch string(d.key(k)) {
		case "delta":
			content, reasoningContent, reasoning, toolBytes = jsonString{}, jsonString{}, jsonString{}, 0
			s.ws()
			if s.i >= len(s.b) || s.b[s.i] != '{' {
				err = s.skip(3)
				break
			}
			s.i++
			var dk jsonString
			var dmore bool
			dk, dmore, err = s.objectStart()
			for ; dmore && err == nil; dk, dmore, err = s.objectNext(err) {
				switch string(d.key(dk)) {
				case "content":
					content, err = s.stringValue(4)
				case "reasoning_content":
					reasoningContent, err = s.stringValue(4)
				case "reasoning":
					reasoning, err = s.stringValue(4)
				case "tool_calls":
					toolBytes, err = d.toolCalls()
				default:
					err = s.skip(4)
				}
			}
		case "text":
			text, err = s.stringValue(3)
		case "finish_reason":
			finish, err = s.stringValue(3)
		default:
			err = s.skip(3)
		}
	}
	if err != nil {
		return err
	}
	tool := toolBytes > 0
	answer := len(content.raw) > 0 || len(text.raw) > 0 || tool
	c.tokenBytes += len(content.raw) + len(text.raw) + len(reasoningContent.raw) + len(reasoning.raw) + toolBytes
	if answer || len(reasoningContent.raw) > 0 || len(reasoning.raw) > 0 {
		c.tokens = true
	}
	c.answer = c.answer || answer
	c.toolCall = c.toolCall || tool
	if len(content.raw) > 0 {
		c.texts = append(c.texts, content)
	}
	if len(text.raw) > 0 {
		c.texts = append(c.texts, text)
	}
	if finish.ok {
		c.finish = finish
	}
	return nil
}

// toolCalls walks delta.tool_calls, an array of {index, id, type,
// function: {name, arguments}}; it returns the length of the arguments
// fragments the elements carry: the generated tokens (the header naming
// the function, arguments "", announces the call and is no token, as
// servers count it). Repeated keys resolve as encoding/json resolves
// them: the last one wins.
func (d *chunkDecoder) toolCalls() (int, error) {
	s := &d.s
	s.ws()
	if s.i >= len(s.b) || s.b[s.i] != '[' {
		return 0, s.skip(4) // null, or not a list: no tool tokens
	}
	s.i++
	fragment := 0
	more, err := s.arrayStart()
	for ; more && err == nil; more, err = s.arrayNext(err) {
		s.ws()
		if s.i >= len(s.b) || s.b[s.i] != '{' {
			err = s.skip(5)
			continue
		}
		s.i++
		var args jsonString // of the element's last "function"
		k, kmore, kerr := s.objectStart()
		for ; kmore && kerr == nil; k, kmore, kerr = s.objectNext(kerr) {
			if string(d.key(k)) != "function" {
				kerr = s.skip(6)
				continue
			}
			args = jsonString{}
			s.ws()
			if s.i >= len(s.b) || s.b[s.i] != '{' {
				kerr = s.skip(6)
				continue
			}
			s.i++
			fk, fmore, ferr := s.objectStart()
			for ; fmore && ferr == nil; fk, fmore, ferr = s.objectNext(ferr) {
				if string(d.key(fk)) == "arguments" {
					args, ferr = s.stringValue(7)
				} else {
					ferr = s.skip(7)
				}
			}
			kerr = ferr
		}
		err = kerr
		fragment += len(args.raw)
	}
	return fragment, err
}

func (d *chunkDecoder) usage() error {
	s, c := &d.s, &d.c
	s.ws()
	if s.i >= len(s.b) || s.b[s.i] != '{' {
		return s.skip(1) // null: no usage in this chunk
	}
	s.i++
	c.hasUsage = true
	u := &c.usage
	k, more, err := s.objectStart()
	for ; more && err == nil; k, more, err = s.objectNext(err) {
		switch string(d.key(k)) {
		case "prompt_tokens":
			u.prompt, u.hasPrompt, u.badPrompt, err = s.usageCount(2)
		case "completion_tokens":
			u.completion, u.hasCompletion, u.badCompletion, err = s.usageCount(2)
		case "completion_tokens_details":
			u.reasoning, u.hasReasoning, u.badReasoning, err = d.countIn(2, "reasoning_tokens")
		case "prompt_tokens_details":
			u.cached, u.hasCached, u.badCached, err = d.countIn(2, "cached_tokens")
		default:
			err = s.skip(2)
		}
	}
	return err
}

// Decoding helpers the protocols share.

// topObject decodes data, which must be one JSON object, calling field
// for each member's key with the scanner at its value (depth 1); field
// consumes the value. d.c is reset first.
func (d *chunkDecoder) topObject(data []byte, field func(key []byte) error) error {
	s := &d.s
	s.b, s.i = data, 0
	texts := d.c.texts[:0]
	d.c = streamChunk{texts: texts}
	s.ws()
	if s.i >= len(s.b) || s.b[s.i] != '{' {
		if err := s.skip(0); err != nil {
			return d.fail(err)
		}
		if s.ws(); s.i != len(s.b) {
			return d.fail(errMalformedJSON)
		}
		return d.fail(errNotObject)
	}
	s.i++
	k, more, err := s.objectStart()
	for ; more && err == nil; k, more, err = s.objectNext(err) {
		err = field(d.key(k))
	}
	if err != nil {
		return d.fail(err)
	}
	if s.ws(); s.i != len(s.b) {
		return d.fail(errMalformedJSON)
	}
	return nil
}

// object decodes the value at the scanner as an object at depth, calling
// field for each key; a value that is not an object (null included) is
// skipped and reported with ok false.
func (d *chunkDecoder) object(depth int, field func(key []byte) error) (ok bool, err error) {
	s := &d.s
	s.ws()
	if s.i >= len(s.b) || s.b[s.i] != '{' {
		return false, s.skip(depth)
	}
	s.i++
	k, more, err := s.objectStart()
	for ; more && err == nil; k, more, err = s.objectNext(err) {
		err = field(d.key(k))
	}
	return true, err
}

// array decodes the value at the scanner as an array at depth, calling
// elem for each element; a value that is not an array is skipped.
func (d *chunkDecoder) array(depth int, elem func() error) error {
	s := &d.s
	s.ws()
	if s.i >= len(s.b) || s.b[s.i] != '[' {
		return s.skip(depth)
	}
	s.i++
	more, err := s.arrayStart()
	for ; more && err == nil; more, err = s.arrayNext(err) {
		err = elem()
	}
	return err
}

// countIn reads the object at the scanner (at depth) for the token count
// under key, as usageCount reports it; a value that is not an object
// holds none. The last of repeated keys wins, as in encoding/json.
func (d *chunkDecoder) countIn(depth int, key string) (n int, ok, bad bool, err error) {
	_, err = d.object(depth, func(k []byte) error {
		if string(k) != key {
			return d.s.skip(depth + 1)
		}
		var e error
		n, ok, bad, e = d.s.usageCount(depth + 1)
		return e
	})
	return n, ok, bad, err
}

// eventName is the type of an event that names it twice: the SSE event
// line when present, else the data's "type" member (typ).
func eventName(ev SSEEvent, typ jsonString) jsonString {
	if ev.Type != nil {
		return jsonString{raw: ev.Type, ok: true}
	}
	return typ
}
