// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package workload

import (
	"testing"

	"github.com/llmprobe/llmprobe/config"
	"github.com/llmprobe/llmprobe/probe/wire"
)

// TestFromDataset: a dataset prompt is sent as it is in the target's
// API (messages to a chat API, their contents joined for a text API, a
// text prompt as one user message), with its output length as
// max_tokens when it has one and the class's draw otherwise, and its
// planned length the token estimate of its text; the length model
// learns nothing from it.
func TestFromDataset(t *testing.T) {
	class := &Class{Name: "c"}
	plan := &Plan{Class: class, PromptTokens: 50, OutputTokens: 9, PrefixGroup: -1}
	msgs := []wire.Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "How do tides work?"}}

	chat := NewBuilder(&config.Target{Name: "a", Model: "m", API: config.APIChat}, 1)
	p := chat.FromDataset(plan, DatasetPrompt{Messages: msgs, OutputTokens: 33})
	if len(p.Req.Messages) != 2 || p.Req.Messages[1].Content != "How do tides work?" || p.Req.Prompt != "" {
		t.Errorf("chat request %+v, want the messages", p.Req)
	}
	if p.Req.MaxTokens != 33 || p.Res.PlannedOutputTokens != 33 {
		t.Errorf("max_tokens %d, planned %d, want the dataset's 33", p.Req.MaxTokens, p.Res.PlannedOutputTokens)
	}
	if words := CountTokens("Be brief.") + CountTokens("How do tides work?"); p.Res.PlannedPromptTokens < words {
		t.Errorf("planned prompt tokens %d, want at least the text's %d", p.Res.PlannedPromptTokens, words)
	}
	if w, _ := p.Learns(); w >= 0 {
		t.Errorf("the length model would learn %d words from a dataset prompt", w)
	}
	p = chat.FromDataset(plan, DatasetPrompt{Text: "Name a prime."})
	if len(p.Req.Messages) != 1 || p.Req.Messages[0].Role != "user" || p.Req.Messages[0].Content != "Name a prime." || p.Req.MaxTokens != 9 {
		t.Errorf("chat request of a text prompt %+v, want one user message and the class's 9 tokens", p.Req)
	}

	text := NewBuilder(&config.Target{Name: "b", Model: "m", API: config.APICompletions}, 1)
	p = text.FromDataset(plan, DatasetPrompt{Messages: msgs})
	if p.Req.Prompt != "Be brief.\n\nHow do tides work?" || len(p.Req.Messages) != 0 {
		t.Errorf("completions request %+v, want the contents joined", p.Req)
	}
}
