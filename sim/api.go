// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// The request vocabulary the APIs share: which API a request came
// through, chat messages (what the prompt template reads, images
// included), the OpenAI error answer, JSON body decoding, max_tokens
// within max_model_len, reasoning effort and tool choices. What only one
// API reads is in its own file.

// apiKind is the API a request came through.
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

// writeError writes an OpenAI-style JSON error,
// {"error":{"message","type","param","code"}}, and returns its status.
func writeError(w http.ResponseWriter, e *apiError) int {
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
	return e.status
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

// toolChoiceModes are the string values of an OpenAI tool_choice.
var toolChoiceModes = map[string]int{"auto": toolChoiceAuto, "none": toolChoiceNone, "required": toolChoiceRequired}

// offered reports whether a tool call can happen (tools offered, and
// tool_choice not "none"); an OpenAI tool_choice "required" without tools
// is an error.
func (tr *toolRequest) offered() (bool, *apiError) {
	if len(tr.names) == 0 {
		if tr.choice == toolChoiceRequired {
			return false, badRequest("tool_choice", "tool_choice \"required\" needs tools")
		}
		return false, nil
	}
	return tr.choice != toolChoiceNone, nil
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
