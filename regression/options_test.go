// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package regression

import (
	"strings"
	"testing"
	"time"
)

func TestOptionsDefaults(t *testing.T) {
	o := Options{}.WithDefaults()
	want := Options{MedianEffect: 0.20, TailEffect: 0.50, ErrorEffect: 0.02, MinSamples: 20, MinBaseline: 100, AcceptAfter: 24 * time.Hour, MedianLevel: 1e-8, TailLevel: 1e-7, ErrorLevel: 1e-8}
	if o != want {
		t.Errorf("defaults %+v, want %+v", o, want)
	}
	if err := o.Validate(); err != nil {
		t.Error(err)
	}
	set := Options{MedianEffect: 0.1, MinSamples: 50}.WithDefaults()
	if set.MedianEffect != 0.1 || set.MinSamples != 50 || set.TailEffect != 0.5 {
		t.Errorf("set fields were overridden: %+v", set)
	}
}

// TestOptionsValidate: each bad field is named in the error, all at once.
func TestOptionsValidate(t *testing.T) {
	for _, c := range []struct {
		o    Options
		want []string
	}{
		{Options{MedianEffect: -0.1}, []string{"MedianEffect must be between 0 and 100, got -0.1"}},
		{Options{TailEffect: 1e9}, []string{"TailEffect"}},
		{Options{ErrorEffect: 2}, []string{"ErrorEffect must be between 0 and 1, got 2"}},
		{Options{MinSamples: 3}, []string{"MinSamples must be between 5 and 2048, got 3"}},
		{Options{MinBaseline: 5000}, []string{"MinBaseline must be between 20 and 2048, got 5000"}},
		{Options{AcceptAfter: time.Second}, []string{"AcceptAfter must be at least 1m, got 1s"}},
		{Options{TailLevel: 0.5}, []string{"TailLevel must be above 0 and below the exit level 0.001, got 0.5"}},
		{Options{MedianLevel: 1}, []string{"MedianLevel must be above 0"}},
		{Options{MinSamples: -1, ErrorLevel: -1}, []string{"MinSamples", "ErrorLevel"}},
	} {
		err := c.o.WithDefaults().Validate()
		if err == nil {
			t.Errorf("%+v: no error", c.o)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%+v: %q does not say %q", c.o, err, w)
			}
		}
	}
}

func TestNewDetectorPanicsOnBadOptions(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(error).Error(), "MinSamples") {
			t.Errorf("recovered %v", r)
		}
	}()
	NewDetector(Latency, Options{MinSamples: 1})
}
