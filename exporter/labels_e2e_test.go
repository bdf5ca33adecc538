// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package exporter

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmprobe/llmprobe/config"
	"github.com/llmprobe/llmprobe/internal/otlptest"
	"github.com/llmprobe/llmprobe/internal/testio"
	"github.com/llmprobe/llmprobe/probe"
)

// hostileChars are what a value must not carry to a label, a log line
// or the page: a terminal escape (ESC), the right-to-left override
// (U+202E) and isolate (U+2066), a C1 control (CSI, U+009B), a line
// separator (U+2028) and a right-to-left mark (U+200F).
var hostileChars = []string{"\x1b", "\u202e", "\u2066", "\u009b", "\u2028", "\u200f"}

// hostile decorates s with every one of hostileChars.
func hostile(s string) string {
	return s + "\x1b[31m\u202egnp.exe\u2066x\u2069\u009b1m\u2028\u200f"
}

// TestHostileLabelValuesAreCleaned: a server whose model, fingerprint,
// Server header, version and error texts, and a file_sd file whose
// replica name, pod, namespace and node labels, carry terminal escapes,
// C1 controls, line separators and bidirectional overrides get none of
// them into /metrics, the status page, the log or the spans.
func TestHostileLabelValuesAreCleaned(t *testing.T) {
	clearOTelEnv(t)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if r.URL.Path == "/version" {
			fmt.Fprintf(w, `{"version":%s}`, jsonString(hostile("0.9.1")))
			return
		}
		if n.Add(1)%4 == 0 {
			http.Error(w, hostile("overloaded"), http.StatusServiceUnavailable)
			return
		}
		// A header value may carry the override's UTF-8 bytes but no
		// control byte: Go's client refuses those.
		w.Header().Set("Server", "vllm\u202egnp.exe\u2066")
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "data: {\"id\":\"x\",\"model\":%s,\"system_fingerprint\":%s,\"choices\":[{\"delta\":{\"content\":\"hi\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n",
			jsonString(hostile("served-model")), jsonString(hostile("fp_1")))
	}))
	defer srv.Close()
	dir := t.TempDir()
	host := strings.TrimPrefix(srv.URL, "http://")
	sd, _ := json.Marshal([]map[string]any{{"targets": []string{host}, "labels": map[string]string{
		"replica": hostile("replica-0"), "pod": hostile("pod-0"), "namespace": hostile("ns"), "node": hostile("node-a")}}})
	writeFile(t, filepath.Join(dir, "pool.json"), string(sd))
	recv := otlptest.Start(t)
	path := filepath.Join(dir, "llmprobe.yml")
	writeFile(t, path, fmt.Sprintf(`
global: {warmup: 0s}
workloads:
  w:
    classes:
      - {name: chat, prompt_tokens: 16, output_tokens: 4}
targets:
  - name: direct
    url: %[1]s/v1
    model: m
    workload: w
    arrival: {process: constant, rate: 40}
    identity: {poll_interval: 1s}
  - name: pool
    model: m
    workload: w
    arrival: {process: constant, rate: 20}
    discovery:
      file: {files: [pool.json]}
tracing: {endpoint: %[2]s, insecure: true}
`, srv.URL, recv.Addr))
	cfg, err := config.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var logs testio.Buffer
	logger := newTextLogger(&logs)
	tr, err := NewTracing(context.Background(), TracingOptions{Config: cfg.Tracing, DefaultServiceName: "llmprobe", Logger: logger})
	if err != nil || tr == nil {
		t.Fatalf("tracing: %v %v", tr, err)
	}
	d := startDaemon(t, path, logger, probe.Options{Tracer: tr.Tracer(), Propagator: tr.Propagator()})
	d.reload(t)
	var exposition string
	if !waitUntil(30*time.Second, 100*time.Millisecond, func() bool {
		_, _, exposition = d.web.do(t, "GET", "/metrics", nil)
		return strings.Contains(exposition, `version="0.9.1`) && strings.Contains(exposition, `fingerprint="fp_1`) &&
			strings.Contains(exposition, `pod="pod-0`) && n.Load() >= 40
	}) {
		t.Fatalf("the identity and the replica never showed:\n%s", exposition)
	}
	_, _, page := d.web.do(t, "GET", "/", nil)
	d.stop(t, tr)
	spans := spansJSON(recv)
	for _, want := range []string{"overloaded", "served-model", "gnp.exe"} {
		if !strings.Contains(page, want) {
			t.Errorf("the status page lacks %q: the hostile values were not shown", want)
		}
	}
	for name, text := range map[string]string{"/metrics": exposition, "/": page, "log": logs.String(), "spans": spans} {
		for _, c := range hostileChars {
			// The spans are JSON, which escapes controls but not the
			// overrides; the log's text handler quotes values, as %q.
			for _, form := range []string{c, strings.Trim(jsonString(c), `"`), strings.Trim(fmt.Sprintf("%q", c), `"`)} {
				if form == "" || (form != c && !strings.HasPrefix(form, `\`)) {
					continue
				}
				if i := strings.Index(text, form); i >= 0 {
					t.Errorf("%s shows %q: ...%q...", name, c, text[max(i-60, 0):min(i+20, len(text))])
				}
			}
		}
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
