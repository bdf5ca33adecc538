// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package scrub

import (
	"strings"
	"testing"
)

func TestURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://127.0.0.1:8000/v1":                                        "http://127.0.0.1:8000/v1",
		"https://user:SECRET@prom.example:9090/api?token=SECRET&x=1#frag": "https://xxxxx@prom.example:9090/api?token=xxxxx&x=xxxxx",
		"http://SECRET@host/metrics":                                      "http://xxxxx@host/metrics", // a token as the user name
		"http://host/metrics?SECRET":                                      "http://host/metrics?xxxxx", // a key on its own
		"http://host/p?a=&b=SECRET&&c":                                    "http://host/p?a=&b=xxxxx&&xxxxx",
		"http://host/p?":                                                  "http://host/p?",
		"http://a:b@c@host:1/p@q?k=v":                                     "http://xxxxx@host:1/p@q?k=xxxxx",  // the last @ before the path ends the userinfo
		"http://user:pa%zz@host/?api_key=SECRET":                          "http://xxxxx@host/?api_key=xxxxx", // does not parse
		"user:SECRET@host:8080/path?t=SECRET":                             "xxxxx@host:8080/path?t=xxxxx",
		"localhost:4317":                                                  "localhost:4317",
		"":                                                                "",
	} {
		if got := URL(in); got != want {
			t.Errorf("URL(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestURLs(t *testing.T) {
	for in, want := range map[string]string{
		`Post "http://user:pw@host:8000/v1/chat/completions?key=s3cret": EOF`: `Post "http://xxxxx@host:8000/v1/chat/completions?key=xxxxx": EOF`,
		"proxyconnect tcp: https://a:b@proxy:3128 refused":                    "proxyconnect tcp: https://xxxxx@proxy:3128 refused",
		"no url here":                                      "no url here",
		"x https://h/p#frag?x y":                           "x https://h/p y",
		"two http://a@b/c?d and ws://e@":                   "two http://xxxxx@b/c?xxxxx and ws://xxxxx@",
		"url: http://u:p@h/x?t=1\nnext: https://h2/?k=v\n": "url: http://xxxxx@h/x?t=xxxxx\nnext: https://h2/?k=xxxxx\n",
	} {
		if got := URLs(in); got != want {
			t.Errorf("URLs(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestChars(t *testing.T) {
	for in, want := range map[string]string{
		"vllm/0.8.5":                        "vllm/0.8.5",
		"héllo wörld ✓":                     "héllo wörld ✓",
		"a\x1b[31mred\x1b[0m":               "a [31mred [0m",
		"gpt\u202Egnp.exe":                  "gptgnp.exe",
		"x\u2066y\u2069z\u200e\u200f\u061c": "xyz",
		"line1\nline2\r\tend\x00\x7f":       "line1 line2  end  ",
		"c1\u0085\u009bx":                   "c1  x",
		"sep\u2028\u2029":                   "sep  ",
		"bad\xffutf8\xc3":                   "bad utf8 ",
		"\uFFFD stays":                      "\uFFFD stays",
	} {
		got := Chars(in)
		if got != want {
			t.Errorf("Chars(%q) = %q, want %q", in, got, want)
		}
		if strings.ContainsFunc(got, Unsafe) {
			t.Errorf("Chars(%q) = %q still holds an unsafe character", in, got)
		}
	}
	clean := "uvicorn fp_0123456789 model-7b"
	if n := testing.AllocsPerRun(100, func() { _ = Chars(clean) }); n != 0 {
		t.Errorf("Chars of a clean string allocates %.0f times", n)
	}
}

func FuzzChars(f *testing.F) {
	for _, s := range []string{"a\x1b[0m", "\u202Ex", "\xff\xfe", "ok"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := Chars(s)
		if strings.ContainsFunc(got, Unsafe) || !utfValid(got) {
			t.Fatalf("Chars(%q) = %q", s, got)
		}
		if Chars(got) != got {
			t.Fatalf("Chars is not idempotent on %q", s)
		}
	})
}

func utfValid(s string) bool { return strings.ToValidUTF8(s, "") == s }

// BenchmarkChars is what the wire client adds to every response: its id
// and model, clean (the common case, no allocation) and with an
// override.
func BenchmarkChars(b *testing.B) {
	for name, s := range map[string]string{
		"clean":    "chatcmpl-9f3c1e2d4b5a69788796a1b2 meta-llama/Llama-3.1-8B-Instruct",
		"override": "chatcmpl-9f3c1e2d4b5a69788796a1b2 meta-llama/Llama\u202e-3.1-8B-Instruct",
	} {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(s)))
			b.ReportAllocs()
			for b.Loop() {
				_ = Chars(s)
			}
		})
	}
}
