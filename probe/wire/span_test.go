// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package wire

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// spanServer streams a fixed chat completion: a role delta, three tokens,
// a finish reason and a usage event with cached tokens. It records the
// headers of the last request.
func spanServer(t *testing.T) (*httptest.Server, <-chan http.Header) {
	t.Helper()
	headers := make(chan http.Header, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		headers <- r.Header.Clone()
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		for _, ev := range []string{
			`{"id":"cmpl-42","model":"served-model","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`,
			`{"id":"cmpl-42","model":"served-model","choices":[{"index":0,"delta":{"content":"Hello"}}]}`,
			`{"id":"cmpl-42","model":"served-model","choices":[{"index":0,"delta":{"content":" there"}}]}`,
			`{"id":"cmpl-42","model":"served-model","choices":[{"index":0,"delta":{"content":" friend"},"finish_reason":"length"}]}`,
			`{"id":"cmpl-42","model":"served-model","choices":[],"usage":{"prompt_tokens":40,"completion_tokens":3,"total_tokens":43,"prompt_tokens_details":{"cached_tokens":32}}}`,
			`[DONE]`,
		} {
			_, _ = w.Write([]byte("data: " + ev + "\n\n"))
			fl.Flush()
			time.Sleep(2 * time.Millisecond)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, headers
}

func recordingTracer(sampler sdktrace.Sampler) (*tracetest.SpanRecorder, *sdktrace.TracerProvider) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithSampler(sampler))
	return rec, tp
}

var w3c = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})

func spanClient(t *testing.T, base string, tracer trace.Tracer, mod func(*ClientConfig)) *Client {
	t.Helper()
	cfg := ClientConfig{BaseURL: base, Timeout: 5 * time.Second, Tracer: tracer, Propagator: w3c}
	if mod != nil {
		mod(&cfg)
	}
	c, err := NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func spanRequest() *Request {
	seed := int64(7)
	return &Request{
		API: APIChat, Model: "m", MaxTokens: 3,
		Messages: []Message{{Role: "system", Content: "You are terse."}, {Role: "user", Content: "Say hello."}},
		Sampling: Sampling{Temperature: 0.7, TopP: 0.95, TopK: 40, Seed: &seed},
	}
}

func spanResult() *Result {
	planned := time.Date(2026, 1, 2, 3, 4, 5, 600, time.UTC)
	return &Result{Target: "tgt", Model: "m", Class: "chat", Planned: planned, Dispatched: planned.Add(1500 * time.Microsecond), ScheduleLag: 1500 * time.Microsecond}
}

func attrMap(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		m[kv.Key] = kv.Value
	}
	return m
}

func onlySpan(t *testing.T, rec *tracetest.SpanRecorder) sdktrace.ReadOnlySpan {
	t.Helper()
	spans := rec.Ended()
	if len(spans) != 1 {
		t.Fatalf("%d ended spans, want 1", len(spans))
	}
	return spans[0]
}

func TestSpanSuccess(t *testing.T) {
	srv, headers := spanServer(t)
	rec, tp := recordingTracer(sdktrace.AlwaysSample())
	c := spanClient(t, srv.URL+"/v1", tp.Tracer("test"), nil)
	res := spanResult()
	res.ConversationID, res.Turn = "conv-1", 2
	member, _ := baggage.NewMember("tenant", "blue")
	bag, _ := baggage.New(member)
	c.Do(baggage.ContextWithBaggage(context.Background(), bag), spanRequest(), res)
	expectOutcome(t, res, OutcomeSuccess, "")

	s := onlySpan(t, rec)
	if s.Name() != "chat m" || s.SpanKind() != trace.SpanKindClient {
		t.Errorf("span %q kind %v, want %q CLIENT", s.Name(), s.SpanKind(), "chat m")
	}
	if s.Status().Code != codes.Unset {
		t.Errorf("status %v %q, want unset", s.Status().Code, s.Status().Description)
	}
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	want := map[attribute.Key]attribute.Value{
		"gen_ai.operation.name":                attribute.StringValue("chat"),
		"gen_ai.provider.name":                 attribute.StringValue("openai"),
		"gen_ai.request.model":                 attribute.StringValue("m"),
		"gen_ai.request.max_tokens":            attribute.IntValue(3),
		"gen_ai.request.temperature":           attribute.Float64Value(0.7),
		"gen_ai.request.top_p":                 attribute.Float64Value(0.95),
		"gen_ai.request.top_k":                 attribute.Float64Value(40),
		"gen_ai.request.seed":                  attribute.Int64Value(7),
		"gen_ai.conversation.id":               attribute.StringValue("conv-1"),
		"gen_ai.response.model":                attribute.StringValue("served-model"),
		"gen_ai.response.id":                   attribute.StringValue("cmpl-42"),
		"gen_ai.response.finish_reasons":       attribute.StringSliceValue([]string{"length"}),
		"gen_ai.usage.input_tokens":            attribute.IntValue(40),
		"gen_ai.usage.output_tokens":           attribute.IntValue(3),
		"gen_ai.usage.cache_read.input_tokens": attribute.IntValue(32),
		"gen_ai.response.time_to_first_chunk":  attribute.Float64Value(res.TTFT.Seconds()),
		"server.address":                       attribute.StringValue("127.0.0.1"),
		"server.port":                          attribute.IntValue(port),
		"http.response.status_code":            attribute.IntValue(200),
		"llmprobe.target":                      attribute.StringValue("tgt"),
		"llmprobe.class":                       attribute.StringValue("chat"),
		"llmprobe.turn":                        attribute.IntValue(2),
		"llmprobe.planned_time":                attribute.StringValue("2026-01-02T03:04:05.0000006Z"),
		"llmprobe.schedule_lag_seconds":        attribute.Float64Value(0.0015),
		"llmprobe.ttft_seconds":                attribute.Float64Value(res.TTFT.Seconds()),
		"llmprobe.ttfa_seconds":                attribute.Float64Value(res.TTFA.Seconds()),
		"llmprobe.outcome":                     attribute.StringValue("success"),
		"llmprobe.usage_reported":              attribute.BoolValue(true),
	}
	got := attrMap(s)
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("attribute %s = %v, want %v", k, g.Emit(), v.Emit())
		}
	}
	for k, v := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("unexpected attribute %s = %v", k, v.Emit())
		}
	}

	ev := s.Events()
	if len(ev) != 1 || ev[0].Name != FirstTokenEvent {
		t.Fatalf("events %v, want one %s", ev, FirstTokenEvent)
	}
	if !ev[0].Time.Equal(res.Start.Add(res.TTFT)) {
		t.Errorf("first-token event at %v, want Start+TTFT %v", ev[0].Time, res.Start.Add(res.TTFT))
	}
	if s.StartTime().After(res.Start) || s.EndTime().Before(res.Start.Add(res.E2E)) {
		t.Errorf("span [%v, %v] does not cover the request [%v, +%v]", s.StartTime(), s.EndTime(), res.Start, res.E2E)
	}

	if res.TraceID != s.SpanContext().TraceID().String() {
		t.Errorf("Result.TraceID %q, span's %s", res.TraceID, s.SpanContext().TraceID())
	}
	h := <-headers
	if want := "00-" + s.SpanContext().TraceID().String() + "-" + s.SpanContext().SpanID().String() + "-01"; h.Get("Traceparent") != want {
		t.Errorf("traceparent %q, want %q", h.Get("Traceparent"), want)
	}
	if h.Get("Baggage") != "tenant=blue" {
		t.Errorf("baggage %q, want tenant=blue", h.Get("Baggage"))
	}
}

func TestSpanFailures(t *testing.T) {
	closed := func() string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		return "http://" + addr + "/v1"
	}
	handler := func(f func(w http.ResponseWriter, fl http.Flusher)) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			f(w, w.(http.Flusher))
		}))
		t.Cleanup(srv.Close)
		return srv.URL + "/v1"
	}
	token := `data: {"choices":[{"index":0,"delta":{"content":"x"}}]}` + "\n\n"
	for _, tc := range []struct {
		name      string
		base      string
		outcome   Outcome
		errorType string
		status    int
	}{
		{"http_error", handler(func(w http.ResponseWriter, _ http.Flusher) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(503)
			_, _ = w.Write([]byte(`{"error":{"message":"overloaded"}}`))
		}), OutcomeHTTPError, "http_503", 503},
		{"connect_error", closed(), OutcomeConnectError, "connection_refused", 0},
		{"timeout", handler(func(w http.ResponseWriter, fl http.Flusher) {
			_, _ = w.Write([]byte(token))
			fl.Flush()
			time.Sleep(time.Second)
		}), OutcomeTimeout, "timeout", 200},
		{"stream_error", handler(func(w http.ResponseWriter, fl http.Flusher) {
			_, _ = w.Write([]byte(token))
		}), OutcomeStreamError, "eof_without_done", 200},
		{"invalid_response", handler(func(w http.ResponseWriter, fl http.Flusher) {
			_, _ = w.Write([]byte(token + "data: {not json\n\n"))
		}), OutcomeInvalidResponse, "malformed_event", 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec, tp := recordingTracer(sdktrace.AlwaysSample())
			c := spanClient(t, tc.base, tp.Tracer("test"), func(cfg *ClientConfig) { cfg.Timeout = 300 * time.Millisecond })
			res := spanResult()
			c.Do(context.Background(), spanRequest(), res)
			expectOutcome(t, res, tc.outcome, tc.errorType)
			s := onlySpan(t, rec)
			if s.Status().Code != codes.Error || s.Status().Description != string(tc.outcome) {
				t.Errorf("status %v %q, want Error %q", s.Status().Code, s.Status().Description, tc.outcome)
			}
			a := attrMap(s)
			if a["error.type"].AsString() != tc.errorType {
				t.Errorf("error.type %q, want %q", a["error.type"].AsString(), tc.errorType)
			}
			if a["llmprobe.outcome"].AsString() != string(tc.outcome) {
				t.Errorf("llmprobe.outcome %q", a["llmprobe.outcome"].AsString())
			}
			if a["llmprobe.error"].AsString() == "" || a["llmprobe.error"].AsString() != res.Error {
				t.Errorf("llmprobe.error %q, want the result's message %q", a["llmprobe.error"].AsString(), res.Error)
			}
			if code, ok := a["http.response.status_code"]; (tc.status == 0) == ok || (ok && code.AsInt64() != int64(tc.status)) {
				t.Errorf("http.response.status_code %v (present %v), want %d", code.AsInt64(), ok, tc.status)
			}
			if _, ok := a["gen_ai.usage.output_tokens"]; ok {
				t.Errorf("usage recorded although the server reported none")
			}
			if tc.outcome == OutcomeTimeout || tc.outcome == OutcomeStreamError || tc.outcome == OutcomeInvalidResponse {
				if ev := s.Events(); len(ev) != 1 || ev[0].Name != FirstTokenEvent {
					t.Errorf("events %v: the token before the failure should be marked", ev)
				}
			}
			if res.TraceID != s.SpanContext().TraceID().String() {
				t.Errorf("a failed request's TraceID %q, span's %s", res.TraceID, s.SpanContext().TraceID())
			}
		})
	}
}

func TestSpanContent(t *testing.T) {
	srv, _ := spanServer(t)
	for _, tc := range []struct {
		name     string
		record   bool
		keepText bool
	}{
		{"off", false, false},
		{"off, text kept for history", false, true},
		{"on", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec, tp := recordingTracer(sdktrace.AlwaysSample())
			c := spanClient(t, srv.URL+"/v1", tp.Tracer("test"), func(cfg *ClientConfig) {
				cfg.KeepText, cfg.RecordContent = tc.keepText, tc.record
			})
			res := spanResult()
			c.Do(context.Background(), spanRequest(), res)
			expectOutcome(t, res, OutcomeSuccess, "")
			a := attrMap(onlySpan(t, rec))
			in, okIn := a["gen_ai.input.messages"]
			out, okOut := a["gen_ai.output.messages"]
			if !tc.record {
				if okIn || okOut {
					t.Fatalf("content recorded without opt-in: %v %v", in.Emit(), out.Emit())
				}
				for k, v := range a {
					if strings.Contains(v.Emit(), "Say hello") || strings.Contains(v.Emit(), "friend") {
						t.Errorf("attribute %s holds prompt or completion text: %s", k, v.Emit())
					}
				}
				return
			}
			if !okIn || !okOut {
				t.Fatalf("content not recorded: input %v output %v", okIn, okOut)
			}
			wantIn := attribute.SliceValue(
				attribute.MapValue(attribute.String("role", "system"), attribute.Slice("parts", attribute.MapValue(attribute.String("type", "text"), attribute.String("content", "You are terse.")))),
				attribute.MapValue(attribute.String("role", "user"), attribute.Slice("parts", attribute.MapValue(attribute.String("type", "text"), attribute.String("content", "Say hello.")))),
			)
			if in.Emit() != wantIn.Emit() {
				t.Errorf("gen_ai.input.messages = %s\nwant %s", in.Emit(), wantIn.Emit())
			}
			wantOut := attribute.SliceValue(attribute.MapValue(
				attribute.String("role", "assistant"),
				attribute.Slice("parts", attribute.MapValue(attribute.String("type", "text"), attribute.String("content", "Hello there friend"))),
				attribute.String("finish_reason", "length"),
			))
			if out.Emit() != wantOut.Emit() {
				t.Errorf("gen_ai.output.messages = %s\nwant %s", out.Emit(), wantOut.Emit())
			}
		})
	}
}

func TestSpanCompletionsPrompt(t *testing.T) {
	req := &Request{API: APICompletions, Model: "m", Prompt: "Once upon"}
	kv, ok := inputMessages(req)
	want := attribute.SliceValue(attribute.MapValue(attribute.String("role", "user"),
		attribute.Slice("parts", attribute.MapValue(attribute.String("type", "text"), attribute.String("content", "Once upon")))))
	if !ok || kv.Key != "gen_ai.input.messages" || kv.Value.Emit() != want.Emit() {
		t.Errorf("inputMessages = %v %s", ok, kv.Value.Emit())
	}
	if _, ok := inputMessages(&Request{API: APICompletions, Model: "m", PromptIDs: []int{1, 2}}); ok {
		t.Error("a token-id prompt has no text to record")
	}
}

func TestSpanUnsampled(t *testing.T) {
	srv, headers := spanServer(t)
	rec, tp := recordingTracer(sdktrace.NeverSample())
	c := spanClient(t, srv.URL+"/v1", tp.Tracer("test"), nil)
	res := spanResult()
	c.Do(context.Background(), spanRequest(), res)
	expectOutcome(t, res, OutcomeSuccess, "")
	if res.TraceID != "" {
		t.Errorf("TraceID %q for an unsampled request (it would become an exemplar)", res.TraceID)
	}
	if n := len(rec.Ended()); n != 0 {
		t.Errorf("%d spans recorded for an unsampled request", n)
	}
	// The trace context still propagates, flagged not sampled, so the
	// server does not sample its side either.
	if tp := (<-headers).Get("Traceparent"); !strings.HasSuffix(tp, "-00") {
		t.Errorf("traceparent %q, want the not-sampled flag", tp)
	}
}

func TestCutText(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"hello", 10, "hello"},
		{"hello", 3, "hel"},
		{"héllo", 2, "h"}, // é is 2 bytes: cut before it
		{"日本", 4, "日"},
		{"日本", 2, ""},
	} {
		if got := cutText(tc.in, tc.n); got != tc.want {
			t.Errorf("cutText(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}

func BenchmarkSpan(b *testing.B) {
	req, res := spanRequest(), spanResult()
	res.Outcome, res.StatusCode, res.FirstToken, res.TTFT = OutcomeSuccess, 200, true, 20*time.Millisecond
	res.UsageReported, res.PromptTokens, res.OutputTokens = true, 40, 3
	res.ResponseModel, res.ResponseID, res.FinishReason = "served-model", "cmpl-42", "length"
	c := &Client{serverAddress: "127.0.0.1", serverPort: 8000}
	for _, tc := range []struct {
		name   string
		tracer trace.Tracer
	}{
		{"off", nil},
		{"sampled", sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample())).Tracer("b")},
		{"unsampled", sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample())).Tracer("b")},
	} {
		b.Run(tc.name, func(b *testing.B) {
			c.tracer = tc.tracer
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				_, span := c.startSpan(ctx, req, res)
				spanFirstToken(span, res.Start)
				c.endSpan(span, res)
			}
		})
	}
}

// A target may name its provider (gen_ai.provider.name).
func TestSpanProvider(t *testing.T) {
	srv, _ := spanServer(t)
	rec, tp := recordingTracer(sdktrace.AlwaysSample())
	c := spanClient(t, srv.URL+"/v1", tp.Tracer("test"), func(cfg *ClientConfig) { cfg.Provider = "azure.ai.openai" })
	c.Do(context.Background(), spanRequest(), spanResult())
	if got := attrMap(onlySpan(t, rec))["gen_ai.provider.name"]; got.AsString() != "azure.ai.openai" {
		t.Errorf("gen_ai.provider.name = %q", got.AsString())
	}
}
