// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package workload

import (
	"math"
	"strings"
	"testing"

	"github.com/llmprobe/llmprobe/fit"
)

// A fit whose lengths reach the +Inf bucket has no upper clamp, and its
// table's tail extrapolates without bound; the refit cuts it at
// MaxRefitTokens. A fit whose table itself goes beyond is refused.
func TestRefitSamplersBounded(t *testing.T) {
	inf := math.Inf(1)
	l, err := fit.FitHistogram([]fit.Bin{{Lo: 0, Hi: 1, Count: 5000}, {Lo: 1, Hi: 2e6, Count: 4990}, {Lo: 2e6, Hi: inf, Count: 10}}, math.NaN())
	if err != nil {
		t.Fatal(err)
	}
	raw, err := l.Sampler()
	if err != nil {
		t.Fatal(err)
	}
	const far = 1 - 1e-15
	if q := raw.Quantile(far); !(q > MaxRefitTokens) {
		t.Fatalf("the fit's own tail reaches %v; the test needs one beyond %d", q, MaxRefitTokens)
	}
	prompt, output, err := RefitSamplers(&fit.Result{Prompt: l, Output: l})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []interface{ Quantile(float64) float64 }{prompt, output} {
		if q := s.Quantile(far); q != MaxRefitTokens {
			t.Errorf("refitted tail reaches %v, want the bound %d", q, MaxRefitTokens)
		}
		if q, want := s.Quantile(0.5), raw.Quantile(0.5); q != want {
			t.Errorf("median %v, want the fit's %v", q, want)
		}
	}

	big, err := fit.FitHistogram([]fit.Bin{{Lo: 1e9, Hi: 1e10, Count: 100}, {Lo: 1e10, Hi: 1e11, Count: 100}, {Lo: 1e11, Hi: 1e12, Count: 100}}, math.NaN())
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := RefitSamplers(&fit.Result{Prompt: l, Output: big}); err == nil || !strings.Contains(err.Error(), "output lengths") {
		t.Errorf("a fit of 1e9..1e12 tokens: err = %v, want the output lengths refused", err)
	}
	if _, _, err := RefitSamplers(&fit.Result{Prompt: l}); err == nil {
		t.Error("a result without output lengths was accepted")
	}
}
