// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package wire

import (
	"bytes"
	"net/http"
	"strconv"
)

// The OpenAI chat and completions protocols (vLLM, SGLang, TGI, llama.cpp,
// NIM and hosted APIs speak them).
//
// Body: {"model", "messages" (chat) | "prompt" (completions: PromptIDs
// when non-nil, else Prompt), "max_tokens" (when > 0), "temperature",
// "top_p" (when > 0), "top_k" (when > 0), "seed" (when set), "stream":
// true, "stream_options": {"include_usage": true}}, then ExtraBody.
//
// Stream: `data:` events of chat.completion.chunk or text_completion JSON
// (chunkDecoder.decode), ended by `data: [DONE]`; an `event: error` is an
// error, other named events are ignored.

// standardKeys are the members encodeOpenAI writes itself; an ExtraBody
// key of the same name replaces the standard one.
var standardKeys = [...]string{"model", "messages", "prompt", "max_tokens", "temperature", "top_p", "top_k", "seed", "stream", "stream_options"}

type openAIChat struct{}

func (openAIChat) path() string        { return "/chat/completions" }
func (openAIChat) headers(http.Header) {}
func (openAIChat) streaming() bool     { return true }
func (openAIChat) encode(dst []byte, req *Request) ([]byte, error) {
	return encodeOpenAI(dst, req)
}
func (openAIChat) decode(d *chunkDecoder, ev SSEEvent) (eventKind, error) {
	return decodeOpenAI(d, &ev)
}

type openAICompletions struct{}

func (openAICompletions) path() string        { return "/completions" }
func (openAICompletions) headers(http.Header) {}
func (openAICompletions) streaming() bool     { return true }
func (openAICompletions) encode(dst []byte, req *Request) ([]byte, error) {
	return encodeOpenAI(dst, req)
}
func (openAICompletions) decode(d *chunkDecoder, ev SSEEvent) (eventKind, error) {
	return decodeOpenAI(d, &ev)
}

func encodeOpenAI(dst []byte, req *Request) ([]byte, error) {
	w := newBodyWriter(dst, req.ExtraBody)
	w.str("model", req.Model)
	if req.API == APIChat {
		if w.member("messages") {
			w.dst = appendMessages(w.dst, req.Messages, nil, chatParts)
		}
	} else if w.member("prompt") {
		if req.PromptIDs != nil {
			w.dst = appendTokenIDs(w.dst, req.PromptIDs)
		} else {
			w.dst = appendJSONString(w.dst, req.Prompt)
		}
	}
	if req.MaxTokens > 0 {
		w.int("max_tokens", int64(req.MaxTokens))
	}
	if err := w.sampling(&req.Sampling); err != nil {
		return w.dst, err
	}
	w.raw("stream", "true")
	w.raw("stream_options", `{"include_usage":true}`)
	return w.close()
}

// chatParts writes a message with images as chat content parts:
// [{"type":"text","text"},{"type":"image_url","image_url":{"url":"data:..."}}...].
func chatParts(dst []byte, m Message) []byte {
	dst = append(dst, `[{"type":"text","text":`...)
	dst = appendJSONString(dst, m.Content)
	dst = append(dst, '}')
	for _, im := range m.Images {
		dst = append(dst, `,{"type":"image_url","image_url":{"url":`...)
		dst = appendJSONString(dst, im.DataURL())
		dst = append(dst, `}}`...)
	}
	return append(dst, ']')
}

// appendTokenIDs appends ids as a JSON list of integers.
func appendTokenIDs(dst []byte, ids []int) []byte {
	dst = append(dst, '[')
	for i, id := range ids {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = strconv.AppendInt(dst, int64(id), 10)
	}
	return append(dst, ']')
}

func decodeOpenAI(d *chunkDecoder, ev *SSEEvent) (eventKind, error) {
	if ev.Type != nil && !ev.IsType("message") {
		if ev.IsType("error") {
			return eventError, nil
		}
		return eventSkip, nil
	}
	data := bytes.TrimSpace(ev.Data)
	if len(data) == 0 {
		return eventSkip, nil
	}
	if string(data) == "[DONE]" {
		return eventDone, nil
	}
	if err := d.decode(data); err != nil {
		return eventChunk, err
	}
	return eventChunk, nil
}
