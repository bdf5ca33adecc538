// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package probe

import (
	"net/http"
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

// decode reads the whole answer (ev.Data): c.items is the number of
// embeddings in data.
func (embeddingsAPI) decode(d *chunkDecoder, ev SSEEvent) (eventKind, error) {
	s := &d.s
	var isErr bool
	var errMsg jsonString
	err := d.topObject(ev.Data, func(key []byte) error {
		var err error
		switch string(key) {
		case "data":
			err = d.array(1, func() error {
				ok, err := d.object(2, func(k []byte) error {
					return s.skip(3) // the vector itself is not needed
				})
				if ok {
					d.c.items++
				}
				return err
			})
		case "model":
			d.c.model, err = s.stringValue(1)
		case "usage":
			d.c.usage = tokenUsage{}
			d.c.hasUsage, err = d.object(1, func(k []byte) error {
				if string(k) == "prompt_tokens" {
					var err error
					d.c.usage.prompt, d.c.usage.hasPrompt, d.c.usage.badPrompt, err = s.usageCount(2)
					return err
				}
				return s.skip(2)
			})
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
	if isErr {
		d.c.isError, d.c.errMsg = true, errMsg
	}
	return eventChunk, nil
}
