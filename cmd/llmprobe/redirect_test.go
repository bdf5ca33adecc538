// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llmprobe/llmprobe/internal/redirecttest"
)

// TestFitPrometheusRedirectKeepsCredentials: a Prometheus (or a proxy
// before it) that redirects `llmprobe fit` to another port or host does
// not get the --prometheus.config.file credentials sent there.
func TestFitPrometheusRedirectKeepsCredentials(t *testing.T) {
	capture := redirecttest.NewCapture(t, "")
	dir := t.TempDir()
	clientCfg := filepath.Join(dir, "prom-client.yml")
	const bearer, key = "fit-bearer-secret-0a1b2c3d", "fit-header-secret-4e5f6a7b"
	if err := os.WriteFile(clientCfg, []byte("authorization: {credentials: "+bearer+"}\nhttp_headers:\n  X-Api-Key: {secrets: ["+key+"]}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, host := range []string{"127.0.0.1", "localhost"} {
		t.Run(host, func(t *testing.T) {
			prom := redirecttest.Redirector(t, capture, host)
			_, err := fitPrometheus(context.Background(), &fitFlags{promURL: prom.URL, promConfigFile: clientCfg, rangeStr: "10m"})
			if err == nil {
				t.Fatal("fit succeeded against a redirecting Prometheus")
			}
			if seen := capture.Requests(); len(seen) != 0 {
				t.Fatalf("the other server received %d requests: %q", len(seen), seen)
			}
			if strings.Contains(err.Error(), bearer) || strings.Contains(err.Error(), key) {
				t.Errorf("error shows a secret: %v", err)
			}
		})
	}
}
