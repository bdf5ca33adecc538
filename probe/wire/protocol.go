// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package wire

// Wire protocols.
//
// Each API llmprobe speaks is one protocol, in a file of its own:
// openai.go (chat and completions), responses.go (the OpenAI Responses
// API), messages.go (the Anthropic Messages API), embeddings.go. A
// protocol knows where a request goes, how its body is written, and how
// each event of its stream reads as tokens, answer, usage, a finish or an
// error; the client (connection, timing, bounds, outcomes), the engine
// and the metrics never look at the wire format. To add one: implement
// protocol in a new file, give it an API constant and add it to
// protocols, accept the value in config (Target.API), and teach the
// simulator to serve it so that its tests run end to end.

import "net/http"

// protocol is one wire protocol.
type protocol interface {
	// path is appended to the target's base URL.
	path() string
	// encode appends the JSON body of req to dst.
	encode(dst []byte, req *Request) ([]byte, error)
	// headers sets the request headers the protocol needs (the user's
	// own, from http_client_config, are added by the transport).
	headers(h http.Header)
	// streaming is false for APIs answered with one JSON body.
	streaming() bool
	// decode reads one event of the stream into d.c (a streaming
	// protocol), or the whole body (non-streaming, ev.Data).
	decode(d *chunkDecoder, ev SSEEvent) (eventKind, error)
}

// eventKind is what one event of a stream was to the client.
type eventKind uint8

const (
	eventSkip  eventKind = iota // nothing the client needs (a ping, a bookkeeping event)
	eventChunk                  // d.c holds what it carried; d.c.end when it also ended the stream
	eventDone                   // the stream's end marker, carrying nothing else ([DONE])
	eventError                  // an error event; d.c.errMsg holds its message when found
)

// protocols maps every API to its protocol.
var protocols = map[API]protocol{
	APIChat:        openAIChat{},
	APICompletions: openAICompletions{},
	APIResponses:   responsesAPI{},
	APIMessages:    messagesAPI{},
	APIEmbeddings:  embeddingsAPI{},
}

// MessageBased reports whether the API carries a conversation as a list
// of role messages (chat, responses, messages) rather than one prompt
// text (completions, embeddings).
func (a API) MessageBased() bool {
	return a == APIChat || a == APIResponses || a == APIMessages
}

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

// is reports whether a decoded JSON string equals lit exactly.
func (j jsonString) is(lit string) bool { return j.ok && !j.esc && string(j.raw) == lit }
