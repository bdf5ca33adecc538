// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package exporter

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/llmprobe/llmprobe/probe"
	"github.com/llmprobe/llmprobe/probe/wire"
)

// TestHTTPResponsesByStatusCode runs the engine against a server that
// answers with a rotation of status codes (a success stream, 401, 403,
// 404, 413, 422, 429, 500, 502, 503, 504, a teapot, 507, a redirect to
// another host) and checks that llmprobe_http_responses_total counts
// exactly what the server sent, by bounded code, and nothing for requests
// that got no response.
func TestHTTPResponsesByStatusCode(t *testing.T) {
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		t.Error("the cross-host redirect was followed")
	}))
	defer elsewhere.Close()
	codes := []int{200, 401, 403, 404, 413, 422, 429, 500, 502, 503, 504, 418, 507, 302}
	var mu sync.Mutex
	sent := map[string]int{} // bounded label -> responses the server sent
	next := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if r.URL.Path != "/v1/chat/completions" {
			http.NotFound(w, r)
			return
		}
		mu.Lock()
		code := codes[next%len(codes)]
		next++
		sent[wire.StatusCodeLabel(code)]++
		mu.Unlock()
		switch code {
		case 200:
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":8,\"completion_tokens\":1}}\n\ndata: [DONE]\n\n")
		case 302:
			http.Redirect(w, r, elsewhere.URL+"/v1/chat/completions", http.StatusFound)
		default:
			http.Error(w, `{"error":{"message":"no"}}`, code)
		}
	}))
	defer srv.Close()

	dir := t.TempDir()
	path := filepath.Join(dir, "llmprobe.yml")
	writeFile(t, path, fmt.Sprintf(`
global: {warmup: 0s}
workloads:
  w:
    classes:
      - {name: chat, prompt_tokens: 8, output_tokens: 1}
targets:
  - name: codes
    url: %s/v1
    model: m
    workload: w
    arrival: {process: constant, rate: 50}
    tokenize: "off"
`, srv.URL))
	d := startDaemon(t, path, slog.New(slog.DiscardHandler), probe.Options{})
	d.reload(t)
	want := 3 * len(codes) // every code three times
	waitUntil(30*time.Second, 20*time.Millisecond, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return next >= want
	})
	d.stop(t)

	mfs := gather(t, d.reg)
	mu.Lock()
	defer mu.Unlock()
	if next < want {
		t.Fatalf("the server got %d requests in 30s, want %d", next, want)
	}
	total := 0
	for _, c := range wire.StatusCodes {
		got := series(mfs, "llmprobe_http_responses_total", map[string]string{"target": "codes", "code": c}).GetCounter().GetValue()
		if int(got) != sent[c] {
			t.Errorf("llmprobe_http_responses_total{code=%q} = %v, the server sent %d", c, got, sent[c])
		}
		total += int(got)
	}
	for _, c := range []string{"2xx", "3xx", "401", "403", "404", "413", "422", "429", "4xx", "500", "502", "503", "504", "5xx"} {
		if sent[c] == 0 {
			t.Errorf("the rotation never produced %s", c)
		}
	}
	if sent["other"] != 0 || sent["400"] != 0 {
		t.Errorf("unexpected codes sent: %v", sent)
	}
	t.Logf("%d responses counted by code: %v", total, sent)
}

func TestStatusCodeLabel(t *testing.T) {
	for code, want := range map[int]string{
		0: "other", 100: "other", 199: "other", 200: "2xx", 204: "2xx", 299: "2xx", 301: "3xx", 308: "3xx",
		400: "400", 401: "401", 403: "403", 404: "404", 405: "4xx", 408: "408", 413: "413", 418: "4xx", 422: "422",
		429: "429", 499: "4xx", 500: "500", 501: "5xx", 502: "502", 503: "503", 504: "504", 599: "5xx", 600: "other", -1: "other",
	} {
		if got := wire.StatusCodeLabel(code); got != want {
			t.Errorf("StatusCodeLabel(%d) = %q, want %q", code, got, want)
		}
	}
}
