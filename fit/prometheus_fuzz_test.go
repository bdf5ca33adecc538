// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package fit

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/llmprobe/llmprobe/config"
	"github.com/llmprobe/llmprobe/internal/promtest"
)

// Prometheus API answers for the seeds.
func promVector(samples ...string) string {
	return `{"status":"success","data":{"resultType":"vector","result":[` + strings.Join(samples, ",") + `]}}`
}

func promSample(labels, value string) string {
	return `{"metric":{` + labels + `},"value":[1700000000,"` + value + `"]}`
}

func promNative(labels, count, sum, buckets string) string {
	return `{"metric":{` + labels + `},"histogram":[1700000000,{"count":"` + count + `","sum":"` + sum + `","buckets":[` + buckets + `]}]}`
}

// classicSeries is a classic histogram's increase: cumulative counts at
// vLLM's prompt-token bucket bounds.
func classicSeries(labels string, les []string, cum []int) []string {
	var out []string
	for i, le := range les {
		out = append(out, promSample(labels+`,"le":"`+le+`"`, fmt.Sprint(cum[i])))
	}
	return out
}

func prometheusSeeds() [][]byte {
	les := []string{"1", "2", "5", "10", "20", "50", "100", "200", "500", "1000", "2000", "5000", "+Inf"}
	prompt := []int{0, 0, 1, 3, 10, 40, 90, 160, 260, 290, 298, 300, 300}
	output := []int{0, 2, 8, 20, 60, 150, 240, 290, 299, 300, 300, 300, 300}
	short := []string{"1", "2", "5", "10", "20", "50", "100", "200", "+Inf"} // a smaller max_model_len
	m := `"model_name":"sim-model"`
	empty := promVector()
	classic := [][]string{
		{empty, promVector(classicSeries(m, les, prompt)...), promVector(promSample(m, "54321")), empty, promVector(classicSeries(m, les, output)...), promVector(promSample(m, "12345"))},
		// Two models with different max_model_len buckets, a split label.
		{empty, promVector(append(classicSeries(m+`,"class":"a"`, short, prompt[:9]), classicSeries(`"model_name":"other","class":"b"`, les[4:], prompt[4:])...)...),
			promVector(promSample(m+`,"class":"a"`, "NaN"), promSample(`"model_name":"other","class":"b"`, "100")),
			empty, promVector(append(classicSeries(m+`,"class":"a"`, les, output), classicSeries(`"model_name":"other","class":"b"`, short, output[:9])...)...), promVector()},
		// Decreasing cumulative counts (extrapolation), a warning.
		{empty, promVector(classicSeries(m, les, []int{0, 1, 0, 5, 4, 9, 9, 9, 9, 9, 9, 9, 9})...), `{"status":"success","warnings":["shard down"],"data":{"resultType":"vector","result":[]}}`},
		// vLLM absent, SGLang present.
		{empty, empty, empty, promVector(classicSeries(m, les, prompt)...), promVector(), empty, promVector(classicSeries(m, les, output)...), promVector()},
	}
	native := [][]string{
		{promVector(promNative(m, "300", "45000", `[0,"1.0","1.1","3"],[0,"50","55","100"],[0,"100","110","150"],[0,"1000","1100","47"]`)),
			promVector(promNative(m, "300", "9000", `[0,"10","11","300"]`))},
		{promVector(promNative(m, "5", "NaN", `[3,"-Inf","+Inf","5"]`), promNative(`"model_name":"x"`, "0", "0", ``)),
			promVector(promNative(m, "1e308", "1e308", `[0,"1","2","1e308"],[0,"2","4","1e308"]`))},
	}
	var seeds [][]byte
	for _, s := range append(classic, native...) {
		seeds = append(seeds, []byte(strings.Join(s, promtest.ReplaySeparator)))
	}
	for _, s := range []string{
		`{"status":"error","errorType":"bad_data","error":"parse error at char 5"}`,
		`{"status":"success"}`, // no data: crashed the fit (nil result)
		"!500" + `{"status":"error","errorType":"internal","error":"boom"}`,
		"!503<html>unavailable</html>",
		"!405" + promtest.ReplaySeparator + promVector(),
		`{"status":"success","data":{"resultType":"matrix","result":[]}}`,
		`{"status":"success","data":{"resultType":"scalar","result":[1700000000,"1"]}}`,
		promVector(promSample(`"le":"abc"`, "1")),
		promVector(promSample(`"le":"NaN"`, "1"), promSample(`"le":"+Inf"`, "+Inf")),
		`not json`,
		``,
	} {
		seeds = append(seeds, []byte(s))
	}
	return seeds
}

// FuzzPrometheusResponse fits arbitrary Prometheus API answers: no panic,
// a bounded time per input, and a fit that succeeds is usable: positive
// counts, a valid table whose sampler builds and whose written workload
// loads, class weights that sum to 1.
func FuzzPrometheusResponse(f *testing.F) {
	for _, s := range prometheusSeeds() {
		for by := range uint8(3) {
			f.Add(s, by)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte, by uint8) {
		if len(data) > 64<<10 {
			t.Skip("large inputs only slow the fuzzer down")
		}
		opts := PromOptions{URL: "http://prometheus.test:9090", Range: time.Hour, Time: time.Unix(1700000000, 0)}
		switch by % 3 {
		case 1:
			opts.By = "class"
		case 2:
			opts.By = "model_name"
		}
		client := &http.Client{Transport: promtest.NewReplay(data, true)}
		start := time.Now()
		res, err := FromPrometheus(context.Background(), client, opts)
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("fit took %v", d)
		}
		if err != nil {
			return
		}
		checkLengths(t, "prompt", res.Prompt)
		checkLengths(t, "output", res.Output)
		if len(res.Classes) == 0 {
			t.Fatal("no classes")
		}
		total := 0.0
		for _, c := range res.Classes {
			if !(c.Weight > 0 && c.Weight <= 1+1e-9) {
				t.Fatalf("class %q weight %v", c.Name, c.Weight)
			}
			total += c.Weight
			checkLengths(t, "class "+c.Name+" prompt", c.Prompt)
			checkLengths(t, "class "+c.Name+" output", c.Output)
		}
		if math.Abs(total-1) > 1e-6 {
			t.Fatalf("class weights sum to %v", total)
		}
		var b bytes.Buffer
		if err := WriteWorkload(&b, res, WorkloadOptions{}); err != nil {
			t.Fatalf("fit succeeded but its workload cannot be written: %v", err)
		}
		if _, err := config.Load(b.Bytes(), "fitted.yml"); err != nil {
			t.Fatalf("written workload does not load: %v\n%s", err, b.String())
		}
	})
}

func checkLengths(t *testing.T, what string, l *Lengths) {
	t.Helper()
	if l == nil {
		t.Fatalf("%s: nil lengths", what)
	}
	if !(l.Count > 0) || math.IsInf(l.Count, 0) {
		t.Fatalf("%s: count %v", what, l.Count)
	}
	if len(l.Table) < 2 {
		t.Fatalf("%s: table %v", what, l.Table)
	}
	for i, pt := range l.Table {
		if !(pt.V >= 1) || math.IsInf(pt.V, 0) || !(pt.P > 0 && pt.P < 1) {
			t.Fatalf("%s: table point %+v", what, pt)
		}
		if i > 0 && (pt.P <= l.Table[i-1].P || pt.V < l.Table[i-1].V) {
			t.Fatalf("%s: table not increasing: %v", what, l.Table)
		}
	}
	s, err := l.Sampler()
	if err != nil {
		t.Fatalf("%s: sampler: %v (table %v)", what, err, l.Table)
	}
	for _, p := range []float64{0, 0.5, 0.99, 1} {
		if q := s.Quantile(p); math.IsNaN(q) || q < 1 {
			t.Fatalf("%s: sampler quantile(%v) = %v (table %v)", what, p, q, l.Table)
		}
	}
}
