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

// writeAnthropicError writes {"type":"error","error":{"type","message"}}.
func writeAnthropicError(w http.ResponseWriter, e *apiError) {
	b, _ := json.Marshal(anthropicErrorBody(e))
	h := w.Header()
	h["Content-Type"] = jsonContentType
	w.WriteHeader(e.status)
	_, _ = w.Write(append(b, '\n'))
}

type anthropicError struct {
	Type  string `json:"type"`
	Error struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

func anthropicErrorBody(e *apiError) anthropicError {
	var body anthropicError
	body.Type = "error"
	body.Error.Type = anthropicErrorType(e.status)
	body.Error.Message = e.message
	return body
}

// anthropicStatus maps a status to the API's: 503 (shutting down) is its
// 529 overloaded_error.
func anthropicStatus(e *apiError) *apiError {
	if e.status == http.StatusServiceUnavailable {
		c := *e
		c.status = 529
		return &c
	}
	return e
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

// handleMessages serves POST /v1/messages.
func (s *Server) handleMessages(w http.ResponseWriter, r *http.Request) {
	var lc requestLifecycle
	lc.begin(s, r, apiMessages)
	defer lc.end()
	const style = errAnthropic

	if r.Header.Get(anthropicVersionHeader) == "" {
		s.fail(w, &lc, invalidRequest("anthropic-version: header is required"), style)
		return
	}
	// x-api-key is accepted and not checked.
	buf, aerr := s.readBody(w, r)
	if aerr != nil {
		s.fail(w, &lc, aerr, style)
		return
	}
	var req messagesRequest
	aerr = decodeJSON(buf.Bytes(), &req)
	putBody(buf)
	if aerr != nil {
		s.fail(w, &lc, aerr, style)
		return
	}
	lc.stream = req.Stream
	if req.Model == "" {
		s.fail(w, &lc, invalidRequest("model: Field required"), style)
		return
	}
	modelIdx, ok := s.models[req.Model]
	if !ok {
		s.fail(w, &lc, &apiError{status: http.StatusNotFound, message: "model: " + truncate(req.Model, 256)}, style)
		return
	}
	s.noteModel(&lc, modelIdx)
	if aerr := validateMessagesRequest(&req); aerr != nil {
		s.fail(w, &lc, aerr, style)
		return
	}
	msgs, aerr := messagesPrompt(&req)
	if aerr != nil {
		s.fail(w, &lc, aerr, style)
		return
	}
	tools, aerr := messagesTools(&req)
	if aerr != nil {
		s.fail(w, &lc, aerr, style)
		return
	}
	thinking := req.Thinking != nil && req.Thinking.Type == "enabled"
	if thinking && tools != nil && (tools.choice == toolChoiceRequired || tools.choice == toolChoiceNamed) {
		s.fail(w, &lc, invalidRequest("Thinking may not be enabled when tool_choice forces tool use."), style)
		return
	}
	if lc.imageTokens, aerr = s.checkImageBudget(msgs, "messages"); aerr != nil {
		s.fail(w, &lc, invalidRequest("prompt is too long: its images alone are %d tokens > %d maximum", lc.imageTokens, s.cfg.MaxModelLen), style)
		return
	}

	sq := s.newSeq(modelIdx)
	sq.promptTokens = s.tok.emitChat(&sq.hasher, msgs, true)
	maxTokens := *req.MaxTokens
	if sq.promptTokens >= s.cfg.MaxModelLen {
		s.fail(w, &lc, invalidRequest("prompt is too long: %d tokens > %d maximum", sq.promptTokens, s.cfg.MaxModelLen), style)
		return
	}
	if sq.promptTokens+maxTokens > s.cfg.MaxModelLen {
		s.fail(w, &lc, invalidRequest("input length and `max_tokens` exceed context limit: %d + %d > %d, decrease input length or `max_tokens` and try again", sq.promptTokens, maxTokens, s.cfg.MaxModelLen), style)
		return
	}
	sq.maxTokens = maxTokens
	sq.seed = s.seedFor(nil, req.Temperature, sq)
	var call *toolCall
	if tools != nil {
		call = s.planToolCall(tools, sq.seed)
	}
	sq.toolCall = call != nil
	if thinking {
		budget := *req.Thinking.BudgetTokens
		n := s.cfg.effectiveReasoning(maxTokens)
		if n == 0 {
			n = budget
		}
		sq.reasoning = max(0, min(n, budget, maxTokens-1))
	}
	lc.reasoning, lc.toolCall = sq.reasoning, sq.toolCall

	if !s.submitGen(w, r, &lc, sq, style) {
		return
	}
	rs := responseState{s: s, w: w, ctx: r.Context(), lc: &lc, sq: sq, api: apiMessages, model: modelIdx, tool: call}
	ms := messagesState{rs: &rs, id: s.newID("msg_")}
	if call != nil {
		ms.toolID = "toolu_" + call.id[len("call_"):]
	}
	lc.id = ms.id
	if req.Stream {
		ms.stream()
	} else {
		ms.unary()
	}
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

// messagesState writes one Messages response.
type messagesState struct {
	rs     *responseState
	id     string
	toolID string
	index  int // content block index of the open (or last) block
	next   int // index of the next block
	open   bool
	buf    []byte
}

type msgUsage struct {
	InputTokens              int `json:"input_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
	OutputTokens             int `json:"output_tokens"`
}

func (ms *messagesState) usage(output int) msgUsage {
	sq := ms.rs.sq
	return msgUsage{InputTokens: sq.promptTokens - sq.cachedTokens, CacheReadInputTokens: sq.cachedTokens, OutputTokens: output}
}

func (ms *messagesState) stopReason(fin int) string {
	switch {
	case ms.rs.tool != nil && ms.rs.written > ms.rs.sq.reasoning:
		return "tool_use"
	case fin == finishStop:
		return "end_turn"
	}
	return "max_tokens"
}

// signature is the thinking block's signature: opaque base64, derived
// from the sequence seed.
func (ms *messagesState) signature() string {
	var raw [48]byte
	x := ms.rs.sq.seed
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

func (ms *messagesState) stream() {
	rs := ms.rs
	begin := func() bool {
		var ev msgStart
		ev.Type = "message_start"
		m := &ev.Message
		m.ID, m.Type, m.Role, m.Content = ms.id, "message", "assistant", []struct{}{}
		m.Model = rs.s.modelName(rs.model)
		m.Usage = ms.usage(1)
		ms.buf = appendSSE(ms.buf[:0], "message_start", ev)
		return rs.write(ms.buf)
	}
	emit := func(i int) bool {
		b := ms.buf[:0]
		word := rs.word(i)
		R := rs.sq.reasoning
		switch {
		case i < R:
			if i == 0 {
				b = ms.startBlock(b, msgThinkingBlock{Type: "thinking"})
			}
			b = appendSSE(b, "content_block_delta", msgDelta{Type: "content_block_delta", Index: ms.index,
				Delta: struct {
					Type     string `json:"type"`
					Thinking string `json:"thinking"`
				}{"thinking_delta", word}})
		case rs.tool != nil:
			if i == R {
				b = ms.closeBlock(b)
				b = ms.startBlock(b, msgToolUseBlock{Type: "tool_use", ID: ms.toolID, Name: rs.tool.name, Input: json.RawMessage("{}")})
			}
			frag := appendArguments(nil, word, i == R, i == rs.sq.maxTokens-1, false)
			b = appendSSE(b, "content_block_delta", msgDelta{Type: "content_block_delta", Index: ms.index,
				Delta: struct {
					Type        string `json:"type"`
					PartialJSON string `json:"partial_json"`
				}{"input_json_delta", string(frag)}})
		default:
			if i == R {
				b = ms.closeBlock(b)
				b = ms.startBlock(b, msgTextBlock{Type: "text"})
			}
			b = appendSSE(b, "content_block_delta", msgDelta{Type: "content_block_delta", Index: ms.index,
				Delta: struct {
					Type string `json:"type"`
					Text string `json:"text"`
				}{"text_delta", word}})
		}
		ms.buf = b
		return rs.write(b)
	}
	fin, ok := rs.pump(errAnthropic, begin, emit)
	if !ok {
		if fin == finishAborted && rs.started {
			e := anthropicErrorBody(&apiError{status: 529, message: "The server shut down mid-stream."})
			_ = rs.write(appendSSE(ms.buf[:0], "error", e))
		}
		return
	}
	b := ms.closeBlock(ms.buf[:0])
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
	md.Delta.StopReason = ms.stopReason(fin)
	md.Usage.OutputTokens = rs.written
	b = appendSSE(b, "message_delta", md)
	b = appendSSE(b, "message_stop", msgTypeOnly{"message_stop"})
	ms.buf = b
	if !rs.write(b) {
		return
	}
	rs.complete(fin)
}

// startBlock opens the next content block; the first is followed by a
// ping, as the API's streams are.
func (ms *messagesState) startBlock(b []byte, block any) []byte {
	ms.index = ms.next
	ms.next++
	b = appendSSE(b, "content_block_start", msgBlockStart{Type: "content_block_start", Index: ms.index, ContentBlock: block})
	if ms.index == 0 {
		b = appendSSE(b, "ping", msgTypeOnly{"ping"})
	}
	ms.open = true
	return b
}

// closeBlock ends the open block, if any (a thinking block with its
// signature first).
func (ms *messagesState) closeBlock(b []byte) []byte {
	if !ms.open {
		return b
	}
	if ms.index == 0 && ms.rs.sq.reasoning > 0 {
		b = appendSSE(b, "content_block_delta", msgDelta{Type: "content_block_delta", Index: 0,
			Delta: struct {
				Type      string `json:"type"`
				Signature string `json:"signature"`
			}{"signature_delta", ms.signature()}})
	}
	ms.open = false
	return appendSSE(b, "content_block_stop", msgIndexed{"content_block_stop", ms.index})
}

func (ms *messagesState) unary() {
	rs := ms.rs
	gen, fin, ok := rs.collect(errAnthropic)
	if !ok {
		return
	}
	R := min(gen, rs.sq.reasoning)
	content := make([]any, 0, 2)
	if R > 0 {
		sig := ms.signature()
		content = append(content, msgThinkingBlock{Type: "thinking", Thinking: rs.textOf(0, R), Signature: &sig})
	}
	switch {
	case gen > R && rs.tool != nil:
		content = append(content, msgToolUseBlock{Type: "tool_use", ID: ms.toolID, Name: rs.tool.name, Input: json.RawMessage(rs.toolArguments(R, gen))})
	case gen > R:
		content = append(content, msgTextBlock{Type: "text", Text: rs.textOf(R, gen)})
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
	}{ms.id, "message", "assistant", rs.s.modelName(rs.model), content, ms.stopReason(fin), nil, ms.usage(gen)}
	b, err := json.Marshal(body)
	if err != nil {
		// Unreachable: tool arguments are valid JSON when complete.
		rs.s.fail(rs.w, rs.lc, &apiError{status: http.StatusInternalServerError, message: err.Error()}, errAnthropic)
		return
	}
	rs.writeBody(append(b, '\n'), fin)
}
