// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package workload

import (
	"cmp"
	"context"
	"math/rand/v2"
	"net/http"

	"github.com/llmprobe/llmprobe/config"
	"github.com/llmprobe/llmprobe/probe/wire"
)

// PromptFormat is how prompts are written: text, or token ids.
type PromptFormat int

const (
	PromptText PromptFormat = iota
	PromptIDs
)

// Builder prepares the requests of one target: it turns a Plan into a
// request in the target's API, model and prompt format, and a
// conversation's answer into its next turn. Its length model, which
// converts planned server tokens into synthesised words, learns from
// every result (Prepared.Learn) and from /tokenize (Calibrate). A Builder
// is safe for concurrent use.
type Builder struct {
	target  string
	replica string // wire.Result.Replica of every request (ForReplica)
	model   string
	api     wire.API
	format  PromptFormat
	synth   *PromptSynth
	lengths *lengthModel
}

// NewBuilder returns the Builder of target t; synthSeed makes its shared
// prefixes (NewPromptSynth).
func NewBuilder(t *config.Target, synthSeed uint64) *Builder {
	format, prior := PromptText, defaultPrior
	switch {
	case t.PromptFormat == config.PromptFormatIDs:
		format, prior = PromptIDs, lengthPrior{}
	case t.API == config.APICompletions, t.API == config.APIEmbeddings:
		prior = lengthPrior{perPrompt: 1} // a begin-of-text token
	}
	return &Builder{
		target:  t.Name,
		model:   t.Model,
		api:     wire.API(t.API),
		format:  format,
		synth:   NewPromptSynth(synthSeed),
		lengths: newLengthModel(prior),
	}
}

// ForReplica makes every result the builder prepares carry the discovered
// replica it is sent to (wire.Result.Replica).
func (b *Builder) ForReplica(name string) { b.replica = name }

// Format is how the target's prompts are written.
func (b *Builder) Format() PromptFormat { return b.format }

// Calibration is what a target's /tokenize said of how it counts: tokens
// per synthesised word, and the template's tokens per prompt and per
// chat message.
type Calibration struct {
	TokensPerWord  float64
	PromptOverhead float64
	PerMessage     float64
}

// Calibrate asks the target's /tokenize (baseURL's server, through hc)
// how it counts prompts and sets the length model from the answer, so
// that planned lengths hold from the first request; without it the model
// learns from the usage responses report.
func (b *Builder) Calibrate(ctx context.Context, hc *http.Client, baseURL string) (Calibration, error) {
	p, tpw, err := calibrateWithTokenize(ctx, hc, baseURL, b.model, b.api, b.synth)
	if err != nil {
		return Calibration{}, err
	}
	b.lengths.setExact(p, tpw)
	return Calibration{TokensPerWord: tpw, PromptOverhead: p.perPrompt, PerMessage: p.perMessage}, nil
}

// Prepared is a request ready to send, with the result it fills (its
// identity and plan already set) and what the length model learns from
// it.
type Prepared struct {
	Class   *Class
	Req     *wire.Request
	Res     *wire.Result
	lengths *lengthModel
	// words is the number of synthesised word-tokens (or ids) of the
	// prompt, and messages its chat message count (0: completions), for
	// calibration; words < 0 when the prompt carries history the model
	// must not learn from.
	words    int
	messages int
}

// Learns is what the length model learns from this request once it
// succeeded: its synthesised words (or ids) and its message count; words
// is negative when it learns nothing (history, images, batches).
func (p *Prepared) Learns() (words, messages int) { return p.words, p.messages }

// Learn teaches the length model how the server counted this request's
// prompt, from res (the request's result) when it succeeded with usage.
func (p *Prepared) Learn(res *wire.Result) {
	if p.words >= 0 && res.UsageReported && res.PromptTokens > 0 && res.Outcome == wire.OutcomeSuccess {
		p.lengths.observe(p.words, p.messages, res.PromptTokens)
	}
}

func (b *Builder) newPrepared(c *Class, maxTokens int) *Prepared {
	model := cmp.Or(c.Model, b.model)
	req := &wire.Request{
		API:       b.api,
		Model:     model,
		MaxTokens: maxTokens,
		Sampling:  c.Sampling,
		ExtraBody: c.Body,
	}
	return &Prepared{
		Class:   c,
		Req:     req,
		lengths: b.lengths,
		Res: &wire.Result{
			Target:              b.target,
			Replica:             b.replica,
			Model:               model,
			Class:               c.Name,
			PlannedOutputTokens: maxTokens,
			MaxTokens:           maxTokens,
			Sampling:            c.Sampling,
			PrefixGroup:         -1,
		},
	}
}

// FirstTurn synthesises the prompt of a single request or of a
// conversation's first turn: the group's shared prefix (stable, so a
// prefix cache can serve it), then a random nonce so that nothing after
// the prefix is cached by accident, then random text up to the planned
// length, converted from server tokens to words by the target's length
// model. conv, when not nil, records the history.
func (b *Builder) FirstTurn(p *Plan, rng *rand.Rand, conv *Conversation) *Prepared {
	pr := b.newPrepared(p.Class, p.OutputTokens)
	res := pr.Res
	res.PrefixGroup, res.PrefixTokens = p.PrefixGroup, p.PrefixTokens
	res.PlannedPromptTokens = p.PromptTokens
	if conv != nil {
		res.ConversationID, res.Turn = conv.ID, 1
		pr.Req.KeepText = true
	}

	if b.format == PromptIDs {
		ids := make([]int, 0, p.PromptTokens)
		if p.PrefixGroup >= 0 {
			ids = append(ids, b.synth.PrefixIDs(p.PrefixGroup, p.PrefixTokens)...)
		}
		n := max(b.lengths.words(p.PromptTokens, 0)-len(ids), NonceTokens)
		ids = AppendTokenIDs(ids, rng, n)
		pr.Req.PromptIDs = ids
		pr.words, pr.messages = len(ids), 0
		res.PlannedPromptTokens = b.lengths.tokens(len(ids), 0)
		return pr
	}

	k := 0
	if b.api.MessageBased() {
		k = 1
		if p.PrefixGroup >= 0 {
			k = 2
		}
	}
	words := b.lengths.words(p.PromptTokens, k)
	body := words - p.PrefixTokens - NonceTokens
	if body < 0 {
		// The planned length cannot hold prefix and nonce: send the
		// shortest prompt that can, and plan what it will count.
		body = 0
		words = p.PrefixTokens + NonceTokens
		res.PlannedPromptTokens = b.lengths.tokens(words, k)
	}
	buf := make([]byte, 0, 8*(body+NonceTokens+1))
	buf = b.synth.AppendNonce(buf, rng)
	if body > 0 {
		buf = append(buf, ' ')
		buf = b.synth.AppendText(buf, rng, body)
	}
	text := string(buf)
	var prefix string
	if p.PrefixGroup >= 0 {
		prefix = b.synth.Prefix(p.PrefixGroup, p.PrefixTokens)
	}
	pr.words, pr.messages = words, k
	switch {
	case b.api.MessageBased():
		if prefix != "" {
			pr.Req.Messages = []wire.Message{{Role: "system", Content: prefix}, {Role: "user", Content: text}}
		} else {
			pr.Req.Messages = []wire.Message{{Role: "user", Content: text}}
		}
		if p.Class.Images != nil {
			user := &pr.Req.Messages[len(pr.Req.Messages)-1]
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
		pr.Req.Prompt = text
		if b.api == wire.APIEmbeddings && p.Class.Batch > 1 {
			// A batch: the first input as planned, the others of the same
			// length with their own random text.
			inputs := make([]string, p.Class.Batch)
			inputs[0] = text
			for i := 1; i < len(inputs); i++ {
				in := b.synth.AppendNonce(make([]byte, 0, len(buf)), rng)
				if body > 0 {
					in = append(in, ' ')
					in = b.synth.AppendText(in, rng, body)
				}
				inputs[i] = string(in)
			}
			pr.Req.Inputs = inputs
			res.PlannedPromptTokens *= len(inputs)
			pr.words = -1 // calibration learns from single prompts only
		}
	}
	if conv != nil {
		conv.messages = pr.Req.Messages
		conv.prompt = pr.Req.Prompt
	}
	return pr
}

// NextTurn builds the turn after prev: the whole history (previous user
// and assistant messages, or the previous prompt and completion) plus a
// new user message of userTokens server tokens. Its planned length is what
// the server counted for the previous turn, plus the answer, plus the new
// message and its template tokens.
func (b *Builder) NextTurn(c *Class, conv *Conversation, prev *wire.Result, userTokens, maxTokens int, rng *rand.Rand) *Prepared {
	pr := b.newPrepared(c, maxTokens)
	res := pr.Res
	res.ConversationID, res.Turn = conv.ID, prev.Turn+1
	res.PrefixGroup, res.PrefixTokens = prev.PrefixGroup, prev.PrefixTokens
	pr.Req.KeepText = true
	pr.words = -1

	k := 0
	if b.api.MessageBased() {
		k = 1
	}
	words := max(b.lengths.scale(userTokens, k), 1)
	text := string(b.synth.AppendText(make([]byte, 0, 8*(words+1)), rng, words))
	newTokens := b.lengths.tokens(words, k) - b.lengths.tokens(0, k)

	switch {
	case b.api.MessageBased():
		msgs := make([]wire.Message, 0, len(conv.messages)+2)
		msgs = append(msgs, conv.messages...)
		msgs = append(msgs, wire.Message{Role: "assistant", Content: prev.Completion}, wire.Message{Role: "user", Content: text})
		pr.Req.Messages = msgs
		conv.messages = msgs
		res.Images, res.ImagePixels = prev.Images, prev.ImagePixels // the history carries them
		res.PlannedPromptTokens = prev.PromptTokens + prev.OutputTokens + 2*b.lengths.perMessage() + newTokens
	default:
		pr.Req.Prompt = conv.prompt + prev.Completion + " " + text
		conv.prompt = pr.Req.Prompt
		res.PlannedPromptTokens = prev.PromptTokens + prev.OutputTokens + newTokens
	}
	return pr
}
