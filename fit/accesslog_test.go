// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package fit

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/llmprobe/llmprobe/config"
	"github.com/llmprobe/llmprobe/dist"
)

// mixedLog holds every shape the default fields cover, and every way a
// line can be unusable. Line numbers matter: see TestReadAccessLogShapes.
const mixedLog = "\xef\xbb\xbf" + `{"prompt_tokens": 10, "completion_tokens": 20, "model": "m1", "timestamp": "2026-03-02T10:00:00Z"}
{"usage": {"prompt_tokens": 11, "completion_tokens": 21, "prompt_tokens_details": {"cached_tokens": 4}}, "model": "m1", "ts": 1772445600}

{"usage": {"input_tokens": 12, "output_tokens": 22}, "model": "m2", "time": 1772445660123}
{"response": {"status_code": 200, "body": {"model": "m2", "usage": {"prompt_tokens": 13, "completion_tokens": 23}}}}
{"attributes": {"gen_ai.usage.input_tokens": 14, "gen_ai.usage.output_tokens": 24}}
{"usage": {"prompt_tokens": "15", "completion_tokens": " 25 "}, "model": "m1"}
{"usage": {"prompt_tokens": 16, "completion_tokens": 0}, "model": "m1"}
{"usage": {"prompt_tokens": 17, "completion_tokens": 27, "truncated
not json at all
[1, 2, 3]
{"status": 500, "error": {"message": "boom"}}
{"usage": null}
{"usage": {"prompt_tokens": 18}}
{"usage": {"prompt_tokens": "n/a", "completion_tokens": 28}}
{"usage": {"prompt_tokens": true, "completion_tokens": 28}}
{"usage": {"prompt_tokens": -1, "completion_tokens": 28}}
{"usage": {"prompt_tokens": 1e999, "completion_tokens": 28}}
{"usage": {"prompt_tokens": 19, "completion_tokens": 29}} trailing
`

func TestReadAccessLogShapes(t *testing.T) {
	res, err := ReadAccessLog(strings.NewReader(mixedLog), "mixed", LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s := res.Log
	if s.Lines != 18 || s.Used != 7 || s.Skipped != 11 {
		t.Errorf("lines/used/skipped = %d/%d/%d, want 18/7/11", s.Lines, s.Used, s.Skipped)
	}
	wantSkips := map[string]int{
		SkipInvalidJSON:  3, // truncated, plain text, trailing garbage
		SkipNotObject:    1,
		SkipNoPrompt:     2, // error response, usage null
		SkipNoCompletion: 1,
		SkipNotNumber:    3, // "n/a", true, 1e999
		SkipNegative:     1,
	}
	if !maps.Equal(s.Skips, wantSkips) {
		t.Errorf("skips = %v, want %v", s.Skips, wantSkips)
	}
	if !slices.Equal(s.FirstSkipped, []int{9, 10, 11, 12, 13}) {
		t.Errorf("first skipped lines = %v, want 9..13 (the blank line 3 counts as a line number)", s.FirstSkipped)
	}
	prompts := res.Prompt.samples
	if !slices.Equal(prompts, []float64{10, 11, 12, 13, 14, 15, 16}) {
		t.Errorf("prompt lengths = %v", prompts)
	}
	if outs := res.Output.samples; !slices.Equal(outs, []float64{0, 20, 21, 22, 23, 24, 25}) {
		t.Errorf("completion lengths = %v", outs)
	}
	if res.Output.Zeros != 1 {
		t.Errorf("zeros = %d, want 1", res.Output.Zeros)
	}
	if res.Model != "m1" {
		t.Errorf("model = %q, want m1 (3 of 6 named lines)", res.Model)
	}
	if s.CachedLines != 1 || s.Cached != 4 || s.CachedPrompt != 11 {
		t.Errorf("cached = %d lines, %g of %g tokens; want 1 line, 4 of 11", s.CachedLines, s.Cached, s.CachedPrompt)
	}
	wantStart := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	if !res.Start.Equal(wantStart) || !res.End.Equal(wantStart.Add(60123*time.Millisecond)) {
		t.Errorf("time range %v .. %v, want %v .. +60.123s", res.Start, res.End, wantStart)
	}
	if len(res.Classes) != 1 || res.Classes[0].Name != DefaultClassName || res.Classes[0].Weight != 1 {
		t.Errorf("classes = %+v, want one default class", res.Classes)
	}
}

func TestReadAccessLogCustomFieldsAndGroups(t *testing.T) {
	var b strings.Builder
	for i := range 100 {
		route := "/v1/chat"
		if i%4 == 0 {
			route = "/v1/embed me!"
		}
		fmt.Fprintf(&b, `{"req": {"in": %d, "out": %d}, "route": %q}`+"\n", 100+i, 1+i%7, route)
	}
	b.WriteString(`{"req": {"in": 5, "out": 5}}` + "\n") // no route
	res, err := ReadAccessLog(strings.NewReader(b.String()), "custom", LogOptions{
		PromptFields:     []string{"req.in"},
		CompletionFields: []string{"req.out"},
		By:               "route",
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Log.Used != 101 || res.Log.Skipped != 0 {
		t.Errorf("used %d skipped %d, want 101 and 0", res.Log.Used, res.Log.Skipped)
	}
	var got []string
	weights := 0.0
	for _, c := range res.Classes {
		got = append(got, fmt.Sprintf("%s=%s:%g", c.Name, c.Value, c.Prompt.Count))
		weights += c.Weight
	}
	// The lone small "none" group keeps its own class (merging one group
	// into "other" would only hide its name); names are made valid.
	want := []string{"v1/chat=/v1/chat:75", "v1/embed-me-=/v1/embed me!:25", "none=none:1"}
	if !slices.Equal(got, want) {
		t.Errorf("classes = %v, want %v", got, want)
	}
	if math.Abs(weights-1) > 1e-12 {
		t.Errorf("weights sum to %g", weights)
	}

	// The default fields do not match this log: the error says what was
	// tried and why the lines were skipped.
	_, err = ReadAccessLog(strings.NewReader(b.String()), "custom", LogOptions{})
	if err == nil || !strings.Contains(err.Error(), "no usable line (of 101: 101 no prompt token count)") ||
		!strings.Contains(err.Error(), "usage.prompt_tokens") {
		t.Errorf("err = %v", err)
	}
	if _, err := ReadAccessLog(strings.NewReader("{}"), "x", LogOptions{PromptFields: []string{"a..b"}}); err == nil {
		t.Error("empty path segment: want an error")
	}
}

func TestSplitGroupsLimits(t *testing.T) {
	sizes := map[string]float64{}
	for i := range 30 {
		sizes[fmt.Sprintf("g%02d", i)] = float64(1000 - i)
	}
	sizes["tiny"] = 3
	keep, other := splitGroups(sizes)
	if len(keep) != MaxClasses-1 || len(other) != 31-(MaxClasses-1) || keep[0] != "g00" || !slices.Contains(other, "tiny") {
		t.Errorf("keep %v other %v", keep, other)
	}
	keep, other = splitGroups(map[string]float64{"a": 100, "b": 5, "c": 4})
	if !slices.Equal(keep, []string{"a"}) || !slices.Equal(other, []string{"b", "c"}) {
		t.Errorf("small groups: keep %v other %v, want [a] and [b c]", keep, other)
	}
	keep, other = splitGroups(map[string]float64{"a": 5})
	if !slices.Equal(keep, []string{"a"}) || other != nil {
		t.Errorf("a single small group must stay: keep %v other %v", keep, other)
	}
}

func TestReadAccessLogGzipLongLinesAndEmpty(t *testing.T) {
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	zw.Write([]byte(`{"prompt_tokens": 5, "completion_tokens": 6}` + "\n" + `{"prompt_tokens": 7, "completion_tokens": 8}`))
	zw.Close()
	res, err := ReadAccessLog(&z, "gz", LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Log.Used != 2 || res.Prompt.Max != 7 {
		t.Errorf("gzip: used %d, prompt max %g", res.Log.Used, res.Prompt.Max)
	}

	old := maxLineBytes
	maxLineBytes = 200
	defer func() { maxLineBytes = old }()
	long := `{"prompt_tokens": 1, "completion_tokens": 2, "text": "` + strings.Repeat("x", 100000) + `"}`
	res, err = ReadAccessLog(strings.NewReader(long+"\n"+`{"prompt_tokens": 3, "completion_tokens": 4}`+"\n"+long), "long", LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Log.Lines != 3 || res.Log.Skips[SkipLineTooLong] != 2 || !slices.Equal(res.Log.FirstSkipped, []int{1, 3}) {
		t.Errorf("long lines: %+v", res.Log)
	}

	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.jsonl")
	os.WriteFile(empty, []byte("\n\n"), 0o644)
	if _, err := FromAccessLog(context.Background(), empty, LogOptions{}); err == nil || !strings.Contains(err.Error(), empty+": no usable line (of 0") {
		t.Errorf("empty log: err = %v, want it to name the file", err)
	}
	if _, err := FromAccessLog(context.Background(), filepath.Join(dir, "missing.jsonl"), LogOptions{}); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: err = %v", err)
	}
	if _, err := ReadAccessLog(bytes.NewReader([]byte{0x1f, 0x8b, 0, 0}), "badgz", LogOptions{}); err == nil {
		t.Error("corrupt gzip: want an error")
	}
}

// FuzzReadAccessLog: no input panics, and what is read adds up.
func FuzzReadAccessLog(f *testing.F) {
	f.Add([]byte(mixedLog))
	f.Add([]byte(`{"a.b": {"c": 1}, "a": {"b.c": 2}}`))
	f.Add([]byte{0x1f, 0x8b, 8, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		res, err := ReadAccessLog(bytes.NewReader(data), "fuzz", LogOptions{By: "model", PromptFields: []string{"a.b.c", "prompt_tokens"}})
		if err != nil {
			return
		}
		if res.Log.Used+res.Log.Skipped != res.Log.Lines || res.Log.Used == 0 {
			t.Fatalf("used %d + skipped %d != lines %d", res.Log.Used, res.Log.Skipped, res.Log.Lines)
		}
		for _, c := range res.Classes {
			if !classNameRE.MatchString(c.Name) {
				t.Fatalf("invalid class name %q", c.Name)
			}
			if _, err := c.Prompt.Sampler(); err != nil {
				t.Fatal(err)
			}
		}
		var b bytes.Buffer
		if err := WriteWorkload(&b, res, WorkloadOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := config.Load(b.Bytes(), "fuzz.yml"); err != nil {
			t.Fatalf("written workload does not load: %v\n%s", err, b.String())
		}
	})
}

const sampleLog = "../examples/logs/access.jsonl"

// TestShippedSampleLog fits the shipped sample: the skipped lines are
// exactly the broken lines the generator wrote, the numbers are those of
// a heavy-tailed mix, and the written workload loads and reproduces the
// data's quantiles.
func TestShippedSampleLog(t *testing.T) {
	res, err := FromAccessLog(context.Background(), sampleLog, LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s := res.Log
	// generate.go: 5000 lines, 12 broken: 4 truncated + 2 plain text
	// (invalid JSON), 3 error responses without usage, 3 "n/a" counts.
	if s.Lines != 5000 || s.Skipped != 12 || s.Used != 4988 {
		t.Errorf("lines/used/skipped = %d/%d/%d, want 5000/4988/12", s.Lines, s.Used, s.Skipped)
	}
	want := map[string]int{SkipInvalidJSON: 6, SkipNoPrompt: 3, SkipNotNumber: 3}
	if !maps.Equal(s.Skips, want) {
		t.Errorf("skips = %v, want %v", s.Skips, want)
	}
	data, err := os.ReadFile(sampleLog)
	if err != nil {
		t.Fatal(err)
	}
	if zeros := bytes.Count(data, []byte(`"completion_tokens":0,`)); res.Output.Zeros != zeros || zeros == 0 {
		t.Errorf("zero-length completions = %d, the log has %d", res.Output.Zeros, zeros)
	}
	p, o := res.Prompt, res.Output
	t.Logf("prompt: mean %.0f p50 %.0f p90 %.0f p99 %.0f max %.0f; output: mean %.0f p50 %.0f p99 %.0f max %.0f",
		p.Mean, p.Quantile(0.5), p.Quantile(0.9), p.Quantile(0.99), p.Max, o.Mean, o.Quantile(0.5), o.Quantile(0.99), o.Max)
	switch {
	case !(p.Quantile(0.5) > 150 && p.Quantile(0.5) < 800):
		t.Errorf("prompt p50 %g: want a few hundred tokens", p.Quantile(0.5))
	case !(p.Quantile(0.99) > 10*p.Quantile(0.5)):
		t.Errorf("prompt p99 %g is not heavy-tailed against p50 %g", p.Quantile(0.99), p.Quantile(0.5))
	case !(o.Quantile(0.99) > 4*o.Quantile(0.5)):
		t.Errorf("output p99 %g is not heavy-tailed against p50 %g", o.Quantile(0.99), o.Quantile(0.5))
	case p.Max != 30000 || o.Max != 4096 || p.Min < 1:
		t.Errorf("extremes: prompt %g..%g, output max %g", p.Min, p.Max, o.Max)
	case res.Model != "llama-3.1-8b":
		t.Errorf("model = %q", res.Model)
	case res.Start.IsZero() || res.End.Sub(res.Start) < 20*time.Hour:
		t.Errorf("time range %v .. %v, want about a day", res.Start, res.End)
	}

	for _, by := range []string{"", "model"} {
		res, err := FromAccessLog(context.Background(), sampleLog, LogOptions{By: by})
		if err != nil {
			t.Fatal(err)
		}
		checkWorkloadReproduces(t, res, "sample")

		// Result.Workload, marshalled and loaded, gives the same samplers.
		doc := map[string]any{
			"workloads": map[string]any{"w": res.Workload()},
			"targets":   []map[string]any{{"name": "t", "url": "http://127.0.0.1:1/v1", "model": "m", "workload": "w", "arrival": map[string]any{"rate": 1}}},
		}
		data, err := yaml.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := config.Load(data, "workload.yml")
		if err != nil {
			t.Fatalf("Result.Workload does not load: %v\n%s", err, data)
		}
		for i, c := range cfg.Workloads["w"].Classes {
			want, err := res.Classes[i].Output.Sampler()
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range []float64{0.001, 0.3, 0.5, 0.97, 0.9999} {
				if got, w := c.OutputTokens.Sampler().Quantile(p), want.Quantile(p); math.Abs(got-w) > 1e-9*w {
					t.Errorf("class %s p%g: loaded %g, Sampler %g", c.Name, p, got, w)
				}
			}
		}
	}
}

// checkWorkloadReproduces writes the workload, loads it with the config
// package and checks that 50k draws of every class reproduce the data's
// p50, p90 and p99 within 5%, and that the weights are the shares.
func checkWorkloadReproduces(t *testing.T, res *Result, name string) *config.Config {
	t.Helper()
	var b bytes.Buffer
	if err := WriteWorkload(&b, res, WorkloadOptions{Name: name}); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(b.Bytes(), name+".yml")
	if err != nil {
		t.Fatalf("written workload does not load: %v\n%s", err, b.String())
	}
	w := cfg.Workloads[name]
	if w == nil || len(w.Classes) != len(res.Classes) {
		t.Fatalf("loaded workload %q has %v classes, want %d", name, w, len(res.Classes))
	}
	for i, c := range res.Classes {
		lc := w.Classes[i]
		if lc.Name != c.Name || math.Abs(lc.Weight-c.Weight) > 1e-4 {
			t.Errorf("class %d: loaded %s weight %g, want %s weight %g", i, lc.Name, lc.Weight, c.Name, c.Weight)
		}
		for _, pair := range []struct {
			what string
			d    *config.Dist
			l    *Lengths
		}{{"prompt", &lc.PromptTokens, c.Prompt}, {"output", &lc.OutputTokens, c.Output}} {
			draws := drawQuantiles(pair.d.Sampler(), uint64(i)+11, 50000)
			for _, p := range []float64{0.5, 0.9, 0.99} {
				got, want := dist.Quantile(draws, p), max(1, pair.l.Quantile(p))
				if relErr(got, want) > 0.05 {
					t.Errorf("class %s %s p%g: 50k draws give %g, data %g (more than 5%% apart)", c.Name, pair.what, p*100, got, want)
				}
			}
			if lo, hi := draws[0], draws[len(draws)-1]; lo < pair.l.TableMin() || (!math.IsNaN(pair.l.TableMax()) && hi > pair.l.TableMax()) {
				t.Errorf("class %s %s: draws %g..%g outside min/max %g..%g", c.Name, pair.what, lo, hi, pair.l.TableMin(), pair.l.TableMax())
			}
		}
	}
	return cfg
}

// TestSampleLogMatchesGenerator regenerates the sample log and compares
// it with the committed file: the file is what the program writes.
func TestSampleLogMatchesGenerator(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the generator")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("go command not found: %v", err)
	}
	cmd := exec.Command(goBin, "run", "generate.go")
	cmd.Dir = "../examples/logs"
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go run generate.go: %v\n%s", err, stderr.String())
	}
	committed, err := os.ReadFile(sampleLog)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out, committed) {
		t.Errorf("examples/logs/access.jsonl differs from what generate.go writes (%d vs %d bytes): regenerate it with `go run examples/logs/generate.go > examples/logs/access.jsonl`", len(committed), len(out))
	}
	if len(committed) >= 1<<20 {
		t.Errorf("the sample log is %d bytes; keep it under 1 MiB", len(committed))
	}
}

// BenchmarkReadAccessLog reads the shipped sample (5,000 lines) with the
// default fields; it reports lines per second.
func BenchmarkReadAccessLog(b *testing.B) {
	data, err := os.ReadFile(sampleLog)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	for range b.N {
		if _, err := ReadAccessLog(bytes.NewReader(data), "bench", LogOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(5000*b.N)/b.Elapsed().Seconds(), "lines/s")
}
