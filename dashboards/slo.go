// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package dashboards

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"

	"github.com/llmprobe/llmprobe/alerts"
)

// sloRow adds the overview's SLO row: goodput and good share from the raw
// llmprobe_slo_* series (they follow any selection and work without the
// rules), the error budget and burn rates from the recorded series the
// burn-rate alerts evaluate, and the bounds bad requests broke.
func sloRow(d *board, cfg alerts.Config, s sels) {
	judged := cfg.DashboardMatchers(`target=~"$target"`, `class=~"$class"`, `result=~"good|bad"`)
	good := cfg.DashboardMatchers(`target=~"$target"`, `class=~"$class"`, `result="good"`)
	rec := cfg.RecordedMatchers(`target=~"$target"`, `class=~"$class"`)
	sw := cfg.SLOWindow.String()
	rate := func(sel string) string {
		return fmt.Sprintf("sum by (target, class) (rate(llmprobe_slo_requests_total%s[%s]))", sel, rateWin)
	}

	d.row("SLO: error budget and burn rate")
	d.add(d.ts("Goodput",
		"Requests per second that met their SLO (succeeded, within every latency bound of the target's and class's slo:), against all requests judged (dashed). "+
			"Only classes of targets with an SLO appear; warm-up is excluded.",
		"reqps", 8, 8,
		q{expr: rate(good), legend: "{{target}} {{class}} good"},
		q{expr: rate(judged), legend: "{{target}} {{class}} judged"},
	).OverrideByQuery("B", dashed()))
	d.add(d.ts("Good share vs objective",
		"Good / judged requests, from summed counters, and the objective (dashed): below it the class spends its error budget faster than the SLO allows. "+
			"At low rates a short interval holds few requests: read the burn rates for the verdict.",
		"percentunit", 8, 8,
		q{expr: rate(good) + "\n/\n" + rate(judged), legend: "{{target}} {{class}} good"},
		q{expr: fmt.Sprintf("max by (target, class) (llmprobe_slo_objective_ratio%s)", s.targetClass), legend: "{{target}} {{class}} objective"},
	).Max(1).OverrideByQuery("B", dashed()))
	d.add(d.stat("Error budget remaining",
		fmt.Sprintf("Share of the error budget (1 − objective of the requests) left over the last %s, the SLO window the rules are generated with "+
			"(needs alerts/llmprobe.rules.yml loaded, and Prometheus retention of at least %s). Negative: overspent.", sw, sw),
		"percentunit", 5, 8,
		q{expr: cfg.SLOBudgetRemainingRecord() + rec, legend: "{{target}} {{class}}"},
	).Decimals(1).Thresholds(thresholds(step(nil, "red"), step(ptr(0.0), "orange"), step(ptr(0.25), "green"))))
	wsec := time.Duration(cfg.SLOWindow).Seconds()
	d.add(d.stat("SLO window",
		fmt.Sprintf("The error-budget period each SLO has in llmprobe's configuration (slo.window). Green when it is the %s the rules compute the budget over; "+
			"red otherwise: generate the rules with SLOWindow equal to it.", sw),
		"dtdurations", 3, 8,
		q{expr: fmt.Sprintf("max by (target, class) (llmprobe_slo_window_seconds%s)", s.targetClass), legend: "{{target}} {{class}}"},
	).Thresholds(thresholds(step(nil, "red"), step(ptr(wsec), "green"), step(ptr(wsec+1), "red"))))

	var burns []q
	var names []string
	for _, w := range cfg.SLOBurnRateWindows() {
		burns = append(burns, q{expr: cfg.SLOBurnRateRecord(w) + rec, legend: "{{target}} {{class}} " + w.String()})
		names = append(names, w.String())
	}
	d.add(burnRateThresholds(d.ts("Burn rate",
		fmt.Sprintf("Bad share / error budget over the alerts' long windows (%s; recorded series, needs the rules). "+
			"At 1 the budget lasts exactly %s. Dashed: the thresholds of %s (red) and %s (orange); each also needs its short window burning as fast, "+
			"and at least %d bad and %d judged requests in the long window.",
			strings.Join(names, ", "), sw, alerts.AlertSLOBurnRateFast, alerts.AlertSLOBurnRateSlow, cfg.SLOMinBadRequests, cfg.MinRequests),
		"none", 12, 8, burns...).Min(0), cfg))
	d.add(d.ts("Violations by bound",
		"Bad requests per second by the bound they broke: ttft, tpot, e2e, or error (the request failed). A request that broke several latency bounds counts "+
			"once for each, so the series can add up to more than the bad requests. The legend is sorted by mean: its first row is the bound that fails most.",
		"reqps", 12, 8,
		q{expr: fmt.Sprintf("sum by (target, bound) (rate(llmprobe_slo_violations_total%s[%s]))", s.targetClass, rateWin), legend: "{{target}} {{bound}}"},
	).DrawStyle(common.GraphDrawStyleBars).
		Stacking(common.NewStackingConfigBuilder().Mode(common.StackingModeNormal)).
		Legend(common.NewVizLegendOptionsBuilder().
			DisplayMode(common.LegendDisplayModeTable).
			Placement(common.LegendPlacementBottom).
			ShowLegend(true).
			Calcs([]string{"mean", "max", "lastNotNull"}).
			SortBy("Mean").
			SortDesc(true)))
}

// burnRateThresholds draws every burn-rate threshold of the SLO alerts as
// a dashed line: red for the fast (page) alert, orange for the slow one.
func burnRateThresholds(p *timeseries.PanelBuilder, cfg alerts.Config) *timeseries.PanelBuilder {
	colors := map[float64]string{}
	for _, w := range cfg.SLOSlow.Windows {
		colors[w.BurnRate] = "orange"
	}
	for _, w := range cfg.SLOFast.Windows {
		colors[w.BurnRate] = "red"
	}
	values := make([]float64, 0, len(colors))
	for v := range colors {
		values = append(values, v)
	}
	slices.Sort(values)
	steps := []dashboard.Threshold{step(nil, "green")}
	for _, v := range values {
		steps = append(steps, step(ptr(v), colors[v]))
	}
	return p.Thresholds(thresholds(steps...)).
		ThresholdsStyle(common.NewGraphThresholdsStyleConfigBuilder().Mode(common.GraphThresholdsStyleModeDashed))
}
