// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package report

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// A stage's Serving figures are written beside its other keys, under
// vllm bench serve's names and in its order (vllm/benchmarks/serve.py,
// benchmark()'s result), so that what reads vLLM's result files reads a
// stage of ours: duration, completed, failed, total_input_tokens,
// total_output_tokens, request_throughput, request_goodput (null without
// an SLO), output_throughput, total_token_throughput,
// max_output_tokens_per_s, max_concurrent_requests, then for each of
// ttft, tpot, itl and e2el mean_, median_, std_ and p{P}_ (P as vLLM
// writes it: 99, 99.9) with the suffix _ms.

// servingMetrics are the latencies of Serving by their vLLM names.
var servingMetrics = []string{"ttft", "tpot", "itl", "e2el"}

func (s *Serving) latencies() []*Latency { return []*Latency{&s.TTFT, &s.TPOT, &s.ITL, &s.E2EL} }

// appendJSON appends s's keys and values, each preceded by a comma, to b.
func (s *Serving) appendJSON(b []byte) ([]byte, error) {
	put := func(k string, v any) error {
		if f, ok := v.(float64); ok && (math.IsNaN(f) || math.IsInf(f, 0)) {
			return fmt.Errorf("%s is %v", k, f)
		}
		enc, err := json.Marshal(v)
		if err != nil {
			return err
		}
		b = append(b, ',')
		b = strconv.AppendQuote(b, k)
		b = append(b, ':')
		b = append(b, enc...)
		return nil
	}
	var goodput any // null without an SLO
	if s.RequestGoodput != nil {
		goodput = *s.RequestGoodput
	}
	for _, kv := range []struct {
		k string
		v any
	}{
		{"duration", s.Duration}, {"completed", s.Completed}, {"failed", s.Failed},
		{"total_input_tokens", s.TotalInputTokens}, {"total_output_tokens", s.TotalOutputTokens},
		{"request_throughput", s.RequestThroughput}, {"request_goodput", goodput},
		{"output_throughput", s.OutputThroughput}, {"total_token_throughput", s.TotalTokenThroughput},
		{"max_output_tokens_per_s", s.MaxOutputTokensPerS}, {"max_concurrent_requests", s.MaxConcurrentRequests},
	} {
		if err := put(kv.k, kv.v); err != nil {
			return nil, err
		}
	}
	for i, l := range s.latencies() {
		m := servingMetrics[i]
		if err := put("mean_"+m+"_ms", l.Mean); err != nil {
			return nil, err
		}
		if err := put("median_"+m+"_ms", l.Median); err != nil {
			return nil, err
		}
		if err := put("std_"+m+"_ms", l.Std); err != nil {
			return nil, err
		}
		for _, p := range l.Percentiles {
			if err := put("p"+percentWord(p.P)+"_"+m+"_ms", p.Value); err != nil {
				return nil, err
			}
		}
	}
	return b, nil
}

// percentWord is p as vLLM names it: str(int(p)) when whole, else str(p).
func percentWord(p float64) string { return strconv.FormatFloat(p, 'g', -1, 64) }

// servingFromJSON reads the Serving figures of a stage's keys; nil when
// the stage has none (a report written before they were kept).
func servingFromJSON(m map[string]json.RawMessage) (*Serving, error) {
	if _, ok := m["completed"]; !ok {
		return nil, nil
	}
	s := &Serving{}
	var err error
	get := func(k string, v any) {
		if raw, ok := m[k]; ok && err == nil {
			if e := json.Unmarshal(raw, v); e != nil {
				err = fmt.Errorf("%s: %v", k, e)
			}
		}
	}
	get("duration", &s.Duration)
	get("completed", &s.Completed)
	get("failed", &s.Failed)
	get("total_input_tokens", &s.TotalInputTokens)
	get("total_output_tokens", &s.TotalOutputTokens)
	get("request_throughput", &s.RequestThroughput)
	get("request_goodput", &s.RequestGoodput)
	get("output_throughput", &s.OutputThroughput)
	get("total_token_throughput", &s.TotalTokenThroughput)
	get("max_output_tokens_per_s", &s.MaxOutputTokensPerS)
	get("max_concurrent_requests", &s.MaxConcurrentRequests)
	for i, l := range s.latencies() {
		metric := servingMetrics[i]
		get("mean_"+metric+"_ms", &l.Mean)
		get("median_"+metric+"_ms", &l.Median)
		get("std_"+metric+"_ms", &l.Std)
		suffix := "_" + metric + "_ms"
		for k := range m {
			word, ok := strings.CutSuffix(k, suffix)
			if !ok || !strings.HasPrefix(word, "p") {
				continue
			}
			p, e := strconv.ParseFloat(word[1:], 64)
			if e != nil {
				continue
			}
			pv := Percentile{P: p}
			get(k, &pv.Value)
			l.Percentiles = append(l.Percentiles, pv)
		}
		slices.SortFunc(l.Percentiles, func(a, b Percentile) int { return cmp.Compare(a.P, b.P) })
	}
	return s, err
}

// marshalWithServing is v's JSON object (v without methods), then the
// keys of fig, if any (above).
func marshalWithServing(v any, fig *Serving) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil || fig == nil {
		return b, err
	}
	if b, err = fig.appendJSON(bytes.TrimSuffix(b, []byte("}"))); err != nil {
		return nil, err
	}
	return append(b, '}'), nil
}

// unmarshalWithServing reads into v (without methods) what
// marshalWithServing wrote, and returns its figures (nil in a report
// written before they were kept).
func unmarshalWithServing(b []byte, v any) (*Serving, error) {
	if err := json.Unmarshal(b, v); err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	return servingFromJSON(m)
}

// stageJSON and closedJSON are StageReport and ClosedLoopStage without
// their methods, for their own JSON.
type (
	stageJSON  StageReport
	closedJSON ClosedLoopStage
)

// MarshalJSON writes the stage's keys, then its Serving figures under
// vLLM's names (above).
func (s *StageReport) MarshalJSON() ([]byte, error) {
	b, err := marshalWithServing((*stageJSON)(s), s.Serving)
	if err != nil {
		return nil, fmt.Errorf("stage %d %s: %w", s.Stage, s.Target, err)
	}
	return b, nil
}

// UnmarshalJSON reads what MarshalJSON wrote, and the stages of reports
// written before the Serving figures were kept (Serving nil).
func (s *StageReport) UnmarshalJSON(b []byte) (err error) {
	s.Serving, err = unmarshalWithServing(b, (*stageJSON)(s))
	return err
}

// MarshalJSON writes the level's keys, then its Serving figures under
// vLLM's names (above).
func (l *ClosedLoopStage) MarshalJSON() ([]byte, error) {
	b, err := marshalWithServing((*closedJSON)(l), l.Serving)
	if err != nil {
		return nil, fmt.Errorf("closed-loop level %d %s: %w", l.Level, l.Target, err)
	}
	return b, nil
}

// UnmarshalJSON reads what MarshalJSON wrote, and the levels of reports
// written before the Serving figures were kept (Serving nil).
func (l *ClosedLoopStage) UnmarshalJSON(b []byte) (err error) {
	l.Serving, err = unmarshalWithServing(b, (*closedJSON)(l))
	return err
}
