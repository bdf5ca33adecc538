// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package workload

import (
	"math/rand/v2"

	"github.com/llmprobe/llmprobe/probe/wire"
	"github.com/llmprobe/llmprobe/tracefile"
)

// Requests from trace records (bench --replay, from_trace classes).
//
// A record says how long a request's prompt and answer were and, for
// traces that carry them (Mooncake's hash_ids), which blocks of
// blockSize prompt tokens it shared with other requests: two records
// whose hash ids agree on their first k blocks had the same first
// k·blockSize tokens. FromRecord writes one synthetic block of text per
// hash id, deterministic from the id and the block size alone (the same
// text for every target, replica, restart and for bench and the daemon
// alike), so that requests with equal leading hash ids send the same
// leading text and a server's prefix cache sees the trace's reuse.

// RecordClass returns a bare class for requests built from trace records
// outside a configured workload (bench --replay): its name is what the
// results carry; model, sampling and body are the target's.
func RecordClass(name string) *Class {
	return &Class{Name: name, Weight: 1, Batch: 1}
}

// FromRecord prepares the request of trace record rec, as class c (its
// name, model, sampling and body; c must not be nil, see RecordClass),
// with hash-id blocks of blockSize tokens (0: 512, Mooncake's):
//
//   - max_tokens is rec.OutputTokens (at least 1). As for every class, the
//     answer has that length only if the server is told to ignore its end
//     of sequence (extra_body: {ignore_eos: true} on vLLM-like servers).
//   - The prompt has rec.PromptTokens server tokens, as the target's
//     length model counts them (template tokens included; exact under the
//     simulator once /tokenize calibrated it, +1 with real BPE tokenizers
//     when the first word splits, see PromptSynth). Its text is one block
//     of blockSize word-tokens per hash id, in order (BlockText), the last
//     one cut to what remains, so equal leading hash ids give equal
//     leading text.
//   - What the hash ids do not cover (all of it when the record has none)
//     is a random nonce and random text drawn from rng, after the blocks,
//     so that it shares nothing with any other request and does not break
//     the blocks' sharing. A prompt fully covered by its blocks has no
//     nonce: its text is what the trace says it shared.
//
// Chat APIs get the prompt as one user message. The planned lengths are
// set on the result (PlannedPromptTokens, PlannedOutputTokens); the
// length model learns from the request like from a synthesised one.
func (b *Builder) FromRecord(c *Class, rec tracefile.Record, blockSize int, rng *rand.Rand) *Prepared {
	if blockSize <= 0 {
		blockSize = 512
	}
	pr := b.newPrepared(c, max(rec.OutputTokens, 1))
	res := pr.Res
	prompt := max(rec.PromptTokens, 1)
	res.PlannedPromptTokens = prompt

	if b.format == PromptIDs {
		n := max(b.lengths.words(prompt, 0), 1)
		ids := make([]int, 0, n)
		for _, h := range rec.HashIDs {
			if len(ids) >= n {
				break
			}
			ids = appendBlockIDs(ids, h, blockSize, min(blockSize, n-len(ids)))
		}
		if rest := n - len(ids); rest > 0 {
			ids = AppendTokenIDs(ids, rng, max(rest, NonceTokens))
		}
		pr.Req.PromptIDs = ids
		pr.words, pr.messages = len(ids), 0
		res.PlannedPromptTokens = b.lengths.tokens(len(ids), 0)
		return pr
	}

	k := 0
	if b.api.MessageBased() {
		k = 1
	}
	words := max(b.lengths.words(prompt, k), 1)
	buf := make([]byte, 0, 8*(words+NonceTokens+1))
	done := 0
	for _, h := range rec.HashIDs {
		if done >= words {
			break
		}
		if done > 0 {
			buf = append(buf, ' ')
		}
		n := min(blockSize, words-done)
		buf = appendBlock(buf, h, blockSize, n)
		done += n
	}
	if rest := words - done; rest > 0 {
		// Unshared: a nonce, then random text up to the length.
		if done > 0 {
			buf = append(buf, ' ')
		}
		buf = b.synth.AppendNonce(buf, rng)
		if body := rest - NonceTokens; body > 0 {
			buf = append(buf, ' ')
			buf = b.synth.AppendText(buf, rng, body)
		} else if body < 0 {
			// Too short for a nonce: send the shortest prompt that has
			// one, and plan what it will count.
			words = done + NonceTokens
			res.PlannedPromptTokens = b.lengths.tokens(words, k)
		}
	}
	text := string(buf)
	pr.words, pr.messages = words, k
	if b.api.MessageBased() {
		pr.Req.Messages = []wire.Message{{Role: "user", Content: text}}
	} else {
		pr.Req.Prompt = text
	}
	return pr
}

// blockSeed is the seed of the text of hash id h in blocks of blockSize
// tokens: it depends on nothing else.
func blockSeed(h uint64, blockSize int) uint64 {
	return SplitMix64(h^0x626c6f636b) ^ SplitMix64(uint64(blockSize)^0x73697a65)
}

// BlockText is the text of trace block h (a hash id) in blocks of
// blockSize tokens, cut to n tokens (n <= blockSize): n tokens under the
// simulator's rule (see PromptSynth), deterministic from h and blockSize.
// The first n-1 tokens of a cut block are those of the whole block (the
// last may be the period that closes the text).
func BlockText(h uint64, blockSize, n int) string {
	return string(appendBlock(nil, h, blockSize, n))
}

func appendBlock(dst []byte, h uint64, blockSize, n int) []byte {
	src := splitmix{state: blockSeed(h, blockSize)}
	return appendWords(dst, &src, n, -1)
}

// appendBlockIDs appends n token ids of trace block h (token-id prompts).
func appendBlockIDs(dst []int, h uint64, blockSize, n int) []int {
	src := splitmix{state: blockSeed(h, blockSize) ^ 0x69647300}
	for range n {
		dst = append(dst, TokenIDMin+pick(src.Uint64(), TokenIDMax-TokenIDMin))
	}
	return dst
}
