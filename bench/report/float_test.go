// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package report

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llmprobe/llmprobe/servermetrics"
)

// TestNonFiniteFiguresJSON: NaN and ±Inf figures are written as null and
// read back (nil for optional figures, NaN for quantiles); the Markdown
// shows them and says why the JSON has null.
func TestNonFiniteFiguresJSON(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	ptr := func(v float64) *servermetrics.Float { f := servermetrics.Float(v); return &f }
	rep := &Report{Stages: []*StageReport{{Stage: 1, Target: "t",
		Server: &servermetrics.Stats{URL: "http://x/metrics", Engine: "vllm", KVCacheUsage: ptr(nan), RequestsRunning: ptr(2),
			GenerationTokensPerSec: ptr(inf), TTFT: &servermetrics.Quantiles{Count: 3, P50: servermetrics.Float(nan), P99: 0.5}},
		TTFTGap: &TTFTGap{P50: servermetrics.Float(nan), P99: servermetrics.Float(math.Inf(-1))},
		GPU:     &servermetrics.GPUStats{Devices: []servermetrics.GPUDevice{{GPU: "0", UtilPercent: ptr(nan), PowerWatts: ptr(300)}}},
	}}}
	var js bytes.Buffer
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatalf("WriteJSON: %v", err)
	}
	for _, want := range []string{`"kv_cache_usage_ratio": null`, `"p50": null`, `"gpu_util_percent": null`, `"power_watts": 300`} {
		if !strings.Contains(js.String(), want) {
			t.Errorf("the JSON lacks %s:\n%s", want, js.String())
		}
	}
	f := filepath.Join(t.TempDir(), "r.json")
	if err := os.WriteFile(f, js.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	back, err := ReadReport(f)
	if err != nil {
		t.Fatal(err)
	}
	ss := back.Stages[0].Server
	if ss.KVCacheUsage != nil || *ss.RequestsRunning != 2 || ss.GenerationTokensPerSec != nil || !math.IsNaN(float64(ss.TTFT.P50)) || ss.TTFT.P99 != 0.5 {
		t.Errorf("read back: %+v %+v", ss, ss.TTFT)
	}
	var md bytes.Buffer
	if err := rep.WriteMarkdown(&md, MarkdownOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| KV-cache usage | NaN |", "| generation tokens/s | +Inf |", "| server TTFT p50 | NaN |", "| probe − server TTFT p99 | -Inf |", "| NaN | - | - | 300.0 W |", "written as null"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("the Markdown lacks %q:\n%s", want, md.String())
		}
	}
}
