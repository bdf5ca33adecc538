// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package wire

import (
	"bytes"
	"net/http"
)

// The OpenAI Responses API (POST /v1/responses), as OpenAI serves it and
// vLLM serves it for open-weight models.
//
// Body: {"model", "input" (the messages as {role, content} items; system
// messages go as role system), "max_output_tokens" (when > 0),
// "temperature", "top_p" (when > 0), "stream": true}, then ExtraBody
// ("reasoning", "tools", "tool_choice", "instructions" come from there).
//
// Stream: named events whose data carries the same "type":
// response.output_text.delta (answer text), response.reasoning_text.delta
// and response.reasoning_summary_text.delta (reasoning),
// response.function_call_arguments.delta (a tool call's arguments) are
// token-bearing; response.created carries the id and model;
// response.completed ends the stream with the usage (input_tokens with
// input_tokens_details.cached_tokens, output_tokens with
// output_tokens_details.reasoning_tokens) and finish reason stop, or
// tool_calls when the answer holds a function call (an output item of
// type function_call, or argument deltas in the stream, as chat's
// finish_reason says it), response.incomplete ends it
// truncated (finish reason length when the reason is max_output_tokens),
// response.failed and error are errors. Everything else (output items and
// content parts added or done, in_progress) is bookkeeping. There is no
// [DONE].

type responsesAPI struct{}

func (responsesAPI) path() string          { return "/responses" }
func (responsesAPI) streaming() bool       { return true }
func (responsesAPI) headers(h http.Header) {}

func (responsesAPI) encode(dst []byte, req *Request) ([]byte, error) {
	w := newBodyWriter(dst, req.ExtraBody)
	w.str("model", req.Model)
	if w.member("input") {
		w.dst = appendMessages(w.dst, req.Messages, nil, responsesParts)
	}
	if req.MaxTokens > 0 {
		w.int("max_output_tokens", int64(req.MaxTokens))
	}
	sp := req.Sampling
	sp.Seed, sp.TopK = nil, 0 // not parameters of the Responses API
	if err := w.sampling(&sp); err != nil {
		return w.dst, err
	}
	w.raw("stream", "true")
	return w.close()
}

// responsesParts writes a message with images as Responses input parts:
// [{"type":"input_text","text"},{"type":"input_image","image_url":"data:..."}...].
func responsesParts(dst []byte, m Message) []byte {
	dst = append(dst, `[{"type":"input_text","text":`...)
	dst = appendJSONString(dst, m.Content)
	dst = append(dst, '}')
	for _, im := range m.Images {
		dst = append(dst, `,{"type":"input_image","image_url":`...)
		dst = appendJSONString(dst, im.DataURL())
		dst = append(dst, '}')
	}
	return append(dst, ']')
}

func (responsesAPI) decode(d *chunkDecoder, ev SSEEvent) (eventKind, error) {
	data := bytes.TrimSpace(ev.Data)
	if len(data) == 0 {
		return eventSkip, nil
	}
	var typ, delta, status, reason, message jsonString
	var usage tokenUsage
	var hasUsage, functionCall bool
	s := &d.s
	err := d.topObject(data, func(key []byte) error {
		var err error
		switch string(key) {
		case "type":
			typ, err = s.stringValue(1)
		case "delta":
			delta, err = s.stringValue(1)
		case "message": // the error event's
			message, err = s.stringValue(1)
		case "response":
			_, err = d.object(1, func(k []byte) error {
				switch string(k) {
				case "id":
					d.c.id, err = s.stringValue(2)
				case "model":
					d.c.model, err = s.stringValue(2)
				case "status":
					status, err = s.stringValue(2)
				case "incomplete_details":
					_, err = d.object(2, func(ik []byte) error {
						if string(ik) == "reason" {
							reason, err = s.stringValue(3)
							return err
						}
						return s.skip(3)
					})
				case "error":
					_, message, err = d.errorObject(2)
				case "usage":
					usage = tokenUsage{}
					hasUsage, err = d.object(2, func(uk []byte) error { return d.responsesUsage(uk, &usage) })
				case "output":
					err = d.array(2, func() error {
						_, err := d.object(3, func(ik []byte) error {
							if string(ik) != "type" {
								return s.skip(4)
							}
							t, err := s.stringValue(4)
							functionCall = functionCall || t.is("function_call")
							return err
						})
						return err
					})
				default:
					err = s.skip(2)
				}
				return err
			})
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
	case name.is("response.output_text.delta"):
		if len(delta.raw) == 0 {
			return eventSkip, nil
		}
		c.tokens, c.answer, c.tokenBytes = true, true, len(delta.raw)
		c.texts = append(c.texts, delta)
	case name.is("response.reasoning_text.delta"), name.is("response.reasoning_summary_text.delta"):
		if len(delta.raw) == 0 {
			return eventSkip, nil
		}
		c.tokens, c.tokenBytes = true, len(delta.raw)
	case name.is("response.function_call_arguments.delta"):
		if len(delta.raw) == 0 {
			return eventSkip, nil
		}
		c.tokens, c.answer, c.toolCall, c.tokenBytes = true, true, true, len(delta.raw)
		d.toolCalled = true
	case name.is("response.created"), name.is("response.in_progress"):
		// id and model only
	case name.is("response.completed"), name.is("response.incomplete"):
		c.end = true
		c.hasUsage, c.usage = hasUsage, usage
		switch {
		case status.is("incomplete") && reason.is("max_output_tokens"):
			c.finish = jsonString{raw: []byte("length"), ok: true}
		case status.is("incomplete"):
			c.finish = reason
		case functionCall || d.toolCalled:
			c.finish = jsonString{raw: []byte("tool_calls"), ok: true}
		default:
			c.finish = jsonString{raw: []byte("stop"), ok: true}
		}
	case name.is("response.failed"), name.is("error"):
		c.isError, c.errMsg = true, message
	default:
		return eventSkip, nil
	}
	return eventChunk, nil
}

// errorObject reads {"code", "message"} (a failed response's error).
func (d *chunkDecoder) errorObject(depth int) (bool, jsonString, error) {
	s := &d.s
	var msg jsonString
	ok, err := d.object(depth, func(k []byte) error {
		if string(k) == "message" {
			var err error
			msg, err = s.stringValue(depth + 1)
			return err
		}
		return s.skip(depth + 1)
	})
	return ok, msg, err
}

// responsesUsage reads one member of a Responses usage object. It is
// chat's usage reading (chunkDecoder.usage) with the Responses API's
// names; the two stay apart because a switch on constant keys is
// measurably faster on the per-chunk path than one on variable names.
func (d *chunkDecoder) responsesUsage(key []byte, u *tokenUsage) error {
	s := &d.s
	var err error
	switch string(key) {
	case "input_tokens":
		u.prompt, u.hasPrompt, u.badPrompt, err = s.usageCount(3)
	case "output_tokens":
		u.completion, u.hasCompletion, u.badCompletion, err = s.usageCount(3)
	case "input_tokens_details":
		u.cached, u.hasCached, u.badCached, err = d.countIn(3, "cached_tokens")
	case "output_tokens_details":
		u.reasoning, u.hasReasoning, u.badReasoning, err = d.countIn(3, "reasoning_tokens")
	default:
		err = s.skip(3)
	}
	return err
}
