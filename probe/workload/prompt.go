// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package workload

import (
	"math/bits"
	"math/rand/v2"
	"sync"
	"unicode"
	"unicode/utf8"
)

// NonceTokens is the length of a nonce, in words (= tokens). Each word is
// drawn from the 2,000-word vocabulary, so a nonce carries 6·log2(2000) ≈
// 66 bits: two requests that share a nonce, and so a cacheable prefix beyond
// the configured one, are practically impossible.
const NonceTokens = 6

// maxCachedPrefixes bounds the prefix cache. A configuration has a handful
// of (group, tokens) pairs; beyond the bound, prefixes are rebuilt on every
// call instead of growing memory.
const maxCachedPrefixes = 1024

// PromptSynth builds prompt text whose token count is predictable.
//
// Text is made of vocabulary words separated by single spaces, with a
// period closing each sentence of 8 to 16 words. Under the built-in
// simulator's tokeniser (see CountTokens) every word and every period is
// exactly one token and whitespace is free, so N planned tokens are exactly
// N tokens. Real BPE tokenizers (GPT-4o, GPT-4, Llama 3; Qwen's is alike)
// encode each " word" and "." as one token too; they count N, or N+1 when
// the text's first word, which has no space before it, splits in two
// (checked with o200k_base, cl100k_base and the Llama 3 tokenizer on texts
// of 71 to 8,070 tokens). A server adds its own chat-template and
// begin-of-text tokens on top.
//
// Pieces join without changing the count: prefix + " " + nonce + " " + body
// has the sum of the pieces' tokens, because a space separates the words
// and never forms a token.
//
// A PromptSynth is safe for concurrent use. Its prefixes depend only on the
// seed, the group and the length, never on a request's random stream, so
// they are identical across requests, restarts and replicas (a prefix cache
// can serve them). Randomness for nonces and bodies comes from the caller's
// *rand.Rand. Word choice uses the raw 64-bit stream (not rand's derived
// methods), so text is stable across Go versions too.
type PromptSynth struct {
	seed uint64

	mu         sync.RWMutex
	prefixes   map[prefixKey]string
	idPrefixes map[prefixKey][]int
}

type prefixKey struct{ group, tokens int }

// NewPromptSynth returns a PromptSynth. The seed makes shared prefixes
// stable: the same seed and group give the same text.
func NewPromptSynth(seed uint64) *PromptSynth {
	return &PromptSynth{seed: seed, prefixes: make(map[prefixKey]string), idPrefixes: make(map[prefixKey][]int)}
}

// Prefix returns the shared system prompt of a prefix group: exactly
// tokens tokens under the simulator's rule, deterministic, and built once
// per (group, tokens). The first 2,000 groups (the vocabulary's size)
// start with different words, so their texts differ from the first token;
// beyond that, texts differ within the first few tokens, the rest of each
// being drawn from a stream seeded by the group. tokens <= 0 gives "".
func (p *PromptSynth) Prefix(group, tokens int) string {
	if tokens <= 0 {
		return ""
	}
	return cachedPrefix(&p.mu, p.prefixes, prefixKey{group, tokens}, func() string {
		src := splitmix{state: SplitMix64(p.seed) ^ SplitMix64(uint64(group)^0x70726566697865)}
		n := uint64(len(vocab))
		first := int((SplitMix64(p.seed^0x6669727374)%n + uint64(group)%n) % n)
		return string(appendWords(make([]byte, 0, tokens*7), &src, tokens, first))
	})
}

// cachedPrefix returns cache[k] (under mu), building it the first time;
// it keeps at most maxCachedPrefixes (beyond, every call builds). Builds
// are deterministic: of two racing ones the first stored is returned.
func cachedPrefix[V any](mu *sync.RWMutex, cache map[prefixKey]V, k prefixKey, build func() V) V {
	mu.RLock()
	v, ok := cache[k]
	mu.RUnlock()
	if ok {
		return v
	}
	v = build()
	mu.Lock()
	if old, ok := cache[k]; ok {
		v = old
	} else if len(cache) < maxCachedPrefixes {
		cache[k] = v
	}
	mu.Unlock()
	return v
}

// Nonce returns NonceTokens random words separated by spaces. Put right
// after the prefix, it makes every request unique from there on, so no
// unintended prefix-cache hit happens.
func (p *PromptSynth) Nonce(r *rand.Rand) string {
	return string(p.AppendNonce(make([]byte, 0, NonceTokens*8), r))
}

// AppendNonce appends a nonce (see Nonce) to dst. It allocates only to grow
// dst.
func (p *PromptSynth) AppendNonce(dst []byte, r *rand.Rand) []byte {
	dst = append(dst, vocab[pick(r.Uint64(), len(vocab))]...)
	for range NonceTokens - 1 {
		dst = append(dst, spacedVocab[pick(r.Uint64(), len(vocab))]...)
	}
	return dst
}

// AppendText appends exactly tokens tokens of random text (words and
// periods; see PromptSynth) to dst, with no leading or trailing space. It
// allocates only to grow dst.
func (p *PromptSynth) AppendText(dst []byte, r *rand.Rand, tokens int) []byte {
	return appendWords(dst, r, tokens, -1)
}

// uint64Source is a source of uniformly random 64-bit values.
type uint64Source interface{ Uint64() uint64 }

// appendWords writes tokens tokens: words, and a period after each
// sentence of 8 to 16 words and as the last token when a sentence is open.
// first >= 0 forces the first word.
func appendWords[S uint64Source](dst []byte, src S, tokens, first int) []byte {
	sentence, words := 8+pick(src.Uint64(), 9), 0
	for i := range tokens {
		if words > 0 && (words == sentence || i == tokens-1) {
			dst = append(dst, '.')
			sentence, words = 8+pick(src.Uint64(), 9), 0
			continue
		}
		w := first
		if i > 0 || w < 0 {
			w = pick(src.Uint64(), len(vocab))
		}
		if i > 0 {
			dst = append(dst, spacedVocab[w]...)
		} else {
			dst = append(dst, vocab[w]...)
		}
		words++
	}
	return dst
}

// pick maps a uniform 64-bit value to [0, n) (Lemire's multiply-shift; the
// bias, n/2^64, is immaterial here).
func pick(x uint64, n int) int {
	hi, _ := bits.Mul64(x, uint64(n))
	return int(hi)
}

// splitmix is the SplitMix64 generator: a tiny, fixed, well-mixed stream
// for deterministic prefixes.
type splitmix struct{ state uint64 }

func (s *splitmix) Uint64() uint64 {
	s.state += 0x9e3779b97f4a7c15
	return mix64(s.state)
}

// SplitMix64 hashes one value with SplitMix64's finaliser (the shared
// prefixes' streams; probe mixes bench's stage streams into a seed with it).
func SplitMix64(x uint64) uint64 { return mix64(x + 0x9e3779b97f4a7c15) }

func mix64(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// CountTokens counts tokens the way the built-in simulator tokenises text:
// each maximal run of ASCII letters splits into pieces of at most 8
// letters, each maximal run of ASCII digits into pieces of at most 3
// digits, and every other rune that is not whitespace is one token (as is
// every byte of invalid UTF-8); whitespace is never a token. It is used in
// tests and to estimate prompt lengths when a server reports no usage.
func CountTokens(text string) int {
	n := 0
	for i := 0; i < len(text); {
		c := text[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f':
			i++
		case tokLetter(c):
			j := runEnd(text, i, tokLetter)
			n += (j - i + 7) / 8
			i = j
		case tokDigit(c):
			j := runEnd(text, i, tokDigit)
			n += (j - i + 2) / 3
			i = j
		case c < utf8.RuneSelf:
			n++
			i++
		default:
			r, size := utf8.DecodeRuneInString(text[i:])
			if r == utf8.RuneError || !unicode.IsSpace(r) {
				n++
			}
			i += size
		}
	}
	return n
}

// runEnd returns the end of the run of bytes in the class that starts at
// text[i].
func runEnd(text string, i int, in func(byte) bool) int {
	j := i + 1
	for j < len(text) && in(text[j]) {
		j++
	}
	return j
}

func tokLetter(c byte) bool { return (c|0x20) >= 'a' && (c|0x20) <= 'z' }
func tokDigit(c byte) bool  { return c >= '0' && c <= '9' }
