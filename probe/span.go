package probe

import (
	"context"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Request spans. The client calls only the functions in this file, so the
// span's attribute set can grow here without touching the client. With no
// Tracer every function returns at once, without allocating.

// operationName is the gen_ai.operation.name of a request.
func operationName(api API) string {
	if api == APICompletions {
		return "text_completion"
	}
	return "chat"
}

// startSpan starts the CLIENT span of a request, named
// "{gen_ai.operation.name} {gen_ai.request.model}". It returns ctx and a
// nil span when the client has no tracer.
func (c *Client) startSpan(ctx context.Context, req *Request, _ *Result) (context.Context, trace.Span) {
	if c.tracer == nil {
		return ctx, nil
	}
	op := operationName(req.API)
	return c.tracer.Start(ctx, op+" "+req.Model,
		trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(
			attribute.String("gen_ai.operation.name", op),
			attribute.String("gen_ai.request.model", req.Model),
			attribute.String("server.address", c.serverAddress),
			attribute.Int("server.port", c.serverPort),
		))
}

// inject writes the span context of ctx into the request headers (W3C
// traceparent with the usual propagator).
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
	span.AddEvent("gen_ai.first_token", trace.WithTimestamp(at))
}

// endSpan records the outcome on the span and ends it; res.TraceID is set
// when the span is sampled.
func endSpan(span trace.Span, res *Result) {
	if span == nil {
		return
	}
	if sc := span.SpanContext(); sc.IsSampled() {
		res.TraceID = sc.TraceID().String()
	}
	if res.Outcome != OutcomeSuccess {
		span.SetAttributes(attribute.String("error.type", res.ErrorType))
		span.SetStatus(codes.Error, string(res.Outcome))
	}
	span.End()
}
