// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package wire

import (
	"context"
	"net/http"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"
)

// Request spans. The client calls only the functions in this file, so the
// span's attribute set can grow here without touching the client. With no
// Tracer every function returns at once, without allocating.
//
// One CLIENT span per request, named "{gen_ai.operation.name}
// {gen_ai.request.model}", with the OpenTelemetry GenAI client attributes
// (semantic conventions v1.41.0, the newest release in the otel module that
// carries the gen_ai registry) and llmprobe's own:
//
//	at start   gen_ai.operation.name, gen_ai.provider.name,
//	           gen_ai.request.model, .max_tokens, .temperature, .top_p,
//	           .top_k, .seed (those sent), gen_ai.conversation.id,
//	           server.address, server.port, llmprobe.target,
//	           llmprobe.class, llmprobe.turn, llmprobe.planned_time,
//	           llmprobe.schedule_lag_seconds, llmprobe.warmup
//	at the end gen_ai.response.model, .id, .finish_reasons,
//	           openai.response.system_fingerprint,
//	           http.response.header.server (identity.go),
//	           gen_ai.response.time_to_first_chunk, llmprobe.ttft_seconds,
//	           llmprobe.ttfa_seconds (the first answer token),
//	           gen_ai.usage.input_tokens, .output_tokens,
//	           .cache_read.input_tokens, .reasoning.output_tokens (as the
//	           server reported them),
//	           llmprobe.usage_reported, http.response.status_code,
//	           llmprobe.outcome, and on failure error.type, llmprobe.error
//	           and status Error with the outcome as its description
//
// An event "gen_ai.first_token" marks the first token-bearing event, at
// its arrival instant (Start + TTFT). Prompt and completion text are
// recorded only with ClientConfig.RecordContent.

// Attribute keys that are llmprobe's own.
const (
	attrTarget        = attribute.Key("llmprobe.target")
	attrClass         = attribute.Key("llmprobe.class")
	attrTurn          = attribute.Key("llmprobe.turn")
	attrPlannedTime   = attribute.Key("llmprobe.planned_time")
	attrScheduleLag   = attribute.Key("llmprobe.schedule_lag_seconds")
	attrWarmup        = attribute.Key("llmprobe.warmup")
	attrTTFT          = attribute.Key("llmprobe.ttft_seconds")
	attrTTFA          = attribute.Key("llmprobe.ttfa_seconds")
	attrOutcome       = attribute.Key("llmprobe.outcome")
	attrError         = attribute.Key("llmprobe.error")
	attrUsageReported = attribute.Key("llmprobe.usage_reported")
)

// FirstTokenEvent is the name of the span event at the first token.
const FirstTokenEvent = "gen_ai.first_token"

// DefaultProvider is the gen_ai.provider.name of a target that sets none:
// llmprobe speaks the OpenAI wire protocol, and, like OpenAI's own client
// instrumentations, reports "openai" whatever server implements it
// (server.address tells which).
const DefaultProvider = "openai"

// DefaultProviderFor is the gen_ai.provider.name of a target of api that
// sets none: the protocol's vendor (the OpenTelemetry GenAI values).
func DefaultProviderFor(api API) string {
	if api == APIMessages {
		return "anthropic"
	}
	return DefaultProvider
}

// maxContentBytes bounds each text recorded with ClientConfig.RecordContent, so that a
// long prompt cannot make a span too large to export.
const maxContentBytes = 16 << 10

// operationName is the gen_ai.operation.name of a request.
func operationName(api API) string {
	switch api {
	case APICompletions:
		return "text_completion"
	case APIEmbeddings:
		return "embeddings"
	}
	return "chat"
}

// startSpan starts the CLIENT span of a request, named
// "{gen_ai.operation.name} {gen_ai.request.model}". It returns ctx and a
// nil span when the client has no tracer. res carries the identity and
// plan fields the runner set.
func (c *Client) startSpan(ctx context.Context, req *Request, res *Result) (context.Context, trace.Span) {
	if c.tracer == nil {
		return ctx, nil
	}
	op := operationName(req.API)
	kv := make([]attribute.KeyValue, 0, 20)
	kv = append(kv,
		semconv.GenAIOperationNameKey.String(op),
		semconv.GenAIProviderNameKey.String(c.provider),
		semconv.GenAIRequestModelKey.String(req.Model),
		semconv.ServerAddress(c.serverAddress),
		semconv.ServerPort(c.serverPort),
		semconv.GenAIRequestTemperature(req.Sampling.Temperature),
	)
	if req.MaxTokens > 0 {
		kv = append(kv, semconv.GenAIRequestMaxTokens(req.MaxTokens))
	}
	if s := req.Sampling; s.TopP != 0 {
		kv = append(kv, semconv.GenAIRequestTopP(s.TopP))
	}
	if s := req.Sampling; s.TopK != 0 {
		kv = append(kv, semconv.GenAIRequestTopK(float64(s.TopK)))
	}
	if s := req.Sampling; s.Seed != nil {
		kv = append(kv, semconv.GenAIRequestSeedKey.Int64(*s.Seed))
	}
	if res.Target != "" {
		kv = append(kv, attrTarget.String(res.Target))
	}
	if res.Class != "" {
		kv = append(kv, attrClass.String(res.Class))
	}
	if res.ConversationID != "" {
		kv = append(kv, semconv.GenAIConversationID(res.ConversationID), attrTurn.Int(res.Turn))
	}
	if !res.Planned.IsZero() {
		kv = append(kv,
			attrPlannedTime.String(res.Planned.UTC().Format(time.RFC3339Nano)),
			attrScheduleLag.Float64(res.ScheduleLag.Seconds()))
	}
	if res.Warmup {
		kv = append(kv, attrWarmup.Bool(true))
	}
	if c.recordContent {
		if msgs, ok := inputMessages(req); ok {
			kv = append(kv, msgs)
		}
	}
	ctx, span := c.tracer.Start(ctx, op+" "+req.Model,
		trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(kv...))
	return ctx, span
}

// inject writes the span context of ctx into the request headers (W3C
// traceparent with the usual propagator, and baggage when ctx has any).
func (c *Client) inject(ctx context.Context, h http.Header) {
	if c.propagator == nil {
		return
	}
	c.propagator.Inject(ctx, propagation.HeaderCarrier(h))
}

// spanFirstToken marks the arrival of the first token-bearing event.
func spanFirstToken(span trace.Span, at time.Time) {
	if span == nil {
		return
	}
	span.AddEvent(FirstTokenEvent, trace.WithTimestamp(at))
}

// endSpan records what is known only at the end (response, usage, TTFT,
// outcome) on the span and ends it; res.TraceID is set when the span is
// sampled (it becomes the exemplar of the result's observations).
func (c *Client) endSpan(span trace.Span, res *Result) {
	if span == nil {
		return
	}
	if sc := span.SpanContext(); sc.IsSampled() {
		res.TraceID = sc.TraceID().String()
	}
	if !span.IsRecording() {
		span.End()
		return
	}
	kv := make([]attribute.KeyValue, 0, 16)
	kv = append(kv, attrOutcome.String(string(res.Outcome)))
	if res.StatusCode != 0 {
		kv = append(kv, semconv.HTTPResponseStatusCode(res.StatusCode))
	}
	if res.ResponseModel != "" {
		kv = append(kv, semconv.GenAIResponseModel(res.ResponseModel))
	}
	if res.ResponseID != "" {
		kv = append(kv, semconv.GenAIResponseID(res.ResponseID))
	}
	if res.SystemFingerprint != "" {
		kv = append(kv, semconv.OpenAIResponseSystemFingerprint(res.SystemFingerprint))
	}
	if res.Server != "" {
		kv = append(kv, semconv.HTTPResponseHeader("server", res.Server))
	}
	if res.FinishReason != "" {
		kv = append(kv, semconv.GenAIResponseFinishReasons(res.FinishReason))
	}
	if res.FirstToken {
		ttft := res.TTFT.Seconds()
		kv = append(kv, attrTTFT.Float64(ttft), semconv.GenAIResponseTimeToFirstChunk(ttft))
	}
	if res.FirstAnswer {
		kv = append(kv, attrTTFA.Float64(res.TTFA.Seconds()))
	}
	if res.StatusCode >= 200 && res.StatusCode <= 299 {
		kv = append(kv, attrUsageReported.Bool(res.UsageReported))
	}
	if res.UsageReported {
		kv = append(kv,
			semconv.GenAIUsageInputTokens(res.PromptTokens),
			semconv.GenAIUsageOutputTokens(res.OutputTokens))
	}
	if res.CachedTokensReported {
		kv = append(kv, semconv.GenAIUsageCacheReadInputTokens(res.CachedTokens))
	}
	if res.ReasoningReported {
		kv = append(kv, semconv.GenAIUsageReasoningOutputTokens(res.ReasoningTokens))
	}
	if res.Outcome != OutcomeSuccess {
		et := res.ErrorType
		if et == "" {
			et = string(res.Outcome)
		}
		kv = append(kv, semconv.ErrorTypeKey.String(et))
		if res.Error != "" {
			kv = append(kv, attrError.String(res.Error))
		}
	}
	if c.recordContent && res.Completion != "" {
		kv = append(kv, outputMessages(res))
	}
	span.SetAttributes(kv...)
	if res.Outcome != OutcomeSuccess {
		span.SetStatus(codes.Error, string(res.Outcome))
	}
	span.End()
}

// inputMessages renders the prompt as gen_ai.input.messages: a list of
// {role, parts: [{type: text, content}]} in the order sent. A prompt sent
// as token ids has no text to record.
func inputMessages(req *Request) (attribute.KeyValue, bool) {
	var msgs []attribute.Value
	switch {
	case req.API.MessageBased() && len(req.Messages) > 0:
		msgs = make([]attribute.Value, 0, len(req.Messages))
		for _, m := range req.Messages {
			msgs = append(msgs, textMessage(m.Role, m.Content))
		}
	case (req.API == APICompletions || req.API == APIEmbeddings) && req.Prompt != "":
		msgs = []attribute.Value{textMessage("user", req.Prompt)}
	default:
		return attribute.KeyValue{}, false
	}
	return semconv.GenAIInputMessagesKey.Slice(msgs...), true
}

// outputMessages renders the completion as gen_ai.output.messages: one
// assistant message with its finish reason ("error" when the request
// failed, as the conventions' schema has it).
func outputMessages(res *Result) attribute.KeyValue {
	finish := res.FinishReason
	if res.Outcome != OutcomeSuccess {
		finish = "error"
	} else if finish == "" {
		finish = "stop"
	}
	return semconv.GenAIOutputMessagesKey.Slice(attribute.MapValue(
		attribute.String("role", "assistant"),
		attribute.Slice("parts", textPart(res.Completion)),
		attribute.String("finish_reason", finish),
	))
}

// textMessage is a message of one text part.
func textMessage(role, text string) attribute.Value {
	return attribute.MapValue(
		attribute.String("role", role),
		attribute.Slice("parts", textPart(text)),
	)
}

func textPart(text string) attribute.Value {
	return attribute.MapValue(
		attribute.String("type", "text"),
		attribute.String("content", cutText(text, maxContentBytes)),
	)
}

// cutText cuts s to at most n bytes, before the rune that straddles n.
func cutText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
