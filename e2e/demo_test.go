// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"strings"
	"testing"
	"time"
)

// TestDemo runs the README's first command, `llmprobe run --demo`, and
// proves that within seconds it serves TTFT histogram observations of the
// built-in simulator, on /metrics and on the status page.
func TestDemo(t *testing.T) {
	start := time.Now()
	_, base := startServer(t, "llmprobe run --demo", "/-/ready", nil, func(addr string) []string {
		return []string{"run", "--demo", "--web.listen-address=" + addr}
	})
	// The demo's warm-up is 5s; allow generously for a busy machine.
	const within = 30 * time.Second
	mfs := pollScrape(t, base, within, "no llmprobe_ttft_seconds observation", func(e exposition) bool {
		n, _ := e.sum("llmprobe_ttft_seconds", map[string]string{"target": "sim-chat"})
		return n > 0
	})
	t.Logf("first TTFT observations served %s after start", time.Since(start).Round(10*time.Millisecond))

	for _, target := range []string{"sim-chat", "sim-completions"} {
		if _, ok := mfs.sum("llmprobe_requests_total", map[string]string{"target": target}); !ok {
			t.Errorf("no llmprobe_requests_total series for demo target %s", target)
		}
	}
	if n, _ := mfs.sum("llmprobe_requests_total", map[string]string{"target": "sim-chat", "outcome": "success"}); n == 0 {
		t.Error("the demo's sim-chat target has no successful request")
	}
	page := get(t, base+"/")
	for _, want := range []string{"sim-chat", "sim-completions"} {
		if !strings.Contains(page, want) {
			t.Errorf("status page does not show target %s", want)
		}
	}
}
