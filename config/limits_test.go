// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package config

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// validBase is a minimal valid configuration whose lines are known: tests
// append to its target (line 13 on) or replace its lines.
const validBase = `workloads:
  w:
    classes:
      - name: c
        prompt_tokens: 10
        output_tokens: 10
targets:
  - name: t
    url: http://127.0.0.1:8000/v1
    model: m
    workload: w
    arrival: {rate: 1}
`

// laughs returns a "billion laughs" chain: levels anchors, each a list of
// width aliases to the previous one, so the last expands to width^levels
// values. indent prefixes every line; the last anchor is named last.
func laughs(indent string, levels, width int) (string, string) {
	var b strings.Builder
	fmt.Fprintf(&b, "%sl0: &l0 [lol]\n", indent)
	for i := 1; i <= levels; i++ {
		fmt.Fprintf(&b, "%sl%d: &l%d [%s]\n", indent, i, i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*l%d, ", i-1), width), ", "))
	}
	return b.String(), fmt.Sprintf("l%d", levels)
}

// mappingLaughs is laughs with mappings: each level a mapping of width
// keys whose values alias the previous level.
func mappingLaughs(indent string, levels, width int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%sm0: &m0 {a: lol}\n", indent)
	for i := 1; i <= levels; i++ {
		var kv []string
		for j := 0; j < width; j++ {
			kv = append(kv, fmt.Sprintf("k%d: *m%d", j, i-1))
		}
		fmt.Fprintf(&b, "%sm%d: &m%d {%s}\n", indent, i, i, strings.Join(kv, ", "))
	}
	return b.String()
}

// bombs are alias bombs in the shapes a hostile or broken file could take.
// Each expands to at least 10^9 values.
func bombs() map[string]string {
	seq, _ := laughs("", 9, 10)
	inBody, _ := laughs("      ", 9, 10)
	return map[string]string{
		// The classic: unknown top-level keys, never decoded, only walked.
		"nested sequences": seq,
		"nested mappings":  mappingLaughs("", 9, 10),
		// Under extra_body (map[string]any), which yaml decodes whatever
		// the content.
		"in a target": validBase + "    extra_body:\n" + inBody,
		"in a target's http_client_config": validBase + "    http_client_config:\n      http_headers:\n" +
			strings.ReplaceAll(mappingLaughs("        ", 9, 10), "{a: lol}", "{values: [lol]}"),
		// Typed places: every aliased element is a type error.
		"targets are aliases": func() string {
			s, last := laughs("", 8, 10)
			return s + "targets: *" + last + "\n"
		}(),
		"in a workload": "workloads:\n  w:\n    classes:\n      - name: c\n        output_tokens: 1\n        prompt_tokens:\n          dist: empirical\n          quantiles:\n" +
			mappingLaughs("            ", 9, 10),
		"classes are aliases": strings.ReplaceAll(strings.ReplaceAll(seq, "l", "c"), "[coc]", "[{name: c, prompt_tokens: 1, output_tokens: 1}]") +
			"workloads:\n  w:\n    classes: *c9\n",
		"merge keys": "b0: &b0 {a: 1}\n" + func() string {
			var b strings.Builder
			for i := 1; i <= 9; i++ {
				fmt.Fprintf(&b, "b%d: &b%d {<<: [%s]}\n", i, i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*b%d, ", i-1), 10), ", "))
			}
			return b.String()
		}() + "global: *b9\n",
		// Wide, not deep: one anchor of 1000 values aliased 10000 times is
		// 10^7 values from a 60 KB file.
		"wide": validBase + "    extra_body:\n      a: &a [" + strings.TrimSuffix(strings.Repeat("1, ", 1000), ", ") + "]\n" +
			"      b: [" + strings.TrimSuffix(strings.Repeat("*a, ", 10000), ", ") + "]\n",
		// An anchor that contains itself: infinite, not just large.
		"cycle":         "a: &a [1, *a]\n",
		"mapping cycle": validBase + "    extra_body: &e {self: *e}\n",
	}
}

// measure runs f and returns its duration and the bytes it allocated.
func measure(f func()) (time.Duration, uint64) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	f()
	d := time.Since(start)
	runtime.ReadMemStats(&after)
	return d, after.TotalAlloc - before.TotalAlloc
}

const bombMemoryBudget = 64 << 20

// TestAliasBombsRefused: a few hundred bytes of nested aliases must not cost
// gigabytes or minutes. The memory bound is the assertion; the time bound
// is a generous guard against a hang (BenchmarkAliasBomb has the number).
func TestAliasBombsRefused(t *testing.T) {
	for name, doc := range bombs() {
		t.Run(name, func(t *testing.T) {
			var err error
			d, alloc := measure(func() { _, err = Load([]byte(doc), "bomb.yml") })
			if err == nil {
				t.Fatal("loaded a bomb without error")
			}
			if alloc > bombMemoryBudget {
				t.Errorf("allocated %d MiB (budget %d MiB)", alloc>>20, bombMemoryBudget>>20)
			}
			if d > 10*time.Second {
				t.Errorf("took %v", d)
			}
			var es Errors
			if !errors.As(err, &es) || len(es) != 1 {
				t.Fatalf("want exactly one error, got %v", err)
			}
			if e := es[0]; e.Line == 0 || !strings.Contains(e.Msg, "alias *") {
				t.Errorf("want a positioned error naming the alias, got %q", e)
			}
		})
	}
}

// TestAliasBombMessages pins the wording of the refusals.
func TestAliasBombMessages(t *testing.T) {
	seq, _ := laughs("", 9, 10)
	for doc, want := range map[string]string{
		seq:               fmt.Sprintf("bomb.yml:6:25: l5[3]: alias *l4 expands the file beyond %d values (anchors may be reused, but nested aliases multiply)", MaxAliasExpansion),
		"a: &a [1, *a]\n": "bomb.yml:1:11: a[1]: alias *a is inside its own anchor (a value cannot contain itself)",
	} {
		_, err := Load([]byte(doc), "bomb.yml")
		if err == nil || err.Error() != want {
			t.Errorf("got  %v\nwant %s", err, want)
		}
	}
}

// TestDecodeAliasGuard: the decode step alone (without the alias check
// that precedes it) must not blow up either: yaml.v3 refuses documents
// whose values come mostly from aliases. It is the second line of defence.
func TestDecodeAliasGuard(t *testing.T) {
	for name, doc := range bombs() {
		t.Run(name, func(t *testing.T) {
			var err error
			d, alloc := measure(func() { _, err = decodeYAML([]byte(doc)) })
			if err == nil {
				t.Fatal("decoded a bomb without error")
			}
			if alloc > bombMemoryBudget || d > 10*time.Second {
				t.Errorf("decode alone: %v, %d MiB", d, alloc>>20)
			}
		})
	}
}

// TestAliasesWithinTheBound: sharing anchors is fine, even a lot of it,
// and stays cheap just under the bound.
func TestAliasesWithinTheBound(t *testing.T) {
	shared := `workloads:
  w:
    classes: &classes
      - name: c
        prompt_tokens: 10
        output_tokens: 10
  w2:
    classes: *classes
targets:
  - name: a
    url: http://127.0.0.1:8000/v1
    model: m
    workload: w
    arrival: &arrival {rate: 1}
    http_client_config: &hc
      basic_auth: {username: u, password: p}
  - name: b
    url: http://127.0.0.1:8001/v1
    model: m
    workload: w2
    arrival: *arrival
    http_client_config: *hc
`
	cfg, err := Load([]byte(shared), "shared.yml")
	if err != nil {
		t.Fatal(err)
	}
	if b := cfg.Target("b"); b.HTTPClientConfig.BasicAuth == nil || b.Arrival.Rate != 1 || len(cfg.Workloads["w2"].Classes) != 1 {
		t.Errorf("aliases not expanded: %+v", b)
	}

	// Just under the bound: 99 values aliased 1000 times (99 000 values).
	near := validBase + "    extra_body:\n      a: &a [" + strings.TrimSuffix(strings.Repeat("1, ", 98), ", ") + "]\n      b: [" +
		strings.TrimSuffix(strings.Repeat("*a, ", 1000), ", ") + "]\n"
	var cfgNear *Config
	_, alloc := measure(func() { cfgNear, err = Load([]byte(near), "near.yml") })
	if err != nil {
		t.Fatal(err)
	}
	if got := len(cfgNear.Targets[0].ExtraBody["b"].([]any)); got != 1000 {
		t.Errorf("b has %d values", got)
	}
	if alloc > bombMemoryBudget {
		t.Errorf("allocated %d MiB just under the bound", alloc>>20)
	}
}

func BenchmarkAliasBomb(b *testing.B) {
	doc, _ := laughs("", 9, 10)
	for b.Loop() {
		if _, err := Load([]byte(doc), "bomb.yml"); err == nil {
			b.Fatal("no error")
		}
	}
}

func TestFileSizeCap(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big.yml")
	// A valid configuration padded with a comment beyond the cap.
	data := []byte(validBase + "#" + strings.Repeat("x", MaxFileSize) + "\n")
	if err := os.WriteFile(big, data, 0o600); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("%s: larger than %d MiB, the limit for a configuration file", big, MaxFileSize>>20)
	if _, err := LoadFile(big); err == nil || err.Error() != want {
		t.Errorf("LoadFile: got %v, want %s", err, want)
	}
	if _, err := Load(data, "big.yml"); err == nil || !strings.Contains(err.Error(), "larger than 16 MiB") {
		t.Errorf("Load: got %v", err)
	}
	// Exactly at the cap is fine.
	if err := os.WriteFile(big, data[:MaxFileSize], 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadFile(big); err != nil {
		t.Errorf("a file of exactly %d bytes: %v", MaxFileSize, err)
	}
	// A file that never ends is not read at all: it is not a regular file.
	if _, err := os.Stat("/dev/zero"); err == nil {
		var err error
		d, alloc := measure(func() { _, err = LoadFile("/dev/zero") })
		if err == nil || err.Error() != "/dev/zero: not a regular file" {
			t.Errorf("/dev/zero: %v", err)
		}
		if alloc > 3*MaxFileSize || d > 10*time.Second {
			t.Errorf("/dev/zero: read %d MiB in %v", alloc>>20, d)
		}
	}
}

// flowTargets returns n targets in flow style.
func flowTargets(n int) string {
	var b strings.Builder
	b.WriteString("targets:\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "  - {name: t%d, url: \"http://127.0.0.1:8000/v1\", model: m, workload: w, arrival: {rate: 1}}\n", i)
	}
	return b.String()
}

func TestCountCaps(t *testing.T) {
	workload := "workloads:\n  w:\n    classes:\n      - {name: c, prompt_tokens: 1, output_tokens: 1}\n"
	many := func(n int, line func(i int) string) string {
		var b strings.Builder
		for i := 0; i < n; i++ {
			b.WriteString(line(i))
		}
		return b.String()
	}
	tests := []struct {
		name, doc, want string
	}{
		{"targets at the cap", workload + flowTargets(MaxTargets), ""},
		{"targets", workload + flowTargets(MaxTargets+1), "x.yml:5:1: targets: too many targets (1001; at most 1000)"},
		{"workloads", "workloads:\n" + many(MaxWorkloads+1, func(i int) string {
			return fmt.Sprintf("  w%d: {classes: [{name: c, prompt_tokens: 1, output_tokens: 1}]}\n", i)
		}) + flowTargets(1), "x.yml:1:1: workloads: too many workloads (1001; at most 1000)"},
		{"classes", "workloads:\n  w:\n    classes:\n" + many(MaxClasses+1, func(i int) string {
			return fmt.Sprintf("      - {name: c%d, prompt_tokens: 1, output_tokens: 1}\n", i)
		}) + flowTargets(1), "x.yml:3:5: workloads.w.classes: too many classes (1001; at most 1000 per workload)"},
		{"classes through an alias", "workloads:\n  w:\n    classes: &c\n" + many(MaxClasses+1, func(i int) string {
			return fmt.Sprintf("      - {name: c%d, prompt_tokens: 1, output_tokens: 1}\n", i)
		}) + "  v:\n    classes: *c\n" + flowTargets(1), "x.yml:3:5: workloads.w.classes: too many classes (1001; at most 1000 per workload)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load([]byte(tt.doc), "x.yml")
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case tt.want != "" && (err == nil || err.Error() != tt.want):
				t.Errorf("got  %v\nwant %s", err, tt.want)
			}
		})
	}
}

func TestArrivalRateMax(t *testing.T) {
	for rate, want := range map[string]string{
		"100000": "",
		"1e308":  "x.yml:12:15: targets[0].arrival.rate: must be at most 100000 requests per second, got 1e+308 (for more, split the load over several targets)",
		"100001": "x.yml:12:15: targets[0].arrival.rate: must be at most 100000 requests per second, got 100001 (for more, split the load over several targets)",
		".inf":   "x.yml:12:15: targets[0].arrival.rate: must be a positive number of requests per second, got +Inf",
	} {
		doc := strings.Replace(validBase, "{rate: 1}", "{rate: "+rate+"}", 1)
		_, err := Load([]byte(doc), "x.yml")
		switch {
		case want == "" && err != nil:
			t.Errorf("rate %s: %v", rate, err)
		case want != "" && (err == nil || err.Error() != want):
			t.Errorf("rate %s:\ngot  %v\nwant %s", rate, err, want)
		}
	}
	if MaxArrivalRate != 100000 {
		t.Errorf("MaxArrivalRate = %v", MaxArrivalRate)
	}
}

func TestSamplesFileCap(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big.txt")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	// Sparse: the size is what counts, nothing is read.
	if err := f.Truncate(MaxSamplesFileSize + 1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := os.Mkdir(filepath.Join(dir, "adir"), 0o700); err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string]string{
		"big.txt": fmt.Sprintf(`x.yml:5:9: workloads.w.classes[0].prompt_tokens: samples file %q is larger than the 16 MiB limit (summarise large logs with llmprobe fit)`, big),
		"adir":    fmt.Sprintf(`x.yml:5:9: workloads.w.classes[0].prompt_tokens: samples file %q is a directory`, filepath.Join(dir, "adir")),
	} {
		doc := strings.Replace(validBase, "prompt_tokens: 10", "prompt_tokens: {dist: empirical, file: "+file+"}", 1)
		_, err := Load([]byte(doc), filepath.Join(dir, "x.yml"))
		want = strings.Replace(want, "x.yml", filepath.Join(dir, "x.yml"), 1)
		if err == nil || err.Error() != want {
			t.Errorf("got  %v\nwant %s", err, want)
		}
	}
	if _, err := os.Stat("/dev/zero"); err == nil {
		doc := strings.Replace(validBase, "prompt_tokens: 10", "prompt_tokens: {dist: empirical, file: /dev/zero}", 1)
		_, err := Load([]byte(doc), "x.yml")
		if want := `x.yml:5:9: workloads.w.classes[0].prompt_tokens: samples file "/dev/zero" is not a regular file`; err == nil || err.Error() != want {
			t.Errorf("got  %v\nwant %s", err, want)
		}
	}
}

// TestSamplesCountCap: a samples file may hold at most MaxSamples values
// (a 28 MB file of 5 million took seconds and hundreds of MiB at every
// load); the error names the file and the line where the count passed,
// and reading stops there.
func TestSamplesCountCap(t *testing.T) {
	dir := t.TempDir()
	for name, tc := range map[string]struct {
		line  string
		field string
	}{
		"numbers":    {line: "123\n"},
		"JSON lines": {line: `{"usage":{"prompt_tokens":123}}` + "\n", field: ", field: usage.prompt_tokens"},
	} {
		t.Run(name, func(t *testing.T) {
			file := filepath.Join(dir, strings.ReplaceAll(name, " ", "_"))
			if err := os.WriteFile(file, []byte("# comment\n"+strings.Repeat(tc.line, MaxSamples+1)), 0o600); err != nil {
				t.Fatal(err)
			}
			doc := strings.Replace(validBase, "prompt_tokens: 10", "prompt_tokens: {dist: empirical, file: "+file+tc.field+"}", 1)
			_, err := Load([]byte(doc), "x.yml")
			want := fmt.Sprintf(`x.yml:5:9: workloads.w.classes[0].prompt_tokens: %s: line %d: more than %d samples (summarise large logs with llmprobe fit)`, file, MaxSamples+2, MaxSamples)
			if err == nil || err.Error() != want {
				t.Errorf("got  %v\nwant %s", err, want)
			}
			// Exactly MaxSamples load.
			if err := os.WriteFile(file, []byte(strings.Repeat(tc.line, MaxSamples)), 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := Load([]byte(doc), "x.yml"); err != nil {
				t.Errorf("%d samples: %v", MaxSamples, err)
			}
		})
	}
}

// TestDenseFileRefusedBeforeParsing: a file dense with values is refused
// before yaml spends ~200 bytes on each (a 16 MiB "[1,1,…]" took 1.9 GB),
// while a large but real configuration in block style still loads.
func TestDenseFileRefusedBeforeParsing(t *testing.T) {
	for name, data := range map[string][]byte{
		"flow 1 MiB":  append(append([]byte("x: ["), bytes.Repeat([]byte("1,"), 1<<19)...), ']'),
		"flow 16 MiB": append(append([]byte("x: ["), bytes.Repeat([]byte("1,"), 8<<20-8)...), ']'),
		"block":       append([]byte("x:\n"), bytes.Repeat([]byte("- 1\n"), 1<<20)...),
		"mapping":     append([]byte("x:\n"), bytes.Repeat([]byte(" a: 1\n"), 1<<20)...),
	} {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		_, err := Load(data, "dense.yml")
		runtime.ReadMemStats(&after)
		if err == nil || !strings.Contains(err.Error(), "more than 100000 values") {
			t.Errorf("%s: %v", name, err)
		}
		if grew := after.TotalAlloc - before.TotalAlloc; grew > 64<<20 {
			t.Errorf("%s: %d MiB allocated before refusing", name, grew>>20)
		}
	}
	var b strings.Builder
	b.WriteString("workloads:\n  w:\n    classes:\n      - name: c # a comment: with - indicators, [brackets]\n        prompt_tokens: {dist: lognormal, median: 120, p99: 2048}\n        output_tokens: 64\ntargets:\n")
	for i := range MaxTargets {
		fmt.Fprintf(&b, "  - name: t%d\n    url: https://llm-%d.internal:8443/v1\n    model: meta-llama/Llama-3.1-8B-Instruct\n    workload: w\n    arrival: {process: poisson, rate: 0.5}\n    extra_body: {ignore_eos: true, note: \"a, b: [c] - d\"}\n", i, i)
	}
	if _, err := Load([]byte(b.String()), "big.yml"); err != nil {
		t.Errorf("a real configuration of %d targets (%d bytes): %v", MaxTargets, b.Len(), err)
	}
}
