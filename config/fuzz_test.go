// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package config

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// FuzzLoad: whatever the bytes, Load returns (no panic, no hang, no
// runaway memory), and a failure is a list of messages in the author's
// words.
func FuzzLoad(f *testing.F) {
	files, _ := filepath.Glob("testdata/*")
	for _, file := range files {
		if data, err := os.ReadFile(file); err == nil {
			f.Add(data)
		}
	}
	for _, doc := range bombs() {
		f.Add([]byte(doc))
	}
	f.Add([]byte(validBase))
	f.Add([]byte(validBase + "    http_client_config: {authorization: {credentials_file: x}, tls_config: {min_version: TLS12}}\n    extra_body: {a: [1, {b: c}]}\n"))
	f.Add([]byte("global: &g {warmup: 1s}\nx: *g\n<<: *g\n"))

	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 16<<10 {
			t.Skip("the bound below is for inputs of a few KB")
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		start := time.Now()
		cfg, err := Load(data, "fuzz.yml")
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("Load took %v for %d bytes", d, len(data))
		}
		runtime.ReadMemStats(&after)
		if d := after.TotalAlloc - before.TotalAlloc; d > 256<<20 {
			t.Fatalf("Load allocated %d MiB for %d bytes", d>>20, len(data))
		}
		if (cfg == nil) == (err == nil) {
			t.Fatalf("Load returned %v and %v", cfg, err)
		}
		if err == nil {
			return
		}
		es, ok := err.(Errors)
		if !ok || len(es) == 0 {
			t.Fatalf("error is %T %v, want Errors", err, err)
		}
		for _, e := range es {
			if e.Msg == "" {
				t.Fatalf("empty message in %v", err)
			}
			if m := goTypeName.FindString(unquoted(e.Msg)); m != "" {
				t.Fatalf("message shows a Go type (%q): %s", m, e)
			}
		}
	})
}
