// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package report

import (
	"bytes"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// rateReport is a report of one stage requested at 5 req/s that sent
// sent requests in 100 s.
func rateReport(sent int) *Report {
	return &Report{Stages: []*StageReport{{Stage: 1, Target: "sim", RequestedRate: 5, Sent: sent,
		AchievedRate: float64(sent) / 100, Duration: 100 * time.Second, Trusted: true}}}
}

// TestCompareAchievedRates: stages matched by their requested rate show
// the rates they achieved, and compare warns when those differ by more
// than chance (the latencies were then taken at different loads): 500
// against 400 requests sent in 100 s at the same requested rate is 3.3
// standard deviations apart, 500 against 480 is 0.6. Over 2000 seeded
// pairs of Poisson counts of the same mean (500), the warning, at a
// nominal 1%, is given 20 times on average (binomial, sd 4.4): more than
// 40 would fail with probability under 1e-5, as would fewer than 5.
func TestCompareAchievedRates(t *testing.T) {
	cs, _ := Compare(rateReport(500), rateReport(400))
	var b bytes.Buffer
	if err := WriteCompare(&b, cs, nil); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"1 sim @5/s (sent 5 → 4/s)", "stage 1 sim @5/s (sent 5 → 4/s): the achieved rates differ by more than chance"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("no %q in\n%s", want, b.String())
		}
	}
	cs, _ = Compare(rateReport(500), rateReport(480))
	b.Reset()
	if err := WriteCompare(&b, cs, nil); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "differ by more than chance") {
		t.Errorf("500 and 480 sent in 100 s: warned\n%s", b.String())
	}
	rng := rand.New(rand.NewPCG(34, 34))
	poisson := func(mean float64) int { // by its normal approximation, fine at 500
		return int(math.Round(mean + math.Sqrt(mean)*rng.NormFloat64()))
	}
	warned := 0
	for range 2000 {
		if p := rateP(poisson(500), 100*time.Second, poisson(500), 100*time.Second); p < RateAlpha {
			warned++
		}
	}
	if warned < 5 || warned > 40 {
		t.Errorf("%d of 2000 null pairs warned, want about 20", warned)
	}
}
