// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package plan

import (
	"fmt"
	"io"
	"math"
	"strings"
	"time"
)

// WriteText writes r for a person: per target its rate, tokens and cost,
// then per class its figures.
func WriteText(w io.Writer, r *Report) error {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	for _, t := range r.Targets {
		p("target %s: %s req/s, %s a day, %s", t.Target, fmtRate(t.Rate), fmtTokens(t.TokensPerDay), fmtCost(t.CostPerDay))
		for _, g := range t.Goals {
			if g.Rate == nil {
				p("  goal %s: no rate up to %g req/s per class meets it for every class", g.Detect, float64(MaxGoalRate))
				continue
			}
			p("  goal %s: every class meets it from %s req/s: %s a day, %s", g.Detect, fmtRate(*g.Rate), fmtTokens(*g.TokensPerDay), fmtCost(g.CostPerDay))
		}
		for _, n := range t.Notes {
			if n != noPricing { // the line says so
				p("  (%s)", n)
			}
		}
		for _, c := range r.Classes {
			if c.Target == t.Target {
				writeClass(p, &c)
			}
		}
		p("")
	}
	p("Delays: from the step to the alarm, over the steps simulated; missed: not caught within the deadline (a goal's, else the horizon);")
	p("false alarms: the detector's union bound per 30 days. Shapes and histories: docs/design.md, \"Planning the rate\".")
	_, err := io.WriteString(w, b.String())
	return err
}

func writeClass(p func(string, ...any), c *Class) {
	p("  class %s: %s req/s, shape %s, %s a day, %s", c.Class, fmtRate(c.Rate), c.Shape, fmtTokens(c.TokensPerDay), fmtCost(c.CostPerDay))
	for _, d := range c.Detection {
		e := Effect{Metric: d.Metric, Effect: d.Effect}
		if d.Quantile != nil {
			e.Quantile = *d.Quantile
		}
		p("    %-22s median %7s  p90 %7s  missed %5.1f%% (deadline %s, history %s, %d steps)  false alarms ≤ %.2g/30d",
			e.String(), FormatDelay(d.MedianSeconds), FormatDelay(d.P90Seconds), 100*d.MissRate,
			fmtSeconds(d.DeadlineSeconds), fmtSeconds(d.HistorySeconds), d.Trials, d.FalseAlarmsPer30Days)
	}
	if c.SLO != nil {
		for _, w := range c.SLO.Windows {
			line := fmt.Sprintf("    SLO %g %s burn %s/%s > %g: %s and %s requests in its windows: ",
				c.SLO.Objective, w.Alert, fmtSeconds(w.LongSeconds), fmtSeconds(w.ShortSeconds), w.BurnRate, FormatCount(w.LongRequests), FormatCount(w.ShortRequests))
			if w.CanFire {
				line += fmt.Sprintf("fires from %.3g%% bad", 100*w.MinBadRatio)
			} else {
				line += "can never fire: " + w.Why
			}
			p("%s", line)
		}
	}
	for _, g := range c.Goals {
		met := "not met"
		if g.Met {
			met = "met"
		}
		if g.Rate == nil {
			p("    goal %s: %s at this rate; no rate up to %g req/s meets it", g.Detect, met, float64(MaxGoalRate))
			continue
		}
		target := ""
		if g.TargetRate != nil {
			target = fmt.Sprintf(" (the target at %s req/s)", fmtRate(*g.TargetRate))
		}
		p("    goal %s: %s at this rate; met from %s req/s%s: %s a day, %s", g.Detect, met, fmtRate(*g.Rate), target, fmtTokens(*g.TokensPerDay), fmtCost(g.CostPerDay))
	}
	for _, n := range c.Notes {
		p("    (%s)", n)
	}
}

func fmtRate(r float64) string { return fmt.Sprintf("%.3g", r) }

func fmtTokens(t Tokens) string {
	return fmt.Sprintf("%s prompt tokens (%s cacheable) and %s output tokens", FormatCount(t.Prompt), FormatCount(t.CachedPrompt), FormatCount(t.Output))
}

// FormatCount writes a count short: 950, 12.3k, 98.9M, 1.2G (the text
// report's and the status page's).
func FormatCount(v float64) string {
	switch a := math.Abs(v); {
	case a >= 1e9:
		return fmt.Sprintf("%.3gG", v/1e9)
	case a >= 1e6:
		return fmt.Sprintf("%.3gM", v/1e6)
	case a >= 1e3:
		return fmt.Sprintf("%.3gk", v/1e3)
	}
	return fmt.Sprintf("%.3g", v)
}

func fmtCost(c *float64) string {
	if c == nil {
		return "no cost (no pricing)"
	}
	return fmt.Sprintf("costing %.4g a day", *c)
}

// FormatDelay writes a detection delay of s seconds shortly (42s, 6.7m,
// 1.8h, 3d), "never" for nil.
func FormatDelay(s *float64) string {
	if s == nil {
		return "never"
	}
	return fmtSeconds(*s)
}

// fmtSeconds writes a duration of s seconds shortly: 42s, 6.7m, 1.8h, 3d.
func fmtSeconds(s float64) string {
	d := time.Duration(s * float64(time.Second))
	switch {
	case d >= 48*time.Hour:
		return fmt.Sprintf("%.3gd", d.Hours()/24)
	case d >= time.Hour:
		return fmt.Sprintf("%.3gh", d.Hours())
	case d >= time.Minute:
		return fmt.Sprintf("%.3gm", d.Minutes())
	}
	return fmt.Sprintf("%.3gs", d.Seconds())
}
