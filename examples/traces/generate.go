// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

//go:build ignore

// Command generate writes the sample Mooncake-format trace
// examples/traces/mirror.jsonl that examples/workloads/trace-mirror.yml
// mirrors:
//
//	go run examples/traces/generate.go > examples/traces/mirror.jsonl
//
// It is deterministic (fixed seed) and generated, not an excerpt of a
// published trace. Over one hour, 2,000 requests of two kinds: RAG (a
// prompt that starts with one of 30 shared documents of 2 blocks of 512
// tokens, then the question; short answers) and chat (short prompts, long
// answers), with the arrival rate rising to a peak at the half hour.
package main

import (
	"bufio"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strings"
)

func main() {
	r := rand.New(rand.NewPCG(2026, 20))
	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()
	const n = 2000
	next := uint64(1000)
	for i := range n {
		// Arrivals: the inverse of a rate ∝ 1 + sin shape over the hour.
		u := (float64(i) + r.Float64()) / n
		ms := int64(3_600_000 * (u - math.Sin(2*math.Pi*u)/(2*math.Pi)*0.8))
		var in, out int
		var ids []uint64
		if r.IntN(2) == 0 {
			doc := uint64(r.IntN(30))
			ids = append(ids, 2*doc, 2*doc+1)
			in, out = 1100+r.IntN(1500), 10+r.IntN(60)
		} else {
			in, out = 30+r.IntN(400), 80+r.IntN(300)
		}
		for len(ids)*512 < in {
			ids = append(ids, next)
			next++
		}
		s := make([]string, len(ids))
		for j, id := range ids {
			s[j] = fmt.Sprint(id)
		}
		fmt.Fprintf(w, "{\"timestamp\": %d, \"input_length\": %d, \"output_length\": %d, \"hash_ids\": [%s]}\n", ms, in, out, strings.Join(s, ", "))
	}
}
