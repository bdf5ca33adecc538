// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"
)

// Server-side tracing. With Config.TracerProvider set, every completion
// request gets a SERVER span, a child of the caller's W3C traceparent when
// there is one, named "{gen_ai.operation.name} {model}" and spanning
// arrival to the end of the response, with three INTERNAL children laid
// out from the request's lifecycle instants:
//
//	queue    handed to the engine → admitted into the running batch
//	prefill  admitted → first token (or the end, for a sequence that
//	         stopped before its first token)
//	decode   first token → last token
//
// (a child whose end the request never reached is left out). The spans
// are built once the response is over, with explicit timestamps, so the
// request path pays nothing while it runs; without a TracerProvider
// nothing is done at all.

// ScopeName is the instrumentation scope of the simulator's spans.
const ScopeName = "github.com/llmprobe/llmprobe/sim"

// providerName is the gen_ai.provider.name of the simulator's spans.
const providerName = "llmprobe.sim"

// Attribute keys of the simulator's own.
const (
	attrStream           = attribute.Key("llmprobe.sim.stream")
	attrFault            = attribute.Key("llmprobe.sim.fault")
	attrWaitingAtArrival = attribute.Key("llmprobe.sim.waiting_at_arrival")
	attrRunningAtFirst   = attribute.Key("llmprobe.sim.running_at_first_token")
	attrPromptTokens     = attribute.Key("llmprobe.sim.prompt_tokens")
	attrPrefillTokens    = attribute.Key("llmprobe.sim.prefill_tokens")
	attrCachedTokens     = attribute.Key("llmprobe.sim.cached_tokens")
	attrOutputTokens     = attribute.Key("llmprobe.sim.output_tokens")
)

// tracing is a server's tracing state; nil when tracing is off.
type tracing struct {
	tracer     trace.Tracer
	propagator propagation.TextMapPropagator
}

func newTracing(tp trace.TracerProvider) *tracing {
	if tp == nil {
		return nil
	}
	return &tracing{
		tracer:     tp.Tracer(ScopeName),
		propagator: propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}),
	}
}

// traceBegin reads the caller's trace context and the engine's queue
// length at arrival.
func (lc *requestLifecycle) traceBegin(s *Server, r *http.Request) {
	lc.tr = s.tracing
	lc.eng = s.engine
	lc.parent = s.tracing.propagator.Extract(context.Background(), propagation.HeaderCarrier(r.Header))
	lc.waitingAtArrival = s.engine.numWaiting.Load()
}

// markFirstToken records the first token's instant and the size of the
// running batch that produced it.
func (lc *requestLifecycle) markFirstToken(now time.Time) {
	lc.firstToken = now
	if lc.eng != nil {
		lc.runningAtFirstToken = lc.eng.numRunning.Load()
	}
}

// traceEnd emits the request's spans.
func (lc *requestLifecycle) traceEnd() {
	op := "chat"
	switch lc.api {
	case apiCompletions:
		op = "text_completion"
	case apiEmbeddings:
		op = "embeddings"
	}
	name := op
	if lc.model != "" {
		name += " " + lc.model
	}
	kv := make([]attribute.KeyValue, 0, 20)
	kv = append(kv,
		semconv.GenAIOperationNameKey.String(op),
		semconv.GenAIProviderNameKey.String(providerName),
		semconv.HTTPRequestMethodPost,
		semconv.URLPath(lc.path),
		attrStream.Bool(lc.stream),
		attrWaitingAtArrival.Int64(lc.waitingAtArrival),
	)
	if lc.model != "" {
		kv = append(kv, semconv.GenAIRequestModel(lc.model), semconv.GenAIResponseModel(lc.model))
	}
	if lc.status != 0 {
		kv = append(kv, semconv.HTTPResponseStatusCode(lc.status))
	}
	if lc.promptTokens > 0 {
		kv = append(kv, semconv.GenAIUsageInputTokens(lc.promptTokens))
	}
	if lc.finishReason != "" {
		kv = append(kv,
			semconv.GenAIResponseFinishReasons(lc.finishReason),
			semconv.GenAIUsageOutputTokens(lc.completionTokens),
			semconv.GenAIUsageCacheReadInputTokens(lc.cachedTokens))
	}
	if lc.fault != faultNone {
		kv = append(kv, attrFault.String(lc.fault.String()))
	}
	errType, failed := lc.errorType()
	if errType != "" {
		kv = append(kv, semconv.ErrorTypeKey.String(errType))
	}

	ctx, span := lc.tr.tracer.Start(lc.parent, name,
		trace.WithSpanKind(trace.SpanKindServer),
		trace.WithTimestamp(lc.arrival),
		trace.WithAttributes(kv...))
	if failed {
		span.SetStatus(codes.Error, truncate(lc.errMsg, 256))
	}
	if span.IsRecording() {
		lc.traceChildren(ctx)
	}
	span.End(trace.WithTimestamp(lc.finished))
}

// errorType classifies a failed request for error.type; failed says
// whether the server span is in error (5xx, an injected fault, a response
// cut short) rather than refusing a bad request (4xx).
func (lc *requestLifecycle) errorType() (string, bool) {
	switch {
	case lc.status >= 400:
		return strconv.Itoa(lc.status), lc.status >= 500 || lc.fault != faultNone
	case lc.fault != faultNone && lc.fault != faultEmpty:
		return lc.fault.String(), true
	case lc.errMsg != "":
		return "aborted", true
	}
	return "", false
}

// traceChildren emits the queue, prefill and decode spans under ctx.
func (lc *requestLifecycle) traceChildren(ctx context.Context) {
	child := func(name string, start, end time.Time, kv ...attribute.KeyValue) {
		if start.IsZero() || end.IsZero() || end.Before(start) {
			return
		}
		_, s := lc.tr.tracer.Start(ctx, name, trace.WithTimestamp(start), trace.WithAttributes(kv...))
		s.End(trace.WithTimestamp(end))
	}
	child("queue", lc.queued, lc.scheduled, attrWaitingAtArrival.Int64(lc.waitingAtArrival))
	prefillEnd := lc.firstToken
	if prefillEnd.IsZero() && lc.finishReason != "" {
		prefillEnd = lc.finished // stopped before its first token
	}
	child("prefill", lc.scheduled, prefillEnd,
		attrPromptTokens.Int(lc.promptTokens),
		attrCachedTokens.Int(lc.cachedTokens),
		attrPrefillTokens.Int(lc.promptTokens-lc.cachedTokens),
		attrRunningAtFirst.Int64(lc.runningAtFirstToken))
	last := lc.lastToken
	if last.IsZero() && !lc.firstToken.IsZero() && lc.finishReason != "" {
		last = lc.finished // a non-streamed answer: decoding ended with the response
	}
	child("decode", lc.firstToken, last, attrOutputTokens.Int(lc.completionTokens))
}
