// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"hash/fnv"
	"reflect"
	"strings"
	"testing"
)

func TestTokenizerRules(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"   \t\n ", nil},
		{"hello", []string{"hello"}},
		{"abcdefgh", []string{"abcdefgh"}},       // 8 letters: one token
		{"abcdefghi", []string{"abcdefgh", "i"}}, // 9 letters: two
		{"supercalifragilistic", []string{"supercal", "ifragili", "stic"}},
		{"12", []string{"12"}},
		{"123", []string{"123"}},
		{"1234567", []string{"123", "456", "7"}},
		{"abc123def", []string{"abc", "123", "def"}},
		{"Hello, world!", []string{"Hello", ",", "world", "!"}},
		{"  leading and trailing  ", []string{"leading", "and", "trailing"}},
		{"a\u00a0b\u2003c", []string{"a", "b", "c"}}, // Unicode spaces separate too
		{"héllo", []string{"h", "é", "llo"}},         // a non-ASCII letter is its own token
		{"日本語", []string{"日", "本", "語"}},
		{"3.14", []string{"3", ".", "14"}},
		{"a\xffb", []string{"a", "\xff", "b"}}, // invalid UTF-8: one token per byte
		{"don't", []string{"don", "'", "t"}},
	}
	for _, tt := range tests {
		var got []string
		for i := 0; ; {
			tok, next, ok := nextToken(tt.in, i)
			if !ok {
				break
			}
			got = append(got, tok)
			i = next
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("tokens of %q = %q, want %q", tt.in, got, tt.want)
		}
		if n := CountTokens(tt.in); n != len(tt.want) {
			t.Errorf("CountTokens(%q) = %d, want %d", tt.in, n, len(tt.want))
		}
		ids := Tokenize(tt.in)
		if len(ids) != len(tt.want) {
			t.Fatalf("Tokenize(%q) gave %d ids, want %d", tt.in, len(ids), len(tt.want))
		}
		for i, tok := range tt.want {
			h := fnv.New32a()
			h.Write([]byte(tok))
			if want := int(h.Sum32() % VocabSize); ids[i] != want {
				t.Errorf("id of %q = %d, want FNV-1a %% 32000 = %d", tok, ids[i], want)
			}
		}
	}
}

func TestChatTemplateCount(t *testing.T) {
	msgs := []ChatMessage{{"system", "Be brief."}, {"user", "What is 2+2?"}}
	want := (CountTokens("Be brief.") + 4) + (CountTokens("What is 2+2?") + 4) + 3
	if got := CountChatTokens(msgs, true); got != want {
		t.Errorf("CountChatTokens = %d, want %d", got, want)
	}
	if got := CountChatTokens(msgs, false); got != want-3 {
		t.Errorf("CountChatTokens without generation prompt = %d, want %d", got, want-3)
	}
	// The emitted sequence has the same length, and identical histories
	// give identical sequences.
	inner := []chatMessage{{Role: "system", Content: messageContent{parts: []string{"Be brief."}}}, {Role: "user", Content: messageContent{parts: []string{"What is 2+2?"}}}}
	var a, b idCollector
	if n := (tokenizer{}).emitChat(&a, inner, true); n != want || len(a.ids) != want {
		t.Errorf("emitChat: %d tokens (%d ids), want %d", n, len(a.ids), want)
	}
	(tokenizer{}).emitChat(&b, inner, true)
	if !reflect.DeepEqual(a.ids, b.ids) {
		t.Error("identical chats tokenise differently")
	}
}

func TestGenerationVocabulary(t *testing.T) {
	seen := map[string]bool{}
	for i, w := range outputWordText {
		word := strings.TrimPrefix(w, " ")
		if w[0] != ' ' || len(word) == 0 || len(word) > 8 || strings.ToLower(word) != word || CountTokens(w) != 1 {
			t.Errorf("word %d %q is not \" \" + up to 8 lowercase letters", i, w)
		}
		if seen[word] {
			t.Errorf("duplicate word %q", word)
		}
		seen[word] = true
		if outputWordID[i] != Tokenize(w)[0] {
			t.Errorf("word %q: precomputed id %d, tokeniser says %d", w, outputWordID[i], Tokenize(w)[0])
		}
	}
	// A generated text of n tokens re-tokenises to n tokens.
	var b strings.Builder
	for i := 0; i < 1000; i++ {
		b.WriteString(outputWordText[outputWord(12345, i)])
	}
	if n := CountTokens(b.String()); n != 1000 {
		t.Errorf("1000 generated words re-tokenise to %d tokens", n)
	}
}

// A varied tokenizer (letters_per_token, begin_of_text) counts the same in
// usage and /tokenize, and differs from the default as configured.
func TestVariedTokenizer(t *testing.T) {
	tok := tokenizer{maxLetters: 3, beginOfText: true}
	var ids idCollector
	// "system" -> sys tem; "prompt" -> pro mpt; "a" -> a; "." -> .; BOS.
	if n := tok.emitText(&ids, "system prompt a."); n != 7 || ids.ids[0] != tokBeginOfText {
		t.Errorf("emitText = %d tokens %v, want 7 starting with BOS", n, ids.ids)
	}
	if n := (tokenizer{}).emitText(&idCollector{}, "system prompt a."); n != 4 {
		t.Errorf("default emitText = %d tokens, want 4", n)
	}
	msgs := []chatMessage{{Role: "user", Content: messageContent{parts: []string{"abcdef"}}}}
	if n := tok.emitChat(&idCollector{}, msgs, true); n != 1+4+2+3 {
		t.Errorf("emitChat = %d tokens, want BOS + 4 template + 2 + 3 generation prompt", n)
	}
}
