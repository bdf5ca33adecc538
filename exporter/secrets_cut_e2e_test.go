// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package exporter

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmprobe/llmprobe/config"
	"github.com/llmprobe/llmprobe/internal/otlptest"
	"github.com/llmprobe/llmprobe/internal/testio"
	"github.com/llmprobe/llmprobe/probe"
	"github.com/llmprobe/llmprobe/probe/wire"
)

// cutBearer is 28 characters, none of them hex digits, so that no trace
// or span id can contain a piece of it by chance.
const cutBearer = "sk-cut-QzWxPmKvLrTnYbHgJfDsX"

// TestSecretCutByAQuotedHeader: an error quotes the response's
// Content-Type cut to 64 bytes (Content-Encoding to 32) and goes on after
// the cut. A server that places the bearer token it received so that the
// cut falls inside it must not get any piece of it (5 characters or
// more) into Result.Error, the log, the status page or the spans.
func TestSecretCutByAQuotedHeader(t *testing.T) {
	if len(cutBearer) != 28 {
		t.Fatalf("cutBearer has %d characters", len(cutBearer))
	}
	clearOTelEnv(t)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		if n.Add(1)%2 == 0 {
			// 37 bytes, then the token: the 64-byte cut keeps 27 of its 28.
			pad := "text/plain; charset=utf-8; x=aaaaaaaa"
			if len(pad) != 37 {
				panic(len(pad))
			}
			w.Header().Set("Content-Type", pad+tok+"; y=z")
			io.WriteString(w, "not an event stream\n")
			return
		}
		// 5 bytes, then the token: the 32-byte cut keeps 27.
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Content-Encoding", "br, x"+tok)
		io.WriteString(w, "data: [DONE]\n\n")
	}))
	defer srv.Close()

	path := filepath.Join(t.TempDir(), "llmprobe.yml")
	writeFile(t, path, fmt.Sprintf(`
global: {warmup: 0s, recent_requests: 30}
workloads:
  w:
    classes:
      - {name: chat, prompt_tokens: 32, output_tokens: 4}
targets:
  - name: cut
    url: %s/v1
    model: m
    workload: w
    arrival: {process: constant, rate: 20}
    http_client_config:
      authorization: {credentials: %s}
`, srv.URL, cutBearer))

	logs := &testio.Buffer{}
	logger := newTextLogger(logs)
	recv := otlptest.Start(t)
	insecure := true
	tr, err := NewTracing(context.Background(), TracingOptions{Config: config.Tracing{Endpoint: recv.Addr, Insecure: &insecure}, ServiceName: "llmprobe", Logger: logger})
	if err != nil || tr == nil {
		t.Fatalf("tracing: %v %v", tr, err)
	}
	var results resultLog
	d := startDaemon(t, path, logger, probe.Options{Observer: &results, Tracer: tr.Tracer(), Propagator: tr.Propagator()})
	d.reload(t)
	waitUntil(20*time.Second, 100*time.Millisecond, func() bool { return n.Load() >= 40 })
	_, _, page := d.web.do(t, "GET", "/", nil)
	d.stop(t, tr)
	spans := spansJSON(recv)
	errs := results.errors()
	if n.Load() < 20 || recv.Count() < 20 || len(errs) < 20 {
		t.Fatalf("too little traffic to judge: %d requests, %d spans, %d results", n.Load(), recv.Count(), len(errs))
	}
	for _, want := range []string{"wrong_content_type", "compressed_response"} {
		if !strings.Contains(page, want) {
			t.Errorf("the status page lacks %q", want)
		}
	}
	for name, text := range map[string]string{"Result.Error": strings.Join(errs, "\n"), "/": page, "log": logs.String(), "spans": spans} {
		for i := 0; i+5 <= len(cutBearer); i++ {
			piece := cutBearer[i : i+5]
			if c := strings.Count(text, piece); c > 0 {
				j := strings.Index(text, piece)
				t.Errorf("%s shows %q of the token %d times: ...%s...", name, piece, c, text[max(j-80, 0):min(j+40, len(text))])
				break
			}
		}
	}
}

// resultLog keeps every result's error.
type resultLog struct {
	mu   sync.Mutex
	errs []string
}

func (*resultLog) Scheduled(string, string, string)                                    {}
func (*resultLog) Dropped(string, string, string, probe.DropReason)                    {}
func (*resultLog) Sent(string, string, string)                                         {}
func (*resultLog) ConversationEnded(string, string, string, probe.ConversationOutcome) {}

func (l *resultLog) Observe(r *wire.Result) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if r.Error != "" {
		l.errs = append(l.errs, r.Error)
	}
}

func (l *resultLog) errors() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.errs...)
}
