// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package slo

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/model"
)

// Spec is an SLO given on a command line: per-request bounds (an
// Objective, judged request by request) and, for a finite run such as a
// bench stage, bounds on quantiles of the whole run.
type Spec struct {
	// Objective holds the per-request bounds and the ratio; nil when the
	// spec gives neither.
	Objective *Objective
	Quantiles []QuantileBound
}

// QuantileBound bounds one quantile of one latency over a run, e.g. TPOT
// p99 ≤ 100ms.
type QuantileBound struct {
	Metric   string // ttft, tpot, itl or e2e
	Quantile float64
	Max      time.Duration
}

func (q QuantileBound) String() string {
	return fmt.Sprintf("%s p%s ≤ %v", strings.ToUpper(q.Metric), formatPercent(q.Quantile), q.Max)
}

// quantileMetrics are the latencies a quantile bound may name.
var quantileMetrics = []string{"ttft", "tpot", "itl", "e2e"}

// ParseSpec parses a comma-separated list of KEY=VALUE:
//
//	ttft=500ms, tpot=60ms, e2e=30s   per-request bounds
//	objective=0.99                   the share that must be good
//	ttft_p99=1s, tpot_p99=100ms      quantile bounds (p50, p90, p95, p99, p999, ...) on ttft, tpot, itl, e2e
//
// e.g. "ttft=500ms,tpot=60ms" or "tpot_p99=100ms,ttft_p99=1s". Every
// problem is reported, each naming its item.
func ParseSpec(s string) (*Spec, error) {
	var (
		spec Spec
		obj  Objective
		errs []error
		seen = map[string]bool{}
	)
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		key, val, ok := strings.Cut(item, "=")
		key, val = strings.TrimSpace(key), strings.TrimSpace(val)
		if !ok || val == "" {
			errs = append(errs, fmt.Errorf("%q: want KEY=VALUE", item))
			continue
		}
		if seen[key] {
			errs = append(errs, fmt.Errorf("%q: %s is given twice", item, key))
			continue
		}
		seen[key] = true
		switch key {
		case "objective":
			r, err := strconv.ParseFloat(val, 64)
			if err != nil || !(r > 0 && r < 1) {
				errs = append(errs, fmt.Errorf("%q: objective must be a share in (0, 1), e.g. 0.99", item))
				continue
			}
			obj.Ratio = r
		case "ttft", "tpot", "e2e":
			d, err := parseBound(val)
			if err != nil {
				errs = append(errs, fmt.Errorf("%q: %v", item, err))
				continue
			}
			switch key {
			case "ttft":
				obj.TTFT = model.Duration(d)
			case "tpot":
				obj.TPOT = model.Duration(d)
			default:
				obj.E2E = model.Duration(d)
			}
		default:
			q, err := parseQuantileBound(key, val)
			if err != nil {
				errs = append(errs, fmt.Errorf("%q: %v", item, err))
				continue
			}
			spec.Quantiles = append(spec.Quantiles, q)
		}
	}
	if len(errs) > 0 {
		msgs := make([]string, len(errs))
		for i, err := range errs {
			msgs[i] = err.Error()
		}
		return nil, fmt.Errorf("SLO %q: %s", s, strings.Join(msgs, "; "))
	}
	if obj != (Objective{}) {
		spec.Objective = Resolve(&obj, nil)
	}
	if spec.Objective == nil && len(spec.Quantiles) == 0 {
		return nil, fmt.Errorf("SLO %q: no bound given (e.g. ttft=500ms,tpot=60ms or tpot_p99=100ms)", s)
	}
	return &spec, nil
}

func parseBound(val string) (time.Duration, error) {
	d, err := time.ParseDuration(val)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%q is not a positive duration such as 500ms", val)
	}
	return d, nil
}

// parseQuantileBound parses METRIC_pNN=DURATION.
func parseQuantileBound(key, val string) (QuantileBound, error) {
	metric, p, ok := strings.Cut(key, "_p")
	if !ok || !slices.Contains(quantileMetrics, metric) {
		return QuantileBound{}, fmt.Errorf("unknown key %q (want objective, ttft, tpot, e2e or METRIC_pNN with METRIC one of %s)", key, strings.Join(quantileMetrics, ", "))
	}
	q, err := parsePercentile(p)
	if err != nil {
		return QuantileBound{}, fmt.Errorf("%s: %v", key, err)
	}
	d, err := parseBound(val)
	if err != nil {
		return QuantileBound{}, err
	}
	return QuantileBound{Metric: metric, Quantile: q, Max: d}, nil
}

// parsePercentile reads the digits of p50, p99, p999 (99.9%), p9999.
func parsePercentile(p string) (float64, error) {
	if len(p) < 2 || strings.Trim(p, "0123456789") != "" || p[0] == '0' {
		return 0, fmt.Errorf("%q is not a percentile such as p50, p99 or p999", "p"+p)
	}
	q, err := strconv.ParseFloat("0."+p, 64)
	if err != nil || !(q > 0 && q < 1) {
		return 0, fmt.Errorf("%q is not a percentile such as p50, p99 or p999", "p"+p)
	}
	return q, nil
}
