// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The golden test pins what the simulator writes: a fixed list of
// requests to every API, sent one at a time over raw loopback TCP
// connections to servers with a fixed Config.Seed (which pins the id
// prefix, the random word seeds, the tool-call ids and the fault draws),
// recorded byte for byte in testdata/golden/*.txt: status line, headers,
// the body as it came off the wire (chunked framing included, so each
// flush shows), how the connection ended; then each server's request log
// and its /metrics exposition. Regenerate with
//
//	go test ./sim/ -run TestGolden -update
//
// and review the diff: any change to these files is a change of the
// simulator's output.
//
// Normalised, because they are time-dependent by nature (nothing else is):
//   - the Date header;
//   - "created" (chat, completions, /v1/models) and "created_at"
//     (responses), Unix seconds of the arrival (same width, so chunk sizes
//     stay right);
//   - in the request log, arrival, ttft_seconds, ttfa_seconds,
//     e2e_seconds and tpot_seconds (their presence is kept);
//   - in /metrics, the buckets and sums of the *_seconds histograms (the
//     counts are kept), the value of vllm:lora_requests_info (the scrape
//     time), and the go_* and process_* runtime metrics (dropped).
//
// Servers run in zero-latency mode, except the shutdown cases: those stop
// the engine (what Shutdown does to requests in flight) once a request
// is admitted under steps of an hour (nothing generated yet), or once
// its first token has come out under steps of a few seconds (the next
// token is far away), so that what was sent before the stop is fixed.

var updateGolden = flag.Bool("update", false, "rewrite testdata/golden/*.txt from the current output")

// goldenCase is one request.
type goldenCase struct {
	name    string
	method  string // "" is POST
	path    string
	headers []string // name, value pairs
	body    string
}

// goldenServer is a server and the requests it answers, in order.
type goldenServer struct {
	file  string // testdata/golden/<file>.txt
	cfg   func(c *Config)
	cases []goldenCase
}

const (
	chatPath  = "/v1/chat/completions"
	complPath = "/v1/completions"
	respPath  = "/v1/responses"
	msgPath   = "/v1/messages"
	embPath   = "/v1/embeddings"
)

var anthropicVersion = []string{"anthropic-version", "2023-06-01"}

func goldenServers() []goldenServer {
	png := "data:image/png;base64," + pngHeaderOnly(56, 56)
	pngRaw := pngHeaderOnly(56, 56)
	return []goldenServer{
		{
			file: "chat",
			cfg: func(c *Config) {
				c.Seed = 11
				c.EOSProbability = 0.3
				c.MaxModelLen = 512
				c.Models = []string{"sim-model", "sim-model-b"}
				c.Adapters = []AdapterConfig{{Name: "sim-lora", DecodeFactor: 2}}
				c.MaxRequestBodyBytes = 4096
			},
			cases: []goldenCase{
				{name: "chat stream", path: chatPath, body: `{"model":"sim-model","messages":[{"role":"user","content":"Hello there"}],"max_tokens":4,"ignore_eos":true,"stream":true}`},
				{name: "chat stream include_usage", path: chatPath, body: `{"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hello there"}],"max_tokens":3,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true}}`},
				{name: "chat stream continuous usage", path: chatPath, body: `{"messages":[{"role":"user","content":"Hello there"}],"max_tokens":3,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true,"continuous_usage_stats":true}}`},
				{name: "chat stream early stop", path: chatPath, body: `{"messages":[{"role":"user","content":"stop early please"}],"max_tokens":40,"temperature":0,"stream":true,"stream_options":{"include_usage":true}}`},
				{name: "chat stream seed min_tokens", path: chatPath, body: `{"messages":[{"role":"user","content":[{"type":"text","text":"two"},{"type":"text","text":"parts"}]}],"max_completion_tokens":6,"min_tokens":2,"seed":7,"stream":true}`},
				{name: "chat unary", path: chatPath, body: `{"messages":[{"role":"user","content":"Hello there"}],"max_tokens":4,"ignore_eos":true}`},
				{name: "chat unary early stop", path: chatPath, body: `{"messages":[{"role":"user","content":"stop early please"}],"max_tokens":40,"temperature":0}`},
				{name: "chat unary image", path: chatPath, body: `{"messages":[{"role":"user","content":[{"type":"text","text":"what is it"},{"type":"image_url","image_url":{"url":"` + png + `"}}]}],"max_tokens":2,"ignore_eos":true}`},
				{name: "chat stream image", path: chatPath, body: `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"` + png + `"}}]}],"max_tokens":2,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true}}`},
				{name: "chat adapter stream", path: chatPath, body: `{"model":"sim-lora","messages":[{"role":"user","content":"Hello there"}],"max_tokens":2,"ignore_eos":true,"stream":true}`},
				{name: "chat adapter unary", path: chatPath, body: `{"model":"sim-lora","messages":[{"role":"user","content":"Hello there"}],"max_tokens":2,"ignore_eos":true}`},
				{name: "chat second model", path: chatPath, body: `{"model":"sim-model-b","messages":[{"role":"user","content":"Hello there"}],"max_tokens":2,"ignore_eos":true}`},
				{name: "chat prefix cache hit", path: chatPath, body: `{"messages":[{"role":"user","content":"a long prompt that fills more than one block of sixteen tokens so that the cache has something to hit on the second time"}],"max_tokens":1}`},
				{name: "chat prefix cache hit again", path: chatPath, body: `{"messages":[{"role":"user","content":"a long prompt that fills more than one block of sixteen tokens so that the cache has something to hit on the second time"}],"max_tokens":1,"stream":true,"stream_options":{"include_usage":true}}`},
				{name: "chat tools none", path: chatPath, body: `{"messages":[{"role":"user","content":"x"}],"max_tokens":2,"ignore_eos":true,"tools":[{"type":"function","function":{"name":"f","parameters":{}}}],"tool_choice":"none"}`},
				{name: "chat tools auto zero probability", path: chatPath, body: `{"messages":[{"role":"user","content":"x"}],"max_tokens":2,"ignore_eos":true,"stream":true,"tools":[{"type":"function","function":{"name":"f"}}]}`},
				{name: "completions stream", path: complPath, body: `{"model":"sim-model","prompt":"Once upon a time","max_tokens":4,"ignore_eos":true,"stream":true}`},
				{name: "completions stream usage ids", path: complPath, body: `{"prompt":[1,2,3,4],"max_tokens":3,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true,"continuous_usage_stats":true}}`},
				{name: "completions stream early stop", path: complPath, body: `{"prompt":"stop early please","max_tokens":40,"temperature":0,"stream":true}`},
				{name: "completions unary", path: complPath, body: `{"prompt":["Once upon a time"],"max_tokens":4,"ignore_eos":true}`},
				{name: "completions unary nested ids", path: complPath, body: `{"prompt":[[5,6,7]],"max_tokens":40,"temperature":0}`},
				{name: "completions default max_tokens", path: complPath, body: `{"prompt":"x","temperature":0}`},
				{name: "error empty body", path: chatPath, body: ``},
				{name: "error bad json", path: chatPath, body: `{"messages":`},
				{name: "error wrong type", path: chatPath, body: `{"messages":[{"role":"user","content":"x"}],"max_tokens":"4"}`},
				{name: "error not an object", path: complPath, body: `[1]`},
				{name: "error unknown model", path: chatPath, body: `{"model":"nope","messages":[{"role":"user","content":"x"}]}`},
				{name: "error no messages", path: chatPath, body: `{"messages":[]}`},
				{name: "error bad role", path: chatPath, body: `{"messages":[{"role":"robot","content":"x"}]}`},
				{name: "error bad part", path: chatPath, body: `{"messages":[{"role":"user","content":[{"type":"audio"}]}]}`},
				{name: "error n", path: chatPath, body: `{"messages":[{"role":"user","content":"x"}],"n":2}`},
				{name: "error temperature", path: complPath, body: `{"prompt":"x","temperature":3}`},
				{name: "error stream_options", path: chatPath, body: `{"messages":[{"role":"user","content":"x"}],"stream_options":{"include_usage":true}}`},
				{name: "error max_tokens", path: chatPath, body: `{"messages":[{"role":"user","content":"x"}],"max_tokens":600}`},
				{name: "error max_tokens zero", path: complPath, body: `{"prompt":"x","max_tokens":0}`},
				{name: "error min_tokens", path: complPath, body: `{"prompt":"x","max_tokens":2,"min_tokens":3}`},
				{name: "error reasoning_effort", path: chatPath, body: `{"messages":[{"role":"user","content":"x"}],"reasoning_effort":"max"}`},
				{name: "error tools", path: chatPath, body: `{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"web"}]}`},
				{name: "error tool_choice", path: chatPath, body: `{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"function","function":{"name":"g"}}}`},
				{name: "error prompt missing", path: complPath, body: `{"max_tokens":2}`},
				{name: "error prompt batch", path: complPath, body: `{"prompt":["a","b"]}`},
				{name: "error prompt id range", path: complPath, body: `{"prompt":[32000]}`},
				{name: "error prompt no token", path: complPath, body: `{"prompt":"   "}`},
				{name: "error body too large", path: chatPath, body: `{"messages":[{"role":"user","content":"` + strings.Repeat("x", 5000) + `"}]}`},
				{name: "error image", path: chatPath, body: `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/gif;base64,R0lGOD"}}]}]}`},
				{name: "error method", method: http.MethodGet, path: chatPath},
				{name: "error path", path: "/v1/nothing", body: `{}`},
				{name: "models", method: http.MethodGet, path: "/v1/models"},
				{name: "health", method: http.MethodGet, path: "/health"},
				{name: "tokenize prompt", path: "/tokenize", body: `{"prompt":"Hello there"}`},
				{name: "tokenize messages", path: "/tokenize", body: `{"messages":[{"role":"user","content":"Hello there"}],"add_generation_prompt":false}`},
			},
		},
		{
			file: "agent",
			cfg: func(c *Config) {
				c.Seed = 12
				c.ReasoningTokens = 2
				c.ToolCallProbability = 0.5
			},
			cases: []goldenCase{
				{name: "chat reasoning stream", path: chatPath, body: `{"messages":[{"role":"user","content":"think"}],"max_tokens":4,"stream":true,"stream_options":{"include_usage":true}}`},
				{name: "chat reasoning unary", path: chatPath, body: `{"messages":[{"role":"user","content":"think"}],"max_tokens":4}`},
				{name: "chat reasoning effort high stream", path: chatPath, body: `{"messages":[{"role":"user","content":"think"}],"max_tokens":6,"reasoning_effort":"high","stream":true,"stream_options":{"include_usage":true,"continuous_usage_stats":true}}`},
				{name: "chat reasoning effort none", path: chatPath, body: `{"messages":[{"role":"user","content":"think"}],"max_tokens":2,"reasoning_effort":"none"}`},
				{name: "chat reasoning cut by max_tokens", path: chatPath, body: `{"messages":[{"role":"user","content":"think"}],"max_tokens":1,"stream":true,"stream_options":{"include_usage":true}}`},
				{name: "chat tool required stream", path: chatPath, body: `{"messages":[{"role":"user","content":"weather?"}],"max_tokens":4,"stream":true,"stream_options":{"include_usage":true},"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}},{"type":"function","function":{"name":"get_time"}}],"tool_choice":"required"}`},
				{name: "chat tool required unary", path: chatPath, body: `{"messages":[{"role":"user","content":"weather?"}],"max_tokens":4,"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}},{"type":"function","function":{"name":"get_time"}}],"tool_choice":"required"}`},
				{name: "chat tool named stream", path: chatPath, body: `{"messages":[{"role":"user","content":"time?"}],"max_tokens":3,"reasoning_effort":"none","stream":true,"tools":[{"type":"function","function":{"name":"get_weather"}},{"type":"function","function":{"name":"get_time"}}],"tool_choice":{"type":"function","function":{"name":"get_time"}}}`},
				{name: "chat tool auto a", path: chatPath, body: `{"messages":[{"role":"user","content":"maybe a"}],"max_tokens":4,"temperature":0,"tools":[{"type":"function","function":{"name":"f"}}]}`},
				{name: "chat tool auto b", path: chatPath, body: `{"messages":[{"role":"user","content":"maybe b"}],"max_tokens":4,"temperature":0,"tools":[{"type":"function","function":{"name":"f"}}]}`},
				{name: "chat tool auto c", path: chatPath, body: `{"messages":[{"role":"user","content":"maybe c"}],"max_tokens":4,"temperature":0,"stream":true,"tools":[{"type":"function","function":{"name":"f"}}]}`},
				{name: "chat tool auto d", path: chatPath, body: `{"messages":[{"role":"user","content":"maybe d"}],"max_tokens":4,"temperature":0,"stream":true,"tools":[{"type":"function","function":{"name":"f"}}]}`},
				{name: "chat tool reasoning cut", path: chatPath, body: `{"messages":[{"role":"user","content":"x"}],"max_tokens":2,"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"required","stream":true}`},
				{name: "completions ignore reasoning", path: complPath, body: `{"prompt":"think","max_tokens":3,"stream":true}`},
			},
		},
		{
			file: "agent-reasoning-field",
			cfg: func(c *Config) {
				c.Seed = 13
				c.ReasoningFraction = 0.5
				c.ReasoningField = reasoningField
			},
			cases: []goldenCase{
				{name: "chat reasoning field stream", path: chatPath, body: `{"messages":[{"role":"user","content":"think"}],"max_tokens":4,"stream":true}`},
				{name: "chat reasoning field unary", path: chatPath, body: `{"messages":[{"role":"user","content":"think"}],"max_tokens":4}`},
				{name: "chat reasoning field tool unary", path: chatPath, body: `{"messages":[{"role":"user","content":"x"}],"max_tokens":4,"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"required"}`},
			},
		},
		{
			file: "responses",
			cfg: func(c *Config) {
				c.Seed = 14
				c.EOSProbability = 0.3
				c.MaxModelLen = 512
				c.Adapters = []AdapterConfig{{Name: "sim-lora", PrefillFactor: 2}}
			},
			cases: []goldenCase{
				{name: "responses stream", path: respPath, body: `{"model":"sim-model","input":"Hello there","max_output_tokens":3,"stream":true}`},
				{name: "responses unary", path: respPath, body: `{"input":"Hello there","max_output_tokens":3,"temperature":0.5,"top_p":0.9}`},
				{name: "responses stream early stop", path: respPath, body: `{"input":"stop early please","max_output_tokens":40,"temperature":0,"stream":true}`},
				{name: "responses unary early stop", path: respPath, body: `{"input":"stop early please","max_output_tokens":40,"temperature":0}`},
				{name: "responses items", path: respPath, body: `{"instructions":"Be brief.","input":[{"role":"user","content":"call it"},{"type":"function_call","call_id":"c1","name":"f","arguments":"{\"a\":1}"},{"type":"function_call_output","call_id":"c1","output":"42"},{"type":"reasoning","summary":[]},{"type":"message","role":"user","content":[{"type":"input_text","text":"and now"},{"type":"input_image","image_url":"` + png + `"}]}],"max_output_tokens":2,"stream":true}`},
				{name: "responses adapter", path: respPath, body: `{"model":"sim-lora","input":"Hello there","max_output_tokens":2}`},
				{name: "responses tools none", path: respPath, body: `{"input":"x","max_output_tokens":2,"tools":[{"type":"function","name":"f","parameters":{}}],"tool_choice":"none"}`},
				{name: "responses default max tokens", path: respPath, body: `{"input":"x","temperature":0}`},
				{name: "error empty", path: respPath, body: ``},
				{name: "error model", path: respPath, body: `{"model":"nope","input":"x"}`},
				{name: "error input", path: respPath, body: `{"input":5}`},
				{name: "error input missing", path: respPath, body: `{}`},
				{name: "error item type", path: respPath, body: `{"input":[{"type":"web_search_call"}]}`},
				{name: "error role", path: respPath, body: `{"input":[{"role":"robot","content":"x"}]}`},
				{name: "error part", path: respPath, body: `{"input":[{"role":"user","content":[{"type":"input_file"}]}]}`},
				{name: "error previous_response_id", path: respPath, body: `{"input":"x","previous_response_id":"resp_1"}`},
				{name: "error effort", path: respPath, body: `{"input":"x","reasoning":{"effort":"max"}}`},
				{name: "error max_output_tokens", path: respPath, body: `{"input":"x","max_output_tokens":0}`},
				{name: "error context", path: respPath, body: `{"input":"x","max_output_tokens":600}`},
				{name: "error tools", path: respPath, body: `{"input":"x","tools":[{"type":"web_search"}]}`},
				{name: "error tool_choice", path: respPath, body: `{"input":"x","tool_choice":"required"}`},
				{name: "error method", method: http.MethodGet, path: respPath},
			},
		},
		{
			file: "responses-agent",
			cfg: func(c *Config) {
				c.Seed = 15
				c.ReasoningTokens = 2
				c.ToolCallProbability = 0.5
			},
			cases: []goldenCase{
				{name: "responses reasoning stream", path: respPath, body: `{"input":"think","max_output_tokens":4,"stream":true,"reasoning":{"effort":"medium"}}`},
				{name: "responses reasoning unary", path: respPath, body: `{"input":"think","max_output_tokens":4,"reasoning":{"effort":"low"}}`},
				{name: "responses reasoning cut stream", path: respPath, body: `{"input":"think","max_output_tokens":1,"stream":true}`},
				{name: "responses reasoning cut unary", path: respPath, body: `{"input":"think","max_output_tokens":1}`},
				{name: "responses tool stream", path: respPath, body: `{"input":"weather?","max_output_tokens":4,"stream":true,"tools":[{"type":"function","name":"get_weather","parameters":{"type":"object"}}],"tool_choice":"required"}`},
				{name: "responses tool unary", path: respPath, body: `{"input":"weather?","max_output_tokens":4,"tools":[{"type":"function","name":"get_weather"}],"tool_choice":{"type":"function","name":"get_weather"}}`},
				{name: "responses tool no reasoning stream", path: respPath, body: `{"input":"weather?","max_output_tokens":3,"stream":true,"reasoning":{"effort":"none"},"tools":[{"type":"function","name":"get_weather"}],"tool_choice":"required"}`},
				{name: "responses tool auto", path: respPath, body: `{"input":"maybe","max_output_tokens":4,"temperature":0,"tools":[{"type":"function","name":"f"}]}`},
			},
		},
		{
			file: "messages",
			cfg: func(c *Config) {
				c.Seed = 16
				c.EOSProbability = 0.3
				c.MaxModelLen = 2048
				c.Adapters = []AdapterConfig{{Name: "sim-lora", DecodeFactor: 3}}
			},
			cases: []goldenCase{
				{name: "messages stream", path: msgPath, headers: anthropicVersion, body: `{"model":"sim-model","max_tokens":3,"messages":[{"role":"user","content":"Hello there"}],"stream":true}`},
				{name: "messages unary", path: msgPath, headers: anthropicVersion, body: `{"model":"sim-model","max_tokens":3,"messages":[{"role":"user","content":"Hello there"}]}`},
				{name: "messages stream early stop", path: msgPath, headers: anthropicVersion, body: `{"model":"sim-model","max_tokens":40,"temperature":0,"messages":[{"role":"user","content":"stop early please"}],"stream":true}`},
				{name: "messages unary early stop", path: msgPath, headers: anthropicVersion, body: `{"model":"sim-model","max_tokens":40,"temperature":0,"messages":[{"role":"user","content":"stop early please"}]}`},
				{name: "messages blocks", path: msgPath, headers: anthropicVersion, body: `{"model":"sim-model","max_tokens":2,"system":[{"type":"text","text":"Be brief."}],"messages":[{"role":"user","content":[{"type":"text","text":"look"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"` + pngRaw + `"}}]},{"role":"assistant","content":[{"type":"thinking","thinking":"hm"},{"type":"tool_use","id":"t1","name":"f","input":{"a":1}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"42"}]}],"stream":true}`},
				{name: "messages adapter", path: msgPath, headers: anthropicVersion, body: `{"model":"sim-lora","max_tokens":2,"messages":[{"role":"user","content":"Hello there"}]}`},
				{name: "messages thinking disabled", path: msgPath, headers: anthropicVersion, body: `{"model":"sim-model","max_tokens":2,"thinking":{"type":"disabled"},"messages":[{"role":"user","content":"x"}]}`},
				{name: "messages thinking without configured reasoning", path: msgPath, headers: anthropicVersion, body: `{"model":"sim-model","max_tokens":1030,"temperature":0,"thinking":{"type":"enabled","budget_tokens":1024},"messages":[{"role":"user","content":"x"}]}`},
				{name: "error version", path: msgPath, body: `{"model":"sim-model","max_tokens":2,"messages":[{"role":"user","content":"x"}]}`},
				{name: "error empty", path: msgPath, headers: anthropicVersion, body: ``},
				{name: "error json", path: msgPath, headers: anthropicVersion, body: `{"model":`},
				{name: "error model missing", path: msgPath, headers: anthropicVersion, body: `{"max_tokens":2,"messages":[{"role":"user","content":"x"}]}`},
				{name: "error model", path: msgPath, headers: anthropicVersion, body: `{"model":"nope","max_tokens":2,"messages":[{"role":"user","content":"x"}]}`},
				{name: "error max_tokens", path: msgPath, headers: anthropicVersion, body: `{"model":"sim-model","messages":[{"role":"user","content":"x"}]}`},
				{name: "error temperature", path: msgPath, headers: anthropicVersion, body: `{"model":"sim-model","max_tokens":2,"temperature":1.5,"messages":[{"role":"user","content":"x"}]}`},
				{name: "error thinking budget", path: msgPath, headers: anthropicVersion, body: `{"model":"sim-model","max_tokens":2000,"thinking":{"type":"enabled","budget_tokens":10},"messages":[{"role":"user","content":"x"}]}`},
				{name: "error role", path: msgPath, headers: anthropicVersion, body: `{"model":"sim-model","max_tokens":2,"messages":[{"role":"system","content":"x"}]}`},
				{name: "error block", path: msgPath, headers: anthropicVersion, body: `{"model":"sim-model","max_tokens":2,"messages":[{"role":"user","content":[{"type":"document"}]}]}`},
				{name: "error image url", path: msgPath, headers: anthropicVersion, body: `{"model":"sim-model","max_tokens":2,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"url","url":"http://x"}}]}]}`},
				{name: "error tools", path: msgPath, headers: anthropicVersion, body: `{"model":"sim-model","max_tokens":2,"tools":[{"name":"f"}],"messages":[{"role":"user","content":"x"}]}`},
				{name: "error tool_choice", path: msgPath, headers: anthropicVersion, body: `{"model":"sim-model","max_tokens":2,"tool_choice":{"type":"any"},"messages":[{"role":"user","content":"x"}]}`},
				{name: "error context", path: msgPath, headers: anthropicVersion, body: `{"model":"sim-model","max_tokens":2047,"messages":[{"role":"user","content":"Hello there"}]}`},
				{name: "error method", method: http.MethodGet, path: msgPath},
			},
		},
		{
			file: "messages-agent",
			cfg: func(c *Config) {
				c.Seed = 17
				c.ReasoningTokens = 2
				c.ToolCallProbability = 0.5
				c.EOSProbability = 0.3
			},
			cases: []goldenCase{
				{name: "messages thinking stream", path: msgPath, headers: anthropicVersion, body: `{"model":"sim-model","max_tokens":1030,"temperature":0,"thinking":{"type":"enabled","budget_tokens":1024},"messages":[{"role":"user","content":"think"}],"stream":true}`},
				{name: "messages thinking unary", path: msgPath, headers: anthropicVersion, body: `{"model":"sim-model","max_tokens":1030,"temperature":0,"thinking":{"type":"enabled","budget_tokens":1024},"messages":[{"role":"user","content":"think"}]}`},
				{name: "messages tool stream", path: msgPath, headers: anthropicVersion, body: `{"model":"sim-model","max_tokens":4,"tools":[{"name":"get_weather","input_schema":{"type":"object"}}],"tool_choice":{"type":"any"},"messages":[{"role":"user","content":"weather?"}],"stream":true}`},
				{name: "messages tool unary", path: msgPath, headers: anthropicVersion, body: `{"model":"sim-model","max_tokens":4,"tools":[{"name":"get_weather","input_schema":{"type":"object"}},{"name":"get_time","input_schema":{}}],"tool_choice":{"type":"tool","name":"get_time"},"messages":[{"role":"user","content":"weather?"}]}`},
				{name: "messages tool auto", path: msgPath, headers: anthropicVersion, body: `{"model":"sim-model","max_tokens":4,"temperature":0,"tools":[{"name":"f","input_schema":{}}],"messages":[{"role":"user","content":"maybe"}],"stream":true}`},
				{name: "messages thinking and tool auto", path: msgPath, headers: anthropicVersion, body: `{"model":"sim-model","max_tokens":1030,"temperature":0,"thinking":{"type":"enabled","budget_tokens":1024},"tools":[{"name":"f","input_schema":{}}],"tool_choice":{"type":"none"},"messages":[{"role":"user","content":"maybe"}]}`},
				{name: "error thinking forced tool", path: msgPath, headers: anthropicVersion, body: `{"model":"sim-model","max_tokens":1030,"thinking":{"type":"enabled","budget_tokens":1024},"tools":[{"name":"f","input_schema":{}}],"tool_choice":{"type":"any"},"messages":[{"role":"user","content":"x"}]}`},
			},
		},
		{
			file: "embeddings",
			cfg: func(c *Config) {
				c.Seed = 18
				c.EmbeddingDimensions = 8
				c.MaxModelLen = 64
				c.NumKVBlocks = 8
				c.Adapters = []AdapterConfig{{Name: "sim-lora"}}
			},
			cases: []goldenCase{
				{name: "embeddings one", path: embPath, body: `{"model":"sim-model","input":"the quick brown fox"}`},
				{name: "embeddings batch", path: embPath, body: `{"input":["the quick brown fox","the quick brown dog"]}`},
				{name: "embeddings base64 dimensions", path: embPath, body: `{"input":"the quick brown fox","encoding_format":"base64","dimensions":4}`},
				{name: "embeddings float", path: embPath, body: `{"input":[1,2,3],"encoding_format":"float","dimensions":2}`},
				{name: "embeddings id lists", path: embPath, body: `{"input":[[1,2,3],[4]]}`},
				{name: "embeddings adapter", path: embPath, body: `{"model":"sim-lora","input":"x"}`},
				{name: "error empty", path: embPath, body: ``},
				{name: "error model", path: embPath, body: `{"model":"nope","input":"x"}`},
				{name: "error input missing", path: embPath, body: `{}`},
				{name: "error input empty", path: embPath, body: `{"input":[]}`},
				{name: "error input mixed", path: embPath, body: `{"input":["a",[1]]}`},
				{name: "error token id", path: embPath, body: `{"input":[[1,-1]]}`},
				{name: "error no token", path: embPath, body: `{"input":["a"," "]}`},
				{name: "error encoding_format", path: embPath, body: `{"input":"x","encoding_format":"int8"}`},
				{name: "error dimensions", path: embPath, body: `{"input":"x","dimensions":9}`},
				{name: "error too long", path: embPath, body: `{"input":"` + strings.Repeat("a ", 70) + `"}`},
				{name: "error kv capacity", path: embPath, body: `{"input":["` + strings.Repeat("a ", 60) + `","` + strings.Repeat("b ", 60) + `","` + strings.Repeat("c ", 60) + `"]}`},
				{name: "error method", method: http.MethodGet, path: embPath},
			},
		},
		{
			file: "faults",
			cfg: func(c *Config) {
				c.Seed = 19
			},
			cases: []goldenCase{
				{name: "http_500", path: chatPath, headers: []string{FaultHeader, "http_500"}, body: `{"messages":[{"role":"user","content":"x"}],"max_tokens":2,"stream":true}`},
				{name: "http_503", path: complPath, headers: []string{FaultHeader, "http_503"}, body: `{"prompt":"x","max_tokens":2}`},
				{name: "http_429", path: chatPath, headers: []string{FaultHeader, "http_429"}, body: `{"messages":[{"role":"user","content":"x"}],"max_tokens":2}`},
				{name: "error http_429 argument", path: chatPath, headers: []string{FaultHeader, "http_429:2500ms"}, body: `{"messages":[{"role":"user","content":"x"}],"max_tokens":2}`},
				{name: "reset stream chat", path: chatPath, headers: []string{FaultHeader, "reset:2"}, body: `{"messages":[{"role":"user","content":"x"}],"max_tokens":4,"stream":true}`},
				{name: "reset stream completions at 0", path: complPath, headers: []string{FaultHeader, "reset:0"}, body: `{"prompt":"x","max_tokens":4,"stream":true}`},
				{name: "reset stream past the end", path: chatPath, headers: []string{FaultHeader, "reset:100"}, body: `{"messages":[{"role":"user","content":"x"}],"max_tokens":2,"stream":true,"stream_options":{"include_usage":true}}`},
				{name: "reset unary", path: chatPath, headers: []string{FaultHeader, "reset:1"}, body: `{"messages":[{"role":"user","content":"x"}],"max_tokens":2}`},
				{name: "stall_first stream", path: chatPath, headers: []string{FaultHeader, "stall_first:1ms"}, body: `{"messages":[{"role":"user","content":"x"}],"max_tokens":2,"stream":true}`},
				{name: "stall_first unary", path: complPath, headers: []string{FaultHeader, "stall_first:1ms"}, body: `{"prompt":"x","max_tokens":2}`},
				{name: "stall stream", path: complPath, headers: []string{FaultHeader, "stall:1:1ms"}, body: `{"prompt":"x","max_tokens":3,"stream":true}`},
				{name: "stall unary", path: chatPath, headers: []string{FaultHeader, "stall:1:1ms"}, body: `{"messages":[{"role":"user","content":"x"}],"max_tokens":3}`},
				{name: "malformed stream chat", path: chatPath, headers: []string{FaultHeader, "malformed:1"}, body: `{"messages":[{"role":"user","content":"x"}],"max_tokens":3,"stream":true}`},
				{name: "malformed stream completions", path: complPath, headers: []string{FaultHeader, "malformed:0"}, body: `{"prompt":"x","max_tokens":3,"stream":true}`},
				{name: "malformed unary", path: chatPath, headers: []string{FaultHeader, "malformed:1"}, body: `{"messages":[{"role":"user","content":"x"}],"max_tokens":3}`},
				{name: "no_done stream", path: chatPath, headers: []string{FaultHeader, "no_done:2"}, body: `{"messages":[{"role":"user","content":"x"}],"max_tokens":3,"stream":true}`},
				{name: "no_done at the end", path: complPath, headers: []string{FaultHeader, "no_done:50"}, body: `{"prompt":"x","max_tokens":3,"stream":true}`},
				{name: "empty stream", path: chatPath, headers: []string{FaultHeader, "empty"}, body: `{"messages":[{"role":"user","content":"x"}],"max_tokens":3,"stream":true,"stream_options":{"include_usage":true}}`},
				{name: "empty unary", path: complPath, headers: []string{FaultHeader, "empty"}, body: `{"prompt":"x","max_tokens":3}`},
				{name: "error no_done unary", path: chatPath, headers: []string{FaultHeader, "no_done:1"}, body: `{"messages":[{"role":"user","content":"x"}],"max_tokens":3}`},
				{name: "error bad fault", path: chatPath, headers: []string{FaultHeader, "explode"}, body: `{"messages":[{"role":"user","content":"x"}]}`},
				{name: "error two fault headers", path: chatPath, headers: []string{FaultHeader, "empty", FaultHeader, "reset"}, body: `{"messages":[{"role":"user","content":"x"}]}`},
				{name: "fault header ignored by responses", path: respPath, headers: []string{FaultHeader, "http_500"}, body: `{"input":"x","max_output_tokens":2}`},
				{name: "fault header ignored by messages", path: msgPath, headers: []string{FaultHeader, "http_500", anthropicVersion[0], anthropicVersion[1]}, body: `{"model":"sim-model","max_tokens":2,"messages":[{"role":"user","content":"x"}]}`},
				{name: "fault header ignored by embeddings", path: embPath, headers: []string{FaultHeader, "http_500"}, body: `{"input":"x","dimensions":2}`},
			},
		},
		{
			file: "faults-random",
			cfg: func(c *Config) {
				c.Seed = 20
				c.Faults.HTTP500.Probability = 0.1
				c.Faults.HTTP429.Probability = 0.1
				c.Faults.Empty.Probability = 0.1
				c.Faults.NoDone = FaultSpec{Probability: 0.2, AfterTokens: 1}
				c.Faults.Malformed = FaultSpec{Probability: 0.1, AfterTokens: 1}
				c.Faults.Reset = FaultSpec{Probability: 0.1, AfterTokens: 1}
			},
			cases: func() []goldenCase {
				var cs []goldenCase
				for i := 0; i < 10; i++ {
					cs = append(cs, goldenCase{name: fmt.Sprintf("random stream %d", i), path: chatPath, body: `{"messages":[{"role":"user","content":"x"}],"max_tokens":2,"stream":true}`})
					cs = append(cs, goldenCase{name: fmt.Sprintf("random unary %d", i), path: complPath, body: `{"prompt":"x","max_tokens":2}`})
				}
				cs = append(cs,
					goldenCase{name: "random draws skip responses", path: respPath, body: `{"input":"x","max_output_tokens":2}`},
					goldenCase{name: "random draws skip messages", path: msgPath, headers: anthropicVersion, body: `{"model":"sim-model","max_tokens":2,"messages":[{"role":"user","content":"x"}],"stream":true}`},
					goldenCase{name: "random draws skip embeddings", path: embPath, body: `{"input":"x","dimensions":2}`},
				)
				return cs
			}(),
		},
	}
}

// goldenShutdownCases are stopped while in flight, each on its own
// server: "admitted" ones once the engine holds them (steps of an hour:
// no token yet), "first token" ones once the marker (a token event) has
// come out (steps of 3 s: the second token is far away).
var goldenShutdownCases = []struct {
	goldenCase
	marker string // "": stop once admitted
}{
	{goldenCase{name: "chat stream before the first token", path: chatPath, body: `{"messages":[{"role":"user","content":"x"}],"max_tokens":3,"stream":true}`}, ""},
	{goldenCase{name: "chat unary", path: chatPath, body: `{"messages":[{"role":"user","content":"x"}],"max_tokens":3}`}, ""},
	{goldenCase{name: "completions stream before the first token", path: complPath, body: `{"prompt":"x","max_tokens":3,"stream":true}`}, ""},
	{goldenCase{name: "completions unary", path: complPath, body: `{"prompt":"x","max_tokens":3}`}, ""},
	{goldenCase{name: "responses stream before the first token", path: respPath, body: `{"input":"x","max_output_tokens":3,"stream":true}`}, ""},
	{goldenCase{name: "responses unary", path: respPath, body: `{"input":"x","max_output_tokens":3}`}, ""},
	{goldenCase{name: "messages stream before the first token", path: msgPath, headers: anthropicVersion, body: `{"model":"sim-model","max_tokens":3,"messages":[{"role":"user","content":"x"}],"stream":true}`}, ""},
	{goldenCase{name: "messages unary", path: msgPath, headers: anthropicVersion, body: `{"model":"sim-model","max_tokens":3,"messages":[{"role":"user","content":"x"}]}`}, ""},
	{goldenCase{name: "embeddings", path: embPath, body: `{"input":"x","dimensions":2}`}, ""},
	{goldenCase{name: "chat stream after the first token", path: chatPath, body: `{"messages":[{"role":"user","content":"x"}],"max_tokens":3,"stream":true,"stream_options":{"include_usage":true}}`}, `"delta":{"content":" `},
	{goldenCase{name: "completions stream after the first token", path: complPath, body: `{"prompt":"x","max_tokens":3,"stream":true}`}, `"text":" `},
	{goldenCase{name: "responses stream after the first token", path: respPath, body: `{"input":"x","max_output_tokens":3,"stream":true}`}, `response.output_text.delta`},
	{goldenCase{name: "messages stream after the first token", path: msgPath, headers: anthropicVersion, body: `{"model":"sim-model","max_tokens":3,"messages":[{"role":"user","content":"x"}],"stream":true}`}, `"text_delta"`},
}

func TestGolden(t *testing.T) {
	for _, gs := range goldenServers() {
		t.Run(gs.file, func(t *testing.T) {
			t.Parallel()
			cfg := zeroConfig()
			cfg.RequestLog = filepath.Join(t.TempDir(), "requests.jsonl")
			gs.cfg(&cfg)
			s, addr := startGoldenServer(t, cfg)
			var out strings.Builder
			for _, c := range gs.cases {
				out.WriteString(goldenExchange(t, addr, c, "", nil))
				goldenSettle(t, s)
			}
			out.WriteString(goldenEnd(t, s, cfg.RequestLog, true))
			checkGolden(t, gs.file, out.String())
		})
	}
	t.Run("shutdown", func(t *testing.T) {
		t.Parallel()
		parts := make([]string, len(goldenShutdownCases))
		t.Run("cases", func(t *testing.T) {
			for i, c := range goldenShutdownCases {
				t.Run(strconv.Itoa(i), func(t *testing.T) {
					t.Parallel()
					parts[i] = goldenShutdown(t, c.goldenCase, c.marker)
				})
			}
		})
		// A server whose engine has stopped refuses what still reaches
		// its handler.
		cfg := zeroConfig()
		cfg.Seed = 21
		cfg.RequestLog = filepath.Join(t.TempDir(), "requests.jsonl")
		s, _ := startGoldenServer(t, cfg)
		if err := s.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		var out strings.Builder
		for _, p := range parts {
			out.WriteString(p)
		}
		for _, c := range []goldenCase{
			{name: "chat after shutdown", path: chatPath, body: `{"messages":[{"role":"user","content":"x"}],"max_tokens":3,"stream":true}`},
			{name: "completions after shutdown", path: complPath, body: `{"prompt":"x","max_tokens":3}`},
			{name: "responses after shutdown", path: respPath, body: `{"input":"x","max_output_tokens":3,"stream":true}`},
			{name: "messages after shutdown", path: msgPath, headers: anthropicVersion, body: `{"model":"sim-model","max_tokens":3,"messages":[{"role":"user","content":"x"}]}`},
			{name: "embeddings after shutdown", path: embPath, body: `{"input":"x"}`},
		} {
			out.WriteString(goldenInProcess(t, s, c))
		}
		checkGolden(t, "shutdown", out.String())
	})
}

// goldenShutdown runs c on a server of its own and stops the engine once
// c is admitted (marker "") or once marker has come out.
func goldenShutdown(t *testing.T, c goldenCase, marker string) string {
	cfg := DefaultConfig()
	cfg.Seed = 22
	cfg.EOSProbability = 0
	cfg.PrefillBase, cfg.PrefillPerToken, cfg.DecodePerSeq = 0, 0, 0
	cfg.DecodeBase = time.Hour
	if marker != "" {
		cfg.DecodeBase = 3 * time.Second
	}
	cfg.RequestLog = filepath.Join(t.TempDir(), "requests.jsonl")
	s, addr := startGoldenServer(t, cfg)
	stopped := make(chan struct{})
	stop := func() {
		s.engine.stop()
		close(stopped)
	}
	if marker == "" {
		go func() {
			deadline := time.Now().Add(30 * time.Second)
			for s.engine.numRunning.Load() != 1 {
				if time.Now().After(deadline) {
					t.Error("the request was not admitted within 30s")
					break
				}
				time.Sleep(time.Millisecond)
			}
			stop()
		}()
	}
	out := goldenExchange(t, addr, c, marker, stop)
	select {
	case <-stopped:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: answered without the engine being stopped:\n%s", c.name, out)
	}
	return out + goldenEnd(t, s, cfg.RequestLog, false)
}

// goldenSettle waits until s's handlers are all over, so that the
// request log lines come in the order of the requests (a reset fault
// cuts the connection before its handler returns).
func goldenSettle(t *testing.T, s *Server) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		s.reqlog.mu.Lock()
		open := s.reqlog.open
		s.reqlog.mu.Unlock()
		if open == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("a handler did not return within 30s")
		}
		time.Sleep(100 * time.Microsecond)
	}
}

func startGoldenServer(t *testing.T, cfg Config) (*Server, string) {
	t.Helper()
	s, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.Serve(l) }()
	t.Cleanup(func() {
		_ = s.Shutdown(context.Background())
		if n := s.panics.Load(); n != 0 {
			t.Errorf("%d handler panics recovered", n)
		}
	})
	return s, l.Addr().String()
}

// goldenRequest writes c's request line and headers as the transcript
// shows them, and returns the wire request.
func goldenRequest(c goldenCase) (transcript, wire string) {
	method := c.method
	if method == "" {
		method = http.MethodPost
	}
	var tr, w strings.Builder
	fmt.Fprintf(&tr, "=== %s\n> %s %s\n", c.name, method, c.path)
	fmt.Fprintf(&w, "%s %s HTTP/1.1\r\nHost: sim.test\r\nConnection: close\r\n", method, c.path)
	if method == http.MethodPost {
		fmt.Fprintf(&w, "Content-Type: application/json\r\nContent-Length: %d\r\n", len(c.body))
	}
	for i := 0; i+1 < len(c.headers); i += 2 {
		fmt.Fprintf(&tr, "> %s: %s\n", c.headers[i], c.headers[i+1])
		fmt.Fprintf(&w, "%s: %s\r\n", c.headers[i], c.headers[i+1])
	}
	w.WriteString("\r\n")
	w.WriteString(c.body)
	if c.body != "" {
		body := c.body
		if len(body) > 300 {
			body = body[:300] + fmt.Sprintf("… (%d bytes)", len(c.body))
		}
		fmt.Fprintf(&tr, "> %s\n", body)
	}
	return tr.String(), w.String()
}

// goldenExchange sends c on a fresh connection and returns the
// transcript of the whole response, read to the connection's end. When
// marker is not empty, onMarker runs once the response holds it.
func goldenExchange(t *testing.T, addr string, c goldenCase, marker string, onMarker func()) string {
	t.Helper()
	tr, wire := goldenRequest(c)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(60 * time.Second))
	if _, err := io.WriteString(conn, wire); err != nil {
		t.Fatalf("%s: writing the request: %v", c.name, err)
	}
	var got []byte
	buf := make([]byte, 32<<10)
	fired := marker == ""
	end := "EOF"
	for {
		n, err := conn.Read(buf)
		got = append(got, buf[:n]...)
		if !fired && bytes.Contains(got, []byte(marker)) {
			fired = true
			onMarker()
		}
		if err != nil {
			var ne net.Error
			switch {
			case errors.Is(err, io.EOF):
			case errors.As(err, &ne) && ne.Timeout():
				t.Fatalf("%s: no end of response within 60s; got %q", c.name, got)
			default:
				end = "connection error" // the reset fault: ECONNRESET
			}
			break
		}
	}
	return tr + "<<<\n" + normaliseResponse(string(got)) + "\n>>> " + end + "\n\n"
}

// goldenInProcess serves c through s.Handler without a connection.
func goldenInProcess(t *testing.T, s *Server, c goldenCase) string {
	t.Helper()
	tr, _ := goldenRequest(c)
	req := httptest.NewRequest(http.MethodPost, c.path, strings.NewReader(c.body))
	for i := 0; i+1 < len(c.headers); i += 2 {
		req.Header.Add(c.headers[i], c.headers[i+1])
	}
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, req)
	var b strings.Builder
	fmt.Fprintf(&b, "%d\n", rec.Code)
	_ = rec.Result().Header.Write(&b)
	b.WriteString("\n")
	b.Write(rec.Body.Bytes())
	return tr + "<<< (in process)\n" + normaliseResponse(b.String()) + "\n>>>\n\n"
}

var (
	goldenDateHeader  = regexp.MustCompile(`(?m)^Date: [^\r\n]*`)
	goldenCreated     = regexp.MustCompile(`"(created|created_at)":\d{10}\b`)
	goldenLogTimes    = regexp.MustCompile(`"(arrival|ttft_seconds|ttfa_seconds|e2e_seconds|tpot_seconds)":("[^"]*"|[-+0-9.eE]+)`)
	goldenMetricValue = regexp.MustCompile(`^((vllm:\w+_seconds_(bucket|sum))|vllm:lora_requests_info)(\{[^}]*\})? .*$`)
)

// normaliseResponse replaces the time-dependent fields and shows
// carriage returns as \r.
func normaliseResponse(s string) string {
	s = goldenDateHeader.ReplaceAllString(s, "Date: <date>")
	s = goldenCreated.ReplaceAllString(s, `"$1":<unixtime>`)
	return strings.ReplaceAll(s, "\r", `\r`)
}

// goldenEnd shuts s down and returns its request log and (when metrics)
// its /metrics exposition, normalised.
func goldenEnd(t *testing.T, s *Server, logPath string, metrics bool) string {
	t.Helper()
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	log, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	b.WriteString("=== request log\n")
	b.WriteString(goldenLogTimes.ReplaceAllString(string(log), `"$1":<time>`))
	b.WriteString("\n")
	if !metrics {
		return b.String()
	}
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	b.WriteString("=== /metrics\n")
	for _, line := range strings.Split(rec.Body.String(), "\n") {
		name := strings.TrimPrefix(strings.TrimPrefix(line, "# HELP "), "# TYPE ")
		if strings.HasPrefix(name, "go_") || strings.HasPrefix(name, "process_") {
			continue
		}
		if m := goldenMetricValue.FindStringSubmatch(line); m != nil {
			line = line[:len(m[1])+len(m[4])] + " <time>"
		}
		b.WriteString(line)
		b.WriteString("\n")
	}
	return b.String()
}

func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name+".txt")
	if *updateGolden {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./sim/ -run TestGolden -update to create it)", err)
	}
	if got == string(want) {
		return
	}
	gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
	for i := 0; i < max(len(gl), len(wl)); i++ {
		var g, w string
		if i < len(gl) {
			g = gl[i]
		}
		if i < len(wl) {
			w = wl[i]
		}
		if g != w {
			t.Fatalf("%s differs from the simulator's output, first at line %d:\nwant %q\ngot  %q\n(go test ./sim/ -run TestGolden -update rewrites it; review the diff)", path, i+1, w, g)
		}
	}
}
