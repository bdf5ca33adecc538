// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package workload_test

import (
	"context"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/llmprobe/llmprobe/config"
	"github.com/llmprobe/llmprobe/internal/simtest"
	"github.com/llmprobe/llmprobe/probe/wire"
	"github.com/llmprobe/llmprobe/probe/workload"
	"github.com/llmprobe/llmprobe/sim"
	"github.com/llmprobe/llmprobe/tracefile"
)

// recordTarget is a simulator with its prefix cache on, and a Builder and
// client for it in api's format, calibrated with its /tokenize.
func recordTarget(t *testing.T, api, format string) (*workload.Builder, *wire.Client) {
	t.Helper()
	cfg := sim.DefaultConfig()
	cfg.ZeroLatency = true
	cfg.EOSProbability = 0 // the answer has max_tokens tokens
	_, base := simtest.Listen(t, cfg)
	target := &config.Target{Name: "sim", URL: base + "/v1", Model: "sim-model", API: api, PromptFormat: format}
	b := workload.NewBuilder(target, 1)
	if b.Format() == workload.PromptText {
		if _, err := b.Calibrate(context.Background(), http.DefaultClient, target.URL); err != nil {
			t.Fatal(err)
		}
	}
	c, err := wire.NewClient(wire.ClientConfig{BaseURL: target.URL, HTTPClient: http.DefaultClient, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return b, c
}

// Two records that share their first k hash-id blocks get a prefix-cache
// hit of k×BlockSize tokens, and every request has the record's prompt
// and output lengths as the simulator counts them (exactly: /tokenize
// calibrated the template's tokens).
func TestFromRecordSharesLeadingBlocks(t *testing.T) {
	const block = 512
	for _, tc := range []struct{ api, format string }{
		{config.APICompletions, ""},
		{config.APIChat, ""},
		{config.APICompletions, config.PromptFormatIDs},
	} {
		t.Run(tc.api+"/"+cmpOr(tc.format, "text"), func(t *testing.T) {
			b, client := recordTarget(t, tc.api, tc.format)
			class := workload.RecordClass("trace")
			rng := rand.New(rand.NewPCG(1, 2))
			send := func(rec tracefile.Record) *wire.Result {
				t.Helper()
				p := b.FromRecord(class, rec, block, rng)
				client.Do(context.Background(), p.Req, p.Res)
				res := p.Res
				if res.Outcome != wire.OutcomeSuccess {
					t.Fatalf("record %+v: outcome %s: %s", rec, res.Outcome, res.Error)
				}
				if res.PromptTokens != rec.PromptTokens || res.PlannedPromptTokens != rec.PromptTokens {
					t.Errorf("record of %d prompt tokens: the simulator counted %d (planned %d)", rec.PromptTokens, res.PromptTokens, res.PlannedPromptTokens)
				}
				if res.OutputTokens != rec.OutputTokens || res.MaxTokens != rec.OutputTokens {
					t.Errorf("record of %d output tokens: got %d (max_tokens %d)", rec.OutputTokens, res.OutputTokens, res.MaxTokens)
				}
				return res
			}
			// The first record fills the cache with blocks 1..4.
			if res := send(tracefile.Record{PromptTokens: 4*block - 100, OutputTokens: 7, HashIDs: []uint64{11, 12, 13, 14}}); res.CachedTokens != 0 {
				t.Errorf("first record: cached %d tokens, want 0", res.CachedTokens)
			}
			// Records sharing their first k blocks (and then their own).
			for k := 0; k <= 3; k++ {
				ids := []uint64{11, 12, 13, 14}[:k]
				for j := k; j < 4; j++ {
					ids = append(ids, uint64(1000*(k+1)+j))
				}
				res := send(tracefile.Record{PromptTokens: 4*block - 50 + k, OutputTokens: 3 + k, HashIDs: ids})
				if want := k * block; res.CachedTokens != want {
					t.Errorf("sharing %d leading blocks: cached %d tokens, want %d", k, res.CachedTokens, want)
				}
			}
			// A record without hash ids shares nothing, even with one of the
			// same length.
			for range 2 {
				if res := send(tracefile.Record{PromptTokens: 4*block - 100, OutputTokens: 5}); res.CachedTokens != 0 {
					t.Errorf("record without hash ids: cached %d tokens, want 0", res.CachedTokens)
				}
			}
			// Hash ids covering less than the prompt: the rest is unshared
			// (a nonce follows the blocks), the blocks still hit.
			for i := range 2 {
				res := send(tracefile.Record{PromptTokens: 3*block + 200, OutputTokens: 2, HashIDs: []uint64{11, 12}})
				if want := 2 * block; res.CachedTokens != want {
					t.Errorf("two blocks then unshared text (request %d): cached %d tokens, want %d", i+1, res.CachedTokens, want)
				}
			}
		})
	}
}

// A block's text depends on its hash id and the block size only, has
// exactly the planned tokens, and a cut block keeps the whole one's start.
func TestBlockText(t *testing.T) {
	if workload.BlockText(7, 512, 512) != workload.BlockText(7, 512, 512) {
		t.Fatal("block text is not deterministic")
	}
	if workload.BlockText(7, 512, 512) == workload.BlockText(8, 512, 512) || workload.BlockText(7, 512, 64) == workload.BlockText(7, 256, 64) {
		t.Error("different hash ids or block sizes give the same text")
	}
	for _, n := range []int{1, 2, 17, 511, 512} {
		text := workload.BlockText(99, 512, n)
		if got := sim.CountTokens(text); got != n {
			t.Errorf("BlockText(99, 512, %d) is %d tokens", n, got)
		}
		whole := workload.BlockText(99, 512, 512)
		words := strings.Fields(text)
		if n > 1 && !strings.HasPrefix(whole, strings.Join(words[:len(words)-1], " ")) {
			t.Errorf("block cut to %d tokens does not start like the whole block", n)
		}
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
