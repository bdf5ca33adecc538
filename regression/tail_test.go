// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package regression

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestTailBaseline: until it is full, the tail baseline's threshold is
// exactly the order statistic of everything added and its count above it
// exact; once full, it keeps its invariants (at most tailKeep values,
// sorted, all above cut, at most tailCapacity represented) and its
// threshold stays near the p99.
func TestTailBaseline(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var tb tailBaseline
	tb.reset()
	merge := make([]float32, 0, CurrentCapacity+tailKeep)
	var all []float32
	randN := func(n int) int { return rng.IntN(n) }
	for round := range 40 {
		batch := make([]float32, 2048)
		for i := range batch {
			batch[i] = float32(rng.ExpFloat64())
			if i%97 == 0 {
				batch[i] = 1 // ties
			}
		}
		slices.Sort(batch)
		tb.add(batch, merge, randN)
		all = append(all, batch...)
		if !slices.IsSorted(tb.top) || len(tb.top) > tailKeep || tb.m > tailCapacity || (len(tb.top) > 0 && tb.top[0] <= tb.cut) {
			t.Fatalf("round %d: invariants broken: %d kept, m %d, cut %v, first %v", round, len(tb.top), tb.m, tb.cut, tb.top[0])
		}
		theta, above, m, ok := tb.threshold()
		if !ok {
			t.Fatalf("round %d: no threshold", round)
		}
		if len(all) <= tailCapacity {
			s := slices.Clone(all)
			slices.Sort(s)
			j := int(0.99 * float64(len(s)))
			want := s[j]
			if theta != want || m != len(s) || above != len(s)-upperBound(s, want) {
				t.Fatalf("round %d: threshold %v (%d above of %d), want %v (%d of %d)", round, theta, above, m, want, len(s)-upperBound(s, want), len(s))
			}
		} else if theta < 4.0 || theta > 5.2 { // the p99 of Exp(1) is 4.6
			t.Errorf("round %d: threshold %v, want about 4.6", round, theta)
		}
	}
}
