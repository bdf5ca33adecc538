// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestServesHTTP1AndH2COnOnePort: the simulator answers HTTP/1.1 and h2c
// (HTTP/2 with prior knowledge) on its one port, and HTTP/2 by ALPN when
// its handler is served over TLS; every stream is whole on each, and the
// request log records the protocol each request came over.
func TestServesHTTP1AndH2COnOnePort(t *testing.T) {
	cfg := zeroConfig()
	cfg.RequestLog = filepath.Join(t.TempDir(), "requests.jsonl")
	base, s := startSim(t, cfg)
	tlsSrv := httptest.NewUnstartedServer(s.Handler())
	tlsSrv.EnableHTTP2 = true
	tlsSrv.StartTLS()
	defer tlsSrv.Close()

	h1 := &http.Transport{}
	h2c := &http.Transport{Protocols: new(http.Protocols)}
	h2c.Protocols.SetUnencryptedHTTP2(true)
	defer h1.CloseIdleConnections()
	defer h2c.CloseIdleConnections()
	cases := []struct {
		id, url, proto string
		client         *http.Client
	}{
		{"http1", base, "HTTP/1.1", &http.Client{Transport: h1, Timeout: time.Minute}},
		{"h2c", base, "HTTP/2.0", &http.Client{Transport: h2c, Timeout: time.Minute}},
		{"h2-tls", tlsSrv.URL, "HTTP/2.0", tlsSrv.Client()},
	}
	for _, tc := range cases {
		req, _ := http.NewRequest(http.MethodPost, tc.url+"/v1/chat/completions", strings.NewReader(mustJSON(chatBody("hello there", 5))))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Request-Id", tc.id)
		resp, err := tc.client.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", tc.id, err)
		}
		if resp.Proto != tc.proto || resp.StatusCode != http.StatusOK {
			t.Errorf("%s: %s %d, want %s 200", tc.id, resp.Proto, resp.StatusCode, tc.proto)
		}
		var done bool
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			done = done || sc.Text() == "data: [DONE]"
		}
		if err := sc.Err(); err != nil || !done {
			t.Errorf("%s: stream ended with %v, [DONE] seen %v", tc.id, err, done)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, e := range readRequestLog(t, cfg.RequestLog) {
		got[e.XRequestID] = e.Proto
	}
	for _, tc := range cases {
		if got[tc.id] != tc.proto {
			t.Errorf("%s: the request log says %q, want %q", tc.id, got[tc.id], tc.proto)
		}
	}
}
