// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package wire

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// decodeBody decodes a body with encoding/json and fails on duplicate keys
// at the top level.
func decodeBody(t *testing.T, body []byte) map[string]any {
	t.Helper()
	if !json.Valid(body) {
		t.Fatalf("body is not valid JSON: %s", body)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("body does not start with an object: %v %v", tok, err)
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		k := tok.(string)
		if seen[k] {
			t.Fatalf("duplicate key %q in %s", k, body)
		}
		seen[k] = true
		var v any
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
	}
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func ptr[T any](v T) *T { return &v }

func TestEncodeBody(t *testing.T) {
	cases := []struct {
		name string
		req  Request
		want string // compared after decoding
	}{
		{"chat", Request{
			API: APIChat, Model: "meta-llama/Llama-3.1-8B-Instruct",
			Messages:  []Message{{Role: "system", Content: "be brief"}, {Role: "user", Content: "hi"}},
			MaxTokens: 128, Sampling: Sampling{Temperature: 0.7, TopP: 0.95, TopK: 40, Seed: ptr[int64](-7)},
		}, `{"model":"meta-llama/Llama-3.1-8B-Instruct","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi"}],
			"max_tokens":128,"temperature":0.7,"top_p":0.95,"top_k":40,"seed":-7,"stream":true,"stream_options":{"include_usage":true}}`},
		{"completions text, defaults omitted", Request{
			API: APICompletions, Model: "m", Prompt: "once upon", MaxTokens: 16,
		}, `{"model":"m","prompt":"once upon","max_tokens":16,"temperature":0,"stream":true,"stream_options":{"include_usage":true}}`},
		{"completions token ids", Request{
			API: APICompletions, Model: "m", Prompt: "ignored", PromptIDs: []int{1, 2, 30000}, MaxTokens: 4, Sampling: Sampling{Temperature: 1},
		}, `{"model":"m","prompt":[1,2,30000],"max_tokens":4,"temperature":1,"stream":true,"stream_options":{"include_usage":true}}`},
		{"empty token ids", Request{API: APICompletions, Model: "m", PromptIDs: []int{}},
			`{"model":"m","prompt":[],"temperature":0,"stream":true,"stream_options":{"include_usage":true}}`},
		{"no messages", Request{API: APIChat, Model: "m", MaxTokens: 1},
			`{"model":"m","messages":[],"max_tokens":1,"temperature":0,"stream":true,"stream_options":{"include_usage":true}}`},
		{"extra body merged and overriding", Request{
			API: APIChat, Model: "m", Messages: []Message{{Role: "user", Content: "x"}}, MaxTokens: 8, Sampling: Sampling{Temperature: 0.5},
			ExtraBody: map[string]any{
				"ignore_eos":     true,
				"stream_options": map[string]any{"include_usage": true, "continuous_usage_stats": true},
				"temperature":    0,
				"stop":           []any{"\n\n", "END"},
				"logit_bias":     map[string]any{"50256": -100.0},
				"min_p":          0.05,
				"nested":         map[string]any{"a": []any{nil, 1, "two", 3.5, false}},
			},
		}, `{"model":"m","messages":[{"role":"user","content":"x"}],"max_tokens":8,"stream":true,
			"ignore_eos":true,"stream_options":{"include_usage":true,"continuous_usage_stats":true},"temperature":0,
			"stop":["\n\n","END"],"logit_bias":{"50256":-100},"min_p":0.05,"nested":{"a":[null,1,"two",3.5,false]}}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			body, err := EncodeBody(nil, &tc.req)
			if err != nil {
				t.Fatal(err)
			}
			got := decodeBody(t, body)
			var want map[string]any
			if err := json.Unmarshal([]byte(tc.want), &want); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("body %s\ndecodes to %v\nwant       %v", body, got, want)
			}
		})
	}
}

func TestEncodeBodyKeyOrder(t *testing.T) {
	req := &Request{API: APIChat, Model: "m", MaxTokens: 2, ExtraBody: map[string]any{"b": 1, "a": 2, "max_tokens": 3}}
	body, err := EncodeBody([]byte("prefix:"), req)
	if err != nil {
		t.Fatal(err)
	}
	want := `prefix:{"model":"m","messages":[],"temperature":0,"stream":true,"stream_options":{"include_usage":true},"a":2,"b":1,"max_tokens":3}`
	if string(body) != want {
		t.Fatalf("got  %s\nwant %s", body, want)
	}
}

func TestEncodeBodyStrings(t *testing.T) {
	var all strings.Builder
	for c := range 0x80 {
		all.WriteByte(byte(c))
	}
	texts := []string{
		"",
		all.String(),
		"quote \" backslash \\ slash / tab\t nl\n cr\r nul\x00 bell\x07 del\x7f",
		"é 日本語 😀 \u2028 \u2029 \ufeff <html>&amp;",
		"invalid \xff\xfe utf8 \xc3\x28 truncated \xe2\x82",
		"surrogate-ish \xed\xa0\x80",
		strings.Repeat("long ", 10000),
	}
	for _, text := range texts {
		req := &Request{API: APIChat, Model: text, Messages: []Message{{Role: "user", Content: text}}}
		body, err := EncodeBody(nil, req)
		if err != nil {
			t.Fatal(err)
		}
		var got struct {
			Model    string
			Messages []Message
		}
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatalf("%q: %v in %s", text, err, body)
		}
		// encoding/json's own round trip is the reference (invalid UTF-8
		// becomes U+FFFD).
		ref, _ := json.Marshal(text)
		var want string
		if err := json.Unmarshal(ref, &want); err != nil {
			t.Fatal(err)
		}
		if got.Model != want || got.Messages[0].Content != want {
			t.Errorf("%q round-trips to %q", text, got.Messages[0].Content)
		}
		if !utf8.Valid(body) {
			t.Errorf("%q: body is not valid UTF-8", text)
		}
	}
}

func TestAppendJSONFloatMatchesEncodingJSON(t *testing.T) {
	for _, f := range []float64{0, math.Copysign(0, -1), 0.7, 1, 1.5, 0.95, 1e-7, 1.2345e-6, 1e20, 1e21, 123456789.125, -3.25e-9, math.MaxFloat64, math.SmallestNonzeroFloat64} {
		got, err := appendJSONFloat(nil, f)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal(f)
		if string(got) != string(want) {
			t.Errorf("%v: got %s, want %s", f, got, want)
		}
	}
	for _, f := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		if _, err := appendJSONFloat(nil, f); err == nil {
			t.Errorf("%v: no error", f)
		}
	}
}

func TestEncodeBodyErrors(t *testing.T) {
	for name, req := range map[string]*Request{
		"nil":              nil,
		"unknown api":      {API: "rerank", Model: "m"},
		"nan temperature":  {API: APIChat, Sampling: Sampling{Temperature: math.NaN()}},
		"inf top_p":        {API: APIChat, Sampling: Sampling{TopP: math.Inf(1)}},
		"bad extra value":  {API: APIChat, ExtraBody: map[string]any{"f": func() {}}},
		"bad extra number": {API: APIChat, ExtraBody: map[string]any{"n": json.Number("1x")}},
		"nan extra":        {API: APIChat, ExtraBody: map[string]any{"x": []any{math.NaN()}}},
	} {
		if _, err := EncodeBody(nil, req); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestEncodeBodyExtraFallback(t *testing.T) {
	type custom struct {
		A int `json:"a"`
	}
	req := &Request{API: APIChat, Model: "m", ExtraBody: map[string]any{
		"s": custom{A: 1}, "f32": float32(0.5), "u8": uint8(3), "ss": []string{"a"}, "n": json.Number("12.5"),
	}}
	body, err := EncodeBody(nil, req)
	if err != nil {
		t.Fatal(err)
	}
	m := decodeBody(t, body)
	if !reflect.DeepEqual(m["s"], map[string]any{"a": 1.0}) || m["f32"] != 0.5 || m["u8"] != 3.0 || m["n"] != 12.5 {
		t.Errorf("fallback values decode to %v", m)
	}
}

func TestEncodeBodyAllocations(t *testing.T) {
	req := &Request{
		API: APIChat, Model: "meta-llama/Llama-3.1-8B-Instruct",
		Messages:  []Message{{Role: "user", Content: strings.Repeat("lorem ipsum ", 100)}},
		MaxTokens: 128, Sampling: Sampling{Temperature: 0.7, TopP: 0.95},
		ExtraBody: map[string]any{"ignore_eos": true},
	}
	buf := make([]byte, 0, 4096)
	allocs := testing.AllocsPerRun(100, func() {
		var err error
		if buf, err = EncodeBody(buf[:0], req); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("EncodeBody into a large enough buffer allocates %.1f times, want 0", allocs)
	}
}

func BenchmarkEncodeBody(b *testing.B) {
	req := &Request{
		API: APIChat, Model: "meta-llama/Llama-3.1-8B-Instruct",
		Messages:  []Message{{Role: "system", Content: strings.Repeat("You are helpful. ", 30)}, {Role: "user", Content: strings.Repeat("lorem ipsum ", 80)}},
		MaxTokens: 128, Sampling: Sampling{Temperature: 0.7, TopP: 0.95},
		ExtraBody: map[string]any{"ignore_eos": true},
	}
	b.Run("EncodeBody", func(b *testing.B) {
		var buf []byte
		b.ReportAllocs()
		for b.Loop() {
			buf, _ = EncodeBody(buf[:0], req)
		}
		b.SetBytes(int64(len(buf)))
	})
	b.Run("encoding_json", func(b *testing.B) {
		b.ReportAllocs()
		var n int
		for b.Loop() {
			m := map[string]any{
				"model": req.Model, "messages": req.Messages, "max_tokens": req.MaxTokens,
				"temperature": req.Sampling.Temperature, "top_p": req.Sampling.TopP, "stream": true,
				"stream_options": map[string]any{"include_usage": true},
			}
			for k, v := range req.ExtraBody {
				m[k] = v
			}
			out, _ := json.Marshal(m)
			n = len(out)
		}
		b.SetBytes(int64(n))
	})
}
