// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package workload

import (
	"strings"

	"github.com/llmprobe/llmprobe/probe/wire"
)

// DatasetPrompt is the prompt of one request taken from a dataset (bench
// --dataset) instead of synthesised: chat messages, or a text prompt.
type DatasetPrompt struct {
	// Messages, when not empty, are sent as they are to a message-based
	// API; a text API gets their contents joined by blank lines.
	Messages []wire.Message
	// Text is the prompt when Messages is empty; a message-based API gets
	// it as one user message.
	Text string
	// OutputTokens, when positive, is the request's max_tokens; otherwise
	// the class's draw is kept.
	OutputTokens int
}

// PromptSource supplies dataset prompts; it must be safe for concurrent
// use. Next returns the next prompt for target, false when it has none
// for it (the synthesised prompt is sent).
type PromptSource interface {
	Next(target string) (DatasetPrompt, bool)
}

// FromDataset prepares a single request of plan's class with d's prompt
// in place of a synthesised one. Its planned prompt length is the
// workload's token estimate of the text (CountTokens) plus the template's
// tokens as the length model knows them; the length model learns nothing
// from it (real text does not tokenise like synthesised words). Shared
// prefixes and images of the class are not used.
func (b *Builder) FromDataset(p *Plan, d DatasetPrompt) *Prepared {
	maxTokens := p.OutputTokens
	if d.OutputTokens > 0 {
		maxTokens = d.OutputTokens
	}
	pr := b.newPrepared(p.Class, maxTokens)
	pr.words = -1
	msgs := d.Messages
	if len(msgs) == 0 {
		msgs = []wire.Message{{Role: "user", Content: d.Text}}
	}
	words, k := 0, 0
	if b.api.MessageBased() {
		pr.Req.Messages = msgs
		k = len(msgs)
		for _, m := range msgs {
			words += CountTokens(m.Content)
		}
	} else {
		text := d.Text
		if len(d.Messages) > 0 {
			parts := make([]string, len(d.Messages))
			for i, m := range d.Messages {
				parts[i] = m.Content
			}
			text = strings.Join(parts, "\n\n")
		}
		pr.Req.Prompt = text
		words = CountTokens(text)
	}
	pr.Res.PlannedPromptTokens = words + b.lengths.tokens(0, k)
	return pr
}
