// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package dashboards

import (
	"fmt"

	"github.com/llmprobe/llmprobe/alerts"
)

// regressionRow shows the daemon's own regression detector
// (docs/design.md "Regression detection"): what it holds, by how much,
// and on how much evidence. The target's identity changes are the
// dashboard's annotations, so a step in these panels lines up with the
// deploy that preceded it.
func regressionRow(d *board, cfg alerts.Config, s sels) {
	d.row("Regressions: did it get worse, and since when?")
	d.add(d.ts("Regressions held",
		"1 while llmprobe's regression detector holds that a class's TTFT, TPOT, E2E or error ratio got worse than its baseline: the period before the target's last identity change "+
			"(the annotations), else a trailing reference of recent requests. The decision needs a significant rank or exceedance test at a stated false-alarm rate "+
			"and at least the class's regression.min_effect; "+alerts.AlertLatencyRegressed+" and "+alerts.AlertErrorsRegressed+" fire from it.",
		"none", 8, 8,
		q{expr: fmt.Sprintf("max by (target, class, metric) (%s%s)", alerts.RegressionMetric, s.targetClass), legend: "{{target}} {{class}} {{metric}}"},
	).Min(0).Max(1))
	d.add(d.ts("Effect: current ÷ baseline",
		"The current window's median and p99 over the baseline's, per class and latency metric (1: unchanged). The detector alarms on the median from "+
			"1 + min_effect.median (1.2 by default) and on the tail from 1 + min_effect.p99 (1.5), when the test is also significant. "+
			"Empty until the detector has a baseline (about 100 requests of the class); the p99 needs 100 current requests more.",
		"none", 8, 8,
		q{expr: fmt.Sprintf("max by (target, class, metric, statistic) (%s%s)", alerts.RegressionEffectMetric, s.targetClass), legend: "{{target}} {{class}} {{metric}} {{statistic}}"},
	))
	d.add(d.ts("Evidence: requests on each side",
		"The requests behind each decision: the baseline, and the current window since the last cut (an identity change) or the detector's reference. "+
			"A fresh daemon or a fresh deploy needs a few hundred requests on each side before a modest regression can be proved.",
		"short", 8, 8,
		q{expr: fmt.Sprintf("max by (target, class, window) (%s%s)", alerts.RegressionSamplesMetric, cfg.DashboardMatchers(`target=~"$target"`, `class=~"$class"`, `metric="ttft"`)), legend: "{{target}} {{class}} ttft {{window}}"},
		q{expr: fmt.Sprintf("max by (target, class, window) (%s%s)", alerts.RegressionErrorRatioMetric, s.targetClass), legend: "{{target}} {{class}} error ratio {{window}}"},
	).OverrideByQuery("B", rightAxis("percentunit")))
}
