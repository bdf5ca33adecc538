// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package servermetrics

import (
	"encoding/json"
	"math"
)

// Float is a figure that comes from what a server sent (its /metrics, or
// Prometheus' answers), which may be NaN or ±Inf. JSON has no such numbers:
// Float writes them as null (a null Float field reads back as NaN; a null
// *Float as nil), so that one odd sample cannot cost the whole report. The
// text and the Markdown show them as NaN, +Inf or -Inf.
type Float float64

// ptr is v as an optional figure.
func ptr(v float64) *Float { f := Float(v); return &f }

// finite reports whether f is neither NaN nor ±Inf.
func (f Float) finite() bool { return !math.IsNaN(float64(f)) && !math.IsInf(float64(f), 0) }

// MarshalJSON writes f as a JSON number, or null when it is not finite.
func (f Float) MarshalJSON() ([]byte, error) {
	if !f.finite() {
		return []byte("null"), nil
	}
	return json.Marshal(float64(f))
}

// UnmarshalJSON reads a number, or null as NaN.
func (f *Float) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*f = Float(math.NaN())
		return nil
	}
	var v float64
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*f = Float(v)
	return nil
}

// NonFinite names a value that is not finite ("NaN", "+Inf", "-Inf"), or
// is "" for a finite one.
func NonFinite(v float64) string {
	switch {
	case math.IsNaN(v):
		return "NaN"
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	}
	return ""
}
