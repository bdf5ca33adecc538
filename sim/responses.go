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
		switch s {
		case "auto":
			tr.choice = toolChoiceAuto
		case "none":
			tr.choice = toolChoiceNone
		case "required":
			tr.choice = toolChoiceRequired
		default:
			return nil, badRequest("tool_choice", "Invalid value for 'tool_choice': %q. Supported values are: 'none', 'auto' and 'required', or {\"type\":\"function\",\"name\":...}.", truncate(s, maxHeaderEcho))
		}
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
	if len(tr.names) == 0 {
		if tr.choice == toolChoiceRequired {
			return nil, badRequest("tool_choice", "tool_choice \"required\" needs tools")
		}
		return nil, nil
	}
	if tr.choice == toolChoiceNone {
		return nil, nil
	}
	return &tr, nil
}

// handleResponses serves POST /v1/responses.
func (s *Server) handleResponses(w http.ResponseWriter, r *http.Request) {
	var lc requestLifecycle
	lc.begin(s, r, apiResponses)
	defer lc.end()
	const style = errOpenAI

	buf, aerr := s.readBody(w, r)
	if aerr != nil {
		s.fail(w, &lc, aerr, style)
		return
	}
	var req responsesRequest
	aerr = decodeJSON(buf.Bytes(), &req)
	putBody(buf)
	if aerr != nil {
		s.fail(w, &lc, aerr, style)
		return
	}
	lc.stream = req.Stream
	modelIdx, aerr := s.resolveModel(req.Model)
	if aerr != nil {
		s.fail(w, &lc, aerr, style)
		return
	}
	s.noteModel(&lc, modelIdx)
	if aerr := validateResponsesRequest(&req); aerr != nil {
		s.fail(w, &lc, aerr, style)
		return
	}
	var effortName *string
	if req.Reasoning != nil {
		effortName = req.Reasoning.Effort
	}
	effort, aerr := reasoningEffortFactor(effortName)
	if aerr != nil {
		aerr.param = "reasoning.effort"
		s.fail(w, &lc, aerr, style)
		return
	}
	msgs, aerr := responsesPrompt(&req)
	if aerr != nil {
		s.fail(w, &lc, aerr, style)
		return
	}
	tools, aerr := responsesTools(&req)
	if aerr != nil {
		s.fail(w, &lc, aerr, style)
		return
	}
	if lc.imageTokens, aerr = s.checkImageBudget(msgs, "input"); aerr != nil {
		s.fail(w, &lc, aerr, style)
		return
	}
	sq := s.newSeq(modelIdx)
	sq.promptTokens = s.tok.emitChat(&sq.hasher, msgs, true)
	cr := completionRequest{MaxTokens: req.MaxOutputTokens}
	if sq.maxTokens, aerr = resolveMaxTokens(&cr, sq.promptTokens, &s.cfg); aerr != nil {
		if aerr.param == "max_tokens" {
			aerr.param = "max_output_tokens"
		} else {
			aerr.param = "input"
		}
		s.fail(w, &lc, aerr, style)
		return
	}
	sq.seed = s.seedFor(nil, req.Temperature, sq)
	var call *toolCall
	if tools != nil {
		call = s.planToolCall(tools, sq.seed)
	}
	sq.toolCall = call != nil
	sq.reasoning = s.cfg.plannedReasoning(sq.maxTokens, effort, sq.toolCall)
	lc.reasoning, lc.toolCall = sq.reasoning, sq.toolCall

	if !s.submitGen(w, r, &lc, sq, style) {
		return
	}
	rs := responseState{s: s, w: w, ctx: r.Context(), lc: &lc, sq: sq, api: apiResponses, model: modelIdx, tool: call}
	st := responsesState{rs: &rs, req: &req, id: s.newID("resp_"), effort: effortName}
	lc.id = st.id
	st.reasoningID = s.newID("rs_")
	if call != nil {
		st.itemID = s.newID("fc_")
	} else {
		st.itemID = s.newID("msg_")
	}
	if req.Stream {
		st.stream()
	} else {
		st.unary()
	}
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

// responsesState writes one Responses API response.
type responsesState struct {
	rs          *responseState
	req         *responsesRequest
	id          string
	reasoningID string
	itemID      string // the message's or function call's item id
	effort      *string
	seqNo       int
	buf         []byte
}

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
func (st *responsesState) object(done bool, gen, fin int) respObject {
	rs, req := st.rs, st.req
	o := respObject{
		ID: st.id, Object: "response", CreatedAt: rs.lc.arrival.Unix(), Status: "in_progress",
		Instructions: req.Instructions, MaxOutputTokens: req.MaxOutputTokens, Model: rs.s.modelName(rs.model),
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
	sq := rs.sq
	u := &respUsage{InputTokens: sq.promptTokens, OutputTokens: gen, TotalTokens: sq.promptTokens + gen}
	u.InputTokensDetails.CachedTokens = sq.cachedTokens
	u.OutputTokensDetails.ReasoningTokens = min(gen, sq.reasoning)
	o.Usage = u
	return o
}

// incomplete reports whether the response stopped at max_output_tokens
// (a function call is planned to end there, complete).
func (st *responsesState) incomplete(fin int) bool {
	return fin == finishLength && !(st.rs.tool != nil && st.rs.written > st.rs.sq.reasoning)
}

func (st *responsesState) reasoningItem(gen int, status string) respReasoningItem {
	R := min(gen, st.rs.sq.reasoning)
	it := respReasoningItem{ID: st.reasoningID, Type: "reasoning", Summary: []struct{}{}, Content: []respText{}, Status: status}
	if status != "in_progress" {
		it.Content = []respText{{Type: "reasoning_text", Text: st.rs.textOf(0, R)}}
	}
	return it
}

func (st *responsesState) answerItem(gen int, status string) any {
	rs := st.rs
	R := min(gen, rs.sq.reasoning)
	if rs.tool != nil {
		args := ""
		if status != "in_progress" {
			args = rs.toolArguments(R, gen)
		}
		return respFunctionCallItem{ID: st.itemID, Type: "function_call", Status: status, Arguments: args, CallID: rs.tool.id, Name: rs.tool.name}
	}
	it := respMessageItem{ID: st.itemID, Type: "message", Status: status, Role: "assistant", Content: []respText{}}
	if status != "in_progress" {
		it.Content = []respText{{Type: "output_text", Text: rs.textOf(R, gen), Annotations: emptyList}}
	}
	return it
}

func (st *responsesState) outputItems(gen, fin int) []any {
	R := min(gen, st.rs.sq.reasoning)
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
func (st *responsesState) event(b []byte, typ string, fields any) []byte {
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

func (st *responsesState) stream() {
	rs := st.rs
	R := rs.sq.reasoning
	answerIndex := 0
	if R > 0 {
		answerIndex = 1
	}
	begin := func() bool {
		o := st.object(false, 0, 0)
		b := st.event(st.buf[:0], "response.created", struct {
			Response respObject `json:"response"`
		}{o})
		b = st.event(b, "response.in_progress", struct {
			Response respObject `json:"response"`
		}{o})
		st.buf = b
		return rs.write(b)
	}
	emit := func(i int) bool {
		b := st.buf[:0]
		word := rs.word(i)
		switch {
		case i < R:
			if i == 0 {
				b = st.event(b, "response.output_item.added", respItemEvent{0, st.reasoningItem(0, "in_progress")})
				b = st.event(b, "response.content_part.added", respPartEvent{st.reasoningID, 0, 0, respText{Type: "reasoning_text"}})
			}
			b = st.event(b, "response.reasoning_text.delta", respTextDelta{ItemID: st.reasoningID, Delta: word})
		default:
			if i == R {
				if R > 0 {
					b = st.closeReasoning(b, i)
				}
				b = st.openAnswer(b, answerIndex)
			}
			if rs.tool != nil {
				frag := appendArguments(nil, word, i == R, i == rs.sq.maxTokens-1, false)
				b = st.event(b, "response.function_call_arguments.delta", respArgsDelta{st.itemID, answerIndex, string(frag)})
			} else {
				b = st.event(b, "response.output_text.delta", respTextDelta{ItemID: st.itemID, OutputIndex: answerIndex, Delta: word, Logprobs: emptyList})
			}
		}
		st.buf = b
		return rs.write(b)
	}
	fin, ok := rs.pump(errOpenAI, begin, emit)
	if !ok {
		return
	}
	gen := rs.written
	b := st.buf[:0]
	switch {
	case gen == 0:
		// Stopped before any token: an empty message.
		b = st.openAnswer(b, 0)
		b = st.closeAnswer(b, 0, gen, fin)
	case gen <= R:
		b = st.closeReasoning(b, gen)
	default:
		b = st.closeAnswer(b, answerIndex, gen, fin)
	}
	o := st.object(true, gen, fin)
	final := "response.completed"
	if o.Status == "incomplete" {
		final = "response.incomplete"
	}
	b = st.event(b, final, struct {
		Response respObject `json:"response"`
	}{o})
	st.buf = b
	if !rs.write(b) {
		return
	}
	rs.complete(fin)
}

func (st *responsesState) closeReasoning(b []byte, gen int) []byte {
	text := st.rs.textOf(0, min(gen, st.rs.sq.reasoning))
	b = st.event(b, "response.reasoning_text.done", respTextDone{ItemID: st.reasoningID, Text: text})
	b = st.event(b, "response.content_part.done", respPartEvent{st.reasoningID, 0, 0, respText{Type: "reasoning_text", Text: text}})
	return st.event(b, "response.output_item.done", respItemEvent{0, st.reasoningItem(gen, "completed")})
}

func (st *responsesState) openAnswer(b []byte, idx int) []byte {
	b = st.event(b, "response.output_item.added", respItemEvent{idx, st.answerItem(0, "in_progress")})
	if st.rs.tool == nil {
		b = st.event(b, "response.content_part.added", respPartEvent{st.itemID, idx, 0, respText{Type: "output_text", Annotations: emptyList}})
	}
	return b
}

func (st *responsesState) closeAnswer(b []byte, idx, gen, fin int) []byte {
	rs := st.rs
	R := min(gen, rs.sq.reasoning)
	status := "completed"
	if st.incomplete(fin) {
		status = "incomplete"
	}
	if rs.tool != nil {
		b = st.event(b, "response.function_call_arguments.done", respArgsDone{st.itemID, idx, rs.tool.name, rs.toolArguments(R, gen)})
	} else {
		text := rs.textOf(R, gen)
		b = st.event(b, "response.output_text.done", respTextDone{ItemID: st.itemID, OutputIndex: idx, Text: text, Logprobs: emptyList})
		b = st.event(b, "response.content_part.done", respPartEvent{st.itemID, idx, 0, respText{Type: "output_text", Text: text, Annotations: emptyList}})
	}
	return st.event(b, "response.output_item.done", respItemEvent{idx, st.answerItem(gen, status)})
}

func (st *responsesState) unary() {
	rs := st.rs
	gen, fin, ok := rs.collect(errOpenAI)
	if !ok {
		return
	}
	b, _ := json.Marshal(st.object(true, gen, fin))
	rs.writeBody(append(b, '\n'), fin)
}
