// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
)

// POST /v1/messages: Anthropic's Messages API, over the same engine as
// chat completions. The prompt is the system text and the messages,
// templated like chat messages (text blocks, tool_use inputs and
// tool_result contents are tokenised as text; images add image tokens;
// earlier thinking blocks are not counted). An answer is optional
// thinking (thinking.budget_tokens, capped by the configured reasoning
// amount when there is one), then text, or a tool_use block when the
// request offers tools and tool_choice is "any" or "tool" (or "auto" with
// tool_call_probability). Every thinking, text or input_json_delta token
// is one decode step.

// messagesSpec: the Messages API answers in its own error shape and takes
// no faults.
var messagesSpec = apiSpec{kind: apiMessages, noun: "response", writeError: writeAnthropicError}

func (s *Server) handleMessages(w http.ResponseWriter, r *http.Request) {
	s.serve(w, r, &messagesSpec, &messagesExchange{})
}

// messagesExchange is one Messages request.
type messagesExchange struct {
	exchange
	req       messagesRequest
	id        string
	toolID    string
	index     int // content block index of the open (or last) block
	next      int // index of the next block
	blockOpen bool
	buf       []byte
}

func (m *messagesExchange) checkHeaders(r *http.Request) *apiError {
	if r.Header.Get(anthropicVersionHeader) == "" {
		return invalidRequest("anthropic-version: header is required")
	}
	// x-api-key is accepted and not checked.
	return nil
}

func (m *messagesExchange) parse(body []byte) *apiError {
	s, req, lc := m.s, &m.req, &m.lc
	if aerr := decodeJSON(body, req); aerr != nil {
		return aerr
	}
	lc.stream = req.Stream
	if req.Model == "" {
		return invalidRequest("model: Field required")
	}
	modelIdx, ok := s.models[req.Model]
	if !ok {
		return &apiError{status: http.StatusNotFound, message: "model: " + truncate(req.Model, 256)}
	}
	m.noteModel(modelIdx)
	if aerr := validateMessagesRequest(req); aerr != nil {
		return aerr
	}
	msgs, aerr := messagesPrompt(req)
	if aerr != nil {
		return aerr
	}
	tools, aerr := messagesTools(req)
	if aerr != nil {
		return aerr
	}
	thinking := req.Thinking != nil && req.Thinking.Type == "enabled"
	if thinking && tools != nil && (tools.choice == toolChoiceRequired || tools.choice == toolChoiceNamed) {
		return invalidRequest("Thinking may not be enabled when tool_choice forces tool use.")
	}
	if lc.imageTokens, aerr = s.checkImageBudget(msgs, "messages"); aerr != nil {
		return invalidRequest("prompt is too long: its images alone are %d tokens > %d maximum", lc.imageTokens, s.cfg.MaxModelLen)
	}

	sq := m.newSeq()
	sq.promptTokens = s.tok.emitChat(&sq.hasher, msgs, true)
	maxTokens := *req.MaxTokens
	if sq.promptTokens >= s.cfg.MaxModelLen {
		return invalidRequest("prompt is too long: %d tokens > %d maximum", sq.promptTokens, s.cfg.MaxModelLen)
	}
	if sq.promptTokens+maxTokens > s.cfg.MaxModelLen {
		return invalidRequest("input length and `max_tokens` exceed context limit: %d + %d > %d, decrease input length or `max_tokens` and try again", sq.promptTokens, maxTokens, s.cfg.MaxModelLen)
	}
	sq.maxTokens = maxTokens
	sq.seed = s.seedFor(nil, req.Temperature, sq)
	if tools != nil {
		m.tool = s.planToolCall(tools, sq.seed)
	}
	sq.toolCall = m.tool != nil
	if thinking {
		budget := *req.Thinking.BudgetTokens
		n := s.cfg.effectiveReasoning(maxTokens)
		if n == 0 {
			n = budget
		}
		sq.reasoning = max(0, min(n, budget, maxTokens-1))
	}
	lc.reasoning, lc.toolCall = sq.reasoning, sq.toolCall
	return nil
}

// admitted takes the message's id (and the tool_use block's).
func (m *messagesExchange) admitted() {
	m.id = m.s.newID("msg_")
	if m.tool != nil {
		m.toolID = "toolu_" + m.tool.id[len("call_"):]
	}
	m.lc.id = m.id
}

// anthropicVersionHeader is the header the API requires.
const anthropicVersionHeader = "anthropic-version"

// minThinkingBudget is the API's minimum thinking.budget_tokens.
const minThinkingBudget = 1024

type messagesRequest struct {
	Model       string             `json:"model"`
	MaxTokens   *int               `json:"max_tokens"`
	Messages    []anthropicMessage `json:"messages"`
	System      json.RawMessage    `json:"system"`
	Stream      bool               `json:"stream"`
	Temperature *float64           `json:"temperature"`
	TopP        *float64           `json:"top_p"`
	TopK        *int               `json:"top_k"`
	Thinking    *struct {
		Type         string `json:"type"`
		BudgetTokens *int   `json:"budget_tokens"`
	} `json:"thinking"`
	Tools      []anthropicTool `json:"tools"`
	ToolChoice *struct {
		Type string `json:"type"`
		Name string `json:"name"`
	} `json:"tool_choice"`
}

type anthropicMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type anthropicTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// anthropicBlock is a content block of a request message.
type anthropicBlock struct {
	Type   string          `json:"type"`
	Text   *string         `json:"text"`
	Source *imageSource    `json:"source"`
	Input  json.RawMessage `json:"input"`   // tool_use
	Result json.RawMessage `json:"content"` // tool_result: a string or blocks
}

type imageSource struct {
	Type      string `json:"type"`
	MediaType string `json:"media_type"`
	Data      string `json:"data"`
}

func validateMessagesRequest(req *messagesRequest) *apiError {
	if req.MaxTokens == nil {
		return invalidRequest("max_tokens: Field required")
	}
	if *req.MaxTokens < 1 {
		return invalidRequest("max_tokens: Input should be greater than or equal to 1")
	}
	if len(req.Messages) == 0 {
		return invalidRequest("messages: at least one message is required")
	}
	if t := req.Temperature; t != nil && (math.IsNaN(*t) || *t < 0 || *t > 1) {
		return invalidRequest("temperature: Input should be between 0 and 1")
	}
	if p := req.TopP; p != nil && (math.IsNaN(*p) || *p < 0 || *p > 1) {
		return invalidRequest("top_p: Input should be between 0 and 1")
	}
	if k := req.TopK; k != nil && *k < 0 {
		return invalidRequest("top_k: Input should be greater than or equal to 0")
	}
	if th := req.Thinking; th != nil {
		switch th.Type {
		case "disabled":
		case "enabled":
			if th.BudgetTokens == nil {
				return invalidRequest("thinking.enabled.budget_tokens: Field required")
			}
			if *th.BudgetTokens < minThinkingBudget {
				return invalidRequest("thinking.enabled.budget_tokens: Input should be greater than or equal to %d", minThinkingBudget)
			}
			if *th.BudgetTokens >= *req.MaxTokens {
				return invalidRequest("`max_tokens` must be greater than `thinking.budget_tokens`. Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking#max-tokens-and-context-window-size")
			}
		default:
			return invalidRequest("thinking.type: Input should be 'enabled' or 'disabled'")
		}
	}
	return nil
}

func invalidRequest(format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, typ: "invalid_request_error", message: fmt.Sprintf(format, args...)}
}

// textOrBlocks decodes a system prompt or tool_result content: a string or
// a list of text blocks (images allowed where images is not nil).
func textOrBlocks(raw json.RawMessage, path string, mc *messageContent, images bool) *apiError {
	raw = bytes.TrimSpace(raw)
	if isJSONNull(raw) {
		return nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return invalidRequest("%s: Input should be a valid string", path)
		}
		mc.parts = append(mc.parts, s)
		return nil
	}
	var blocks []anthropicBlock
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return invalidRequest("%s: Input should be a valid string or a list of content blocks", path)
	}
	for j, b := range blocks {
		p := fmt.Sprintf("%s.%d", path, j)
		switch {
		case b.Type == "text" && b.Text != nil:
			mc.parts = append(mc.parts, *b.Text)
		case b.Type == "text":
			return invalidRequest("%s.text: Field required", p)
		case b.Type == "image" && images:
			if aerr := addAnthropicImage(b.Source, p, mc); aerr != nil {
				return aerr
			}
		default:
			return invalidRequest("%s.type: block type %q is not allowed here", p, truncate(b.Type, maxHeaderEcho))
		}
	}
	return nil
}

func addAnthropicImage(src *imageSource, path string, mc *messageContent) *apiError {
	switch {
	case src == nil:
		return invalidRequest("%s.source: Field required", path)
	case src.Type == "url":
		return invalidRequest("%s.source: image URLs are not fetched by the simulator; send the image as {\"type\":\"base64\",\"media_type\",\"data\"}", path)
	case src.Type != "base64":
		return invalidRequest("%s.source.type: Input should be 'base64' (got %q)", path, truncate(src.Type, maxHeaderEcho))
	}
	if src.MediaType == "" {
		return invalidRequest("%s.source.media_type: Field required", path)
	}
	im, err := parseImageData(src.MediaType, src.Data)
	if err != nil {
		return invalidRequest("%s.source: %v", path, err)
	}
	mc.images = append(mc.images, im)
	return nil
}

// messagesPrompt converts the request's system and messages into chat
// messages for the template.
func messagesPrompt(req *messagesRequest) ([]chatMessage, *apiError) {
	msgs := make([]chatMessage, 0, len(req.Messages)+1)
	if !isJSONNull(req.System) {
		m := chatMessage{Role: "system"}
		if aerr := textOrBlocks(req.System, "system", &m.Content, false); aerr != nil {
			return nil, aerr
		}
		msgs = append(msgs, m)
	}
	for i, am := range req.Messages {
		path := fmt.Sprintf("messages.%d", i)
		if am.Role != "user" && am.Role != "assistant" {
			return nil, invalidRequest("%s.role: Input should be 'user' or 'assistant'", path)
		}
		m := chatMessage{Role: am.Role}
		raw := bytes.TrimSpace(am.Content)
		switch {
		case isJSONNull(raw):
			return nil, invalidRequest("%s.content: Field required", path)
		case raw[0] == '"':
			var s string
			if err := json.Unmarshal(raw, &s); err != nil {
				return nil, invalidRequest("%s.content: Input should be a valid string", path)
			}
			m.Content.parts = []string{s}
		default:
			var blocks []anthropicBlock
			if err := json.Unmarshal(raw, &blocks); err != nil {
				return nil, invalidRequest("%s.content: Input should be a valid string or a list of content blocks", path)
			}
			for j, b := range blocks {
				p := fmt.Sprintf("%s.content.%d", path, j)
				switch b.Type {
				case "text":
					if b.Text == nil {
						return nil, invalidRequest("%s.text: Field required", p)
					}
					m.Content.parts = append(m.Content.parts, *b.Text)
				case "image":
					if aerr := addAnthropicImage(b.Source, p, &m.Content); aerr != nil {
						return nil, aerr
					}
				case "tool_use":
					if !isJSONNull(b.Input) {
						m.Content.parts = append(m.Content.parts, string(b.Input))
					}
				case "tool_result":
					if aerr := textOrBlocks(b.Result, p+".content", &m.Content, true); aerr != nil {
						return nil, aerr
					}
				case "thinking", "redacted_thinking":
					// Earlier turns' thinking is not part of the context.
				default:
					return nil, invalidRequest("%s.type: block type %q is not supported by the simulator (text, image, tool_use, tool_result, thinking)", p, truncate(b.Type, maxHeaderEcho))
				}
			}
		}
		msgs = append(msgs, m)
	}
	return msgs, nil
}

// messagesTools validates tools and tool_choice; nil when no tool call
// can happen.
func messagesTools(req *messagesRequest) (*toolRequest, *apiError) {
	var tr toolRequest
	for i, t := range req.Tools {
		p := fmt.Sprintf("tools.%d", i)
		if t.Type != "" && t.Type != "custom" {
			return nil, invalidRequest("%s.type: tool type %q is not supported by the simulator (custom tools only)", p, truncate(t.Type, maxHeaderEcho))
		}
		if !validToolName(t.Name) {
			return nil, invalidRequest("%s.name: String should match pattern '^[a-zA-Z0-9_-]{1,64}$'", p)
		}
		if s := bytes.TrimSpace(t.InputSchema); len(s) == 0 || s[0] != '{' {
			return nil, invalidRequest("%s.input_schema: Field required (a JSON Schema object)", p)
		}
		tr.names = append(tr.names, t.Name)
	}
	tr.choice = toolChoiceAuto
	if tc := req.ToolChoice; tc != nil {
		switch tc.Type {
		case "auto":
		case "any":
			tr.choice = toolChoiceRequired
		case "tool":
			if tc.Name == "" {
				return nil, invalidRequest("tool_choice.name: Field required")
			}
			if !contains(tr.names, tc.Name) {
				return nil, invalidRequest("tool_choice.name: tool %q is not in tools", truncate(tc.Name, maxHeaderEcho))
			}
			tr.choice, tr.named = toolChoiceNamed, tc.Name
		case "none":
			tr.choice = toolChoiceNone
		default:
			return nil, invalidRequest("tool_choice.type: Input should be 'auto', 'any', 'tool' or 'none'")
		}
	}
	if len(tr.names) == 0 {
		if tr.choice == toolChoiceRequired || tr.choice == toolChoiceNamed {
			return nil, invalidRequest("tool_choice: tool_choice of type %q requires tools", req.ToolChoice.Type)
		}
		return nil, nil
	}
	if tr.choice == toolChoiceNone {
		return nil, nil
	}
	return &tr, nil
}

// msgUsage is a Message's usage.
type msgUsage struct {
	InputTokens              int `json:"input_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
	OutputTokens             int `json:"output_tokens"`
}

func (m *messagesExchange) usage(output int) msgUsage {
	sq := m.sq
	return msgUsage{InputTokens: sq.promptTokens - sq.cachedTokens, CacheReadInputTokens: sq.cachedTokens, OutputTokens: output}
}

func (m *messagesExchange) stopReason(fin int) string {
	switch {
	case m.tool != nil && m.written > m.sq.reasoning:
		return "tool_use"
	case fin == finishStop:
		return "end_turn"
	}
	return "max_tokens"
}

// signature is the thinking block's signature: opaque base64, derived
// from the sequence seed.
func (m *messagesExchange) signature() string {
	var raw [48]byte
	x := m.sq.seed
	for i := 0; i < len(raw); i += 8 {
		x = splitmix64(x)
		for j := 0; j < 8; j++ {
			raw[i+j] = byte(x >> (8 * j))
		}
	}
	return base64.StdEncoding.EncodeToString(raw[:])
}

type msgStart struct {
	Type    string `json:"type"`
	Message struct {
		ID           string     `json:"id"`
		Type         string     `json:"type"`
		Role         string     `json:"role"`
		Content      []struct{} `json:"content"`
		Model        string     `json:"model"`
		StopReason   *string    `json:"stop_reason"`
		StopSequence *string    `json:"stop_sequence"`
		Usage        msgUsage   `json:"usage"`
	} `json:"message"`
}

type msgBlockStart struct {
	Type         string `json:"type"`
	Index        int    `json:"index"`
	ContentBlock any    `json:"content_block"`
}

type msgTextBlock struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type msgThinkingBlock struct {
	Type      string  `json:"type"`
	Thinking  string  `json:"thinking"`
	Signature *string `json:"signature,omitempty"`
}

type msgToolUseBlock struct {
	Type  string          `json:"type"`
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

type msgDelta struct {
	Type  string `json:"type"`
	Index int    `json:"index"`
	Delta any    `json:"delta"`
}

type msgTypeOnly struct {
	Type string `json:"type"`
}

type msgIndexed struct {
	Type  string `json:"type"`
	Index int    `json:"index"`
}

// open writes message_start.
func (m *messagesExchange) open() bool {
	m.w.Header().Set("Cache-Control", "no-cache")
	var ev msgStart
	ev.Type = "message_start"
	msg := &ev.Message
	msg.ID, msg.Type, msg.Role, msg.Content = m.id, "message", "assistant", []struct{}{}
	msg.Model = m.s.modelName(m.model)
	msg.Usage = m.usage(1)
	m.buf = appendSSE(m.buf[:0], "message_start", ev)
	return m.write(m.buf)
}

// token writes token i's delta: thinking, then text or the tool_use
// block's input, each block opened at its first token.
func (m *messagesExchange) token(i int, _ bool) bool {
	b := m.buf[:0]
	word := m.word(i)
	R := m.sq.reasoning
	switch {
	case i < R:
		if i == 0 {
			b = m.startBlock(b, msgThinkingBlock{Type: "thinking"})
		}
		b = m.blockDelta(b, struct {
			Type     string `json:"type"`
			Thinking string `json:"thinking"`
		}{"thinking_delta", word})
	case m.tool != nil:
		if i == R {
			b = m.closeBlock(b)
			b = m.startBlock(b, msgToolUseBlock{Type: "tool_use", ID: m.toolID, Name: m.tool.name, Input: json.RawMessage("{}")})
		}
		frag := appendArguments(nil, word, i == R, i == m.sq.maxTokens-1, false)
		b = m.blockDelta(b, struct {
			Type        string `json:"type"`
			PartialJSON string `json:"partial_json"`
		}{"input_json_delta", string(frag)})
	default:
		if i == R {
			b = m.closeBlock(b)
			b = m.startBlock(b, msgTextBlock{Type: "text"})
		}
		b = m.blockDelta(b, struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}{"text_delta", word})
	}
	m.buf = b
	return m.write(b)
}

// close ends the open block and writes message_delta and message_stop.
func (m *messagesExchange) close(fin int) bool {
	b := m.closeBlock(m.buf[:0])
	var md struct {
		Type  string `json:"type"`
		Delta struct {
			StopReason   string  `json:"stop_reason"`
			StopSequence *string `json:"stop_sequence"`
		} `json:"delta"`
		Usage struct {
			OutputTokens int `json:"output_tokens"`
		} `json:"usage"`
	}
	md.Type = "message_delta"
	md.Delta.StopReason = m.stopReason(fin)
	md.Usage.OutputTokens = m.written
	b = appendSSE(b, "message_delta", md)
	b = appendSSE(b, "message_stop", msgTypeOnly{"message_stop"})
	m.buf = b
	return m.write(b)
}

// cut ends a stream the shutdown cut with an error event.
func (m *messagesExchange) cut() {
	_ = m.write(appendSSE(m.buf[:0], "error", anthropicErrorBody(529, "The server shut down mid-stream.")))
}

// blockDelta appends a content_block_delta of the open block.
func (m *messagesExchange) blockDelta(b []byte, delta any) []byte {
	return appendSSE(b, "content_block_delta", msgDelta{Type: "content_block_delta", Index: m.index, Delta: delta})
}

// startBlock opens the next content block; the first is followed by a
// ping, as the API's streams are.
func (m *messagesExchange) startBlock(b []byte, block any) []byte {
	m.index = m.next
	m.next++
	b = appendSSE(b, "content_block_start", msgBlockStart{Type: "content_block_start", Index: m.index, ContentBlock: block})
	if m.index == 0 {
		b = appendSSE(b, "ping", msgTypeOnly{"ping"})
	}
	m.blockOpen = true
	return b
}

// closeBlock ends the open block, if any (a thinking block with its
// signature first).
func (m *messagesExchange) closeBlock(b []byte) []byte {
	if !m.blockOpen {
		return b
	}
	if m.index == 0 && m.sq.reasoning > 0 {
		b = m.blockDelta(b, struct {
			Type      string `json:"type"`
			Signature string `json:"signature"`
		}{"signature_delta", m.signature()})
	}
	m.blockOpen = false
	return appendSSE(b, "content_block_stop", msgIndexed{"content_block_stop", m.index})
}

// unaryBody renders the message: thinking, then text or tool_use.
func (m *messagesExchange) unaryBody(gen, fin int) ([]byte, *apiError) {
	R := min(gen, m.sq.reasoning)
	content := make([]any, 0, 2)
	if R > 0 {
		sig := m.signature()
		content = append(content, msgThinkingBlock{Type: "thinking", Thinking: m.textOf(0, R), Signature: &sig})
	}
	switch {
	case gen > R && m.tool != nil:
		content = append(content, msgToolUseBlock{Type: "tool_use", ID: m.toolID, Name: m.tool.name, Input: json.RawMessage(m.toolArguments(R, gen))})
	case gen > R:
		content = append(content, msgTextBlock{Type: "text", Text: m.textOf(R, gen)})
	}
	body := struct {
		ID           string   `json:"id"`
		Type         string   `json:"type"`
		Role         string   `json:"role"`
		Model        string   `json:"model"`
		Content      []any    `json:"content"`
		StopReason   string   `json:"stop_reason"`
		StopSequence *string  `json:"stop_sequence"`
		Usage        msgUsage `json:"usage"`
	}{m.id, "message", "assistant", m.s.modelName(m.model), content, m.stopReason(fin), nil, m.usage(gen)}
	b, err := json.Marshal(body)
	if err != nil {
		// Unreachable: tool arguments are valid JSON when complete.
		return nil, &apiError{status: http.StatusInternalServerError, message: err.Error()}
	}
	return append(b, '\n'), nil
}

// writeAnthropicError writes {"type":"error","error":{"type","message"}}
// with the API's status for e (anthropicStatus) and returns that status.
func writeAnthropicError(w http.ResponseWriter, e *apiError) int {
	status := anthropicStatus(e.status)
	b, _ := json.Marshal(anthropicErrorBody(status, e.message))
	h := w.Header()
	h["Content-Type"] = jsonContentType
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
	return status
}

type anthropicError struct {
	Type  string `json:"type"`
	Error struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

func anthropicErrorBody(status int, message string) anthropicError {
	var body anthropicError
	body.Type = "error"
	body.Error.Type = anthropicErrorType(status)
	body.Error.Message = message
	return body
}

// anthropicStatus maps a status to the API's: 503 (shutting down) is its
// 529 overloaded_error.
func anthropicStatus(status int) int {
	if status == http.StatusServiceUnavailable {
		return 529
	}
	return status
}

func anthropicErrorType(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "invalid_request_error"
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case 529:
		return "overloaded_error"
	}
	return "api_error"
}
