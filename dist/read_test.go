// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package dist

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestReadSamples(t *testing.T) {
	cases := []struct {
		name, in, field string
		want            []float64
		err             string
	}{
		{
			name: "numbers with comments, blanks, CRLF and a BOM",
			in:   "\xef\xbb\xbf120\r\n# prompt lengths\r\n\r\n  2048  \r\n7.5\n1e3\n",
			want: []float64{120, 2048, 7.5, 1000},
		},
		{name: "no trailing newline", in: "1\n2", want: []float64{1, 2}},
		{name: "bad number names its line", in: "1\n# c\nabc\n", err: `line 3: "abc" is not a number`},
		{name: "long bad line is shortened", in: strings.Repeat("x", 100), err: `line 1: "` + strings.Repeat("x", 40) + `..." is not a number`},
		{name: "infinite", in: "1\ninf\n", err: "line 2: +Inf is not a finite number"},
		{name: "nan", in: "NaN\n", err: "line 1: NaN is not a finite number"},
		{name: "empty", in: "\n# nothing\n", err: "no samples"},
		{
			name:  "jsonl dotted field",
			field: "usage.prompt_tokens",
			in: `{"id":"a","usage":{"prompt_tokens":120,"completion_tokens":5}}
# a comment
{"id":"b","usage":{"prompt_tokens":2048}}

{"id":"c","usage":null}
{"id":"d","error":"timeout"}
{"id":"e","usage":{"prompt_tokens":null}}
{"id":"f","usage":{"prompt_tokens":"300"}}
`,
			want: []float64{120, 2048, 300},
		},
		{name: "top-level field", field: "n", in: `{"n": 3.5}` + "\n" + `{"n": 4}`, want: []float64{3.5, 4}},
		{
			name: "invalid JSON names its line and does not quote it", field: "usage.prompt_tokens",
			in:  `{"usage":{"prompt_tokens":1}}` + "\n" + `{"messages":"SECRET PROMPT TEXT", oops}`,
			err: "line 2: invalid JSON at byte 35",
		},
		{name: "not an object", field: "a", in: "[1,2]\n", err: "line 1: not a JSON object (found a JSON array)"},
		{name: "intermediate not an object", field: "usage.prompt_tokens", in: `{"usage":5}`, err: "line 1: usage is not a JSON object"},
		{name: "value not a number", field: "usage.prompt_tokens", in: `{"usage":{"prompt_tokens":[1]}}`, err: "line 1: usage.prompt_tokens is not a number"},
		{name: "string not a number", field: "n", in: `{"n":"many"}`, err: `line 1: n: "many" is not a number`},
		{name: "field never found", field: "usage.prompt_tokens", in: `{"a":1}` + "\n" + `{"b":2}`, err: `field "usage.prompt_tokens" found on none of 2 lines`},
		{name: "bad field path", field: "usage..x", in: `{}`, err: `invalid field path "usage..x": empty key`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ReadSamples(strings.NewReader(c.in), c.field)
			if c.err != "" {
				if err == nil || err.Error() != c.err {
					t.Fatalf("error %v, want %q", err, c.err)
				}
				if strings.Contains(err.Error(), "SECRET") {
					t.Fatalf("error quotes the input line: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, c.want) {
				t.Fatalf("got %v, want %v", got, c.want)
			}
		})
	}
}

func TestReadSamplesLongLines(t *testing.T) {
	// A JSONL line carrying a long prompt is fine...
	long := `{"prompt":"` + strings.Repeat("word ", 200_000) + `","usage":{"prompt_tokens":200000}}`
	got, err := ReadSamples(strings.NewReader(long+"\n"), "usage.prompt_tokens")
	if err != nil || len(got) != 1 || got[0] != 200000 {
		t.Fatalf("got %v, %v", got, err)
	}
	// ...an unbounded one is refused with its line number.
	defer func(n int) { maxLineBytes = n }(maxLineBytes)
	maxLineBytes = 1 << 20
	huge := "1\n" + strings.Repeat("9", maxLineBytes+1)
	if _, err := ReadSamples(strings.NewReader(huge), ""); err == nil || err.Error() != "line 2: longer than 1 MiB" {
		t.Fatalf("error %v", err)
	}
}

func TestReadSamplesFile(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "lengths.txt")
	if err := os.WriteFile(good, []byte("# lengths\n10\n20\n30\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := ReadSamplesFile(good, "")
	if err != nil || !slices.Equal(got, []float64{10, 20, 30}) {
		t.Fatalf("got %v, %v", got, err)
	}
	bad := filepath.Join(dir, "bad.txt")
	if err := os.WriteFile(bad, []byte("10\n20x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadSamplesFile(bad, ""); err == nil || err.Error() != bad+`: line 2: "20x" is not a number` {
		t.Fatalf("error %v", err)
	}
	missing := filepath.Join(dir, "missing.txt")
	if _, err := ReadSamplesFile(missing, ""); err == nil || !strings.Contains(err.Error(), missing) {
		t.Fatalf("error %v should name %s", err, missing)
	}
	// End to end: a file feeds FromSamples.
	s, err := FromSamples(got)
	if err != nil || s.Quantile(0.5) != 20 {
		t.Fatalf("FromSamples: %v, median %v", err, s.Quantile(0.5))
	}
}

func FuzzReadSamples(f *testing.F) {
	f.Add("1\n2\n# x\n", "")
	f.Add(`{"a":{"b":3}}`+"\n"+`{"a":null}`, "a.b")
	f.Add(`{"a":"4"}`, "a")
	f.Add("\xef\xbb\xbf\r\n5", "")
	f.Fuzz(func(t *testing.T, in, field string) {
		vs, err := ReadSamples(strings.NewReader(in), field)
		if err != nil {
			return
		}
		if len(vs) == 0 {
			t.Fatal("no error and no samples")
		}
		for _, v := range vs {
			if !finite(v) {
				t.Fatalf("non-finite sample %v", v)
			}
		}
		if _, err := FromSamples(vs); err != nil {
			t.Fatalf("FromSamples rejected ReadSamples output: %v", err)
		}
	})
}

func FuzzEmpirical(f *testing.F) {
	f.Add(0.5, 1800.0, 0.9, 4000.0, 0.99, 7000.0)
	f.Add(0.0, 1.0, 0.5, 1.0, 1.0, 1.0)
	f.Add(1e-300, 1e-300, 0.5, 1e300, 1-1e-16, 1e308)
	f.Add(0.5, 5.0, 0.5, 6.0, 0.7, 7.0)
	f.Fuzz(func(t *testing.T, p1, v1, p2, v2, p3, v3 float64) {
		s, err := Empirical([]Point{{p1, v1}, {p2, v2}, {p3, v3}})
		if err != nil {
			return
		}
		if math.IsNaN(s.Mean()) || s.Mean() < 0 {
			t.Fatalf("%s: Mean %v", s, s.Mean())
		}
		prev := 0.0
		for p := 0.0; p <= 1; p += 1.0 / 64 {
			q := s.Quantile(p)
			if math.IsNaN(q) || q < prev {
				t.Fatalf("%s: Quantile(%v) = %v after %v", s, p, q, prev)
			}
			prev = q
		}
		c := Clamp(s, 1, 1e6)
		if m := c.Mean(); math.IsNaN(m) || m < 1 || m > 1e6 {
			t.Fatalf("%s: Mean %v", c, m)
		}
	})
}
