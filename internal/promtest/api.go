// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package promtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

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

// ActiveTarget is one scrape target as /api/v1/targets reports it.
type ActiveTarget struct {
	ScrapePool string            `json:"scrapePool"`
	ScrapeURL  string            `json:"scrapeUrl"`
	Labels     map[string]string `json:"labels"`
	Health     string            `json:"health"`
	LastError  string            `json:"lastError"`
}

// APIError is an error response of the Prometheus HTTP API.
type APIError struct {
	StatusCode int
	Type       string
	Message    string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("prometheus API: HTTP %d: %s: %s", e.StatusCode, e.Type, e.Message)
}

type apiResponse struct {
	Status    string          `json:"status"`
	Data      json.RawMessage `json:"data"`
	ErrorType string          `json:"errorType"`
	Error     string          `json:"error"`
	Warnings  []string        `json:"warnings"`
	Infos     []string        `json:"infos"`
}

func (s *Server) call(ctx context.Context, path string, form url.Values) (*apiResponse, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+path, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("reading %s response: %w", path, err)
	}
	var r apiResponse
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("%s: HTTP %d, undecodable body %.200q: %w", path, resp.StatusCode, body, err)
	}
	if r.Status != "success" {
		return nil, &APIError{StatusCode: resp.StatusCode, Type: r.ErrorType, Message: r.Error}
	}
	return &r, nil
}

func formatTime(t time.Time) string {
	return strconv.FormatFloat(float64(t.UnixNano())/1e9, 'f', 3, 64)
}

// Query runs an instant query at ts (the server's now when ts is zero).
func (s *Server) Query(ctx context.Context, expr string, ts time.Time) (*Result, error) {
	form := url.Values{"query": {expr}}
	if !ts.IsZero() {
		form.Set("time", formatTime(ts))
	}
	r, err := s.call(ctx, "/api/v1/query", form)
	if err != nil {
		return nil, err
	}
	return decodeResult(r)
}

// QueryRange runs a range query.
func (s *Server) QueryRange(ctx context.Context, expr string, start, end time.Time, step time.Duration) (*Result, error) {
	if step <= 0 {
		return nil, errors.New("QueryRange: step must be positive")
	}
	form := url.Values{
		"query": {expr},
		"start": {formatTime(start)},
		"end":   {formatTime(end)},
		"step":  {strconv.FormatFloat(step.Seconds(), 'f', -1, 64)},
	}
	r, err := s.call(ctx, "/api/v1/query_range", form)
	if err != nil {
		return nil, err
	}
	return decodeResult(r)
}

// QueryExemplars returns the exemplars of the series the expression's
// selectors match, between start and end.
func (s *Server) QueryExemplars(ctx context.Context, expr string, start, end time.Time) ([]ExemplarSeries, error) {
	form := url.Values{"query": {expr}, "start": {formatTime(start)}, "end": {formatTime(end)}}
	r, err := s.call(ctx, "/api/v1/query_exemplars", form)
	if err != nil {
		return nil, err
	}
	var raw []struct {
		SeriesLabels map[string]string `json:"seriesLabels"`
		Exemplars    []struct {
			Labels    map[string]string `json:"labels"`
			Value     string            `json:"value"`
			Timestamp float64           `json:"timestamp"`
		} `json:"exemplars"`
	}
	if err := json.Unmarshal(r.Data, &raw); err != nil {
		return nil, fmt.Errorf("decoding exemplars: %w", err)
	}
	out := make([]ExemplarSeries, 0, len(raw))
	for _, rs := range raw {
		es := ExemplarSeries{SeriesLabels: rs.SeriesLabels}
		for _, e := range rs.Exemplars {
			v, err := strconv.ParseFloat(e.Value, 64)
			if err != nil {
				return nil, fmt.Errorf("exemplar value %q: %w", e.Value, err)
			}
			es.Exemplars = append(es.Exemplars, Exemplar{Labels: e.Labels, Value: v, Time: unixFloat(e.Timestamp)})
		}
		out = append(out, es)
	}
	return out, nil
}

// Targets returns the active scrape targets, for diagnosing scrape errors.
func (s *Server) Targets(ctx context.Context) ([]ActiveTarget, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/api/v1/targets?state=active", nil)
	if err != nil {
		return nil, err
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var r struct {
		Status string `json:"status"`
		Data   struct {
			ActiveTargets []ActiveTarget `json:"activeTargets"`
		} `json:"data"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 16<<20)).Decode(&r); err != nil {
		return nil, fmt.Errorf("decoding targets: %w", err)
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("targets: status %q", r.Status)
	}
	return r.Data.ActiveTargets, nil
}

func unixFloat(f float64) time.Time {
	sec, frac := math.Modf(f)
	return time.Unix(int64(sec), int64(math.Round(frac*1e9)))
}

func decodeResult(r *apiResponse) (*Result, error) {
	var data struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(r.Data, &data); err != nil {
		return nil, fmt.Errorf("decoding query data: %w", err)
	}
	res := &Result{Type: data.ResultType, Warnings: r.Warnings, Infos: r.Infos}
	switch data.ResultType {
	case "vector":
		var raw []struct {
			Metric    map[string]string `json:"metric"`
			Value     []json.RawMessage `json:"value"`
			Histogram []json.RawMessage `json:"histogram"`
		}
		if err := json.Unmarshal(data.Result, &raw); err != nil {
			return nil, fmt.Errorf("decoding vector: %w", err)
		}
		for _, e := range raw {
			s := Sample{Metric: e.Metric}
			var err error
			if e.Histogram != nil {
				var h Histogram
				s.Time, h, err = decodeHistogramPair(e.Histogram)
				s.Histogram = &h
			} else {
				s.Time, s.Value, err = decodeFloatPair(e.Value)
			}
			if err != nil {
				return nil, err
			}
			res.Vector = append(res.Vector, s)
		}
	case "matrix":
		var raw []struct {
			Metric     map[string]string   `json:"metric"`
			Values     [][]json.RawMessage `json:"values"`
			Histograms [][]json.RawMessage `json:"histograms"`
		}
		if err := json.Unmarshal(data.Result, &raw); err != nil {
			return nil, fmt.Errorf("decoding matrix: %w", err)
		}
		for _, e := range raw {
			ser := Series{Metric: e.Metric}
			for _, p := range e.Values {
				t, v, err := decodeFloatPair(p)
				if err != nil {
					return nil, err
				}
				ser.Values = append(ser.Values, Point{Time: t, Value: v})
			}
			for _, p := range e.Histograms {
				t, h, err := decodeHistogramPair(p)
				if err != nil {
					return nil, err
				}
				ser.Histograms = append(ser.Histograms, HistogramPoint{Time: t, Histogram: h})
			}
			res.Matrix = append(res.Matrix, ser)
		}
	case "scalar":
		var pair []json.RawMessage
		if err := json.Unmarshal(data.Result, &pair); err != nil {
			return nil, fmt.Errorf("decoding scalar: %w", err)
		}
		t, v, err := decodeFloatPair(pair)
		if err != nil {
			return nil, err
		}
		res.Scalar = &Sample{Time: t, Value: v}
	case "string":
		// Nothing a dashboard test needs; the type alone is reported.
	default:
		return nil, fmt.Errorf("unknown result type %q", data.ResultType)
	}
	return res, nil
}

func decodeTime(raw json.RawMessage) (time.Time, error) {
	var f float64
	if err := json.Unmarshal(raw, &f); err != nil {
		return time.Time{}, fmt.Errorf("decoding timestamp %s: %w", raw, err)
	}
	return unixFloat(f), nil
}

func decodeFloatPair(pair []json.RawMessage) (time.Time, float64, error) {
	if len(pair) != 2 {
		return time.Time{}, 0, fmt.Errorf("sample pair has %d elements, want 2", len(pair))
	}
	t, err := decodeTime(pair[0])
	if err != nil {
		return time.Time{}, 0, err
	}
	v, err := decodeNumber(pair[1])
	return t, v, err
}

// decodeNumber decodes the API's quoted floats, including "NaN", "+Inf".
func decodeNumber(raw json.RawMessage) (float64, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return 0, fmt.Errorf("decoding value %s: %w", raw, err)
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, fmt.Errorf("decoding value %q: %w", s, err)
	}
	return v, nil
}

func decodeHistogramPair(pair []json.RawMessage) (time.Time, Histogram, error) {
	if len(pair) != 2 {
		return time.Time{}, Histogram{}, fmt.Errorf("histogram pair has %d elements, want 2", len(pair))
	}
	t, err := decodeTime(pair[0])
	if err != nil {
		return time.Time{}, Histogram{}, err
	}
	var raw struct {
		Count   json.RawMessage     `json:"count"`
		Sum     json.RawMessage     `json:"sum"`
		Buckets [][]json.RawMessage `json:"buckets"`
	}
	if err := json.Unmarshal(pair[1], &raw); err != nil {
		return time.Time{}, Histogram{}, fmt.Errorf("decoding histogram: %w", err)
	}
	var h Histogram
	if h.Count, err = decodeNumber(raw.Count); err != nil {
		return time.Time{}, Histogram{}, err
	}
	if h.Sum, err = decodeNumber(raw.Sum); err != nil {
		return time.Time{}, Histogram{}, err
	}
	for _, b := range raw.Buckets {
		if len(b) != 4 {
			return time.Time{}, Histogram{}, fmt.Errorf("histogram bucket has %d elements, want 4", len(b))
		}
		var hb HistogramBucket
		if err := json.Unmarshal(b[0], &hb.Boundaries); err != nil {
			return time.Time{}, Histogram{}, fmt.Errorf("decoding bucket boundary rule %s: %w", b[0], err)
		}
		if hb.Lower, err = decodeNumber(b[1]); err != nil {
			return time.Time{}, Histogram{}, err
		}
		if hb.Upper, err = decodeNumber(b[2]); err != nil {
			return time.Time{}, Histogram{}, err
		}
		if hb.Count, err = decodeNumber(b[3]); err != nil {
			return time.Time{}, Histogram{}, err
		}
		h.Buckets = append(h.Buckets, hb)
	}
	return t, h, nil
}
