// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package wire

import (
	"bytes"
	"net/http"
	"strings"
)

// The Anthropic Messages API (POST /v1/messages), as Anthropic serves it
// and vLLM and SGLang serve it for their models.
//
// Body: {"model", "max_tokens" (required by the API), "system" (the
// request's system messages), "messages" (the user and assistant turns),
// "temperature", "top_p", "top_k" (when set), "stream": true}, then
// ExtraBody ("thinking", "tools", "tool_choice" come from there).
// Authentication (x-api-key) is the target's http_client_config; the
// anthropic-version header is set unless the configuration sets it.
//
// Stream: named events message_start (message id, model, and the prompt
// side of usage: input_tokens, cache_read_input_tokens,
// cache_creation_input_tokens; its output_tokens is a placeholder and is
// not taken as a count), content_block_start, content_block_delta
// (text_delta: answer text; thinking_delta: reasoning; input_json_delta:
// a tool call's arguments; signature_delta: none of them),
// content_block_stop, message_delta (stop_reason and the output tokens so
// far), message_stop (the end), ping, and error (Anthropic's
// {"type":"error","error":{"type","message"}}, or llama.cpp's flat
// {"code","message","type"}). A stream that ends before message_delta
// has no output count: the client counts the text deltas, as estimated.
//
// Usage maps to OpenAI's counting: prompt tokens are input_tokens +
// cache_read_input_tokens + cache_creation_input_tokens (Anthropic counts
// input_tokens after the last cache breakpoint), cached tokens are
// cache_read_input_tokens. stop_reason maps to finish reasons: end_turn
// and stop_sequence → stop, max_tokens → length, tool_use → tool_calls;
// others are kept as they are.

// AnthropicVersion is the anthropic-version header sent when the target's
// configuration sets none.
const AnthropicVersion = "2023-06-01"

type messagesAPI struct{}

func (messagesAPI) path() string    { return "/messages" }
func (messagesAPI) streaming() bool { return true }

// headers sets anthropic-version; a configured one (http_headers) is
// added by the transport after this, so the client is told to leave it
// out when the target sets it (ClientConfig.OmitHeaders).
func (messagesAPI) headers(h http.Header) { h["Anthropic-Version"] = []string{AnthropicVersion} }

func (messagesAPI) encode(dst []byte, req *Request) ([]byte, error) {
	w := newBodyWriter(dst, req.ExtraBody)
	w.str("model", req.Model)
	w.int("max_tokens", int64(max(req.MaxTokens, 1)))
	var system []string
	for _, m := range req.Messages {
		if m.Role == "system" {
			system = append(system, m.Content)
		}
	}
	if len(system) > 0 {
		w.str("system", strings.Join(system, "\n\n"))
	}
	if w.member("messages") {
		w.dst = appendMessages(w.dst, req.Messages, func(m Message) bool { return m.Role == "system" }, messagesParts)
	}
	sp := req.Sampling
	sp.Seed = nil // the Messages API has no seed
	if err := w.sampling(&sp); err != nil {
		return w.dst, err
	}
	w.raw("stream", "true")
	return w.close()
}

// messagesParts writes a message with images as Anthropic content blocks,
// images before the text as Anthropic's documentation has it:
// [{"type":"image","source":{"type":"base64","media_type","data"}}...,{"type":"text","text"}].
func messagesParts(dst []byte, m Message) []byte {
	dst = append(dst, '[')
	for _, im := range m.Images {
		dst = append(dst, `{"type":"image","source":{"type":"base64","media_type":`...)
		dst = appendJSONString(dst, im.MediaType)
		dst = append(dst, `,"data":`...)
		dst = appendJSONString(dst, im.Data)
		dst = append(dst, `}},`...)
	}
	dst = append(dst, `{"type":"text","text":`...)
	dst = appendJSONString(dst, m.Content)
	return append(dst, `}]`...)
}

func (messagesAPI) decode(d *chunkDecoder, ev SSEEvent) (eventKind, error) {
	data := bytes.TrimSpace(ev.Data)
	if len(data) == 0 {
		return eventSkip, nil
	}
	var typ, deltaType, text, stop jsonString
	var deltaUsage tokenUsage
	var hasDeltaUsage, isErr bool
	var errMsg, topMsg jsonString
	err := d.topObject(data, func(key []byte) error {
		s := &d.s
		var err error
		switch string(key) {
		case "type":
			typ, err = s.stringValue(1)
		case "message": // message_start's message, or an error's text
			if s.ws(); s.i < len(s.b) && s.b[s.i] == '"' {
				topMsg, err = s.stringValue(1)
				return err
			}
			_, err = d.object(1, func(k []byte) error {
				switch string(k) {
				case "id":
					d.c.id, err = s.stringValue(2)
				case "model":
					d.c.model, err = s.stringValue(2)
				case "usage":
					d.prompt = tokenUsage{}
					_, err = d.object(2, func(uk []byte) error { return d.anthropicUsage(uk, 3, &d.prompt) })
					// Its output_tokens is a placeholder (0, or 1), not a
					// count: only message_delta reports the output.
					d.prompt.completion, d.prompt.hasCompletion, d.prompt.badCompletion = 0, false, false
				default:
					err = s.skip(2)
				}
				return err
			})
		case "delta":
			_, err = d.object(1, func(k []byte) error {
				switch string(k) {
				case "type":
					deltaType, err = s.stringValue(2)
				case "text", "thinking", "partial_json":
					text, err = s.stringValue(2)
				case "stop_reason":
					stop, err = s.stringValue(2)
				default:
					err = s.skip(2)
				}
				return err
			})
		case "usage": // message_delta
			deltaUsage = tokenUsage{}
			hasDeltaUsage, err = d.object(1, func(uk []byte) error { return d.anthropicUsage(uk, 2, &deltaUsage) })
		case "error":
			isErr, errMsg, err = d.errorValue()
		default:
			err = s.skip(1)
		}
		return err
	})
	if err != nil {
		return eventChunk, err
	}
	name := eventName(ev, typ)
	c := &d.c
	switch {
	case isErr || name.is("error"):
		// Anthropic's {"type":"error","error":{"message"}}, or a flat
		// {"code","message","type"} (llama.cpp).
		c.isError, c.errMsg = true, errMsg
		if !errMsg.ok {
			c.errMsg = topMsg
		}
		return eventChunk, nil
	case name.is("message_start"):
		c.hasUsage, c.usage = true, d.prompt
		return eventChunk, nil
	case name.is("content_block_delta"):
		if len(text.raw) == 0 {
			return eventSkip, nil
		}
		c.tokenBytes = len(text.raw)
		switch {
		case deltaType.is("text_delta"):
			c.tokens, c.answer = true, true
			c.texts = append(c.texts, text)
		case deltaType.is("thinking_delta"):
			c.tokens = true
		case deltaType.is("input_json_delta"):
			c.tokens, c.answer, c.toolCall = true, true, true
		default: // signature_delta and what may come
			return eventSkip, nil
		}
		return eventChunk, nil
	case name.is("message_delta"):
		if stop.ok {
			c.finish = anthropicFinish(stop)
		}
		if hasDeltaUsage {
			u := d.prompt
			u.completion, u.hasCompletion, u.badCompletion = deltaUsage.completion, deltaUsage.hasCompletion, deltaUsage.badCompletion
			if deltaUsage.hasPrompt { // some servers repeat the input side
				u.prompt, u.hasPrompt, u.cached, u.hasCached = deltaUsage.prompt, true, deltaUsage.cached, deltaUsage.hasCached
			}
			c.hasUsage, c.usage = true, u
		}
		return eventChunk, nil
	case name.is("message_stop"):
		return eventDone, nil
	}
	return eventSkip, nil // ping, content_block_start/stop, and what may come
}

// anthropicUsage reads one usage member into u: the prompt is the sum of
// input_tokens and the cache reads and writes.
func (d *chunkDecoder) anthropicUsage(key []byte, depth int, u *tokenUsage) error {
	s := &d.s
	var n int
	var ok, bad bool
	var err error
	switch string(key) {
	case "output_tokens":
		u.completion, u.hasCompletion, u.badCompletion, err = s.usageCount(depth)
		return err
	case "input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens":
		n, ok, bad, err = s.usageCount(depth)
	default:
		return s.skip(depth)
	}
	u.badPrompt = u.badPrompt || bad
	if !ok {
		return err
	}
	u.prompt += n
	u.hasPrompt = true
	if string(key) == "cache_read_input_tokens" {
		u.cached, u.hasCached = n, true
	}
	return err
}

// anthropicFinish maps a stop_reason to OpenAI's finish_reason vocabulary.
func anthropicFinish(stop jsonString) jsonString {
	var to string
	switch {
	case stop.is("end_turn"), stop.is("stop_sequence"):
		to = "stop"
	case stop.is("max_tokens"):
		to = "length"
	case stop.is("tool_use"):
		to = "tool_calls"
	default:
		return stop
	}
	return jsonString{raw: []byte(to), ok: true}
}
