// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// FuzzNewAPIs sends arbitrary bodies to /v1/responses, /v1/messages and
// /v1/embeddings: the server must never panic, and must answer 200 or an
// error body in the API's shape.
func FuzzNewAPIs(f *testing.F) {
	for _, seed := range []struct {
		path uint8
		body string
	}{
		{0, `{"input":"hi","max_output_tokens":3,"stream":true,"reasoning":{"effort":"high"}}`},
		{0, `{"input":[{"role":"user","content":[{"type":"input_image","image_url":"data:image/png;base64,iVBORw0KGgo="}]}],"max_output_tokens":2}`},
		{0, `{"input":"x","tools":[{"type":"function","name":"f"}],"tool_choice":"required","max_output_tokens":2,"stream":true}`},
		{1, `{"model":"sim-model","max_tokens":3,"messages":[{"role":"user","content":"hi"}],"stream":true}`},
		{1, `{"model":"sim-model","max_tokens":1100,"thinking":{"type":"enabled","budget_tokens":1024},"messages":[{"role":"user","content":[{"type":"text","text":"x"}]}]}`},
		{1, `{"model":"sim-model","max_tokens":2,"tools":[{"name":"f","input_schema":{}}],"tool_choice":{"type":"any"},"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"x"}}]}]}]}`},
		{2, `{"input":["a","b"],"encoding_format":"base64","dimensions":8}`},
		{2, `{"input":[[1,2],[3]]}`},
		{2, `{"input":[]}`},
		{1, `null`},
	} {
		f.Add(seed.path, []byte(seed.body))
	}
	cfg := zeroConfig()
	cfg.MaxModelLen = 2048
	cfg.NumKVBlocks = 256
	cfg.ReasoningTokens = 2
	cfg.ToolCallProbability = 0.5
	cfg.MaxRequestBodyBytes = 64 << 10
	cfg.Adapters = []AdapterConfig{{Name: "lora", DecodeFactor: 2}}
	s, err := New(cfg, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	paths := []string{"/v1/responses", "/v1/messages", "/v1/embeddings"}
	f.Fuzz(func(t *testing.T, path uint8, body []byte) {
		p := paths[int(path)%len(paths)]
		req := httptest.NewRequest(http.MethodPost, p, bytes.NewReader(body))
		req.Header.Set("anthropic-version", "2023-06-01")
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, req.WithContext(ctx))
		if n := s.panics.Load(); n != 0 {
			t.Fatalf("handler panicked on %s %q", p, body)
		}
		if rec.Code == 200 {
			return
		}
		if p == "/v1/messages" {
			var e anthropicError
			if json.Unmarshal(rec.Body.Bytes(), &e) != nil || e.Type != "error" || e.Error.Message == "" {
				t.Fatalf("status %d, not an Anthropic error: %q", rec.Code, rec.Body.String())
			}
			return
		}
		var e openAIError
		if json.Unmarshal(rec.Body.Bytes(), &e) != nil || e.Error == nil || e.Error.Message == "" {
			t.Fatalf("status %d, not an OpenAI error: %q", rec.Code, rec.Body.String())
		}
	})
}
