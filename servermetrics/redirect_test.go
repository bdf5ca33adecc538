// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package servermetrics

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/llmprobe/llmprobe/internal/redirecttest"
)

// TestBenchClientsRefuseRedirectsElsewhere: the server-metrics scrape and
// the GPU query (credentials in their URLs) do not follow a redirect to
// another port or another host: net/http would send the basic auth of
// the URL to another port of the same host name.
func TestBenchClientsRefuseRedirectsElsewhere(t *testing.T) {
	capture := redirecttest.NewCapture(t, "")
	for _, host := range []string{"127.0.0.1", "localhost"} {
		t.Run(host, func(t *testing.T) {
			red := redirecttest.Redirector(t, capture, host)
			withAuth := strings.Replace(red.URL, "http://", "http://bench:bench-secret-pw@", 1)
			res := Fetch(context.Background(), NewClient("llmprobe_bench_server_metrics"), withAuth+"/metrics")
			if res.err == nil || !strings.Contains(res.err.Error(), "redirect") {
				t.Errorf("server metrics: err = %v, want a refused redirect", res.err)
			}
			gpu := QueryGPU(context.Background(), withAuth, `gpu="0"`, time.Now(), time.Minute)
			if len(gpu.Errors) == 0 {
				t.Errorf("GPU query: no error")
			}
			if got := capture.Requests(); len(got) != 0 {
				t.Fatalf("the other server received %d requests: %q", len(got), got)
			}
		})
	}
}
