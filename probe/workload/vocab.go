// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package workload

import (
	_ "embed"
	"strings"
)

// vocabText is the word list prompts are synthesised from: 2,000 common
// lowercase English words of 2 to 8 letters, one a line, sorted.
//
// How it was built: the most frequent English words (SCOWL size 10),
// restricted to those that encode as exactly one token when preceded by a
// space, and stay two tokens when followed by ".", in all of OpenAI's
// o200k_base (GPT-4o and later) and cl100k_base (GPT-4) encodings and the
// Llama 3 tokenizer; ranked by cl100k merge rank (earlier merges are more
// frequent strings); with words that might trip a hosted endpoint's content
// filter (violence, drugs, politics) removed; and the first 2,000 kept.
// Qwen's tokenizer, a byte-level BPE trained on similar data, splits these
// words the same way.
//
// So " word" is one token for those tokenizers as it is for the built-in
// simulator (a run of at most 8 letters), and a synthesised prompt of N
// planned tokens comes out at about N real tokens.
//
//go:embed vocab.txt
var vocabText string

// vocab holds the words of vocabText; spacedVocab the same words with a
// leading space, so that text is written with one append per word.
var (
	vocab       = strings.Fields(vocabText)
	spacedVocab = func() []string {
		s := make([]string, len(vocab))
		for i, w := range vocab {
			s[i] = " " + w
		}
		return s
	}()
)
