// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

//go:build ignore

// Command generate writes the sample access log examples/logs/access.jsonl
// that `llmprobe fit` is demonstrated and tested on:
//
//	go run examples/logs/generate.go > examples/logs/access.jsonl
//
// It is deterministic (fixed seed): the same program always writes the
// same file. The log has 5,000 lines shaped like an OpenAI-compatible
// gateway's request log (time, model, status, latency, and the
// response's usage with prompt_tokens_details.cached_tokens) over one day.
// Lengths are heavy-tailed: a mix of log-normal modes, chat on an 8B model
// and retrieval-augmented and agent requests with long prompts on a 70B
// model. Some requests were cancelled by the client before their first
// token (status 499, completion_tokens 0): they are valid lines.
//
// Exactly BrokenLines lines are broken the way real logs break, and
// `llmprobe fit` must skip and count each of them: truncated JSON (a line
// cut by log rotation), error responses without usage, non-numeric token
// counts, and plain-text lines from another writer.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"time"
)

const (
	// Lines is the total number of lines written.
	Lines = 5000
	// BrokenLines of them are unusable (see brokenKinds).
	BrokenLines = 12
)

// brokenKinds lists the broken lines, one entry per line.
var brokenKinds = []string{
	"truncated", "truncated", "truncated", "truncated",
	"no-usage", "no-usage", "no-usage",
	"non-numeric", "non-numeric", "non-numeric",
	"text", "text",
}

// mode is one log-normal component of the traffic.
type mode struct {
	share                    float64
	model                    string
	promptMedian, promptSig  float64
	promptMax                float64
	outputMedian, outputSig  float64
	outputMax                float64
	cacheProb, cacheMaxShare float64
}

var modes = []mode{
	// Chat: short prompts behind a shared system prompt, modest answers.
	{share: 0.75, model: "llama-3.1-8b", promptMedian: 220, promptSig: 0.9, promptMax: 8000,
		outputMedian: 160, outputSig: 0.8, outputMax: 2048, cacheProb: 0.6, cacheMaxShare: 0.8},
	// RAG: retrieved documents make long prompts.
	{share: 0.20, model: "llama-3.1-70b", promptMedian: 3500, promptSig: 0.45, promptMax: 30000,
		outputMedian: 280, outputSig: 0.6, outputMax: 2048, cacheProb: 0.2, cacheMaxShare: 0.3},
	// Agents: very long contexts, long outputs.
	{share: 0.05, model: "llama-3.1-70b", promptMedian: 9000, promptSig: 0.6, promptMax: 30000,
		outputMedian: 600, outputSig: 0.9, outputMax: 4096, cacheProb: 0.9, cacheMaxShare: 0.9},
}

type promptDetails struct {
	CachedTokens int `json:"cached_tokens"`
}

type usage struct {
	PromptTokens        int           `json:"prompt_tokens"`
	CompletionTokens    int           `json:"completion_tokens"`
	PromptTokensDetails promptDetails `json:"prompt_tokens_details"`
}

type entry struct {
	Time      string `json:"time"`
	Model     string `json:"model"`
	Status    int    `json:"status"`
	LatencyMS int    `json:"latency_ms"`
	Usage     *usage `json:"usage,omitempty"`
}

func lognormal(r *rand.Rand, median, sigma, maxV float64) int {
	v := math.Round(median * math.Exp(sigma*r.NormFloat64()))
	return int(min(max(v, 1), maxV))
}

func main() {
	r := rand.New(rand.NewPCG(20260302, 7))
	// Broken lines go at distinct random positions.
	broken := map[int]string{}
	for _, kind := range brokenKinds {
		for {
			i := r.IntN(Lines)
			if _, taken := broken[i]; !taken {
				broken[i] = kind
				break
			}
		}
	}

	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()
	t := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	mean := 24 * time.Hour / Lines
	for i := range Lines {
		t = t.Add(time.Duration(r.ExpFloat64() * float64(mean)))
		m := modes[len(modes)-1]
		u := r.Float64()
		for _, md := range modes {
			if u < md.share {
				m = md
				break
			}
			u -= md.share
		}
		prompt := lognormal(r, m.promptMedian, m.promptSig, m.promptMax)
		output := lognormal(r, m.outputMedian, m.outputSig, m.outputMax)
		status := 200
		if r.Float64() < 0.004 {
			status, output = 499, 0 // cancelled before the first token
		}
		cached := 0
		if r.Float64() < m.cacheProb {
			cached = int(float64(prompt)*m.cacheMaxShare*r.Float64()) / 16 * 16
		}
		latency := 25 + 0.04*float64(prompt) + 11*float64(output)
		e := entry{
			Time:      t.Format(time.RFC3339),
			Model:     m.model,
			Status:    status,
			LatencyMS: int(latency * math.Exp(0.2*r.NormFloat64())),
			Usage:     &usage{PromptTokens: prompt, CompletionTokens: output, PromptTokensDetails: promptDetails{cached}},
		}
		b, err := json.Marshal(e)
		if err != nil {
			panic(err)
		}
		switch broken[i] {
		case "truncated":
			b = b[:len(b)/2]
		case "no-usage":
			e.Status, e.Usage = 500, nil
			b, _ = json.Marshal(struct {
				entry
				Error map[string]string `json:"error"`
			}{e, map[string]string{"type": "internal_error", "message": "engine step failed"}})
		case "non-numeric":
			b = fmt.Appendf(nil, `{"time":%q,"model":%q,"status":200,"latency_ms":%d,"usage":{"prompt_tokens":%d,"completion_tokens":"n/a"}}`,
				e.Time, e.Model, e.LatencyMS, prompt)
		case "text":
			b = fmt.Appendf(nil, "%s WARN gateway: upstream connection reset, retrying", e.Time)
		}
		w.Write(b)
		w.WriteByte('\n')
	}
}
