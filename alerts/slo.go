// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package alerts

import (
	"fmt"
	"slices"
	"strings"

	"github.com/prometheus/common/model"
)

// SLO rules: error ratios, burn rates and the error budget of the
// objectives configured in the daemon (llmprobe_slo_* series, one set per
// target and class with an SLO), and the multi-window multi-burn-rate
// alerts on them.
//
// A request is judged good (it succeeded and met every latency bound) or
// bad; the error ratio is bad / judged requests, from counts summed over
// replicas, and the burn rate is that ratio divided by the error budget,
// 1 − objective: at burn rate 1 the budget lasts exactly SLOWindow.

// sloRequests is the counter of judged requests.
const sloRequests = "llmprobe_slo_requests_total"

// SLOWindows returns the windows the SLO counts, error ratios and burn
// rates are recorded over, shortest first: every Long and Short window of
// SLOFast and SLOSlow, and SLOWindow (the error budget's).
func (c Config) SLOWindows() []model.Duration {
	ws := []model.Duration{c.SLOWindow}
	for _, a := range []BurnRateAlert{c.SLOFast, c.SLOSlow} {
		for _, w := range a.Windows {
			ws = append(ws, w.Long, w.Short)
		}
	}
	slices.Sort(ws)
	return slices.Compact(ws)
}

// SLOBurnRateWindows returns the Long windows of SLOFast and SLOSlow,
// shortest first: the burn rates the dashboards plot.
func (c Config) SLOBurnRateWindows() []model.Duration {
	var ws []model.Duration
	for _, a := range []BurnRateAlert{c.SLOFast, c.SLOSlow} {
		for _, w := range a.Windows {
			ws = append(ws, w.Long)
		}
	}
	slices.Sort(ws)
	return slices.Compact(ws)
}

// SLORequestsRecord names the judged requests (good and bad) per target
// and class over window d, summed over replicas.
func (c Config) SLORequestsRecord(d model.Duration) string {
	return "target_class:llmprobe_slo_requests:increase" + win(d)
}

// SLOBadRecord names the bad requests per target and class over window d.
func (c Config) SLOBadRecord(d model.Duration) string {
	return "target_class:llmprobe_slo_requests_bad:increase" + win(d)
}

// SLOErrorRatioRecord names bad / judged requests per target and class
// over window d (one of SLOWindows), from the summed counts.
func (c Config) SLOErrorRatioRecord(d model.Duration) string {
	return "target_class:llmprobe_slo_errors:ratio_rate" + win(d)
}

// SLOBurnRateRecord names the burn rate per target and class over window
// d: SLOErrorRatioRecord(d) / (1 − objective).
func (c Config) SLOBurnRateRecord(d model.Duration) string {
	return "target_class:llmprobe_slo_burn_rate:rate" + win(d)
}

// SLOObjectiveRecord names the objective per target and class (the
// largest over replicas, should a reload leave them briefly different).
func (c Config) SLOObjectiveRecord() string { return "target_class:llmprobe_slo_objective_ratio:max" }

// SLOBudgetRemainingRecord names the share of the error budget left over
// SLOWindow: 1 − SLOBurnRateRecord(SLOWindow). Negative once the budget is
// overspent.
func (c Config) SLOBudgetRemainingRecord() string {
	return "target_class:llmprobe_slo_error_budget_remaining:ratio"
}

// SLORecordingRules returns the SLO recording rules, in a group of their
// own: the SLOWindow counts read the whole error-budget period of raw
// samples (exact, as cheap as llmprobe's few series allow; Prometheus'
// retention must cover SLOWindow), and a separate group lets a large
// Prometheus give them a longer interval.
func (c Config) SLORecordingRules() RuleGroup {
	rules := []Rule{{
		Record: c.SLOObjectiveRecord(),
		Expr:   fmt.Sprintf("max"+c.by("target", "class")+" (llmprobe_slo_objective_ratio%s)", c.Matchers()),
	}}
	for _, d := range c.SLOWindows() {
		rules = append(rules,
			Rule{
				Record: c.SLORequestsRecord(d),
				Expr:   fmt.Sprintf("sum"+c.by("target", "class")+" (increase(%s%s[%s]))", sloRequests, c.Matchers(`result=~"good|bad"`), win(d)),
			},
			Rule{
				Record: c.SLOBadRecord(d),
				Expr:   fmt.Sprintf("sum"+c.by("target", "class")+" (increase(%s%s[%s]))", sloRequests, c.Matchers(`result="bad"`), win(d)),
			},
			Rule{
				Record: c.SLOErrorRatioRecord(d),
				Expr:   c.SLOBadRecord(d) + "\n/\n" + c.SLORequestsRecord(d),
			},
			Rule{
				Record: c.SLOBurnRateRecord(d),
				Expr:   c.SLOErrorRatioRecord(d) + "\n/ " + c.on("target", "class") + "\n(1 - " + c.SLOObjectiveRecord() + ")",
			},
		)
	}
	rules = append(rules, Rule{
		Record: c.SLOBudgetRemainingRecord(),
		Expr:   "1 - " + c.SLOBurnRateRecord(c.SLOWindow),
	})
	return RuleGroup{Name: "llmprobe.slo", Rules: rules}
}

// burnRateCondition is one window pair of a burn-rate alert with its
// low-rate guard.
func (c Config) burnRateCondition(w BurnRateWindows) string {
	b := FormatFloat(w.BurnRate)
	return "(\n" +
		"  " + c.SLOBurnRateRecord(w.Long) + " > " + b + "\n" +
		"  and " + c.on("target", "class") + "\n" +
		"  " + c.SLOBurnRateRecord(w.Short) + " > " + b + "\n" +
		"  and " + c.on("target", "class") + "\n" +
		"  " + c.SLOBadRecord(w.Long) + " >= " + fmt.Sprint(c.SLOMinBadRequests) + "\n" +
		"  and " + c.on("target", "class") + "\n" +
		"  " + c.SLORequestsRecord(w.Long) + " >= " + fmt.Sprint(c.MinRequests) + "\n" +
		")"
}

// sloQuery renders, in an annotation, the value of a per-target-and-class
// recorded series for the alert's target and class.
func (c Config) sloQuery(record, format string) string {
	return c.sloQueryExpr("", record, format)
}

// sloQueryExpr is sloQuery of prefix + record (e.g. "1 - ").
func (c Config) sloQueryExpr(prefix, record, format string) string {
	return "{{ with " + c.seriesQuery(prefix+record, "", []string{"target", "class"}, "") + " | query }}{{ . | first | value | " + format + " }}{{ end }}"
}

// burnRateAlert returns one multi-window multi-burn-rate alert: any of
// its window pairs burning faster than its threshold, with enough bad and
// judged requests in the long window.
func (c Config) burnRateAlert(name string, a BurnRateAlert, pace string) Rule {
	var conds, burns, thresholds []string
	for _, w := range a.Windows {
		conds = append(conds, c.burnRateCondition(w))
		burns = append(burns, fmt.Sprintf("%s over the last %s", c.sloQuery(c.SLOBurnRateRecord(w.Long), "humanize"), win(w.Long)))
		thresholds = append(thresholds, fmt.Sprintf("%s over %s and %s", FormatFloat(w.BurnRate), win(w.Long), win(w.Short)))
	}
	sw := win(c.SLOWindow)
	return Rule{
		Alert:  name,
		Expr:   strings.Join(conds, "\nor\n"),
		For:    win(a.For),
		Labels: labels(a.Severity, "slo"),
		Annotations: c.annotations(name,
			fmt.Sprintf("{{ $labels.target }} ({{ $labels.class }}) burns its SLO error budget {{ $value | humanize }}× as fast as it can afford: %s.", pace),
			fmt.Sprintf("The SLO of target {{ $labels.target }}, class {{ $labels.class }}, wants %s of its requests good "+
				"(succeeded and within every latency bound), which leaves an error budget of %s of the requests over %s. "+
				"The budget burns at %s (bad share / budget; 1 spends exactly the budget in %s). "+
				"This alert fires above %s, with at least %d bad and %d judged requests in the long window. "+
				"%s"+
				"The SLO row of the overview shows which bound fails; check the harness-health row first.",
				c.sloQuery(c.SLOObjectiveRecord(), "humanizePercentage"),
				c.sloQueryExpr("1 - ", c.SLOObjectiveRecord(), "humanizePercentage"),
				sw,
				strings.Join(burns, " and "),
				sw,
				strings.Join(thresholds, ", or "),
				c.SLOMinBadRequests, c.MinRequests,
				"{{ with "+c.seriesQuery(c.SLOBudgetRemainingRecord(), "", []string{"target", "class"}, "")+
					" | query }}{{ . | first | value | humanizePercentage }} of the "+sw+" budget remains. {{ end }}",
			)+c.diagnosisText(false)),
	}
}
