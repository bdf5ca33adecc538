// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package workload_test

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/llmprobe/llmprobe/probe/workload"
	"github.com/llmprobe/llmprobe/sim"
)

// The probe synthesises prompts whose length it predicts with the
// simulator's documented tokenisation; the two implementations must agree.
func TestCountTokensMatchesSimulator(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	synth := workload.NewPromptSynth(5)
	alphabet := []rune("abcXYZ0123456789 \t\n.,;:!?-_/()[]{}\"'é漢😀\u00a0")
	for i := range 5000 {
		var s string
		if i%2 == 0 {
			s = string(synth.AppendText(nil, r, r.IntN(300)))
		} else {
			var b strings.Builder
			for range r.IntN(80) {
				b.WriteRune(alphabet[r.IntN(len(alphabet))])
			}
			s = b.String()
		}
		if p, q := workload.CountTokens(s), sim.CountTokens(s); p != q {
			t.Fatalf("CountTokens(%q): probe %d, simulator %d", s, p, q)
		}
	}
	// Prefix + nonce + body add up exactly.
	text := synth.Prefix(3, 200) + " " + synth.Nonce(r) + " " + string(synth.AppendText(nil, r, 94))
	if got := sim.CountTokens(text); got != 200+workload.NonceTokens+94 {
		t.Errorf("prefix+nonce+body = %d tokens, want %d", got, 200+workload.NonceTokens+94)
	}
}
