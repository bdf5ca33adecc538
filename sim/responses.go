// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
)

// POST /v1/responses: OpenAI's Responses API, over the same engine as
// chat completions. The prompt is instructions (as a system message) and
// input (a string, or message items), templated like chat messages
// (function_call items count their arguments, function_call_output items
// their output; reasoning items are not counted). An answer is optional
// reasoning (the configured amount, scaled by reasoning.effort), streamed
// as response.reasoning_text.delta as vLLM does for open-weight reasoning
// models, then a message (output_text) or a function_call item. A response
// that stops at max_output_tokens is "incomplete"; nothing is stored
// (previous_response_id is refused).

// responsesSpec: the Responses API answers OpenAI-style errors and takes
// no faults.
var responsesSpec = apiSpec{kind: apiResponses, noun: "response", writeError: writeError}

func (s *Server) handleResponses(w http.ResponseWriter, r *http.Request) {
	s.serve(w, r, &responsesSpec, &responsesExchange{})
}

// responsesExchange is one Responses request.
type responsesExchange struct {
	exchange
	req         responsesRequest
	id          string
	reasoningID string
	itemID      string // the message's or function call's item id
	effort      *string
	seqNo       int
	buf         []byte
}

func (st *responsesExchange) parse(body []byte) *apiError {
	s, req, lc := st.s, &st.req, &st.lc
	if aerr := decodeJSON(body, req); aerr != nil {
		return aerr
	}
	lc.stream = req.Stream
	if aerr := st.useModel(req.Model); aerr != nil {
		return aerr
	}
	if aerr := validateResponsesRequest(req); aerr != nil {
		return aerr
	}
	if req.Reasoning != nil {
		st.effort = req.Reasoning.Effort
	}
	effort, aerr := reasoningEffortFactor(st.effort)
	if aerr != nil {
		aerr.param = "reasoning.effort"
		return aerr
	}
	msgs, aerr := responsesPrompt(req)
	if aerr != nil {
		return aerr
	}
	tools, aerr := responsesTools(req)
	if aerr != nil {
		return aerr
	}
	if lc.imageTokens, aerr = s.checkImageBudget(msgs, "input"); aerr != nil {
		return aerr
	}
	sq := st.newSeq()
	sq.promptTokens = s.tok.emitChat(&sq.hasher, msgs, true)
	cr := completionRequest{MaxTokens: req.MaxOutputTokens}
	if sq.maxTokens, aerr = resolveMaxTokens(&cr, sq.promptTokens, &s.cfg); aerr != nil {
		if aerr.param == "max_tokens" {
			aerr.param = "max_output_tokens"
		} else {
			aerr.param = "input"
		}
		return aerr
	}
	sq.seed = s.seedFor(nil, req.Temperature, sq)
	if tools != nil {
		st.tool = s.planToolCall(tools, sq.seed)
	}
	sq.toolCall = st.tool != nil
	sq.reasoning = s.cfg.plannedReasoning(sq.maxTokens, effort, sq.toolCall)
	lc.reasoning, lc.toolCall = sq.reasoning, sq.toolCall
	return nil
}

// admitted takes the response's id and its items'.
func (st *responsesExchange) admitted() {
	s := st.s
	st.id = s.newID("resp_")
	st.lc.id = st.id
	st.reasoningID = s.newID("rs_")
	if st.tool != nil {
		st.itemID = s.newID("fc_")
	} else {
		st.itemID = s.newID("msg_")
	}
}

type responsesRequest struct {
	Model              string          `json:"model"`
	Input              json.RawMessage `json:"input"`
	Instructions       *string         `json:"instructions"`
	MaxOutputTokens    *int            `json:"max_output_tokens"`
	Temperature        *float64        `json:"temperature"`
	TopP               *float64        `json:"top_p"`
	Stream             bool            `json:"stream"`
	PreviousResponseID *string         `json:"previous_response_id"`
	Reasoning          *struct {
		Effort *string `json:"effort"`
	} `json:"reasoning"`
	Tools      json.RawMessage `json:"tools"`
	ToolChoice json.RawMessage `json:"tool_choice"`
}

// responsesItem is an input item: a message ({role, content}, type
// "message" or absent), or a function_call / function_call_output /
// reasoning item.
type responsesItem struct {
	Type      string          `json:"type"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	Arguments string          `json:"arguments"`
	Output    json.RawMessage `json:"output"`
}

type responsesPart struct {
	Type     string  `json:"type"`
	Text     *string `json:"text"`
	ImageURL *string `json:"image_url"`
}

func validateResponsesRequest(req *responsesRequest) *apiError {
	if req.PreviousResponseID != nil && *req.PreviousResponseID != "" {
		return badRequest("previous_response_id", "previous_response_id is not supported: the simulator stores no responses")
	}
	if t := req.Temperature; t != nil && (math.IsNaN(*t) || *t < 0 || *t > 2) {
		return badRequest("temperature", "temperature must be between 0 and 2, got %v", *t)
	}
	if p := req.TopP; p != nil && (math.IsNaN(*p) || *p <= 0 || *p > 1) {
		return badRequest("top_p", "top_p must be in (0, 1], got %v", *p)
	}
	if m := req.MaxOutputTokens; m != nil && *m < 1 {
		return badRequest("max_output_tokens", "max_output_tokens must be at least 1, got %d", *m)
	}
	return nil
}

// responsesPrompt converts instructions and input into chat messages.
func responsesPrompt(req *responsesRequest) ([]chatMessage, *apiError) {
	var msgs []chatMessage
	if req.Instructions != nil {
		msgs = append(msgs, chatMessage{Role: "system", Content: messageContent{parts: []string{*req.Instructions}}})
	}
	raw := bytes.TrimSpace(req.Input)
	switch {
	case isJSONNull(raw):
		return nil, badRequest("input", "input is required")
	case raw[0] == '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, badRequest("input", "input is not a valid JSON string")
		}
		return append(msgs, chatMessage{Role: "user", Content: messageContent{parts: []string{s}}}), nil
	case raw[0] != '[':
		return nil, badRequest("input", "input must be a string or an array of input items")
	}
	var items []responsesItem
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, badRequest("input", "input must be a string or an array of input items ({\"role\",\"content\"})")
	}
	if len(items) == 0 {
		return nil, badRequest("input", "input must not be empty")
	}
	for i, it := range items {
		path := fmt.Sprintf("input[%d]", i)
		switch it.Type {
		case "", "message":
		case "function_call":
			msgs = append(msgs, chatMessage{Role: "assistant", Content: messageContent{parts: []string{it.Arguments}}})
			continue
		case "function_call_output":
			var out string
			if len(it.Output) > 0 && it.Output[0] == '"' {
				_ = json.Unmarshal(it.Output, &out)
			} else {
				out = string(it.Output)
			}
			msgs = append(msgs, chatMessage{Role: "tool", Content: messageContent{parts: []string{out}}})
			continue
		case "reasoning":
			continue
		default:
			return nil, badRequest(path+".type", "input item type %q is not supported by the simulator (message, function_call, function_call_output, reasoning)", truncate(it.Type, maxHeaderEcho))
		}
		switch it.Role {
		case "user", "assistant", "system", "developer":
		default:
			return nil, badRequest(path+".role", "%s.role %q is not one of user, assistant, system, developer", path, truncate(it.Role, maxHeaderEcho))
		}
		m := chatMessage{Role: it.Role}
		c := bytes.TrimSpace(it.Content)
		switch {
		case isJSONNull(c):
			return nil, badRequest(path+".content", "%s.content is required", path)
		case c[0] == '"':
			var s string
			if err := json.Unmarshal(c, &s); err != nil {
				return nil, badRequest(path+".content", "%s.content is not a valid string", path)
			}
			m.Content.parts = []string{s}
		default:
			var parts []responsesPart
			if err := json.Unmarshal(c, &parts); err != nil {
				return nil, badRequest(path+".content", "%s.content must be a string or an array of input_text / input_image parts", path)
			}
			for j, p := range parts {
				pp := fmt.Sprintf("%s.content[%d]", path, j)
				switch p.Type {
				case "input_text", "output_text", "text":
					if p.Text == nil {
						return nil, badRequest(pp+".text", "%s.text is required", pp)
					}
					m.Content.parts = append(m.Content.parts, *p.Text)
				case "input_image":
					if p.ImageURL == nil {
						return nil, badRequest(pp+".image_url", "%s.image_url is required (a data: URL; file_id is not supported)", pp)
					}
					im, err := parseImageURL(*p.ImageURL)
					if err != nil {
						return nil, badRequest(pp+".image_url", "%s: %v", pp, err)
					}
					m.Content.images = append(m.Content.images, im)
				default:
					return nil, badRequest(pp+".type", "%s.type %q is not supported (input_text, input_image)", pp, truncate(p.Type, maxHeaderEcho))
				}
			}
		}
		msgs = append(msgs, m)
	}
	return msgs, nil
}

// responsesTools validates the flat function tools and tool_choice; nil
// when no tool call can happen.
func responsesTools(req *responsesRequest) (*toolRequest, *apiError) {
	var tr toolRequest
	if !isJSONNull(req.Tools) {
		var defs []struct {
			Type       string          `json:"type"`
			Name       string          `json:"name"`
			Parameters json.RawMessage `json:"parameters"`
		}
		if err := json.Unmarshal(req.Tools, &defs); err != nil {
			return nil, badRequest("tools", "tools must be an array of {\"type\":\"function\",\"name\":...} objects")
		}
		for i, d := range defs {
			if d.Type != "function" {
				return nil, badRequest(fmt.Sprintf("tools[%d].type", i), "tools[%d].type is %q; only \"function\" tools are supported by the simulator", i, truncate(d.Type, maxHeaderEcho))
			}
			if !validToolName(d.Name) {
				return nil, badRequest(fmt.Sprintf("tools[%d].name", i), "tools[%d].name %q must be 1 to %d letters, digits, underscores or dashes", i, truncate(d.Name, maxHeaderEcho), maxToolNameLen)
			}
			if p := bytes.TrimSpace(d.Parameters); len(p) > 0 && string(p) != "null" && p[0] != '{' {
				return nil, badRequest(fmt.Sprintf("tools[%d].parameters", i), "tools[%d].parameters must be a JSON Schema object", i)
			}
			tr.names = append(tr.names, d.Name)
		}
	}
	choice := bytes.TrimSpace(req.ToolChoice)
	switch {
	case isJSONNull(choice):
		tr.choice = toolChoiceAuto
	case choice[0] == '"':
		var s string
		_ = json.Unmarshal(choice, &s)
		mode, ok := toolChoiceModes[s]
		if !ok {
			return nil, badRequest("tool_choice", "Invalid value for 'tool_choice': %q. Supported values are: 'none', 'auto' and 'required', or {\"type\":\"function\",\"name\":...}.", truncate(s, maxHeaderEcho))
		}
		tr.choice = mode
	default:
		var named struct {
			Type string `json:"type"`
			Name string `json:"name"`
		}
		if err := json.Unmarshal(choice, &named); err != nil || named.Type != "function" || named.Name == "" {
			return nil, badRequest("tool_choice", "tool_choice must be \"none\", \"auto\", \"required\" or {\"type\":\"function\",\"name\":...}")
		}
		if !contains(tr.names, named.Name) {
			return nil, badRequest("tool_choice", "tool_choice names the function %q, which is not in tools", truncate(named.Name, maxHeaderEcho))
		}
		tr.choice, tr.named = toolChoiceNamed, named.Name
	}
	if ok, aerr := tr.offered(); !ok {
		return nil, aerr
	}
	return &tr, nil
}

// respUsage is a response object's usage.
type respUsage struct {
	InputTokens        int `json:"input_tokens"`
	InputTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokens        int `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
	TotalTokens int `json:"total_tokens"`
}

type respObject struct {
	ID                string  `json:"id"`
	Object            string  `json:"object"`
	CreatedAt         int64   `json:"created_at"`
	Status            string  `json:"status"`
	Error             *string `json:"error"`
	IncompleteDetails *struct {
		Reason string `json:"reason"`
	} `json:"incomplete_details"`
	Instructions       *string `json:"instructions"`
	MaxOutputTokens    *int    `json:"max_output_tokens"`
	Model              string  `json:"model"`
	Output             []any   `json:"output"`
	ParallelToolCalls  bool    `json:"parallel_tool_calls"`
	PreviousResponseID *string `json:"previous_response_id"`
	Reasoning          struct {
		Effort  *string `json:"effort"`
		Summary *string `json:"summary"`
	} `json:"reasoning"`
	Temperature float64           `json:"temperature"`
	ToolChoice  json.RawMessage   `json:"tool_choice"`
	Tools       json.RawMessage   `json:"tools"`
	TopP        float64           `json:"top_p"`
	Truncation  string            `json:"truncation"`
	Usage       *respUsage        `json:"usage"`
	Metadata    map[string]string `json:"metadata"`
}

type respText struct {
	Type        string      `json:"type"`
	Text        string      `json:"text"`
	Annotations *[]struct{} `json:"annotations,omitempty"` // [] for output_text, absent for reasoning_text
}

// emptyList encodes as [] (annotations, logprobs).
var emptyList = &[]struct{}{}

type respMessageItem struct {
	ID      string     `json:"id"`
	Type    string     `json:"type"`
	Status  string     `json:"status"`
	Role    string     `json:"role"`
	Content []respText `json:"content"`
}

type respReasoningItem struct {
	ID      string     `json:"id"`
	Type    string     `json:"type"`
	Summary []struct{} `json:"summary"`
	Content []respText `json:"content"`
	Status  string     `json:"status"`
}

type respFunctionCallItem struct {
	ID        string `json:"id"`
	Type      string `json:"type"`
	Status    string `json:"status"`
	Arguments string `json:"arguments"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
}

// object builds the response object: in progress (no output, no usage)
// until done.
func (st *responsesExchange) object(done bool, gen, fin int) respObject {
	req := &st.req
	o := respObject{
		ID: st.id, Object: "response", CreatedAt: st.lc.arrival.Unix(), Status: "in_progress",
		Instructions: req.Instructions, MaxOutputTokens: req.MaxOutputTokens, Model: st.s.modelName(st.model),
		Output: []any{}, ParallelToolCalls: true, Temperature: 1, TopP: 1, Truncation: "disabled",
		ToolChoice: json.RawMessage(`"auto"`), Tools: json.RawMessage(`[]`), Metadata: map[string]string{},
	}
	o.Reasoning.Effort = st.effort
	if req.Temperature != nil {
		o.Temperature = *req.Temperature
	}
	if req.TopP != nil {
		o.TopP = *req.TopP
	}
	if c := bytes.TrimSpace(req.ToolChoice); !isJSONNull(c) {
		o.ToolChoice = c
	}
	if t := bytes.TrimSpace(req.Tools); !isJSONNull(t) {
		o.Tools = t
	}
	if !done {
		return o
	}
	o.Status = "completed"
	if st.incomplete(fin) {
		o.Status = "incomplete"
		o.IncompleteDetails = &struct {
			Reason string `json:"reason"`
		}{"max_output_tokens"}
	}
	o.Output = st.outputItems(gen, fin)
	sq := st.sq
	u := &respUsage{InputTokens: sq.promptTokens, OutputTokens: gen, TotalTokens: sq.promptTokens + gen}
	u.InputTokensDetails.CachedTokens = sq.cachedTokens
	u.OutputTokensDetails.ReasoningTokens = min(gen, sq.reasoning)
	o.Usage = u
	return o
}

// incomplete reports whether the response stopped at max_output_tokens
// (a function call is planned to end there, complete).
func (st *responsesExchange) incomplete(fin int) bool {
	return fin == finishLength && !(st.tool != nil && st.written > st.sq.reasoning)
}

func (st *responsesExchange) reasoningItem(gen int, status string) respReasoningItem {
	R := min(gen, st.sq.reasoning)
	it := respReasoningItem{ID: st.reasoningID, Type: "reasoning", Summary: []struct{}{}, Content: []respText{}, Status: status}
	if status != "in_progress" {
		it.Content = []respText{{Type: "reasoning_text", Text: st.textOf(0, R)}}
	}
	return it
}

func (st *responsesExchange) answerItem(gen int, status string) any {
	R := min(gen, st.sq.reasoning)
	if st.tool != nil {
		args := ""
		if status != "in_progress" {
			args = st.toolArguments(R, gen)
		}
		return respFunctionCallItem{ID: st.itemID, Type: "function_call", Status: status, Arguments: args, CallID: st.tool.id, Name: st.tool.name}
	}
	it := respMessageItem{ID: st.itemID, Type: "message", Status: status, Role: "assistant", Content: []respText{}}
	if status != "in_progress" {
		it.Content = []respText{{Type: "output_text", Text: st.textOf(R, gen), Annotations: emptyList}}
	}
	return it
}

func (st *responsesExchange) outputItems(gen, fin int) []any {
	R := min(gen, st.sq.reasoning)
	status := "completed"
	if st.incomplete(fin) {
		status = "incomplete"
	}
	out := make([]any, 0, 2)
	if R > 0 {
		out = append(out, st.reasoningItem(gen, "completed"))
	}
	if gen > R || R == 0 {
		out = append(out, st.answerItem(gen, status))
	}
	return out
}

// event appends one event; fields are the event's own, after type and
// sequence_number.
func (st *responsesExchange) event(b []byte, typ string, fields any) []byte {
	// Encode {"type","sequence_number", ...fields} by splicing.
	j, _ := json.Marshal(fields)
	b = append(b, "event: "...)
	b = append(b, typ...)
	b = append(b, "\ndata: {\"type\":\""...)
	b = append(b, typ...)
	b = append(b, "\",\"sequence_number\":"...)
	b = fmt.Appendf(b, "%d", st.seqNo)
	st.seqNo++
	if len(j) > 2 {
		b = append(b, ',')
		b = append(b, j[1:]...)
	} else {
		b = append(b, '}')
	}
	return append(b, "\n\n"...)
}

type respItemEvent struct {
	OutputIndex int `json:"output_index"`
	Item        any `json:"item"`
}

type respPartEvent struct {
	ItemID       string   `json:"item_id"`
	OutputIndex  int      `json:"output_index"`
	ContentIndex int      `json:"content_index"`
	Part         respText `json:"part"`
}

type respTextDelta struct {
	ItemID       string      `json:"item_id"`
	OutputIndex  int         `json:"output_index"`
	ContentIndex int         `json:"content_index"`
	Delta        string      `json:"delta"`
	Logprobs     *[]struct{} `json:"logprobs,omitempty"`
}

type respTextDone struct {
	ItemID       string      `json:"item_id"`
	OutputIndex  int         `json:"output_index"`
	ContentIndex int         `json:"content_index"`
	Text         string      `json:"text"`
	Logprobs     *[]struct{} `json:"logprobs,omitempty"`
}

type respArgsDelta struct {
	ItemID      string `json:"item_id"`
	OutputIndex int    `json:"output_index"`
	Delta       string `json:"delta"`
}

type respArgsDone struct {
	ItemID      string `json:"item_id"`
	OutputIndex int    `json:"output_index"`
	Name        string `json:"name"`
	Arguments   string `json:"arguments"`
}

// responseEvent is the data of response.created, response.in_progress
// and the final event.
type responseEvent struct {
	Response respObject `json:"response"`
}

// answerIndex is the output index of the message or function call.
func (st *responsesExchange) answerIndex() int {
	if st.sq.reasoning > 0 {
		return 1
	}
	return 0
}

// open writes response.created and response.in_progress.
func (st *responsesExchange) open() bool {
	st.w.Header().Set("Cache-Control", "no-cache")
	o := st.object(false, 0, 0)
	b := st.event(st.buf[:0], "response.created", responseEvent{o})
	b = st.event(b, "response.in_progress", responseEvent{o})
	st.buf = b
	return st.write(b)
}

// token writes token i's delta: reasoning text, then output text or
// function call arguments, each item opened at its first token.
func (st *responsesExchange) token(i int, _ bool) bool {
	b := st.buf[:0]
	word := st.word(i)
	R := st.sq.reasoning
	switch {
	case i < R:
		if i == 0 {
			b = st.event(b, "response.output_item.added", respItemEvent{0, st.reasoningItem(0, "in_progress")})
			b = st.event(b, "response.content_part.added", respPartEvent{st.reasoningID, 0, 0, respText{Type: "reasoning_text"}})
		}
		b = st.event(b, "response.reasoning_text.delta", respTextDelta{ItemID: st.reasoningID, Delta: word})
	default:
		idx := st.answerIndex()
		if i == R {
			if R > 0 {
				b = st.closeReasoning(b, i)
			}
			b = st.openAnswer(b, idx)
		}
		if st.tool != nil {
			frag := appendArguments(nil, word, i == R, i == st.sq.maxTokens-1, false)
			b = st.event(b, "response.function_call_arguments.delta", respArgsDelta{st.itemID, idx, string(frag)})
		} else {
			b = st.event(b, "response.output_text.delta", respTextDelta{ItemID: st.itemID, OutputIndex: idx, Delta: word, Logprobs: emptyList})
		}
	}
	st.buf = b
	return st.write(b)
}

// close ends the open item and writes response.completed (or
// response.incomplete).
func (st *responsesExchange) close(fin int) bool {
	gen := st.written
	b := st.buf[:0]
	switch {
	case gen == 0:
		// Stopped before any token: an empty message.
		b = st.openAnswer(b, 0)
		b = st.closeAnswer(b, 0, gen, fin)
	case gen <= st.sq.reasoning:
		b = st.closeReasoning(b, gen)
	default:
		b = st.closeAnswer(b, st.answerIndex(), gen, fin)
	}
	o := st.object(true, gen, fin)
	final := "response.completed"
	if o.Status == "incomplete" {
		final = "response.incomplete"
	}
	b = st.event(b, final, responseEvent{o})
	st.buf = b
	return st.write(b)
}

func (st *responsesExchange) closeReasoning(b []byte, gen int) []byte {
	text := st.textOf(0, min(gen, st.sq.reasoning))
	b = st.event(b, "response.reasoning_text.done", respTextDone{ItemID: st.reasoningID, Text: text})
	b = st.event(b, "response.content_part.done", respPartEvent{st.reasoningID, 0, 0, respText{Type: "reasoning_text", Text: text}})
	return st.event(b, "response.output_item.done", respItemEvent{0, st.reasoningItem(gen, "completed")})
}

func (st *responsesExchange) openAnswer(b []byte, idx int) []byte {
	b = st.event(b, "response.output_item.added", respItemEvent{idx, st.answerItem(0, "in_progress")})
	if st.tool == nil {
		b = st.event(b, "response.content_part.added", respPartEvent{st.itemID, idx, 0, respText{Type: "output_text", Annotations: emptyList}})
	}
	return b
}

func (st *responsesExchange) closeAnswer(b []byte, idx, gen, fin int) []byte {
	R := min(gen, st.sq.reasoning)
	status := "completed"
	if st.incomplete(fin) {
		status = "incomplete"
	}
	if st.tool != nil {
		b = st.event(b, "response.function_call_arguments.done", respArgsDone{st.itemID, idx, st.tool.name, st.toolArguments(R, gen)})
	} else {
		text := st.textOf(R, gen)
		b = st.event(b, "response.output_text.done", respTextDone{ItemID: st.itemID, OutputIndex: idx, Text: text, Logprobs: emptyList})
		b = st.event(b, "response.content_part.done", respPartEvent{st.itemID, idx, 0, respText{Type: "output_text", Text: text, Annotations: emptyList}})
	}
	return st.event(b, "response.output_item.done", respItemEvent{idx, st.answerItem(gen, status)})
}

// unaryBody renders the response object.
func (st *responsesExchange) unaryBody(gen, fin int) ([]byte, *apiError) {
	b, _ := json.Marshal(st.object(true, gen, fin))
	return append(b, '\n'), nil
}
