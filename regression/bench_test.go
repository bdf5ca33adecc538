// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package regression

import (
	"testing"
	"time"
)

// BenchmarkDetector100rps is one series at 100 requests per second with an
// Evaluate every simulated minute (every 6000 samples), at steady state:
// ns/op is per sample, Add and its share of the evaluations. The share of
// a core one such series takes is ns/op × 100 / 1e9.
func BenchmarkDetector100rps(b *testing.B) {
	benchmarkRate(b, Latency, 100)
}

// BenchmarkDetectorErrors100rps is the same for an errors series.
func BenchmarkDetectorErrors100rps(b *testing.B) {
	benchmarkRate(b, Ratio, 100)
}

func benchmarkRate(b *testing.B, kind Kind, rate float64) {
	s := newStream(1, rate, 0)
	s.errRate = 0.01
	const n = 1 << 16
	vals := make([]float64, n)
	for i := range vals {
		if kind == Latency {
			vals[i] = s.ttft()
		} else {
			vals[i] = s.errorSample()
		}
	}
	d := NewDetector(kind, Options{})
	step := time.Duration(float64(time.Second) / rate)
	perEval := int(rate * 60)
	t := epoch
	warm := 20 * perEval
	for i := range warm {
		t = t.Add(step)
		d.Add(t, vals[i%n])
		if i%perEval == 0 {
			d.Evaluate(t)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		t = t.Add(step)
		d.Add(t, vals[i%n])
		if i%perEval == 0 {
			d.Evaluate(t)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)*rate/1e9*100, "%core")
	b.ReportMetric(float64(d.MemoryBytes()), "B/detector")
}
