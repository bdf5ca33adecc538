// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package exporter

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/llmprobe/llmprobe/plan"
)

// planSeries maps each series of a family to its value, keyed by its
// labels' values in the family's label order.
func planSeries(mf *dto.MetricFamily) map[string]float64 {
	out := map[string]float64{}
	for _, m := range mf.GetMetric() {
		var k []string
		for _, l := range m.GetLabel() {
			k = append(k, l.GetName()+"="+l.GetValue())
		}
		out[strings.Join(k, ",")] = m.GetGauge().GetValue()
	}
	return out
}

// TestPlannerExported: the daemon's plan figures are package plan's for
// the running configuration, exported per class (the median delay of
// each regression, +Inf when never caught; the tokens a day by kind),
// absent until computed, recomputed when a reload changes a rate and
// kept when it changes nothing the plan reads.
func TestPlannerExported(t *testing.T) {
	o := plan.Options{Trials: 6}
	cfg := mustConfig(t, testConfigYAML)
	want, err := plan.Plan(cfg, o)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	pl := NewPlanner(context.Background(), nil, o)
	reg.MustRegister(pl)
	if mfs := gather(t, reg); len(mfs) != 0 {
		t.Errorf("figures before any configuration: %v", mfs)
	}
	pl.SetConfig(cfg)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := pl.wait(ctx); err != nil {
		t.Fatal(err)
	}
	mfs := gather(t, reg)
	delays := planSeries(mfs["llmprobe_plan_detection_delay_seconds"])
	tokens := planSeries(mfs["llmprobe_probe_tokens_per_day"])
	n := 0
	for _, c := range want.Classes {
		for _, d := range c.Detection {
			n++
			k := "class=" + c.Class + ",effect=" + EffectLabel(d) + ",metric=" + d.Metric + ",target=" + c.Target
			v, ok := delays[k]
			switch {
			case !ok:
				t.Errorf("no series %s", k)
			case d.MedianSeconds == nil && !math.IsInf(v, 1):
				t.Errorf("%s = %g, want +Inf (never)", k, v)
			case d.MedianSeconds != nil && v != *d.MedianSeconds:
				t.Errorf("%s = %g, want %g", k, v, *d.MedianSeconds)
			}
		}
		for kind, v := range map[string]float64{"prompt": c.TokensPerDay.Prompt, "output": c.TokensPerDay.Output, "cached_prompt": c.TokensPerDay.CachedPrompt} {
			k := "class=" + c.Class + ",kind=" + kind + ",target=" + c.Target
			if tokens[k] != v {
				t.Errorf("%s = %g, want %g", k, tokens[k], v)
			}
		}
	}
	if len(delays) != n || n != 3*len(plan.DefaultEffects) || len(tokens) != 9 {
		t.Errorf("%d delay series (want %d), %d token series", len(delays), n, len(tokens))
	}
	for _, k := range []string{"class=chat,effect=+25%,metric=ttft,target=alpha", "class=chat,effect=p99x2,metric=ttft,target=alpha", "class=agent,effect=5%,metric=errors,target=alpha"} {
		if _, ok := delays[k]; !ok {
			t.Errorf("no series %s", k)
		}
	}

	// The same configuration again: the plan is kept, not recomputed.
	pl.mu.Lock()
	run := pl.cur
	pl.mu.Unlock()
	pl.SetConfig(mustConfig(t, testConfigYAML))
	if pl.cur != run {
		t.Error("an unchanged configuration was planned again")
	}
	// A changed rate: planned again, alpha's tokens double.
	pl.SetConfig(mustConfig(t, strings.Replace(testConfigYAML, "arrival: {rate: 1}", "arrival: {rate: 2}", 1)))
	if err := pl.wait(ctx); err != nil {
		t.Fatal(err)
	}
	tokens2 := planSeries(gather(t, reg)["llmprobe_probe_tokens_per_day"])
	if k := "class=chat,kind=output,target=alpha"; math.Abs(tokens2[k]-2*tokens[k]) > 1e-6*tokens[k] {
		t.Errorf("%s after doubling the rate: %g, before %g", k, tokens2[k], tokens[k])
	}
}

// TestPlannerAbandons: a configuration replaced while it is planned is
// abandoned (its plan stops), no figures are served until the new one is
// done, and every plan stops when the daemon does.
func TestPlannerAbandons(t *testing.T) {
	ctx, stop := context.WithCancel(context.Background())
	pl := NewPlanner(ctx, nil, plan.Options{Trials: 5000})
	pl.SetConfig(mustConfig(t, testConfigYAML))
	pl.mu.Lock()
	first := pl.cur
	pl.mu.Unlock()
	pl.SetConfig(mustConfig(t, alphaOnlyYAML))
	// 5000 steps a figure take minutes: it is still running, and the
	// first configuration's figures are not served meanwhile.
	if rep, err := pl.Report(); rep != nil || err != nil {
		t.Errorf("while planning: %v, %v", rep, err)
	}
	select {
	case <-first.done:
	case <-time.After(30 * time.Second):
		t.Fatal("the replaced plan did not stop")
	}
	if first.err == nil || first.rep != nil {
		t.Errorf("the replaced plan: %v, %v", first.rep, first.err)
	}
	stop()
	wctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := pl.wait(wctx); err == nil || wctx.Err() != nil {
		t.Errorf("after the daemon stopped: %v (wait %v)", err, wctx.Err())
	}
	if rep, err := pl.Report(); rep != nil || err == nil {
		t.Errorf("report after stopping: %v, %v", rep, err)
	}
}

// TestStatusPagePlan: the status page shows each class's plan figures,
// or that they are being computed.
func TestStatusPagePlan(t *testing.T) {
	pl := NewPlanner(context.Background(), nil, plan.Options{Trials: 4})
	f := newWebFixture(t, func(o *WebOptions) { o.Planner = pl })
	_, _, body := f.do(t, "GET", "/", nil)
	if strings.Contains(body, "What the rate buys") {
		t.Error("a plan section before any configuration was planned")
	}
	pl.SetConfig(mustConfig(t, testConfigYAML))
	_, _, body = f.do(t, "GET", "/", nil)
	if !strings.Contains(body, "Planning the configuration") && !strings.Contains(body, `id="plan-alpha-chat"`) {
		t.Errorf("neither planning nor planned:\n%s", body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := pl.wait(ctx); err != nil {
		t.Fatal(err)
	}
	_, _, body = f.do(t, "GET", "/", nil)
	for _, want := range []string{`id="plan-alpha"`, `id="plan-alpha-chat"`, `id="plan-alpha-agent"`, `id="plan-beta-ping"`,
		"<th>TTFT &#43;25%</th>", "<th>TTFT p99x2</th>", "<th>ERRORS 5%</th>", "no pricing"} {
		if !strings.Contains(body, want) {
			t.Errorf("the status page has no %q", want)
		}
	}
}
