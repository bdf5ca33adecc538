// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestCheckConfigCancelled: check-config stops on SIGTERM/SIGINT (its
// context) even when a file blocks (a FIFO nobody writes).
func TestCheckConfigCancelled(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fifo.yml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := checkConfigs(ctx, []string{fifo})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v, want the context's", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("returned after %v", d)
	}
	// Release a reader still waiting in open, if any; without one a
	// blocking open for writing would wait for ever (the cancelled read
	// may already have released and closed its end).
	if w, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
		w.Close()
	}
}

// TestCheckConfigMissingCredentials: a credentials file that does not
// exist fails check-config (it used to pass, and every request then
// failed with a misleading connect_error).
func TestCheckConfigMissingCredentials(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "llmprobe.yml")
	cfg := `workloads: {w: {classes: [{name: c, prompt_tokens: 1, output_tokens: 1}]}}
targets:
  - name: t
    url: http://127.0.0.1:8000/v1
    model: m
    workload: w
    arrival: {rate: 1}
    http_client_config: {authorization: {credentials_file: token}}
`
	if err := os.WriteFile(file, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	if code := Main([]string{"check-config", file}); code != 1 {
		t.Errorf("check-config exited %d, want 1", code)
	}
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code := Main([]string{"check-config", file}); code != 0 {
		t.Errorf("check-config exited %d with the file present, want 0", code)
	}
}

// TestCheckConfigPositionsAndTypos runs the binary: a syntax error on
// line 3 is reported at 3:4 (it said 1:1), and a misspelt key says which
// key was meant, alone (it was followed by "arrival.rate ... got 0").
func TestCheckConfigPositionsAndTypos(t *testing.T) {
	bin := binary(t)
	dir := t.TempDir()
	syntax := filepath.Join(dir, "syntax.yml")
	typo := filepath.Join(dir, "typo.yml")
	writeTestFile(t, syntax, "targets:\n  - name: a\n   url: http://127.0.0.1:8000/v1\n")
	writeTestFile(t, typo, `workloads: {w: {classes: [{name: c, prompt_tokens: 1, output_tokens: 1}]}}
targets:
  - name: t
    url: http://127.0.0.1:8000/v1
    model: m
    workload: w
    arival: {rate: 1}
`)
	r := runBinary(t, bin, nil, "check-config", syntax)
	if r.code != 1 || !strings.Contains(r.stdout+r.stderr, syntax+":3:4: did not find expected '-' indicator") {
		t.Errorf("check-config of a syntax error on line 3 = %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	r = runBinary(t, bin, nil, "check-config", typo)
	out := r.stdout + r.stderr
	if r.code != 1 || !strings.Contains(out, typo+`:7:5: targets[0].arival: unknown field "arival" (did you mean "arrival"?)`) || strings.Contains(out, "arrival.rate") {
		t.Errorf("check-config of a misspelt key = %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
}

func writeTestFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}
