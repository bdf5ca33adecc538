// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package workload

import (
	"math/rand/v2"
	"strconv"

	"github.com/llmprobe/llmprobe/probe/wire"
)

// Conversation is the state a multi-turn conversation carries between
// turns: its id and the history the next turn sends (Builder.FirstTurn
// starts it, Builder.NextTurn extends it).
type Conversation struct {
	ID       string
	messages []wire.Message // chat: the system prefix, then user/assistant turns
	prompt   string         // completions: the previous prompt
}

// NewConversation starts a conversation with a random 64-bit id (in
// hex) drawn from rng.
func NewConversation(rng *rand.Rand) *Conversation {
	return &Conversation{ID: strconv.FormatUint(rng.Uint64()|1<<63, 16)}
}

// Size is the number of text bytes the next turn would resend, answer
// included.
func (c *Conversation) Size(answer string) int {
	n := len(c.prompt) + len(answer)
	for _, m := range c.messages {
		n += len(m.Content)
	}
	return n
}
