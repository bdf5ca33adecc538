// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package discovery

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/common/model"

	"github.com/llmprobe/llmprobe/config"
)

// BenchmarkFileSDRefreshAtBound reads what a refresh may read at most:
// eight files of MaxFileSDSize/8 bytes (together just under the bound),
// every group one replica of its own, in JSON and in YAML. B/op is the
// memory a refresh allocates; the replicas metric how many it lists.
// docs/config.md ("discovery.file.files") gives its figures, and the
// peak RSS of a run (/usr/bin/time -v).
func BenchmarkFileSDRefreshAtBound(b *testing.B) {
	for _, format := range []string{"json", "yaml"} {
		b.Run(format, func(b *testing.B) {
			dir := b.TempDir()
			n := 0
			for i := range 8 {
				var sb strings.Builder
				if format == "json" {
					sb.WriteString("[")
				}
				for sb.Len() < MaxFileSDSize/8-200 {
					n++
					if format == "json" {
						if n%(1<<20) != 1 && sb.Len() > 1 {
							sb.WriteString(",")
						}
						fmt.Fprintf(&sb, `{"targets":["10.%d.%d.%d:8000"],"labels":{"pod":"p%d"}}`, n>>16&255, n>>8&255, n&255, n)
					} else {
						fmt.Fprintf(&sb, "- targets: ['10.%d.%d.%d:8000']\n  labels: {pod: p%d}\n", n>>16&255, n>>8&255, n&255, n)
					}
				}
				if format == "json" {
					sb.WriteString("]")
				}
				if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%d.%s", i, format)), []byte(sb.String()), 0o644); err != nil {
					b.Fatal(err)
				}
			}
			d, err := New(&config.Discovery{File: &config.FileSD{Files: []string{filepath.Join(dir, "*."+format)}, RefreshInterval: model.Duration(60e9)}}, Options{})
			if err != nil {
				b.Fatal(err)
			}
			f := d.(*fileDiscoverer)
			b.ReportAllocs()
			b.ResetTimer()
			var replicas int
			for b.Loop() {
				u := f.refresh(context.Background())
				if u.Err != nil {
					b.Fatal(u.Err)
				}
				replicas = len(u.Replicas)
			}
			b.ReportMetric(float64(replicas), "replicas")
		})
	}
}
