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

// Path is what a request of the API appends to the target's base URL
// ("/chat/completions"); "" for an unknown API.
func (a API) Path() string {
	if p, ok := protocols[a]; ok {
		return p.path()
	}
	return ""
}

// MessageBased reports whether the API carries a conversation as a list
// of role messages (chat, responses, messages) rather than one prompt
// text (completions, embeddings).
func (a API) MessageBased() bool {
	return a == APIChat || a == APIResponses || a == APIMessages
}
