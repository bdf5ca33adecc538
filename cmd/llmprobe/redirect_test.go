// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// TestFitPrometheusRedirectKeepsCredentials: a Prometheus (or a proxy
// before it) that redirects `llmprobe fit` to another port or host does
// not get the --prometheus.config.file credentials sent there.
func TestFitPrometheusRedirectKeepsCredentials(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	capture := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		seen = append(seen, fmt.Sprintf("%s %s %v %s", r.Method, r.URL, r.Header, body))
		mu.Unlock()
	}))
	defer capture.Close()
	cu, _ := url.Parse(capture.URL)
	dir := t.TempDir()
	clientCfg := filepath.Join(dir, "prom-client.yml")
	const bearer, key = "fit-bearer-secret-0a1b2c3d", "fit-header-secret-4e5f6a7b"
	if err := os.WriteFile(clientCfg, []byte("authorization: {credentials: "+bearer+"}\nhttp_headers:\n  X-Api-Key: {secrets: ["+key+"]}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, host := range []string{"127.0.0.1", "localhost"} {
		t.Run(host, func(t *testing.T) {
			loc := "http://" + net.JoinHostPort(host, cu.Port()) + "/capture"
			prom := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				w.Header().Set("Location", loc)
				w.WriteHeader(http.StatusTemporaryRedirect)
			}))
			defer prom.Close()
			_, err := fitPrometheus(context.Background(), &fitFlags{promURL: prom.URL, promConfigFile: clientCfg, rangeStr: "10m"})
			if err == nil {
				t.Fatal("fit succeeded against a redirecting Prometheus")
			}
			mu.Lock()
			defer mu.Unlock()
			if len(seen) != 0 {
				t.Fatalf("the other server received %d requests: %q", len(seen), seen)
			}
			if strings.Contains(err.Error(), bearer) || strings.Contains(err.Error(), key) {
				t.Errorf("error shows a secret: %v", err)
			}
		})
	}
}
