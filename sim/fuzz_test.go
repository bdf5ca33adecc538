// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// FuzzRequest sends arbitrary bodies (and fault headers) to every POST
// endpoint: the server must never panic, and must answer 200 or an error
// body in the API's shape (Anthropic's for /v1/messages, OpenAI's for the
// others).
func FuzzRequest(f *testing.F) {
	const (
		chat = iota
		completions
		tokenize
		responses
		messages
		embeddings
	)
	paths := []string{"/v1/chat/completions", "/v1/completions", "/tokenize", "/v1/responses", "/v1/messages", "/v1/embeddings"}
	for _, seed := range []struct {
		path  uint8
		body  string
		fault string
	}{
		{chat, `{"messages":[{"role":"user","content":"hi"}],"max_tokens":3,"stream":true,"stream_options":{"include_usage":true,"continuous_usage_stats":true}}`, ""},
		{chat, `{"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":null}]}]}`, ""},
		{chat, `{"messages":[{"role":"system","content":null},{"role":"user","content":"x"}],"max_tokens":2,"min_tokens":1,"ignore_eos":true,"temperature":0,"seed":-1}`, "malformed:1"},
		{chat, `{"messages":[{"role":"user","content":"x"}],"max_tokens":2,"stream":true}`, "reset:1"},
		{chat, `{"messages":[{"role":"user","content":"x"}],"max_tokens":2,"stream":true}`, "no_done:0"},
		{completions, `{"prompt":[1,2,3],"max_tokens":2,"stream":true}`, "empty"},
		{completions, `{"prompt":[[1,2]],"max_tokens":2}`, "stall:1:1ms"},
		{completions, `{"prompt":["a b c"],"max_completion_tokens":4}`, ""},
		{completions, `{"prompt":"\u0000\uffff\ud800","max_tokens":1e400}`, ""},
		{completions, `{"prompt":[99999999999999999999]}`, ""},
		{tokenize, `{"messages":[{"role":"user","content":"hi"}],"add_generation_prompt":false}`, ""},
		{tokenize, `{"prompt":"hello"}`, ""},
		{chat, `{"model":null,"messages":null}`, "http_429"},
		{chat, `{`, ""},
		{completions, `null`, ""},
		{completions, `"just a string"`, ""},
		{completions, `{"prompt":"x","n":0,"top_p":1,"temperature":2}`, "stall_first:0s"},
		{chat, `{"messages":[{"role":"user","content":"x"}],"max_tokens":3,"stream":true,"reasoning_effort":"high","tools":[{"type":"function","function":{"name":"f","parameters":{}}}],"tool_choice":"required"}`, "malformed:2"},
		{chat, `{"messages":[{"role":"user","content":"x"}],"max_tokens":1,"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"function","function":{"name":"f"}}}`, ""},
		{chat, `{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":""}}],"tool_choice":null}`, ""},
		{chat, `{"messages":[{"role":"user","content":"x"}],"max_tokens":2,"stream":true,"tools":[{"type":"function","function":{"name":"f"}}]}`, "reset:1"},
		{responses, `{"input":"hi","max_output_tokens":3,"stream":true,"reasoning":{"effort":"high"}}`, ""},
		{responses, `{"input":[{"role":"user","content":[{"type":"input_image","image_url":"data:image/png;base64,iVBORw0KGgo="}]}],"max_output_tokens":2}`, ""},
		{responses, `{"input":"x","tools":[{"type":"function","name":"f"}],"tool_choice":"required","max_output_tokens":2,"stream":true}`, ""},
		{messages, `{"model":"sim-model","max_tokens":3,"messages":[{"role":"user","content":"hi"}],"stream":true}`, ""},
		{messages, `{"model":"sim-model","max_tokens":1100,"thinking":{"type":"enabled","budget_tokens":1024},"messages":[{"role":"user","content":[{"type":"text","text":"x"}]}]}`, ""},
		{messages, `{"model":"sim-model","max_tokens":2,"tools":[{"name":"f","input_schema":{}}],"tool_choice":{"type":"any"},"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"x"}}]}]}]}`, ""},
		{messages, `null`, "http_500"},
		{embeddings, `{"input":["a","b"],"encoding_format":"base64","dimensions":8}`, ""},
		{embeddings, `{"input":[[1,2],[3]]}`, ""},
		{embeddings, `{"input":[]}`, ""},
	} {
		f.Add(seed.path, []byte(seed.body), seed.fault)
	}

	cfg := zeroConfig()
	cfg.MaxModelLen = 2048
	cfg.NumKVBlocks = 256
	cfg.EOSProbability = 0.01
	cfg.ReasoningFraction = 0.25  // chat answers reason first
	cfg.ToolCallProbability = 0.5 // and half of those offering tools call one
	cfg.MaxRequestBodyBytes = 64 << 10
	cfg.Adapters = []AdapterConfig{{Name: "lora", DecodeFactor: 2}}
	s, err := New(cfg, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = s.Shutdown(context.Background()) })

	f.Fuzz(func(t *testing.T, path uint8, body []byte, faultValue string) {
		if flt, err := parseFaultHeader(faultValue, time.Second); err == nil && flt.duration > 10*time.Millisecond {
			t.Skip("long stalls make slow fuzzing")
		}
		p := paths[int(path)%len(paths)]
		req := httptest.NewRequest(http.MethodPost, p, bytes.NewReader(body))
		req.Header.Set(anthropicVersionHeader, "2023-06-01")
		if faultValue != "" {
			req.Header[FaultHeader] = []string{faultValue}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req = req.WithContext(ctx)
		rec := httptest.NewRecorder()
		aborted := false
		func() {
			defer func() {
				if v := recover(); v != nil {
					if v != http.ErrAbortHandler {
						t.Fatalf("panic: %v", v)
					}
					aborted = true // the reset fault, or a recovered bug (counted below)
				}
			}()
			s.Handler().ServeHTTP(rec, req)
		}()
		if n := s.panics.Load(); n != 0 {
			t.Fatalf("handler panicked (%d) on %s %q", n, p, body)
		}
		if aborted || rec.Code == 200 {
			return
		}
		if p == "/v1/messages" {
			var e anthropicError
			if json.Unmarshal(rec.Body.Bytes(), &e) != nil || e.Type != "error" || e.Error.Message == "" {
				t.Fatalf("status %d, not an Anthropic error: %q", rec.Code, rec.Body.String())
			}
			return
		}
		switch rec.Code {
		case 400, 404, 413, 429, 500, 503:
			var e openAIError
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Error == nil || e.Error.Message == "" {
				t.Fatalf("status %d with a body that is not an OpenAI error: %q", rec.Code, rec.Body.String())
			}
		default:
			t.Fatalf("unexpected status %d: %q", rec.Code, rec.Body.String())
		}
	})
}

// configYAML writes a configuration back as YAML that LoadConfigFile
// reads: every key, each fault as a mapping of the parameters its kind
// takes.
func configYAML(c Config) ([]byte, error) {
	plain := c
	plain.Faults, plain.TracerProvider = FaultConfig{}, nil
	b, err := yaml.Marshal(plain)
	if err != nil {
		return nil, err
	}
	var doc map[string]any
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, err
	}
	faults := map[string]any{}
	for _, s := range c.Faults.specs() {
		name := s.kind.String()
		m := map[string]any{"probability": s.spec.Probability}
		for _, p := range faultParams[name] {
			switch p {
			case "after_tokens":
				m[p] = s.spec.AfterTokens
			case "duration":
				m[p] = s.spec.Duration.String()
			case "retry_after":
				m[p] = s.spec.RetryAfter.String()
			}
		}
		faults[name] = m
	}
	doc["faults"] = faults
	return yaml.Marshal(doc)
}

// FuzzLoadConfig parses arbitrary YAML as a simulator configuration: no
// panic, a bounded time, a configuration that loads is valid, and writing
// it back and loading it again gives the same configuration.
func FuzzLoadConfig(f *testing.F) {
	files, err := filepath.Glob("testdata/*.yml")
	if err != nil || len(files) == 0 {
		f.Fatalf("no seed configurations: %v", err)
	}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, s := range []string{
		"faults: ~\n",
		"faults: {}\nmodels: []\n",
		"models: &m [a, b]\nfaults: {http_500: *m}\n",
		"a: &a [*a]\n",
		"faults:\n  stall: {probability: .5, duration: 1h, after_tokens: 0}\n  http_429: {retry_after: -1s}\n",
		"max_model_len: 16777216\nnum_kv_blocks: 1048576\nblock_size: 16\n",
		"models: [\"\\u00e9\\t\", 'x: y']\nseed: 18446744073709551615\n",
		"eos_probability: .nan\nreasoning_fraction: -.inf\n",
		"prefill_base: 9223372036854775807ns\n",
		"---\nmodels: [a]\n---\nmodels: [b]\n",
		"!!binary aGVsbG8=",
		"? [a, b]\n: c\n",
		"timing_steps: [{after: 0s, factor: 0.5}, {after: 2m, factor: 5}]\nrequest_log: requests.jsonl\n",
		"timing_steps: []\nzero_latency: true\n",
		"background:\n  - {after: 0s, rate: 12, prompt_tokens: {dist: lognormal, median: 600, p99: 3000}, output_tokens: 100, prefix: {share: 0.5, count: 4, tokens: 256}}\n  - {after: 2m, prompt_tokens: {dist: uniform, min: 1, max: 9}}\n  - {after: 3m, rate: 0}\n",
		"gateway: {delay: 5ms, steps: [{after: 2m, delay: 300ms}]}\nkv_allocation: on_demand\nschedule_scale: 0.05\n",
		"dcgm: {interval: 500ms, pod: vllm-0, namespace: llm, container: vllm, uuid: GPU-1, fb_total_mib: 1024}\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 64<<10 {
			t.Skip("large inputs only slow the fuzzer down")
		}
		// A hang would stall the fuzzer silently: crash instead, so that
		// the input is kept.
		done := make(chan struct{})
		defer close(done)
		go func() {
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				panic(fmt.Sprintf("parsing %q hung", data))
			}
		}()
		start := time.Now()
		cfg, err := parseConfig(data)
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("parsing %d bytes took %v", len(data), d)
		}
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error message")
			}
			return
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("loaded configuration is invalid: %v", err)
		}
		out, err := configYAML(cfg)
		if err != nil {
			t.Fatalf("cannot write the configuration back: %v", err)
		}
		again, err := parseConfig(out)
		if err != nil {
			t.Fatalf("written configuration does not load: %v\n%s", err, out)
		}
		if !reflect.DeepEqual(again, cfg) {
			t.Fatalf("round trip changed the configuration:\n%+v\n%+v\n%s", cfg, again, out)
		}
	})
}
