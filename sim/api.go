// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
)

// apiKind is the OpenAI endpoint a request came through.
type apiKind uint8

const (
	apiChat apiKind = iota
	apiCompletions
	apiResponses  // POST /v1/responses (responses.go)
	apiMessages   // POST /v1/messages (messages.go)
	apiEmbeddings // POST /v1/embeddings (embeddings.go)
)

func (a apiKind) String() string {
	switch a {
	case apiChat:
		return "chat"
	case apiResponses:
		return "responses"
	case apiMessages:
		return "messages"
	case apiEmbeddings:
		return "embeddings"
	}
	return "completions"
}

// completionRequest is the subset of an OpenAI/vLLM completion request the
// simulator reads. Other fields are accepted and ignored.
type completionRequest struct {
	Model    string          `json:"model"`
	Messages []chatMessage   `json:"messages"`
	Prompt   json.RawMessage `json:"prompt"`

	MaxTokens           *int     `json:"max_tokens"`
	MaxCompletionTokens *int     `json:"max_completion_tokens"`
	MinTokens           *int     `json:"min_tokens"`
	Temperature         *float64 `json:"temperature"`
	TopP                *float64 `json:"top_p"`
	N                   *int     `json:"n"`
	Seed                *int64   `json:"seed"`
	IgnoreEOS           bool     `json:"ignore_eos"`

	Stream        bool           `json:"stream"` // next to IgnoreEOS: no padding
	StreamOptions *streamOptions `json:"stream_options"`

	// Chat only (ignored by /v1/completions): reasoning_effort scales the
	// reasoning tokens; tools and tool_choice may turn the answer into a
	// tool call. Pointers to raw JSON, so that a plain request's decoded
	// struct stays small (it is on the heap) and completions do not
	// validate them.
	ReasoningEffort *string          `json:"reasoning_effort"`
	Tools           *json.RawMessage `json:"tools"`
	ToolChoice      *json.RawMessage `json:"tool_choice"`
}

type streamOptions struct {
	IncludeUsage         bool `json:"include_usage"`
	ContinuousUsageStats bool `json:"continuous_usage_stats"`
}

// chatMessage is a chat message; content is a string, null, or an array of
// text parts.
type chatMessage struct {
	Role    string         `json:"role"`
	Content messageContent `json:"content"`
}

// messageContent holds the text parts of a message's content (one part for
// a string) and its images. The chat template tokenises each part
// separately, then the images' tokens (images.go).
type messageContent struct {
	parts  []string
	images []imageRef // nil without images
}

type contentPart struct {
	Type     string  `json:"type"`
	Text     *string `json:"text"`
	ImageURL *struct {
		URL string `json:"url"`
	} `json:"image_url"`
}

func (c *messageContent) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case len(b) == 0 || string(b) == "null":
		c.parts = nil
		return nil
	case b[0] == '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		c.parts = []string{s}
		return nil
	case b[0] == '[':
		var parts []contentPart
		if err := json.Unmarshal(b, &parts); err != nil {
			return errors.New("content must be a string or an array of {\"type\":\"text\",\"text\":...} parts")
		}
		c.parts = make([]string, 0, len(parts))
		for i, p := range parts {
			if p.Type == "image_url" {
				if p.ImageURL == nil {
					return fmt.Errorf("content part %d has no image_url", i)
				}
				img, err := parseImageURL(p.ImageURL.URL)
				if err != nil {
					return fmt.Errorf("content part %d: %w", i, err)
				}
				c.images = append(c.images, img)
				continue
			}
			if p.Type != "text" {
				return fmt.Errorf("content part %d has type %q; only \"text\" and \"image_url\" parts are supported", i, truncate(p.Type, maxHeaderEcho))
			}
			if p.Text == nil {
				return fmt.Errorf("content part %d has no text", i)
			}
			c.parts = append(c.parts, *p.Text)
		}
		return nil
	}
	return errors.New("content must be a string or an array of {\"type\":\"text\",\"text\":...} parts")
}

// apiError is an OpenAI-style error answer.
type apiError struct {
	status  int
	message string
	typ     string
	param   string // empty: null
	code    string // empty: null
}

func (e *apiError) Error() string { return e.message }

func badRequest(param, format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, message: fmt.Sprintf(format, args...), typ: "invalid_request_error", param: param}
}

// writeError writes an OpenAI-style JSON error:
// {"error":{"message","type","param","code"}}.
func writeError(w http.ResponseWriter, e *apiError) {
	body := struct {
		Error struct {
			Message string  `json:"message"`
			Type    string  `json:"type"`
			Param   *string `json:"param"`
			Code    *string `json:"code"`
		} `json:"error"`
	}{}
	body.Error.Message = e.message
	body.Error.Type = e.typ
	if e.param != "" {
		body.Error.Param = &e.param
	}
	if e.code != "" {
		body.Error.Code = &e.code
	}
	b, _ := json.Marshal(body)
	h := w.Header()
	h["Content-Type"] = jsonContentType
	h["Content-Length"] = []string{strconv.Itoa(len(b) + 1)}
	w.WriteHeader(e.status)
	b = append(b, '\n')
	_, _ = w.Write(b)
}

// decodeJSON unmarshals a request body, turning decoding errors into 400s
// that name the offending field.
func decodeJSON(body []byte, v any) *apiError {
	if len(bytes.TrimSpace(body)) == 0 {
		return badRequest("", "request body is empty; expected a JSON object")
	}
	err := json.Unmarshal(body, v)
	if err == nil {
		return nil
	}
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return badRequest("", "invalid JSON body at offset %d: %s", syn.Offset, syn.Error())
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			return badRequest("", "invalid JSON body: expected a JSON object, got %s", typ.Value)
		}
		return badRequest(field, "invalid type for %q: got %s, want %s", field, typ.Value, jsonTypeName(typ.Type.Kind().String()))
	}
	msg := err.Error()
	msg = strings.TrimPrefix(msg, "json: ")
	return badRequest("", "invalid request: %s", truncate(msg, 256))
}

func jsonTypeName(kind string) string {
	switch kind {
	case "int", "int64", "int32":
		return "integer"
	case "float64", "float32":
		return "number"
	case "bool":
		return "boolean"
	case "slice":
		return "array"
	case "struct", "map":
		return "object"
	}
	return kind
}

// promptInput is a decoded completions prompt.
type promptInput struct {
	text  string
	ids   []int
	isIDs bool
}

// parsePrompt decodes the completions prompt: a string, a list of token
// ids, or a batch of one of either (larger batches are refused).
func parsePrompt(raw json.RawMessage) (promptInput, *apiError) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return promptInput{}, badRequest("prompt", "prompt is required")
	}
	switch raw[0] {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return promptInput{}, badRequest("prompt", "prompt is not a valid JSON string")
		}
		return promptInput{text: s}, nil
	case '[':
		var items []json.RawMessage
		if err := json.Unmarshal(raw, &items); err != nil {
			return promptInput{}, badRequest("prompt", "prompt must be a string, an array of token ids, or an array with one of either")
		}
		if len(items) == 0 {
			return promptInput{}, badRequest("prompt", "prompt must not be empty")
		}
		first := bytes.TrimSpace(items[0])
		if len(first) > 0 && (first[0] == '"' || first[0] == '[') {
			if len(items) != 1 {
				return promptInput{}, badRequest("prompt", "batched prompts are not supported: send one prompt per request (got %d)", len(items))
			}
			return parsePrompt(items[0])
		}
		ids := make([]int, len(items))
		for i, it := range items {
			v, err := strconv.ParseInt(string(bytes.TrimSpace(it)), 10, 64)
			if err != nil {
				return promptInput{}, badRequest("prompt", "prompt[%d] is not an integer token id", i)
			}
			if v < 0 || v >= VocabSize {
				return promptInput{}, badRequest("prompt", "token id %d at prompt[%d] is out of vocabulary range [0, %d)", v, i, VocabSize)
			}
			ids[i] = int(v)
		}
		return promptInput{ids: ids, isIDs: true}, nil
	}
	return promptInput{}, badRequest("prompt", "prompt must be a string, an array of token ids, or an array with one of either")
}

// validateSampling checks the parameters common to both endpoints.
func validateSampling(r *completionRequest) *apiError {
	if r.N != nil && *r.N != 1 {
		return badRequest("n", "only n=1 is supported, got %d", *r.N)
	}
	if t := r.Temperature; t != nil && (math.IsNaN(*t) || *t < 0 || *t > 2) {
		return badRequest("temperature", "temperature must be between 0 and 2, got %v", *t)
	}
	if p := r.TopP; p != nil && (math.IsNaN(*p) || *p <= 0 || *p > 1) {
		return badRequest("top_p", "top_p must be in (0, 1], got %v", *p)
	}
	if r.StreamOptions != nil && !r.Stream {
		return badRequest("stream_options", "stream_options can only be set when stream is true")
	}
	if r.MinTokens != nil && *r.MinTokens < 0 {
		return badRequest("min_tokens", "min_tokens must be at least 0, got %d", *r.MinTokens)
	}
	return nil
}

// resolveMaxTokens applies max_tokens (or max_completion_tokens), the
// default and max_model_len, as vLLM does.
func resolveMaxTokens(r *completionRequest, promptTokens int, cfg *Config) (int, *apiError) {
	requested := r.MaxTokens
	param := "max_tokens"
	if requested == nil && r.MaxCompletionTokens != nil {
		requested, param = r.MaxCompletionTokens, "max_completion_tokens"
	}
	if promptTokens >= cfg.MaxModelLen {
		return 0, badRequest("messages", "This model's maximum context length is %d tokens. However, your request has %d input tokens. Please reduce the length of the input messages.", cfg.MaxModelLen, promptTokens)
	}
	var maxTokens int
	if requested == nil {
		maxTokens = min(cfg.DefaultMaxTokens, cfg.MaxModelLen-promptTokens)
	} else {
		maxTokens = *requested
		if maxTokens < 1 {
			return 0, badRequest(param, "%s must be at least 1, got %d", param, maxTokens)
		}
		if promptTokens+maxTokens > cfg.MaxModelLen {
			return 0, badRequest(param, "This model's maximum context length is %d tokens. However, you requested %d tokens (%d in the messages, %d in the completion). Please reduce the length of the messages or completion.", cfg.MaxModelLen, promptTokens+maxTokens, promptTokens, maxTokens)
		}
	}
	if r.MinTokens != nil && *r.MinTokens > maxTokens {
		return 0, badRequest("min_tokens", "min_tokens (%d) must be less than or equal to max_tokens (%d)", *r.MinTokens, maxTokens)
	}
	return maxTokens, nil
}

// tokenizeRequest is vLLM's /tokenize body: a prompt, or chat messages.
type tokenizeRequest struct {
	Model               string        `json:"model"`
	Prompt              *string       `json:"prompt"`
	Messages            []chatMessage `json:"messages"`
	AddGenerationPrompt *bool         `json:"add_generation_prompt"`
}

// reasoningEffortFactor returns the factor a chat request's
// reasoning_effort applies to the configured reasoning tokens: absent or
// "medium" 1, "none" 0, "minimal" 0.25, "low" 0.5, "high" 2.
func reasoningEffortFactor(effort *string) (float64, *apiError) {
	if effort == nil {
		return 1, nil
	}
	switch *effort {
	case "none":
		return 0, nil
	case "minimal":
		return 0.25, nil
	case "low":
		return 0.5, nil
	case "medium":
		return 1, nil
	case "high":
		return 2, nil
	}
	return 0, badRequest("reasoning_effort", "Invalid value for 'reasoning_effort': %q. Supported values are: 'none', 'minimal', 'low', 'medium' and 'high'.", truncate(*effort, maxHeaderEcho))
}

// toolDef is an OpenAI function tool: {"type":"function","function":
// {"name","description","parameters"}}.
type toolDef struct {
	Type     string `json:"type"`
	Function *struct {
		Name       string          `json:"name"`
		Parameters json.RawMessage `json:"parameters"`
	} `json:"function"`
}

// Tool choice modes.
const (
	toolChoiceAuto     = iota // the configured tool_call_probability
	toolChoiceNone            // never a tool call
	toolChoiceRequired        // always a call, of a tool chosen by the seed
	toolChoiceNamed           // always a call of the named tool
)

// toolRequest is a chat request's validated tools and tool_choice.
type toolRequest struct {
	names  []string
	choice int
	named  string // with toolChoiceNamed
}

// maxToolNameLen is OpenAI's limit on a function name.
const maxToolNameLen = 64

// validToolName reports whether name matches OpenAI's ^[a-zA-Z0-9_-]{1,64}$
// (which also means that it needs no escaping in JSON).
func validToolName(name string) bool {
	if name == "" || len(name) > maxToolNameLen {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

func isJSONNull(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || string(raw) == "null"
}

// rawOrNil dereferences an optional raw JSON field.
func rawOrNil(p *json.RawMessage) json.RawMessage {
	if p == nil {
		return nil
	}
	return *p
}

// parseTools validates a chat request's tools and tool_choice. It returns
// nil when no tool call can happen (no tools, or tool_choice "none").
func parseTools(r *completionRequest) (*toolRequest, *apiError) {
	if r.Tools == nil && r.ToolChoice == nil {
		return nil, nil
	}
	var tr toolRequest
	if tools := rawOrNil(r.Tools); !isJSONNull(tools) {
		var defs []toolDef
		if err := json.Unmarshal(tools, &defs); err != nil {
			return nil, badRequest("tools", "tools must be an array of {\"type\":\"function\",\"function\":{\"name\":...}} objects")
		}
		if len(defs) == 0 {
			return nil, badRequest("tools", "Invalid 'tools': empty array. Expected an array with minimum length 1.")
		}
		tr.names = make([]string, len(defs))
		for i, d := range defs {
			if d.Type != "function" {
				return nil, badRequest(fmt.Sprintf("tools[%d].type", i), "tools[%d].type is %q; only \"function\" tools are supported", i, truncate(d.Type, maxHeaderEcho))
			}
			if d.Function == nil {
				return nil, badRequest(fmt.Sprintf("tools[%d].function", i), "tools[%d].function is required", i)
			}
			if !validToolName(d.Function.Name) {
				return nil, badRequest(fmt.Sprintf("tools[%d].function.name", i), "tools[%d].function.name %q must be 1 to %d letters, digits, underscores or dashes", i, truncate(d.Function.Name, maxHeaderEcho), maxToolNameLen)
			}
			if p := bytes.TrimSpace(d.Function.Parameters); len(p) > 0 && string(p) != "null" && p[0] != '{' {
				return nil, badRequest(fmt.Sprintf("tools[%d].function.parameters", i), "tools[%d].function.parameters must be a JSON Schema object", i)
			}
			tr.names[i] = d.Function.Name
		}
	}
	choice := bytes.TrimSpace(rawOrNil(r.ToolChoice))
	switch {
	case isJSONNull(choice):
		tr.choice = toolChoiceAuto
	case choice[0] == '"':
		var s string
		if err := json.Unmarshal(choice, &s); err != nil {
			return nil, badRequest("tool_choice", "tool_choice is not a valid JSON string")
		}
		switch s {
		case "auto":
			tr.choice = toolChoiceAuto
		case "none":
			tr.choice = toolChoiceNone
		case "required":
			tr.choice = toolChoiceRequired
		default:
			return nil, badRequest("tool_choice", "Invalid value for 'tool_choice': %q. Supported values are: 'none', 'auto' and 'required', or {\"type\":\"function\",\"function\":{\"name\":...}}.", truncate(s, maxHeaderEcho))
		}
	case choice[0] == '{':
		var named struct {
			Type     string `json:"type"`
			Function *struct {
				Name string `json:"name"`
			} `json:"function"`
		}
		if err := json.Unmarshal(choice, &named); err != nil || named.Type != "function" || named.Function == nil || named.Function.Name == "" {
			return nil, badRequest("tool_choice", "tool_choice must be \"none\", \"auto\", \"required\" or {\"type\":\"function\",\"function\":{\"name\":...}}")
		}
		tr.choice, tr.named = toolChoiceNamed, named.Function.Name
		if !contains(tr.names, tr.named) {
			return nil, badRequest("tool_choice", "tool_choice names the function %q, which is not in tools", truncate(tr.named, maxHeaderEcho))
		}
	default:
		return nil, badRequest("tool_choice", "tool_choice must be \"none\", \"auto\", \"required\" or {\"type\":\"function\",\"function\":{\"name\":...}}")
	}
	if len(tr.names) == 0 {
		if tr.choice == toolChoiceRequired {
			return nil, badRequest("tool_choice", "tool_choice \"required\" needs tools")
		}
		return nil, nil
	}
	if tr.choice == toolChoiceNone {
		return nil, nil
	}
	out := tr // only a request that may call a tool allocates
	return &out, nil
}
