// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"io"
	"net/http/httptest"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// The caller's span, as the probe would send it.
var (
	callerTrace = trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36}
	callerSpan  = trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7}
)

func traceparent(sampled bool) string {
	flags := "01"
	if !sampled {
		flags = "00"
	}
	return "00-" + callerTrace.String() + "-" + callerSpan.String() + "-" + flags
}

// tracedSim starts a simulator whose spans are recorded.
func tracedSim(t *testing.T, cfg Config) (string, *tracetest.SpanRecorder) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	cfg.TracerProvider = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	base, _ := startSim(t, cfg)
	return base, rec
}

// waitSpans waits (bounded) until n spans have ended: the server ends
// its spans when the handler returns, just after the client has read
// the response.
func waitSpans(t *testing.T, rec *tracetest.SpanRecorder, n int) []sdktrace.ReadOnlySpan {
	t.Helper()
	return waitSpansUntil(rec, func(spans []sdktrace.ReadOnlySpan) bool { return len(spans) >= n })
}

// waitSpansUntil returns the ended spans once done holds of them, or
// after 5 s.
func waitSpansUntil(rec *tracetest.SpanRecorder, done func([]sdktrace.ReadOnlySpan) bool) []sdktrace.ReadOnlySpan {
	deadline := time.Now().Add(5 * time.Second)
	for {
		spans := rec.Ended()
		if done(spans) || time.Now().After(deadline) {
			return spans
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func spansByName(spans []sdktrace.ReadOnlySpan) map[string]sdktrace.ReadOnlySpan {
	m := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		m[s.Name()] = s
	}
	return m
}

func spanAttrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		m[kv.Key] = kv.Value
	}
	return m
}

func streamBody(prompt string, maxTokens int) string {
	return `{"model":"sim-model","messages":[{"role":"user","content":"` + prompt + `"}],"max_tokens":` +
		strconv.Itoa(maxTokens) + `,"stream":true,"stream_options":{"include_usage":true},"ignore_eos":true}`
}

func readAll(t *testing.T, base, body string, headers ...string) {
	t.Helper()
	resp := post(t, base+"/v1/chat/completions", body, headers...)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}

func TestServerSpans(t *testing.T) {
	cfg := DefaultConfig() // real timing: queue, prefill and decode take time
	cfg.EOSProbability = 0
	cfg.BlockSize = 4
	base, rec := tracedSim(t, cfg)
	prompt := strings.Repeat("alpha beta gamma delta ", 8)

	readAll(t, base, streamBody(prompt, 5), "traceparent", traceparent(true), "baggage", "tenant=blue")
	// The same prompt again: its prefix is cached now.
	readAll(t, base, streamBody(prompt, 5), "traceparent", traceparent(true))
	spans := waitSpans(t, rec, 8)
	if len(spans) != 8 {
		t.Fatalf("%d spans, want 2 × (server + queue + prefill + decode)", len(spans))
	}

	var servers []sdktrace.ReadOnlySpan
	for _, s := range spans {
		if s.Name() == "chat sim-model" {
			servers = append(servers, s)
		}
	}
	if len(servers) != 2 {
		t.Fatalf("server spans %v, want 2 named \"chat sim-model\"", names(spans))
	}
	sort.Slice(servers, func(i, j int) bool { return servers[i].StartTime().Before(servers[j].StartTime()) })
	for i, srv := range servers {
		group := []sdktrace.ReadOnlySpan{srv}
		for _, s := range spans {
			if s.Parent().SpanID() == srv.SpanContext().SpanID() {
				group = append(group, s)
			}
		}
		byName := spansByName(group)
		if srv.SpanKind() != trace.SpanKindServer {
			t.Errorf("server span kind %v", srv.SpanKind())
		}
		if srv.Parent().TraceID() != callerTrace || srv.Parent().SpanID() != callerSpan || !srv.Parent().IsRemote() {
			t.Errorf("server span parent %v, want the caller's remote span %s/%s", srv.Parent(), callerTrace, callerSpan)
		}
		if srv.Status().Code != codes.Unset {
			t.Errorf("server span status %v %q", srv.Status().Code, srv.Status().Description)
		}
		a := spanAttrs(srv)
		for k, want := range map[attribute.Key]attribute.Value{
			"gen_ai.operation.name":          attribute.StringValue("chat"),
			"gen_ai.provider.name":           attribute.StringValue("llmprobe.sim"),
			"gen_ai.request.model":           attribute.StringValue("sim-model"),
			"gen_ai.response.model":          attribute.StringValue("sim-model"),
			"gen_ai.response.finish_reasons": attribute.StringSliceValue([]string{"length"}),
			"gen_ai.usage.input_tokens":      attribute.IntValue(8*4 + 4 + 3),
			"gen_ai.usage.output_tokens":     attribute.IntValue(5),
			"http.request.method":            attribute.StringValue("POST"),
			"url.path":                       attribute.StringValue("/v1/chat/completions"),
			"http.response.status_code":      attribute.IntValue(200),
			"llmprobe.sim.stream":            attribute.BoolValue(true),
		} {
			if got := a[k]; got != want {
				t.Errorf("request %d: %s = %s, want %s", i, k, got.Emit(), want.Emit())
			}
		}
		cached := a["gen_ai.usage.cache_read.input_tokens"].AsInt64()
		if (i == 0) != (cached == 0) {
			t.Errorf("request %d: cached tokens %d (the second request should hit the prefix cache)", i, cached)
		}

		prev := srv.StartTime()
		for _, name := range []string{"queue", "prefill", "decode"} {
			c := byName[name]
			if c == nil {
				t.Fatalf("request %d: no %s span among %v", i, name, names(group))
			}
			if c.Parent().SpanID() != srv.SpanContext().SpanID() || c.SpanContext().TraceID() != callerTrace {
				t.Errorf("%s span is not a child of the server span", name)
			}
			if c.StartTime().Before(prev) || c.EndTime().Before(c.StartTime()) || c.EndTime().After(srv.EndTime()) {
				t.Errorf("%s span [%v, %v] out of order (previous ended %v, server [%v, %v])",
					name, c.StartTime(), c.EndTime(), prev, srv.StartTime(), srv.EndTime())
			}
			prev = c.EndTime()
		}
		p := spanAttrs(byName["prefill"])
		if p["llmprobe.sim.cached_tokens"].AsInt64() != cached ||
			p["llmprobe.sim.prefill_tokens"].AsInt64() != a["gen_ai.usage.input_tokens"].AsInt64()-cached ||
			p["llmprobe.sim.running_at_first_token"].AsInt64() < 1 {
			t.Errorf("prefill attributes %v", p)
		}
		if d := spanAttrs(byName["decode"]); d["llmprobe.sim.output_tokens"].AsInt64() != 5 {
			t.Errorf("decode attributes %v", d)
		}
		// With default timing, prefill (≥ 20 ms base) and decode (4 steps
		// of ≥ 12 ms) take real time.
		if d := byName["prefill"].EndTime().Sub(byName["prefill"].StartTime()); d < 10*time.Millisecond {
			t.Errorf("prefill span lasted %v", d)
		}
		if d := byName["decode"].EndTime().Sub(byName["decode"].StartTime()); d < 20*time.Millisecond {
			t.Errorf("decode span lasted %v", d)
		}
	}
}

func names(spans []sdktrace.ReadOnlySpan) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name())
	}
	return out
}

func TestServerSpanFailures(t *testing.T) {
	base, rec := tracedSim(t, zeroConfig())
	for _, tc := range []struct {
		fault, body     string
		errType, status string
		failed          bool
	}{
		{"http_500", streamBody("hi", 3), "500", "Error", true},
		{"http_429", streamBody("hi", 3), "429", "Error", true},
		{"reset:1", streamBody("hi", 3), "reset", "Error", true},
		{"", `{"model":"sim-model","messages":[]}`, "400", "Unset", false},
		{"", `{"model":"nope","messages":[{"role":"user","content":"x"}]}`, "404", "Unset", false},
	} {
		rec.Reset()
		var headers []string
		if tc.fault != "" {
			headers = []string{FaultHeader, tc.fault}
		}
		headers = append(headers, "traceparent", traceparent(true))
		resp := post(t, base+"/v1/chat/completions", tc.body, headers...)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		// The server span ends after the handler returns, which may be
		// after the client saw the reset and a child span ended.
		spans := waitSpansUntil(rec, func(spans []sdktrace.ReadOnlySpan) bool {
			return slices.ContainsFunc(spans, func(s sdktrace.ReadOnlySpan) bool { return s.SpanKind() == trace.SpanKindServer })
		})
		var srv sdktrace.ReadOnlySpan
		for _, s := range spans {
			if s.SpanKind() == trace.SpanKindServer {
				srv = s
			}
		}
		if srv == nil {
			t.Fatalf("%s %s: no server span among %v", tc.fault, tc.body, names(spans))
		}
		if got := spanAttrs(srv)["error.type"].AsString(); got != tc.errType {
			t.Errorf("%s %s: error.type %q, want %q", tc.fault, tc.body, got, tc.errType)
		}
		if (srv.Status().Code == codes.Error) != tc.failed {
			t.Errorf("%s %s: status %v %q", tc.fault, tc.body, srv.Status().Code, srv.Status().Description)
		}
		if tc.failed && srv.Status().Description == "" {
			t.Errorf("%s: error status without a description", tc.fault)
		}
		if tc.fault != "" {
			if got, want := spanAttrs(srv)["llmprobe.sim.fault"].AsString(), strings.Split(tc.fault, ":")[0]; got != want {
				t.Errorf("llmprobe.sim.fault %q, want %q", got, want)
			}
		}
	}
}

func TestServerSpansFollowTheCaller(t *testing.T) {
	base, rec := tracedSim(t, zeroConfig())
	// Not sampled by the caller: the server does not sample either.
	readAll(t, base, streamBody("hi", 2), "traceparent", traceparent(false))
	// No caller context: a root span of the server's own trace.
	readAll(t, base, streamBody("hi", 2))
	spans := waitSpans(t, rec, 4)
	time.Sleep(50 * time.Millisecond)
	spans = rec.Ended()
	if len(spans) != 4 {
		t.Fatalf("%d spans %v, want the 4 of the request without a caller only", len(spans), names(spans))
	}
	for _, s := range spans {
		if s.SpanContext().TraceID() == callerTrace {
			t.Errorf("span %s joined the unsampled caller's trace", s.Name())
		}
		if s.SpanKind() == trace.SpanKindServer && s.Parent().IsValid() {
			t.Errorf("server span without a caller has parent %v", s.Parent())
		}
	}
}

// TestServerWithoutTracing checks that without a TracerProvider a request
// carries no tracing state, whatever headers it has.
func TestServerWithoutTracing(t *testing.T) {
	_, s := startSim(t, zeroConfig())
	if s.tracing != nil {
		t.Fatal("tracing state without a TracerProvider")
	}
	r := httptest.NewRequest("POST", "/v1/chat/completions", nil)
	r.Header.Set("traceparent", traceparent(true))
	var lc requestLifecycle
	lc.begin(s, r, apiChat)
	lc.end()
	if lc.tr != nil || lc.parent != nil || lc.eng != nil {
		t.Errorf("lifecycle holds tracing state: %+v", lc)
	}
}
