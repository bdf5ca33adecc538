// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"
)

// Embeddings API (/v1/embeddings) over loopback.

type embeddingsAnswer struct {
	Object string `json:"object"`
	Data   []struct {
		Object    string          `json:"object"`
		Index     int             `json:"index"`
		Embedding json.RawMessage `json:"embedding"`
	} `json:"data"`
	Model string `json:"model"`
	Usage struct {
		PromptTokens int `json:"prompt_tokens"`
		TotalTokens  int `json:"total_tokens"`
	} `json:"usage"`
}

func postEmbeddings(t *testing.T, url string, body any) embeddingsAnswer {
	t.Helper()
	status, _, raw := postJSON(t, url, body)
	if status != 200 {
		t.Fatalf("status %d: %s", status, raw)
	}
	var out embeddingsAnswer
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&out); err != nil || out.Object != "list" {
		t.Fatalf("not an embeddings list (%v): %.300s", err, raw)
	}
	return out
}

func floats(t *testing.T, raw json.RawMessage) []float64 {
	t.Helper()
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		_ = json.Unmarshal(raw, &s)
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil || len(b)%4 != 0 {
			t.Fatalf("base64 embedding: %v", err)
		}
		out := make([]float64, len(b)/4)
		for i := range out {
			out[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])))
		}
		return out
	}
	var v []float64
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("embedding: %v", err)
	}
	return v
}

func norm(v []float64) float64 {
	s := 0.0
	for _, x := range v {
		s += x * x
	}
	return math.Sqrt(s)
}

func dot(a, b []float64) float64 {
	s := 0.0
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

func TestEmbeddings(t *testing.T) {
	base, _ := startSim(t, zeroConfig())
	url := base + "/v1/embeddings"
	one := postEmbeddings(t, url, map[string]any{"model": "sim-model", "input": "the quick brown fox"})
	v := floats(t, one.Data[0].Embedding)
	if len(one.Data) != 1 || one.Data[0].Object != "embedding" || one.Data[0].Index != 0 || len(v) != 768 ||
		math.Abs(norm(v)-1) > 1e-5 || one.Model != "sim-model" || one.Usage.PromptTokens != 4 || one.Usage.TotalTokens != 4 {
		t.Fatalf("one input: %d dims, norm %v, %+v", len(v), norm(v), one.Usage)
	}
	// A batch: indexes in order, deterministic vectors, similar inputs
	// closer than unrelated ones.
	batch := postEmbeddings(t, url, map[string]any{"input": []string{"the quick brown fox", "the quick brown dog", "matrix kernel tensor"}})
	if len(batch.Data) != 3 || batch.Usage.PromptTokens != 4+4+3 {
		t.Fatalf("batch: %d items, usage %+v", len(batch.Data), batch.Usage)
	}
	var vs [][]float64
	for i, d := range batch.Data {
		if d.Index != i {
			t.Errorf("item %d has index %d", i, d.Index)
		}
		vs = append(vs, floats(t, d.Embedding))
	}
	if dot(vs[0], v) < 1-1e-5 {
		t.Errorf("the same input embeds differently (cos %v)", dot(vs[0], v))
	}
	if !(dot(vs[0], vs[1]) > dot(vs[0], vs[2])) {
		t.Errorf("cos(fox, dog) %v not above cos(fox, tensor) %v", dot(vs[0], vs[1]), dot(vs[0], vs[2]))
	}
	// base64 carries the same float32 values; dimensions truncates and
	// renormalises.
	b64 := postEmbeddings(t, url, map[string]any{"input": "the quick brown fox", "encoding_format": "base64"})
	if bv := floats(t, b64.Data[0].Embedding); len(bv) != 768 || dot(bv, v) < 1-1e-5 {
		t.Errorf("base64 vector differs (%d dims)", len(bv))
	}
	short := postEmbeddings(t, url, map[string]any{"input": "the quick brown fox", "dimensions": 64})
	sv := floats(t, short.Data[0].Embedding)
	if len(sv) != 64 || math.Abs(norm(sv)-1) > 1e-5 {
		t.Errorf("dimensions 64: %d dims, norm %v", len(sv), norm(sv))
	}
	// Token ids: one list, or a list of lists.
	ids := postEmbeddings(t, url, map[string]any{"input": [][]int{{1, 2, 3}, {4}}})
	if len(ids.Data) != 2 || ids.Usage.PromptTokens != 4 {
		t.Errorf("token id lists: %d items, usage %+v", len(ids.Data), ids.Usage)
	}
	single := postEmbeddings(t, url, map[string]any{"input": []int{1, 2, 3}})
	if len(single.Data) != 1 || single.Usage.PromptTokens != 3 {
		t.Errorf("token ids: %+v", single.Usage)
	}

	for _, tc := range []struct {
		name  string
		body  any
		param string
	}{
		{"no input", map[string]any{"model": "sim-model"}, "input"},
		{"empty list", map[string]any{"input": []string{}}, "input"},
		{"empty string", map[string]any{"input": "   "}, "input"},
		{"mixed", map[string]any{"input": []any{"a", []int{1}}}, "input"},
		{"id range", map[string]any{"input": []int{1, 99999}}, "input"},
		{"format", map[string]any{"input": "a", "encoding_format": "int8"}, "encoding_format"},
		{"dimensions 0", map[string]any{"input": "a", "dimensions": 0}, "dimensions"},
		{"dimensions big", map[string]any{"input": "a", "dimensions": 769}, "dimensions"},
		{"too long", map[string]any{"input": strings.Repeat("word ", 9000)}, "input"},
	} {
		status, _, raw := postJSON(t, url, tc.body)
		if status != 400 {
			t.Errorf("%s: status %d: %s", tc.name, status, raw)
			continue
		}
		if e := decodeError(t, raw); e.Error.Param == nil || *e.Error.Param != tc.param {
			t.Errorf("%s: %s, want param %q", tc.name, raw, tc.param)
		}
	}
}

// TestEmbeddingsTiming checks that an embedding is a prefill-only engine
// job: it takes one step with its tokens' prefill time and no decode
// step, and its repeat hits the prefix cache.
func TestEmbeddingsTiming(t *testing.T) {
	cfg := DefaultConfig()
	cfg.EOSProbability = 0
	cfg.PrefillBase = 0
	cfg.PrefillPerToken = time.Millisecond
	cfg.DecodeBase = 5 * time.Millisecond
	cfg.DecodePerSeq = 0
	base, _ := startSim(t, cfg)
	input := strings.Repeat("alpha beta gamma delta ", 40) // 160 tokens, 10 blocks
	start := time.Now()
	out := postEmbeddings(t, base+"/v1/embeddings", map[string]any{"input": input})
	first := time.Since(start)
	if out.Usage.PromptTokens != 160 {
		t.Fatalf("prompt_tokens %d", out.Usage.PromptTokens)
	}
	if want := 165 * time.Millisecond; first < want*9/10 || first > want*4 {
		t.Errorf("embedding of 160 tokens took %v, want about %v (160 × 1ms prefill + one 5ms step)", first, want)
	}
	// The repeat is cached but for the last block: about 16 ms + 5 ms.
	start = time.Now()
	postEmbeddings(t, base+"/v1/embeddings", map[string]any{"input": input})
	if again := time.Since(start); again > first/2 {
		t.Errorf("cached repeat took %v, first %v", again, first)
	}
	m := scrape(t, base)
	if !strings.Contains(m, `vllm:prefix_cache_hits_total{engine="0",model_name="sim-model"} 144`) || !strings.Contains(m, `vllm:generation_tokens_total{engine="0",model_name="sim-model"} 0`) {
		t.Errorf("metrics:\n%s\n%s", grepLines(m, "prefix_cache_hits"), grepLines(m, "generation_tokens_total"))
	}
}
