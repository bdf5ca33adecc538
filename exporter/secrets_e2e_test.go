// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package exporter

import (
	"context"
	"encoding/base64"
	"encoding/hex"
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

// Secrets of TestSecretsAreNeverRepublished's configuration.
const (
	echoBearer   = "sk-echo-bearer-5f1e2d3c4b5a69788796"
	echoHeader   = "xk-echo-header-a1b2c3d4e5f60718293a"
	echoPassword = "echo-basic-password-0f9e8d7c6b5a"
	echoFileKey  = "fk-echo-file-key-77665544332211aa"
)

// TestSecretsAreNeverRepublished runs the daemon's wiring against a server
// that quotes every request header back in every way it can (401 bodies,
// error events, response ids and models, Server headers and
// system_fingerprints, /tokenize errors; as sent, upper-cased, hex and
// base64) and checks that no configured secret, in any of those forms
// and in any letter case, appears in /metrics, the status page, /config,
// the debug log or the spans a real OTLP receiver got.
func TestSecretsAreNeverRepublished(t *testing.T) {
	clearOTelEnv(t)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
	var n atomic.Int64
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		var quoted strings.Builder
		for k, vs := range r.Header {
			for _, v := range vs {
				fmt.Fprintf(&quoted, "%s: %s [%s] (%s) <%X> ", k, v, base64.StdEncoding.EncodeToString([]byte(v)), strings.ToUpper(v), v)
			}
		}
		q, _ := json.Marshal(quoted.String())
		switch {
		case strings.HasSuffix(r.URL.Path, "/tokenize"):
			http.Error(w, "tokenize refused for "+quoted.String(), http.StatusForbidden)
		case n.Add(1)%3 == 0:
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprintf(w, `{"error":{"message":%s}}`, q)
		case n.Load()%3 == 1:
			w.Header().Set("Content-Type", "text/event-stream")
			w.Header().Set("Server", strings.ToUpper(r.Header.Get("X-Api-Key")))
			id, _ := json.Marshal(r.Header.Get("Authorization"))
			model, _ := json.Marshal(r.Header.Get("X-Api-Key"))
			fp, _ := json.Marshal(hex.EncodeToString([]byte(r.Header.Get("X-File-Key") + r.Header.Get("Authorization"))))
			fmt.Fprintf(w, "data: {\"id\":%s,\"model\":%s,\"system_fingerprint\":%s,\"choices\":[{\"delta\":{\"content\":\"hi\"},\"finish_reason\":%s}]}\n\n", id, model, fp, model)
			io.WriteString(w, "data: [DONE]\n\n")
		default:
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\nevent: error\ndata: {\"error\":{\"message\":%s}}\n\n", q)
		}
	}))
	defer echo.Close()

	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "key"), echoFileKey+"\n")
	path := filepath.Join(dir, "llmprobe.yml")
	writeFile(t, path, fmt.Sprintf(`
global: {warmup: 0s, recent_requests: 20}
workloads:
  w:
    classes:
      - {name: chat, prompt_tokens: 32, output_tokens: 4}
targets:
  - name: bearer
    url: %[1]s/v1
    model: m
    workload: w
    arrival: {process: constant, rate: 20}
    http_client_config:
      authorization: {credentials: %[2]s}
      http_headers:
        X-Api-Key: {secrets: [%[3]s]}
        X-File-Key: {files: [key]}
  - name: basic
    url: %[1]s/v1
    model: m
    workload: w
    arrival: {process: constant, rate: 20}
    http_client_config:
      basic_auth: {username: probe, password: %[4]s}
`, echo.URL, echoBearer, echoHeader, echoPassword))

	logs := &testio.Buffer{}
	logger := newTextLogger(logs)
	recv := otlptest.Start(t)
	insecure := true
	tr, err := NewTracing(context.Background(), TracingOptions{Config: config.Tracing{Endpoint: recv.Addr, Insecure: &insecure, RecordContent: true}, ServiceName: "llmprobe", Logger: logger})
	if err != nil || tr == nil {
		t.Fatalf("tracing: %v %v", tr, err)
	}
	d := startDaemon(t, path, logger, probe.Options{Tracer: tr.Tracer(), Propagator: tr.Propagator(), RecordContent: true})
	d.reload(t)
	waitUntil(20*time.Second, 100*time.Millisecond, func() bool { return n.Load() >= 60 })
	_, _, exposition := d.web.do(t, "GET", "/metrics", map[string]string{"Accept": "application/openmetrics-text;version=1.0.0"})
	_, _, page := d.web.do(t, "GET", "/", nil)
	_, _, cfgPage := d.web.do(t, "GET", "/config", nil)
	d.stop(t, tr)
	spans := spansJSON(recv)
	if n.Load() < 30 || recv.Count() < 30 {
		t.Fatalf("too little traffic to judge: %d requests, %d spans", n.Load(), recv.Count())
	}
	// The failures really happened and were recorded, redacted.
	for _, want := range []string{"http_401", "error_event", "[secret]"} {
		if !strings.Contains(page, want) {
			t.Errorf("the status page lacks %q", want)
		}
	}
	if !strings.Contains(logs.String(), "[secret]") {
		t.Error("the debug log shows no redacted failure")
	}
	for name, text := range map[string]string{"/metrics": exposition, "/": page, "/config": cfgPage, "log": logs.String(), "spans": spans} {
		low := strings.ToLower(text)
		for _, sec := range []string{echoBearer, echoHeader, echoPassword, echoFileKey, "probe:" + echoPassword} {
			b64, hexed := base64.StdEncoding.EncodeToString([]byte(sec)), hex.EncodeToString([]byte(sec))
			for _, form := range []string{sec, sec[:16], b64, b64[:16], hexed, hexed[:16]} {
				if i := strings.Index(low, strings.ToLower(form)); i >= 0 {
					t.Errorf("%s shows secret %q (as %q): ...%s...", name, sec, form, text[max(i-80, 0):min(i+80, len(text))])
				}
			}
		}
	}
}
