// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package plan

import (
	"testing"
	"time"
)

func TestParseGoal(t *testing.T) {
	for _, c := range []struct {
		spec string
		want Goal
	}{
		{"ttft:+25%:10m", Goal{Effect{MetricTTFT, 0.5, 1.25}, 10 * time.Minute, "ttft:+25%:10m"}},
		{"tpot:x1.5:1h", Goal{Effect{MetricTPOT, 0.5, 1.5}, time.Hour, "tpot:x1.5:1h"}},
		{"e2e:p99x2:2h", Goal{Effect{MetricE2E, 0.99, 2}, 2 * time.Hour, "e2e:p99x2:2h"}},
		{"ttft:p99+100%:1d", Goal{Effect{MetricTTFT, 0.99, 2}, 24 * time.Hour, "ttft:p99+100%:1d"}},
		{"errors:5%:30m", Goal{Effect{MetricErrors, 0, 5}, 30 * time.Minute, "errors:5%:30m"}},
		{"errors:x3:30m", Goal{Effect{MetricErrors, 0, 3}, 30 * time.Minute, "errors:x3:30m"}},
	} {
		g, err := ParseGoal(c.spec)
		if err != nil || g.Metric != c.want.Metric || g.Quantile != c.want.Quantile || g.Within != c.want.Within || g.Spec != c.want.Spec ||
			g.Effect.Effect < c.want.Effect.Effect-1e-12 || g.Effect.Effect > c.want.Effect.Effect+1e-12 {
			t.Errorf("%s: %+v, %v; want %+v", c.spec, g, err, c.want)
		}
	}
	for _, c := range []struct{ spec, want string }{
		{"ttft:+25%", `"ttft:+25%": want METRIC:EFFECT:WITHIN, e.g. ttft:+25%:10m`},
		{"itl:+25%:10m", `"itl:+25%:10m": the metric must be ttft, tpot, e2e or errors, got "itl"`},
		{"ttft:25%:10m", `"ttft:25%:10m": the effect must be a rise such as +25% or x1.25 (p99+100% or p99x2 for the p99), got "25%"`},
		{"ttft:-25%:10m", `"ttft:-25%:10m": the effect must be a rise such as +25% or x1.25 (p99+100% or p99x2 for the p99), got "-25%"`},
		{"ttft:x0.5:10m", `"ttft:x0.5:10m": the effect must be a rise such as +25% or x1.25 (p99+100% or p99x2 for the p99), got "x0.5"`},
		{"ttft:+25%:soon", `"ttft:+25%:soon": WITHIN must be a positive duration such as 10m, got "soon"`},
		{"ttft:+25%:0s", `"ttft:+25%:0s": WITHIN must be a positive duration such as 10m, got "0s"`},
		{"ttft:+25%:30d", `"ttft:+25%:30d": WITHIN must be at most 1w`},
		{"errors:0.5%:1h", `"errors:0.5%:1h": errors wants the error ratio after the step, above the baseline's 1% and below 100%, e.g. 5%`},
		{"errors:x200:1h", `"errors:x200:1h": errors xF wants a factor F above 1 with F × 1% below 100%, e.g. x5`},
	} {
		if _, err := ParseGoal(c.spec); err == nil || err.Error() != c.want {
			t.Errorf("%s: %v, want %s", c.spec, err, c.want)
		}
	}
}
