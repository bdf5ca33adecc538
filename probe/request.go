// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package probe

import (
	"cmp"
	"math/rand/v2"
	"strconv"

	"github.com/llmprobe/llmprobe/probe/wire"
)

// promptFormat is how prompts are written: text, or token ids.
type promptFormat int

const (
	promptText promptFormat = iota
	promptIDs
)

// prepared is a request ready to send, with what its result needs and
// what the length model learns from it.
type prepared struct {
	class   *Class
	req     *wire.Request
	res     *wire.Result
	lengths *lengthModel
	// words is the number of synthesised word-tokens (or ids) of the
	// prompt, and messages its chat message count (0: completions), for
	// calibration; words < 0 when the prompt carries history the model
	// must not learn from.
	words    int
	messages int
}

func (r *runner) newPrepared(c *Class, maxTokens int) *prepared {
	model := cmp.Or(c.Model, r.model)
	req := &wire.Request{
		API:       r.api,
		Model:     model,
		MaxTokens: maxTokens,
		Sampling:  c.Sampling,
		ExtraBody: c.Body,
	}
	return &prepared{
		class:   c,
		req:     req,
		lengths: r.lengths,
		res: &wire.Result{
			Target:              r.name,
			Model:               model,
			Class:               c.Name,
			PlannedOutputTokens: maxTokens,
			MaxTokens:           maxTokens,
			Sampling:            c.Sampling,
			PrefixGroup:         -1,
		},
	}
}

// firstTurn synthesises the prompt of a single request or of a
// conversation's first turn: the group's shared prefix (stable, so a
// prefix cache can serve it), then a random nonce so that nothing after
// the prefix is cached by accident, then random text up to the planned
// length, converted from server tokens to words by the target's length
// model. conv, when not nil, records the history.
func (r *runner) firstTurn(p *Plan, rng *rand.Rand, conv *conversation) *prepared {
	pr := r.newPrepared(p.Class, p.OutputTokens)
	res := pr.res
	res.PrefixGroup, res.PrefixTokens = p.PrefixGroup, p.PrefixTokens
	res.PlannedPromptTokens = p.PromptTokens
	if conv != nil {
		res.ConversationID, res.Turn = conv.id, 1
		pr.req.KeepText = true
	}

	if r.promptFormat == promptIDs {
		ids := make([]int, 0, p.PromptTokens)
		if p.PrefixGroup >= 0 {
			ids = append(ids, r.synth.PrefixIDs(p.PrefixGroup, p.PrefixTokens)...)
		}
		n := max(r.lengths.words(p.PromptTokens, 0)-len(ids), NonceTokens)
		ids = AppendTokenIDs(ids, rng, n)
		pr.req.PromptIDs = ids
		pr.words, pr.messages = len(ids), 0
		res.PlannedPromptTokens = r.lengths.tokens(len(ids), 0)
		return pr
	}

	k := 0
	if r.api.MessageBased() {
		k = 1
		if p.PrefixGroup >= 0 {
			k = 2
		}
	}
	words := r.lengths.words(p.PromptTokens, k)
	body := words - p.PrefixTokens - NonceTokens
	if body < 0 {
		// The planned length cannot hold prefix and nonce: send the
		// shortest prompt that can, and plan what it will count.
		body = 0
		words = p.PrefixTokens + NonceTokens
		res.PlannedPromptTokens = r.lengths.tokens(words, k)
	}
	buf := make([]byte, 0, 8*(body+NonceTokens+1))
	buf = r.synth.AppendNonce(buf, rng)
	if body > 0 {
		buf = append(buf, ' ')
		buf = r.synth.AppendText(buf, rng, body)
	}
	text := string(buf)
	var prefix string
	if p.PrefixGroup >= 0 {
		prefix = r.synth.Prefix(p.PrefixGroup, p.PrefixTokens)
	}
	pr.words, pr.messages = words, k
	switch {
	case r.api.MessageBased():
		if prefix != "" {
			pr.req.Messages = []wire.Message{{Role: "system", Content: prefix}, {Role: "user", Content: text}}
		} else {
			pr.req.Messages = []wire.Message{{Role: "user", Content: text}}
		}
		if p.Class.Images != nil {
			user := &pr.req.Messages[len(pr.req.Messages)-1]
			user.Images, res.ImagePixels = p.Class.Images.draw(rng)
			res.Images = len(user.Images)
			if res.Images > 0 {
				pr.words = -1 // image tokens are the server's: no length to learn from
			}
		}
	default:
		if prefix != "" {
			text = prefix + " " + text
		}
		pr.req.Prompt = text
		if r.api == wire.APIEmbeddings && p.Class.Batch > 1 {
			// A batch: the first input as planned, the others of the same
			// length with their own random text.
			inputs := make([]string, p.Class.Batch)
			inputs[0] = text
			for i := 1; i < len(inputs); i++ {
				b := r.synth.AppendNonce(make([]byte, 0, len(buf)), rng)
				if body > 0 {
					b = append(b, ' ')
					b = r.synth.AppendText(b, rng, body)
				}
				inputs[i] = string(b)
			}
			pr.req.Inputs = inputs
			res.PlannedPromptTokens *= len(inputs)
			pr.words = -1 // calibration learns from single prompts only
		}
	}
	if conv != nil {
		conv.messages = pr.req.Messages
		conv.prompt = pr.req.Prompt
	}
	return pr
}

// nextTurn builds the turn after prev: the whole history (previous user
// and assistant messages, or the previous prompt and completion) plus a
// new user message of userTokens server tokens. Its planned length is what
// the server counted for the previous turn, plus the answer, plus the new
// message and its template tokens.
func (r *runner) nextTurn(c *Class, conv *conversation, prev *wire.Result, userTokens, maxTokens int, rng *rand.Rand) *prepared {
	pr := r.newPrepared(c, maxTokens)
	res := pr.res
	res.ConversationID, res.Turn = conv.id, prev.Turn+1
	res.PrefixGroup, res.PrefixTokens = prev.PrefixGroup, prev.PrefixTokens
	pr.req.KeepText = true
	pr.words = -1

	k := 0
	if r.api.MessageBased() {
		k = 1
	}
	words := max(r.lengths.scale(userTokens, k), 1)
	text := string(r.synth.AppendText(make([]byte, 0, 8*(words+1)), rng, words))
	newTokens := r.lengths.tokens(words, k) - r.lengths.tokens(0, k)

	switch {
	case r.api.MessageBased():
		msgs := make([]wire.Message, 0, len(conv.messages)+2)
		msgs = append(msgs, conv.messages...)
		msgs = append(msgs, wire.Message{Role: "assistant", Content: prev.Completion}, wire.Message{Role: "user", Content: text})
		pr.req.Messages = msgs
		conv.messages = msgs
		res.Images, res.ImagePixels = prev.Images, prev.ImagePixels // the history carries them
		res.PlannedPromptTokens = prev.PromptTokens + prev.OutputTokens + 2*r.lengths.perMessage() + newTokens
	default:
		pr.req.Prompt = conv.prompt + prev.Completion + " " + text
		conv.prompt = pr.req.Prompt
		res.PlannedPromptTokens = prev.PromptTokens + prev.OutputTokens + newTokens
	}
	return pr
}

// conversationID is a random 64-bit id in hex.
func conversationID(rng *rand.Rand) string {
	return strconv.FormatUint(rng.Uint64()|1<<63, 16)
}
