// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

// Package slo holds service-level objectives and decides, request by
// request, whether a request was good. The daemon (its SLO counters, hence
// the burn-rate alerts) and bench (goodput per stage) both judge with Judge,
// so a request is good or bad for the same reasons everywhere.
//
// A request is good when it succeeded and met every latency bound the
// objective gives; a failed request is bad whatever its latency (errors
// spend the error budget too). Each bound is "at most": a TTFT equal to the
// bound meets it.
//
// slo imports no llmprobe package.
package slo

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/prometheus/common/model"
)

// Bound names what a bad request broke: a latency bound, or "error" for a
// request that failed. They are the values of the bound label of
// llmprobe_slo_violations_total.
type Bound string

// The bounds, in the order they are reported.
const (
	BoundTTFT  Bound = "ttft"
	BoundTPOT  Bound = "tpot"
	BoundE2E   Bound = "e2e"
	BoundError Bound = "error"
)

// Bounds lists every bound, in label order.
var Bounds = [...]Bound{BoundTTFT, BoundTPOT, BoundE2E, BoundError}

// Defaults of an objective's unset fields.
const (
	DefaultRatio  = 0.99
	DefaultWindow = model.Duration(28 * 24 * time.Hour)
	// MaxWindow bounds the error-budget period (a quarter).
	MaxWindow = model.Duration(92 * 24 * time.Hour)
	// MinWindow is the shortest error-budget period: the longest burn-rate
	// window (3d) must fit in it.
	MinWindow = model.Duration(3 * 24 * time.Hour)
)

// Objective is an SLO: the share of requests that must be good, and what a
// good request's latencies may be at most. A zero field is unset: a zero
// latency bound is not checked, a zero Ratio or Window takes its default
// (see Resolve).
type Objective struct {
	// Ratio is the share of requests that must be good, in (0, 1).
	Ratio float64 `yaml:"objective,omitempty"`
	// TTFT bounds the time to first token of every good request.
	TTFT model.Duration `yaml:"ttft,omitempty"`
	// TPOT bounds the time per output token (after the first) of every
	// good request with at least two output tokens.
	TPOT model.Duration `yaml:"tpot,omitempty"`
	// E2E bounds the whole request, from the connection to the last token.
	E2E model.Duration `yaml:"e2e,omitempty"`
	// Window is the error-budget period the dashboards show the budget
	// over.
	Window model.Duration `yaml:"window,omitempty"`
}

// Problem is one invalid field of an objective: Field is its YAML key.
type Problem struct {
	Field, Msg string
}

// Validate lists the objective's invalid fields. Unset fields are valid.
func (o *Objective) Validate() []Problem {
	var ps []Problem
	if o.Ratio != 0 && !(o.Ratio > 0 && o.Ratio < 1) {
		ps = append(ps, Problem{"objective", fmt.Sprintf("must be a share of requests in (0, 1), e.g. 0.99, got %v", o.Ratio)})
	}
	for _, b := range []struct {
		field string
		d     model.Duration
	}{{"ttft", o.TTFT}, {"tpot", o.TPOT}, {"e2e", o.E2E}} {
		if b.d < 0 {
			ps = append(ps, Problem{b.field, fmt.Sprintf("must be a positive duration, got %v", b.d)})
		}
	}
	if o.Window != 0 && (o.Window < MinWindow || o.Window > MaxWindow) {
		ps = append(ps, Problem{"window", fmt.Sprintf("must be from %v (the longest burn-rate window) to %v, got %v", MinWindow, MaxWindow, o.Window)})
	}
	return ps
}

// Resolve returns the objective that applies when base (e.g. a target's)
// is refined by over (e.g. a class's): each field over sets wins, and unset
// Ratio and Window take their defaults. Either may be nil; with both nil
// there is no objective and Resolve returns nil.
func Resolve(base, over *Objective) *Objective {
	if base == nil && over == nil {
		return nil
	}
	var o Objective
	for _, src := range []*Objective{base, over} {
		if src == nil {
			continue
		}
		if src.Ratio != 0 {
			o.Ratio = src.Ratio
		}
		if src.TTFT != 0 {
			o.TTFT = src.TTFT
		}
		if src.TPOT != 0 {
			o.TPOT = src.TPOT
		}
		if src.E2E != 0 {
			o.E2E = src.E2E
		}
		if src.Window != 0 {
			o.Window = src.Window
		}
	}
	if o.Ratio == 0 {
		o.Ratio = DefaultRatio
	}
	if o.Window == 0 {
		o.Window = DefaultWindow
	}
	return &o
}

// Request is what Judge needs of one finished request.
type Request struct {
	// Succeeded: the request ended with a well-formed, complete response.
	Succeeded bool
	TTFT      time.Duration
	// TPOT is judged only when OutputTokens >= 2 (it is undefined below).
	TPOT         time.Duration
	OutputTokens int
	E2E          time.Duration
}

// Verdict is the judgement of one request: Good, or the bounds it broke.
type Verdict struct {
	Good  bool
	Broke [len(Bounds)]bool // indexed like Bounds
}

// Broken lists the bounds the request broke, in Bounds order.
func (v Verdict) Broken() []Bound {
	var bs []Bound
	for i, b := range v.Broke {
		if b {
			bs = append(bs, Bounds[i])
		}
	}
	return bs
}

// Judge decides whether r was good under o. A failed request broke "error"
// only: its latencies describe a response that did not arrive.
func (o *Objective) Judge(r Request) Verdict {
	var v Verdict
	if !r.Succeeded {
		v.Broke[3] = true
		return v
	}
	v.Broke[0] = o.TTFT > 0 && r.TTFT > time.Duration(o.TTFT)
	v.Broke[1] = o.TPOT > 0 && r.OutputTokens >= 2 && r.TPOT > time.Duration(o.TPOT)
	v.Broke[2] = o.E2E > 0 && r.E2E > time.Duration(o.E2E)
	v.Good = !v.Broke[0] && !v.Broke[1] && !v.Broke[2]
	return v
}

// String describes the objective, e.g. "99% of requests with TTFT ≤ 500ms,
// TPOT ≤ 60ms".
func (o *Objective) String() string {
	s := fmt.Sprintf("%s%% of requests", formatPercent(o.Ratio))
	sep := " with "
	for _, b := range []struct {
		name string
		d    model.Duration
	}{{"TTFT", o.TTFT}, {"TPOT", o.TPOT}, {"E2E", o.E2E}} {
		if b.d > 0 {
			s += sep + b.name + " ≤ " + b.d.String()
			sep = ", "
		}
	}
	if sep == " with " {
		s += " succeeding"
	}
	return s
}

// formatPercent writes a share as a percentage with no more digits than it
// needs: 0.99 → 99, 0.999 → 99.9.
func formatPercent(r float64) string {
	return strconv.FormatFloat(math.Round(r*1e8)/1e6, 'f', -1, 64)
}
