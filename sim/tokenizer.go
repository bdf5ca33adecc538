// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// VocabSize is the size of the simulated vocabulary: every token id is in
// [0, VocabSize).
const VocabSize = 32000

// Token-run limits of the tokeniser (see the package documentation).
const (
	maxLetterRun = 8
	maxDigitRun  = 3
)

// Chat-template token ids. They are fixed so that identical message
// histories produce identical token sequences (and so hit the prefix cache).
const (
	tokMsgStart = 1 // opens a message: <|start|>
	tokMsgEnd   = 2 // closes a message: <|end|>
	tokRoleSep  = 3 // between the role and the content

	// Template tokens per message (start, role, separator, end) and for
	// the generation prompt (start, assistant, separator).
	templateTokensPerMessage  = 4
	templateTokensGenPrompt   = 3
	roleIDSystem, roleIDUser  = 4, 5
	roleIDAssistant           = 6
	roleIDTool, roleIDDevelop = 7, 8
	roleIDFunction            = 9
)

// roleID returns the template token id of a chat role, or false for a role
// the simulator does not accept.
func roleID(role string) (int, bool) {
	switch role {
	case "system":
		return roleIDSystem, true
	case "user":
		return roleIDUser, true
	case "assistant":
		return roleIDAssistant, true
	case "tool":
		return roleIDTool, true
	case "developer":
		return roleIDDevelop, true
	case "function":
		return roleIDFunction, true
	}
	return 0, false
}

// tokenizer is a server's tokenisation. The zero value is the documented
// default (8 letters per token, no begin-of-text token); Config's
// letters_per_token and begin_of_text vary it to stand for a model whose
// tokenizer a client does not know.
type tokenizer struct {
	maxLetters  int  // letters per token; 0 means maxLetterRun
	beginOfText bool // every prompt starts with a begin-of-text token
	imagePixels int  // pixels per image token (images.go); 0 means 784
}

// tokBeginOfText is the begin-of-text token id.
const tokBeginOfText = 0

// nextToken returns the first token of s[i:] under the default rule and
// the index just past it.
func nextToken(s string, i int) (tok string, next int, ok bool) {
	return nextTokenN(s, i, maxLetterRun)
}

// nextTokenN is nextToken with at most maxLetters letters per token.
// ok is false when only whitespace remains.
func nextTokenN(s string, i, maxLetters int) (tok string, next int, ok bool) {
	for i < len(s) {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f':
				i++
				continue
			case isASCIILetter(c):
				j := i + 1
				for j < len(s) && j-i < maxLetters && isASCIILetter(s[j]) {
					j++
				}
				return s[i:j], j, true
			case c >= '0' && c <= '9':
				j := i + 1
				for j < len(s) && j-i < maxDigitRun && s[j] >= '0' && s[j] <= '9' {
					j++
				}
				return s[i:j], j, true
			default:
				return s[i : i+1], i + 1, true
			}
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r != utf8.RuneError && unicode.IsSpace(r) {
			i += size
			continue
		}
		// Any other rune, and every byte of invalid UTF-8, is one token.
		return s[i : i+size], i + size, true
	}
	return "", i, false
}

func isASCIILetter(c byte) bool {
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

// tokenID is the id of a token's text: FNV-1a 32-bit modulo VocabSize.
func tokenID(tok string) int {
	h := uint32(2166136261)
	for i := 0; i < len(tok); i++ {
		h ^= uint32(tok[i])
		h *= 16777619
	}
	return int(h % VocabSize)
}

// CountTokens returns how many tokens the simulator's tokeniser makes of s.
func CountTokens(s string) int {
	n := 0
	for i := 0; ; n++ {
		var ok bool
		if _, i, ok = nextToken(s, i); !ok {
			return n
		}
	}
}

// Tokenize returns the token ids of s, as /tokenize and the prefix cache
// see them.
func Tokenize(s string) []int {
	ids := make([]int, 0, len(s)/4+1)
	return appendTokenIDs(ids, s)
}

func appendTokenIDs(dst []int, s string) []int {
	for i := 0; ; {
		tok, next, ok := nextToken(s, i)
		if !ok {
			return dst
		}
		dst = append(dst, tokenID(tok))
		i = next
	}
}

// ChatMessage is one message of a chat prompt, reduced to what the chat
// template uses.
type ChatMessage struct {
	Role    string
	Content string
}

// CountChatTokens returns the prompt token count of a chat request: the sum
// over messages of (tokens of the content + 4), plus 3 for the generation
// prompt when addGenerationPrompt is true (chat completions always add it).
func CountChatTokens(msgs []ChatMessage, addGenerationPrompt bool) int {
	n := 0
	for _, m := range msgs {
		n += CountTokens(m.Content) + templateTokensPerMessage
	}
	if addGenerationPrompt {
		n += templateTokensGenPrompt
	}
	return n
}

// tokenSink receives token ids one at a time (the prefix-cache hasher, or a
// slice collector for /tokenize).
type tokenSink interface {
	add(id int)
}

type idCollector struct{ ids []int }

func (c *idCollector) add(id int) { c.ids = append(c.ids, id) }

// emitChat feeds the templated token sequence of a chat prompt to sink and
// returns its length. Roles must already be validated.
func (t tokenizer) emitChat(sink tokenSink, msgs []chatMessage, addGenerationPrompt bool) int {
	n := t.emitBOS(sink)
	for i := range msgs {
		rid, _ := roleID(msgs[i].Role)
		sink.add(tokMsgStart)
		sink.add(rid)
		sink.add(tokRoleSep)
		n += 4
		for _, part := range msgs[i].Content.parts {
			for j := 0; ; {
				tok, next, ok := nextTokenN(part, j, t.letters())
				if !ok {
					break
				}
				sink.add(tokenID(tok))
				n++
				j = next
			}
		}
		for _, im := range msgs[i].Content.images {
			n += t.emitImage(sink, im)
		}
		sink.add(tokMsgEnd)
	}
	if addGenerationPrompt {
		sink.add(tokMsgStart)
		sink.add(roleIDAssistant)
		sink.add(tokRoleSep)
		n += templateTokensGenPrompt
	}
	return n
}

// emitText feeds the tokens of a plain-text prompt to sink and returns how
// many there were.
func (t tokenizer) emitText(sink tokenSink, s string) int {
	n := t.emitBOS(sink)
	for i := 0; ; n++ {
		tok, next, ok := nextTokenN(s, i, t.letters())
		if !ok {
			return n
		}
		sink.add(tokenID(tok))
		i = next
	}
}

// The generation vocabulary: every output token is one of these words,
// emitted with a leading space. All are lowercase ASCII of at most 8
// letters, so the generated text re-tokenises to exactly one token per
// word. The list has 256 entries so that a byte indexes it.
var outputWords = strings.Fields(`
the of and to in is that for it as was with be by on not he this are or his
from at which but have an had they you were their one all we can her has
there been if more when will would who so no time about out up them some
could other into than then its only new over also after two first may any
these way many most where well should through years between both under never
same while last might great since being made long used before must state
people world still back around small every part without place again house
point order large water number often city among course public school system
right become three early during each against program later case local given
form power change level light study heart value party market voice table
record simple moment yellow river garden window silver planet forest letter
summer winter spring autumn morning evening bridge stone cloud paper music
story dream field ocean island valley mountain desert engine signal vector
matrix kernel tensor token layer cache block queue batch stream packet
socket server client metric sample latency ratio budget random steady quiet
gentle bright careful honest modest narrow smooth strong tender warm cold
fresh ancient modern plain clear rapid slow above below inside outside
beyond toward across along behind beside within orange purple green blue
black white golden copper marble velvet crystal harbor meadow canyon glacier
thunder lantern compass anchor feather pebble saddle candle ribbon pillow
basket ladder kettle mirror
`)

// outputWordCount is the number of generation words; outputWordMask
// indexes them.
const outputWordCount = 256

var (
	// outputWordText holds " word" (leading space) for each word.
	outputWordText [outputWordCount]string
	// outputWordID holds the token id of each word.
	outputWordID [outputWordCount]int
)

func init() {
	if len(outputWords) < outputWordCount {
		panic("sim: generation vocabulary too short")
	}
	for i := 0; i < outputWordCount; i++ {
		w := outputWords[i]
		if len(w) > maxLetterRun {
			panic("sim: generation word longer than 8 letters: " + w)
		}
		outputWordText[i] = " " + w
		outputWordID[i] = tokenID(w)
	}
}

// splitmix64 is a fast, well-mixed hash of a 64-bit value; it drives the
// deterministic choice of words and end-of-sequence draws.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// outputWord returns the index in the generation vocabulary of the i-th
// output token of a sequence with the given seed.
func outputWord(seed uint64, i int) int {
	return int(splitmix64(seed+uint64(i)*0x632be59bd9b4e019) & (outputWordCount - 1))
}

func (t tokenizer) letters() int {
	if t.maxLetters > 0 {
		return t.maxLetters
	}
	return maxLetterRun
}

// emitBOS feeds the begin-of-text token when the tokenizer has one.
func (t tokenizer) emitBOS(sink tokenSink) int {
	if !t.beginOfText {
		return 0
	}
	sink.add(tokBeginOfText)
	return 1
}
