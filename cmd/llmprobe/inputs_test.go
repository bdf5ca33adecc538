// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/llmprobe/llmprobe/examples"
)

// runBounded is runBinary in a shell that caps the address space at 4
// GiB, so that a command that reads an endless input without a bound (as
// they once did: bench compare /dev/zero grew to 23 GB) fails here rather
// than taking the machine's memory.
func runBounded(t *testing.T, bin string, args ...string) cliResult {
	t.Helper()
	return runBinary(t, "sh", nil, boundedArgs(t, bin, args...)...)
}

// boundedArgs are the arguments of sh that run bin with args in 4 GiB of
// address space (see runBounded).
func boundedArgs(t *testing.T, bin string, args ...string) []string {
	t.Helper()
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	return append([]string{"-c", `ulimit -v 4194304 && exec "$@"`, "sh", bin}, args...)
}

// TestEndlessInputs: every command given /dev/zero (a file that never
// ends) for a file input fails at once with one plain error naming the
// file, without reading it.
func TestEndlessInputs(t *testing.T) {
	bin := binary(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "llmprobe.yml")
	if err := os.WriteFile(cfg, examples.Demo, 0o600); err != nil {
		t.Fatal(err)
	}
	report := filepath.Join(dir, "report.json")
	if err := os.WriteFile(report, []byte(`{"stages":[{"stage":1}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	const want = "/dev/zero: not a regular file"
	for _, args := range [][]string{
		{"run", "--config.file=/dev/zero", "--web.listen-address=127.0.0.1:0"},
		{"run", "--config.file=" + cfg, "--web.config.file=/dev/zero", "--web.listen-address=127.0.0.1:0"},
		{"check-config", "/dev/zero"},
		{"sim", "--sim.config.file=/dev/zero", "--web.listen-address=127.0.0.1:0"},
		{"bench", "compare", "/dev/zero", cfg},
		{"bench", "compare", report, "/dev/zero"},
		{"bench", "--config.file=/dev/zero", "--stage=1:1s"},
		{"bench", "--sim", "--config.file=/dev/zero", "--stage=1:1s"},
		{"bench", "--sim", "--sim.config.file=/dev/zero", "--stage=1:1s"},
		{"fit", "--access-log=/dev/zero"},
		{"fit", "--prometheus.url=http://127.0.0.1:1", "--prometheus.config.file=/dev/zero"},
		{"selftest", "--config.file=/dev/zero", "--output="},
		{"mixin", "--config.file=/dev/zero", "--output=" + filepath.Join(dir, "mixin")},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			t.Parallel()
			r := runBounded(t, bin, args...)
			if r.code != 1 {
				t.Errorf("exit code %d, want 1", r.code)
			}
			if !strings.Contains(r.stderr, want) || !strings.Contains(r.stderr, "llmprobe: error: ") {
				t.Errorf("stderr does not say %q:\n%s", want, r.stderr)
			}
		})
	}
}

// TestLargeInputs: a regular file over its bound is refused before it is
// read, with the bound in the message.
func TestLargeInputs(t *testing.T) {
	bin := binary(t)
	dir := t.TempDir()
	big := filepath.Join(dir, "big")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(1 << 40); err != nil { // sparse: 1 TiB of nothing
		t.Skipf("sparse file: %v", err)
	}
	f.Close()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "compare", big, big}, big + ": larger than 256 MiB"},
		{[]string{"sim", "--sim.config.file=" + big, "--web.listen-address=127.0.0.1:0"}, big + ": larger than 1 MiB"},
		{[]string{"fit", "--prometheus.url=http://127.0.0.1:1", "--prometheus.config.file=" + big}, big + ": larger than 1 MiB"},
		{[]string{"check-config", big}, big + ": larger than 16 MiB"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			t.Parallel()
			r := runBounded(t, bin, tc.args...)
			if r.code != 1 || !strings.Contains(r.stderr, tc.want) {
				t.Errorf("exit code %d, stderr:\n%s\nwant %q", r.code, r.stderr, tc.want)
			}
		})
	}
}

// stalledFIFO returns a named pipe whose writer opens it and never
// writes, until the test ends.
func stalledFIFO(t *testing.T) string {
	t.Helper()
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	done := make(chan struct{})
	go func() {
		w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		if err != nil {
			return
		}
		<-done
		w.Close()
	}()
	t.Cleanup(func() { close(done) })
	return fifo
}

// TestLongReadsCancelled: bench compare and fit --access-log give way to
// SIGINT/SIGTERM (their context) while a read blocks.
func TestLongReadsCancelled(t *testing.T) {
	for name, run := range map[string]func(ctx context.Context, path string) error{
		"bench compare": func(ctx context.Context, path string) error {
			return runBenchCompare(ctx, io.Discard, path, path)
		},
		"fit --access-log": func(ctx context.Context, path string) error {
			return runFit(ctx, nil, &fitFlags{accessLog: path, rate: 1}, io.Discard, io.Discard)
		},
	} {
		t.Run(name, func(t *testing.T) {
			fifo := stalledFIFO(t)
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			start := time.Now()
			err := run(ctx, fifo)
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("err = %v, want the context's", err)
			}
			if d := time.Since(start); d > 30*time.Second {
				t.Errorf("returned after %v", d)
			}
		})
	}
}

// TestSelftestFileBounded: run's --selftest.file is read within a bound
// (it is optional: what cannot be read leaves the documented ceiling).
func TestSelftestFileBounded(t *testing.T) {
	if _, err := os.Stat("/dev/zero"); err != nil {
		t.Skip("no /dev/zero")
	}
	if _, source := harnessCeiling("/dev/zero"); !strings.Contains(source, "the documented") {
		t.Errorf("source %q", source)
	}
}
