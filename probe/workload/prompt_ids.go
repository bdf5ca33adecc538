// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package workload

import "math/rand/v2"

// Token-id prompts (prompt_format: token_ids, completions API): vLLM and
// the simulator accept a prompt given as a list of token ids, whose length
// the server cannot count differently. Ids are drawn from
// [TokenIDMin, TokenIDMax), inside every common vocabulary and clear of the
// special tokens most tokenizers put first.
const (
	TokenIDMin = 1000
	TokenIDMax = 30000
)

// PrefixIDs is Prefix for token-id prompts: a deterministic list of n ids
// per group, built once per (group, n). The caller must not modify it.
func (p *PromptSynth) PrefixIDs(group, n int) []int {
	if n <= 0 {
		return nil
	}
	return cachedPrefix(&p.mu, p.idPrefixes, prefixKey{group, n}, func() []int {
		src := splitmix{state: SplitMix64(p.seed^0x69647300) ^ SplitMix64(uint64(group)^0x70726566697865)}
		ids := make([]int, n)
		for i := range ids {
			ids[i] = TokenIDMin + pick(src.Uint64(), TokenIDMax-TokenIDMin)
		}
		return ids
	})
}

// AppendTokenIDs appends n random ids (a nonce needs no special care:
// NonceTokens random ids carry ~88 bits).
func AppendTokenIDs(dst []int, r *rand.Rand, n int) []int {
	for range n {
		dst = append(dst, TokenIDMin+pick(r.Uint64(), TokenIDMax-TokenIDMin))
	}
	return dst
}
