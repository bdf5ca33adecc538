// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
)

// POST /v1/chat/completions and /v1/completions: OpenAI's (and vLLM's)
// chat and text completions, streamed as vLLM streams them (one data:
// event per token, then usage and [DONE]) or answered with one
// chat.completion / text_completion object. Chat may reason first and may
// answer with a tool call; faults (X-Sim-Fault, configured probabilities)
// apply to both.

var (
	chatSpec        = apiSpec{kind: apiChat, noun: "completion", faults: true, writeError: writeError}
	completionsSpec = apiSpec{kind: apiCompletions, noun: "completion", faults: true, writeError: writeError}
)

func (s *Server) handleChat(w http.ResponseWriter, r *http.Request) {
	s.serve(w, r, &chatSpec, &completionExchange{})
}

func (s *Server) handleCompletions(w http.ResponseWriter, r *http.Request) {
	s.serve(w, r, &completionsSpec, &completionExchange{})
}

// completionExchange is one chat or completions request.
type completionExchange struct {
	exchange
	req completionRequest

	includeUsage bool
	continuous   bool
	ev           *eventBuf // streaming
}

var _ malformer = (*completionExchange)(nil)

func (c *completionExchange) chat() bool { return c.spec.kind == apiChat }

func (c *completionExchange) parse(body []byte) *apiError {
	s, req, lc := c.s, &c.req, &c.lc
	aerr := decodeJSON(body, req)
	if aerr != nil {
		return aerr
	}
	if aerr = c.useModel(req.Model); aerr != nil {
		return aerr
	}
	lc.stream = req.Stream
	if aerr = validateSampling(req); aerr != nil {
		return aerr
	}

	sq := c.newSeq()
	sq.ignoreEOS = req.IgnoreEOS
	effort := 1.0
	var tools *toolRequest
	if c.chat() {
		if len(req.Messages) == 0 {
			return badRequest("messages", "messages is required and must not be empty")
		}
		if aerr = validateMessages(req.Messages); aerr != nil {
			return aerr
		}
		if effort, aerr = reasoningEffortFactor(req.ReasoningEffort); aerr != nil {
			return aerr
		}
		if tools, aerr = parseTools(req); aerr != nil {
			return aerr
		}
		if lc.imageTokens, aerr = s.checkImageBudget(req.Messages, "messages"); aerr != nil {
			return aerr
		}
		sq.promptTokens = s.tok.emitChat(&sq.hasher, req.Messages, true)
	} else {
		p, aerr := parsePrompt(req.Prompt)
		if aerr != nil {
			return aerr
		}
		if p.isIDs {
			for _, id := range p.ids {
				sq.hasher.add(id)
			}
			sq.promptTokens = len(p.ids)
		} else {
			sq.promptTokens = s.tok.emitText(&sq.hasher, p.text)
		}
		if sq.promptTokens == 0 {
			return badRequest("prompt", "prompt must contain at least one token")
		}
	}
	if sq.maxTokens, aerr = resolveMaxTokens(req, sq.promptTokens, &s.cfg); aerr != nil {
		return aerr
	}
	if req.MinTokens != nil {
		sq.minTokens = *req.MinTokens
	}
	sq.seed = s.seedFor(req.Seed, req.Temperature, sq)
	if tools != nil {
		c.tool = s.planToolCall(tools, sq.seed)
	}
	if c.chat() {
		sq.toolCall = c.tool != nil
		sq.reasoning = s.cfg.plannedReasoning(sq.maxTokens, effort, sq.toolCall)
		lc.reasoning, lc.toolCall = sq.reasoning, sq.toolCall
	}
	if so := req.StreamOptions; so != nil && req.Stream {
		c.includeUsage = so.IncludeUsage
		c.continuous = so.IncludeUsage && so.ContinuousUsageStats
	}
	return nil
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

// toolDef is an OpenAI function tool: {"type":"function","function":
// {"name","description","parameters"}}.
type toolDef struct {
	Type     string `json:"type"`
	Function *struct {
		Name       string          `json:"name"`
		Parameters json.RawMessage `json:"parameters"`
	} `json:"function"`
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
		mode, ok := toolChoiceModes[s]
		if !ok {
			return nil, badRequest("tool_choice", "Invalid value for 'tool_choice': %q. Supported values are: 'none', 'auto' and 'required', or {\"type\":\"function\",\"function\":{\"name\":...}}.", truncate(s, maxHeaderEcho))
		}
		tr.choice = mode
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
	if ok, aerr := tr.offered(); !ok {
		return nil, aerr
	}
	out := tr // only a request that may call a tool allocates
	return &out, nil
}

// eventBuf holds a response's pre-formatted event prefix and the scratch
// buffer events are built in; pooled, so that streaming a token allocates
// nothing.
type eventBuf struct {
	prefix []byte // `data: {"id":…,"object":…,"created":…,"model":…,"choices":[`
	buf    []byte
	id     []byte
}

var eventBufPool = sync.Pool{New: func() any {
	return &eventBuf{prefix: make([]byte, 0, 256), buf: make([]byte, 0, 512), id: make([]byte, 0, 48)}
}}

// idPrefix is what the response ids start with.
func (c *completionExchange) idPrefix() string {
	if c.chat() {
		return "chatcmpl-"
	}
	return "cmpl-"
}

// admitted takes a stream's id and builds its event prefix.
func (c *completionExchange) admitted() {
	if !c.lc.stream {
		return
	}
	ev := eventBufPool.Get().(*eventBuf)
	c.ev = ev
	ev.id = c.s.appendID(ev.id[:0], c.idPrefix())
	p := append(ev.prefix[:0], `data: {"id":"`...)
	p = append(p, ev.id...)
	if c.chat() {
		p = append(p, `","object":"chat.completion.chunk","created":`...)
	} else {
		p = append(p, `","object":"text_completion","created":`...)
	}
	p = strconv.AppendInt(p, c.lc.arrival.Unix(), 10)
	p = append(p, `,"model":`...)
	p = append(p, c.s.modelJSON[c.model]...)
	p = append(p, c.s.identity.at(c.lc.arrival).fingerprint...)
	p = append(p, `,"choices":[`...)
	ev.prefix = p
}

func (c *completionExchange) done() {
	if c.ev != nil && cap(c.ev.buf) <= 64<<10 {
		eventBufPool.Put(c.ev)
	}
	c.ev = nil
}

// appendUsage appends an OpenAI usage object.
func (c *completionExchange) appendUsage(b []byte, completion int) []byte {
	p := c.sq.promptTokens
	b = append(b, `{"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(p), 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, int64(p+completion), 10)
	b = append(b, `,"completion_tokens":`...)
	b = strconv.AppendInt(b, int64(completion), 10)
	b = append(b, `,"prompt_tokens_details":{"cached_tokens":`...)
	b = strconv.AppendInt(b, int64(c.sq.cachedTokens), 10)
	if r := c.sq.reasoning; r > 0 {
		b = append(b, `},"completion_tokens_details":{"reasoning_tokens":`...)
		b = strconv.AppendInt(b, int64(min(completion, r)), 10)
	}
	return append(b, `}}`...)
}

// event starts an event in the scratch buffer.
func (c *completionExchange) event() []byte {
	return append(c.ev.buf[:0], c.ev.prefix...)
}

// send closes the choices array (adding usage when continuous usage stats
// are on), writes the event and flushes it.
func (c *completionExchange) send(b []byte, completion int) bool {
	b = append(b, ']')
	if c.continuous {
		b = append(b, `,"usage":`...)
		b = c.appendUsage(b, completion)
	}
	b = append(b, "}\n\n"...)
	c.ev.buf = b
	return c.write(b)
}

// open records the stream's id and, for chat, sends the role-only delta.
func (c *completionExchange) open() bool {
	if c.lc.log != nil {
		c.lc.id = string(c.ev.id) // goes out with the first event
	}
	if !c.chat() {
		return true
	}
	b := c.event()
	b = append(b, `{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}`...)
	return c.send(b, 0)
}

func (c *completionExchange) malformedEvent() []byte {
	b := c.event()
	b = append(b, `{"index":0,"delta":{"cont`...)
	b = append(b, "\n\n"...)
	c.ev.buf = b
	return b
}

// token writes token i's event. The first token of a tool call is
// preceded by the call's header event (id, type, name), which carries no
// token.
func (c *completionExchange) token(i int, last bool) bool {
	word := c.word(i)
	if c.tool != nil && i == c.sq.reasoning && !c.sendToolHeader(i) {
		return false
	}
	b := c.event()
	if c.chat() {
		switch {
		case i < c.sq.reasoning:
			b = append(b, c.s.reasoningDelta...)
			b = append(b, word...)
			b = append(b, `"},"logprobs":null,"finish_reason":`...)
		case c.tool != nil:
			b = append(b, `{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"`...)
			b = appendArguments(b, word, i == c.sq.reasoning, i == c.sq.maxTokens-1, true)
			b = append(b, `"}}]},"logprobs":null,"finish_reason":`...)
		default:
			b = append(b, `{"index":0,"delta":{"content":"`...)
			b = append(b, word...)
			b = append(b, `"},"logprobs":null,"finish_reason":`...)
		}
		switch {
		case !last:
			b = append(b, `null}`...)
		case c.tool != nil && i >= c.sq.reasoning:
			b = append(b, `"tool_calls"}`...)
		default:
			b = append(b, `"length"}`...)
		}
	} else {
		b = append(b, `{"index":0,"text":"`...)
		b = append(b, word...)
		b = append(b, `","logprobs":null,"finish_reason":`...)
		if last {
			b = append(b, `"length","stop_reason":null}`...)
		} else {
			b = append(b, `null,"stop_reason":null}`...)
		}
	}
	return c.send(b, i+1)
}

// sendToolHeader writes the tool call's first event, vLLM/OpenAI style:
// index, id, type and name, with empty arguments. It carries no token;
// written tokens went before it.
func (c *completionExchange) sendToolHeader(written int) bool {
	b := c.event()
	b = append(b, `{"index":0,"delta":{"tool_calls":[{"index":0,"id":"`...)
	b = append(b, c.tool.id...)
	b = append(b, `","type":"function","function":{"name":"`...)
	b = append(b, c.tool.name...)
	b = append(b, `","arguments":""}}]},"logprobs":null,"finish_reason":null}`...)
	return c.send(b, written)
}

// close writes the stop event (after an early stop), the usage event
// (include_usage) and [DONE].
func (c *completionExchange) close(fin int) bool {
	if fin == finishStop {
		b := c.event()
		if c.chat() {
			b = append(b, `{"index":0,"delta":{"content":""},"logprobs":null,"finish_reason":"stop"}`...)
		} else {
			b = append(b, `{"index":0,"text":"","logprobs":null,"finish_reason":"stop","stop_reason":null}`...)
		}
		if !c.send(b, c.written) {
			return false
		}
	}
	if c.includeUsage {
		b := c.event()
		b = append(b, `],"usage":`...)
		b = c.appendUsage(b, c.written)
		b = append(b, "}\n\n"...)
		c.ev.buf = b
		if !c.write(b) {
			return false
		}
	}
	return c.write(doneEvent)
}

var doneEvent = []byte("data: [DONE]\n\n")

type usageJSON struct {
	PromptTokens        int `json:"prompt_tokens"`
	TotalTokens         int `json:"total_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	PromptTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	// Only for requests that reason.
	CompletionTokensDetails *completionTokensDetailsJSON `json:"completion_tokens_details,omitempty"`
}

type completionTokensDetailsJSON struct {
	ReasoningTokens int `json:"reasoning_tokens"`
}

// chatChoiceJSON is a chat choice: message.content, or (content null)
// message.tool_calls.
type chatChoiceJSON struct {
	Index   int `json:"index"`
	Message struct {
		Role             string         `json:"role"`
		Content          *string        `json:"content"`
		ToolCalls        []toolCallJSON `json:"tool_calls,omitempty"`
		ReasoningContent *string        `json:"reasoning_content,omitempty"`
		Reasoning        *string        `json:"reasoning,omitempty"`
	} `json:"message"`
	Logprobs     *struct{} `json:"logprobs"`
	FinishReason string    `json:"finish_reason"`
	StopReason   *string   `json:"stop_reason"`

	content string // what Message.Content points to (in the same allocation)
}

type toolCallJSON struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type textChoiceJSON struct {
	Index        int       `json:"index"`
	Text         string    `json:"text"`
	Logprobs     *struct{} `json:"logprobs"`
	FinishReason string    `json:"finish_reason"`
	StopReason   *string   `json:"stop_reason"`
}

type completionJSON struct {
	ID                string    `json:"id"`
	Object            string    `json:"object"`
	Created           int64     `json:"created"`
	Model             string    `json:"model"`
	SystemFingerprint string    `json:"system_fingerprint,omitempty"`
	Choices           any       `json:"choices"`
	Usage             usageJSON `json:"usage"`
}

// unaryBody renders a non-streaming chat.completion or text_completion.
func (c *completionExchange) unaryBody(gen, fin int) ([]byte, *apiError) {
	finish := "length"
	if fin == finishStop {
		finish = "stop"
	}
	var reasoning, content strings.Builder
	var args []byte
	for i := 0; i < gen; i++ {
		word := c.word(i)
		switch {
		case c.chat() && i < c.sq.reasoning:
			reasoning.WriteString(word)
		case c.tool != nil:
			args = appendArguments(args, word, i == c.sq.reasoning, i == c.sq.maxTokens-1, false)
		default:
			content.WriteString(word)
		}
	}
	c.lc.id = string(c.s.appendID(nil, c.idPrefix()))
	resp := completionJSON{
		ID:      c.lc.id,
		Created: c.lc.arrival.Unix(),
		Model:   c.s.modelName(c.model),
	}
	resp.SystemFingerprint = c.s.identity.at(c.lc.arrival).id.Fingerprint
	resp.Usage.PromptTokens = c.sq.promptTokens
	resp.Usage.CompletionTokens = gen
	resp.Usage.TotalTokens = c.sq.promptTokens + gen
	resp.Usage.PromptTokensDetails.CachedTokens = c.sq.cachedTokens
	if c.sq.reasoning > 0 {
		resp.Usage.CompletionTokensDetails = &completionTokensDetailsJSON{ReasoningTokens: min(gen, c.sq.reasoning)}
	}
	if c.chat() {
		resp.Object = "chat.completion"
		choices := []chatChoiceJSON{{FinishReason: finish}}
		ch := &choices[0]
		ch.Message.Role = "assistant"
		if len(args) > 0 {
			if fin == finishLength {
				ch.FinishReason = "tool_calls"
			}
			tc := toolCallJSON{ID: c.tool.id, Type: "function"}
			tc.Function.Name = c.tool.name
			tc.Function.Arguments = string(args)
			ch.Message.ToolCalls = []toolCallJSON{tc}
		} else {
			ch.content = content.String()
			ch.Message.Content = &ch.content
		}
		if reasoning.Len() > 0 {
			ch.Message.ReasoningContent, ch.Message.Reasoning = c.reasoningText(reasoning.String())
		}
		resp.Choices = choices
	} else {
		resp.Object = "text_completion"
		resp.Choices = []textChoiceJSON{{Text: content.String(), FinishReason: finish}}
	}
	b, _ := json.Marshal(resp)
	return append(b, '\n'), nil
}

// reasoningText returns the message's reasoning_content and reasoning
// fields: the text in the configured one, nil in the other.
func (c *completionExchange) reasoningText(text string) (reasoningContent, reasoning *string) {
	if c.s.cfg.ReasoningField == reasoningField {
		return nil, &text
	}
	return &text, nil
}
