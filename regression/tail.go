// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package regression

import "math"

// The tail test's baseline stands for more samples than the baseline
// (tailCapacity, not BaselineCapacity) at little cost: the test needs only
// how many baseline values lie above its threshold, so the tail baseline
// keeps only its largest values (at most tailKeep, about the top 3%) and a
// count of the rest. Eight times the samples make the exceedance count's
// null variance, n·p(1−p)(1 + n/m), nearly binomial for the windows the
// tail test decides on (n of 1000 to 4000), where the baseline's 4096
// would add 30 to 60% to it.
const (
	tailCapacity = 32768
	tailKeep     = 1024
)

// tailBaseline represents m samples: every one of them above cut is in
// top (sorted ascending), the others are only counted. Samples leave at
// random, as the baseline's do.
type tailBaseline struct {
	top []float32
	cut float32
	m   int
}

func (t *tailBaseline) reset() {
	t.top = t.top[:0]
	t.cut = float32(math.Inf(-1))
	t.m = 0
}

// add represents the sorted values moved, first making room by dropping
// represented samples at random; merge is scratch space for at least
// tailKeep+len(moved) values.
func (t *tailBaseline) add(moved, merge []float32, randN func(int) int) {
	if e := t.m + len(moved) - tailCapacity; e > 0 {
		// How many of the e samples dropped are kept values
		// (hypergeometric, drawn sequentially), then which.
		total, stored, x := t.m, len(t.top), 0
		for range e {
			if randN(total) < stored {
				x++
				stored--
			}
			total--
		}
		t.m -= e
		keep, kept := len(t.top)-x, 0
		for i := 0; i < len(t.top) && kept < keep; i++ {
			if randN(len(t.top)-i) < keep-kept {
				t.top[kept] = t.top[i]
				kept++
			}
		}
		t.top = t.top[:kept]
	}
	t.m += len(moved)
	// Merge the moved values above cut with top, ascending.
	merged := merge[:0]
	i, j := 0, 0
	for j < len(moved) && moved[j] <= t.cut {
		j++
	}
	for i < len(t.top) || j < len(moved) {
		if j == len(moved) || (i < len(t.top) && t.top[i] <= moved[j]) {
			merged = append(merged, t.top[i])
			i++
		} else {
			merged = append(merged, moved[j])
			j++
		}
	}
	if over := len(merged) - tailKeep; over > 0 {
		t.cut = merged[over-1]
		merged = merged[over:]
		for len(merged) > 0 && merged[0] <= t.cut {
			merged = merged[1:]
		}
	}
	if t.top == nil {
		t.top = make([]float32, 0, tailKeep)
	}
	t.top = append(t.top[:0], merged...)
}

// threshold is the tail test's threshold over the m samples represented:
// the order statistic the baseline's p99 is (the (K+1)-th largest, K =
// m−1−⌊0.99m⌋), and how many represented values exceed it. ok is false
// when top does not reach it.
func (t *tailBaseline) threshold() (theta float32, above, m int, ok bool) {
	k := t.m - 1 - int(0.99*float64(t.m))
	if t.m == 0 || len(t.top) < k+1 {
		return 0, 0, 0, false
	}
	theta = t.top[len(t.top)-1-k]
	return theta, len(t.top) - upperBound(t.top, theta), t.m, true
}
