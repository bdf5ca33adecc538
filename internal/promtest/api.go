// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package promtest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
)

// The queries go through client_golang's Prometheus HTTP API client
// (api/prometheus/v1); this file only turns its model values into the
// plain shapes the tests compare (string label maps, float values).

// Sample is one element of an instant vector, or a scalar. Exactly one of
// Value and Histogram is meaningful: Histogram is non-nil for a native
// histogram sample.
type Sample struct {
	Metric    map[string]string
	Time      time.Time
	Value     float64
	Histogram *Histogram
}

func (s Sample) valueString() string {
	if s.Histogram != nil {
		return fmt.Sprintf("{count:%g sum:%g}", s.Histogram.Count, s.Histogram.Sum)
	}
	return strconv.FormatFloat(s.Value, 'g', -1, 64)
}

// Histogram is a native histogram sample as the HTTP API returns it.
type Histogram struct {
	Count   float64
	Sum     float64
	Buckets []HistogramBucket
}

// HistogramBucket is one bucket of a native histogram: its boundaries, the
// API's boundary rule (0: open left, 1: open right, 2: open both, 3: closed
// both) and its count.
type HistogramBucket struct {
	Boundaries int
	Lower      float64
	Upper      float64
	Count      float64
}

// Point is one float sample of a range-vector series.
type Point struct {
	Time  time.Time
	Value float64
}

// HistogramPoint is one native histogram sample of a range-vector series.
type HistogramPoint struct {
	Time      time.Time
	Histogram Histogram
}

// Series is one series of a range query.
type Series struct {
	Metric     map[string]string
	Values     []Point
	Histograms []HistogramPoint
}

// Result is the data of a query or range-query response.
type Result struct {
	// Type is vector, matrix, scalar or string.
	Type     string
	Vector   []Sample
	Matrix   []Series
	Scalar   *Sample
	Warnings []string
	Infos    []string
}

// Empty reports whether the result holds no sample (a scalar is never empty).
func (r *Result) Empty() bool {
	if r == nil {
		return true
	}
	return len(r.Vector) == 0 && len(r.Matrix) == 0 && r.Scalar == nil
}

// HasFinite reports whether the result holds at least one sample that is a
// native histogram or a float other than NaN and ±Inf: "the panel shows
// something" rather than "the query matched series".
func (r *Result) HasFinite() bool {
	if r == nil {
		return false
	}
	finite := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
	for _, s := range r.Vector {
		if s.Histogram != nil || finite(s.Value) {
			return true
		}
	}
	for _, s := range r.Matrix {
		if len(s.Histograms) > 0 {
			return true
		}
		for _, p := range s.Values {
			if finite(p.Value) {
				return true
			}
		}
	}
	return r.Scalar != nil && finite(r.Scalar.Value)
}

// Exemplar is one exemplar returned by /api/v1/query_exemplars.
type Exemplar struct {
	Labels map[string]string
	Value  float64
	Time   time.Time
}

// ExemplarSeries groups the exemplars of one series.
type ExemplarSeries struct {
	SeriesLabels map[string]string
	Exemplars    []Exemplar
}

// APIError is an error answer of the Prometheus HTTP API (client_golang's
// *v1.Error, whose Type is e.g. bad_data for HTTP 400).
type APIError = v1.Error

// Query runs an instant query at ts (the server's now when ts is zero).
func (s *Server) Query(ctx context.Context, expr string, ts time.Time) (*Result, error) {
	v, warnings, infos, err := s.api.Query(ctx, expr, ts)
	if err != nil {
		return nil, err
	}
	return convertValue(v, warnings, infos)
}

// QueryRange runs a range query.
func (s *Server) QueryRange(ctx context.Context, expr string, start, end time.Time, step time.Duration) (*Result, error) {
	if step <= 0 {
		return nil, errors.New("QueryRange: step must be positive")
	}
	v, warnings, infos, err := s.api.QueryRange(ctx, expr, v1.Range{Start: start, End: end, Step: step})
	if err != nil {
		return nil, err
	}
	return convertValue(v, warnings, infos)
}

// QueryExemplars returns the exemplars of the series the expression's
// selectors match, between start and end.
func (s *Server) QueryExemplars(ctx context.Context, expr string, start, end time.Time) ([]ExemplarSeries, error) {
	raw, err := s.api.QueryExemplars(ctx, expr, start, end)
	if err != nil {
		return nil, err
	}
	out := make([]ExemplarSeries, 0, len(raw))
	for _, rs := range raw {
		es := ExemplarSeries{SeriesLabels: labelMap(rs.SeriesLabels)}
		for _, e := range rs.Exemplars {
			es.Exemplars = append(es.Exemplars, Exemplar{Labels: labelMap(e.Labels), Value: float64(e.Value), Time: e.Timestamp.Time()})
		}
		out = append(out, es)
	}
	return out, nil
}

// Targets returns the active scrape targets, for diagnosing scrape errors.
func (s *Server) Targets(ctx context.Context) ([]v1.ActiveTarget, error) {
	r, err := s.api.Targets(ctx)
	if err != nil {
		return nil, err
	}
	return r.Active, nil
}

func labelMap[L ~map[model.LabelName]model.LabelValue](ls L) map[string]string {
	m := make(map[string]string, len(ls))
	for k, v := range ls {
		m[string(k)] = string(v)
	}
	return m
}

func convertHistogram(h *model.SampleHistogram) Histogram {
	out := Histogram{Count: float64(h.Count), Sum: float64(h.Sum)}
	for _, b := range h.Buckets {
		out.Buckets = append(out.Buckets, HistogramBucket{
			Boundaries: int(b.Boundaries), Lower: float64(b.Lower), Upper: float64(b.Upper), Count: float64(b.Count),
		})
	}
	return out
}

func convertValue(v model.Value, warnings v1.Warnings, infos v1.Infos) (*Result, error) {
	res := &Result{Type: v.Type().String(), Warnings: warnings, Infos: infos}
	switch v := v.(type) {
	case model.Vector:
		for _, e := range v {
			s := Sample{Metric: labelMap(e.Metric), Time: e.Timestamp.Time(), Value: float64(e.Value)}
			if e.Histogram != nil {
				h := convertHistogram(e.Histogram)
				s.Histogram, s.Value = &h, 0
			}
			res.Vector = append(res.Vector, s)
		}
	case model.Matrix:
		for _, e := range v {
			ser := Series{Metric: labelMap(e.Metric)}
			for _, p := range e.Values {
				ser.Values = append(ser.Values, Point{Time: p.Timestamp.Time(), Value: float64(p.Value)})
			}
			for _, p := range e.Histograms {
				ser.Histograms = append(ser.Histograms, HistogramPoint{Time: p.Timestamp.Time(), Histogram: convertHistogram(p.Histogram)})
			}
			res.Matrix = append(res.Matrix, ser)
		}
	case *model.Scalar:
		res.Scalar = &Sample{Time: v.Timestamp.Time(), Value: float64(v.Value)}
	case *model.String:
		// Nothing a dashboard test needs; the type alone is reported.
	default:
		return nil, fmt.Errorf("unknown result type %q", v.Type())
	}
	return res, nil
}
