// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package probe

import (
	"log/slog"
	"math"
	"reflect"
	"sync"
	"time"

	"github.com/llmprobe/llmprobe/config"
	"github.com/llmprobe/llmprobe/probe/wire"
	"github.com/llmprobe/llmprobe/regression"
)

// Regression detection (docs/design.md "Regression detection"): per target
// and class, one detector for each of TTFT, TPOT, E2E and the error ratio,
// fed with every judged request and evaluated once a minute. The detectors
// outlive reloads that leave a class as it was, so a reload does not throw
// away the baseline; a class whose requests change (its lengths, the
// target's URL, model or body) starts afresh, since its old samples
// describe other requests.

// Regression metrics: the `metric` label of llmprobe_regression.
const (
	RegressionTTFT   = "ttft"
	RegressionTPOT   = "tpot"
	RegressionE2E    = "e2e"
	RegressionErrors = "errors"
)

// RegressionMetrics lists them in a stable order.
var RegressionMetrics = [...]string{RegressionTTFT, RegressionTPOT, RegressionE2E, RegressionErrors}

// RegressionStatus is one detector's latest decision.
type RegressionStatus struct {
	Class  string
	Metric string // one of RegressionMetrics
	regression.Result
}

// regressionBank holds the detectors of one target, across reloads.
type regressionBank struct {
	mu      sync.Mutex
	classes map[string]*classDetectors
	order   []string // class names in configuration order
	last    time.Time
}

// classDetectors are one class's four detectors. A runner holds the
// pointer it was built with: after a reset, the requests of a replaced
// runner still in flight feed the discarded set, not the new one.
type classDetectors struct {
	spec regressionSpec // what the samples depend on; a change resets the detectors
	on   bool
	// judged says which metrics apply: an embeddings answer is not
	// streamed, so it has no TTFT or TPOT to judge.
	judged [len(RegressionMetrics)]bool
	det    [len(RegressionMetrics)]*regression.Detector
	last   [len(RegressionMetrics)]regression.Result
}

// regressionSpec is what a class's latencies depend on besides the
// server: the requests llmprobe sends, and how they are judged.
type regressionSpec struct {
	URL, API, Model, PromptFormat string
	ExtraBody                     map[string]any
	ContinuousUsageStats          bool
	Class                         config.Class
	Regression                    config.Regression
}

// bankPlan is a bank's detectors for a new configuration, applied by
// commit once the whole configuration is (a failed reload changes
// nothing).
type bankPlan struct {
	classes map[string]*classDetectors
	order   []string
}

// plan returns the detectors a target's configuration needs, by class
// name: the bank's own for the classes that stay as they were, new ones
// for the others.
func (b *regressionBank) plan(cfg *config.Config, t *config.Target, w *config.Workload) bankPlan {
	b.mu.Lock()
	defer b.mu.Unlock()
	p := bankPlan{classes: make(map[string]*classDetectors, len(w.Classes))}
	for _, cl := range w.Classes {
		rc := cfg.Regression(t, cl)
		spec := regressionSpec{URL: t.URL, API: t.API, Model: t.Model, PromptFormat: t.PromptFormat,
			ExtraBody: t.ExtraBody, ContinuousUsageStats: t.ContinuousUsageStats, Class: *cl, Regression: rc}
		cd := b.classes[cl.Name]
		if cd == nil || !reflect.DeepEqual(cd.spec, spec) {
			cd = &classDetectors{spec: spec, on: rc.On()}
			for i, m := range RegressionMetrics {
				cd.judged[i] = t.API != config.APIEmbeddings || (m != RegressionTTFT && m != RegressionTPOT)
			}
			opts := rc.DetectorOptions()
			for i, m := range RegressionMetrics {
				kind := regression.Latency
				if m == RegressionErrors {
					kind = regression.Ratio
				}
				cd.det[i] = regression.NewDetector(kind, opts)
				cd.last[i] = regression.Result{MedianRatio: math.NaN(), P99Ratio: math.NaN(), BaselineRatio: math.NaN(), CurrentRatio: math.NaN(), P: 1}
			}
		}
		p.classes[cl.Name] = cd
		p.order = append(p.order, cl.Name)
	}
	return p
}

// commit makes p the bank's detectors.
func (b *regressionBank) commit(p bankPlan) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.classes, b.order = p.classes, p.order
}

// observe feeds one request's values to its class's detectors. Requests
// of the warm-up, those llmprobe cancelled itself, and those sent while
// the harness flags its own numbers (saturated: a late client inflates
// latency) are not judged.
func (b *regressionBank) observe(cd *classDetectors, res *wire.Result, saturated bool) {
	if b == nil || cd == nil || !cd.on || res.Warmup || saturated || res.ErrorType == wire.ErrorTypeCancelled {
		return
	}
	at := res.Start
	if at.IsZero() {
		at = res.Dispatched
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	failed := 0.0
	if res.Outcome != wire.OutcomeSuccess {
		failed = 1
	}
	cd.det[3].Add(at, failed)
	if failed != 0 {
		return
	}
	if res.FirstToken && cd.judged[0] {
		cd.det[0].Add(at, res.TTFT.Seconds())
	}
	if res.OutputTokens >= 2 && res.TPOT > 0 && cd.judged[1] {
		cd.det[1].Add(at, res.TPOT.Seconds())
	}
	cd.det[2].Add(at, res.E2E.Seconds())
}

// cut tells every detector of the target that the target changed at t
// (a new model build, server or version): what came before is the
// baseline of what comes after.
func (b *regressionBank) cut(t time.Time) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, cd := range b.classes {
		for _, d := range cd.det {
			d.Cut(t)
		}
	}
}

// evaluate runs the detectors when every has passed since the last
// evaluation (global.regression_interval), logging every regression that
// begins or ends.
func (b *regressionBank) evaluate(now time.Time, every time.Duration, target string, logger *slog.Logger) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if now.Sub(b.last) < every {
		return
	}
	b.last = now
	for _, class := range b.order {
		cd := b.classes[class]
		if cd == nil || !cd.on {
			continue
		}
		for i, m := range RegressionMetrics {
			if !cd.judged[i] {
				continue
			}
			was := cd.last[i]
			r := cd.det[i].Evaluate(now)
			cd.last[i] = r
			switch {
			case r.Regressed && !was.Regressed:
				args := []any{"target", target, "class", class, "metric", m, "test", r.Test,
					"change_point", r.ChangePoint.UTC().Format(time.RFC3339), "baseline_samples", r.BaselineN, "current_samples", r.CurrentN, "p", r.P}
				if m == RegressionErrors {
					args = append(args, "baseline_error_ratio", r.BaselineRatio, "current_error_ratio", r.CurrentRatio)
				} else {
					args = append(args, "median_ratio", r.MedianRatio, "p99_ratio", r.P99Ratio)
				}
				logger.Warn("regression detected", args...)
			case r.Accepted:
				logger.Info("regression accepted as the new baseline after regression.accept_after", "target", target, "class", class, "metric", m,
					"since", was.Onset.UTC().Format(time.RFC3339))
			case !r.Regressed && was.Regressed:
				logger.Info("regression over", "target", target, "class", class, "metric", m)
			}
		}
	}
}

// status returns the latest decisions, by class then metric.
func (b *regressionBank) status() []RegressionStatus {
	if b == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []RegressionStatus
	for _, class := range b.order {
		cd := b.classes[class]
		if cd == nil || !cd.on {
			continue
		}
		for i, m := range RegressionMetrics {
			if cd.judged[i] {
				out = append(out, RegressionStatus{Class: class, Metric: m, Result: cd.last[i]})
			}
		}
	}
	return out
}
