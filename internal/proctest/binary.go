// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package proctest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// Package is the import path of the llmprobe command.
const Package = "github.com/llmprobe/llmprobe/cmd/llmprobe"

// BuildTimeout bounds `go build`.
const BuildTimeout = 10 * time.Minute

// Binary is the llmprobe binary a test package runs: the file Env names,
// or cmd/llmprobe built with the go command on $PATH, once per test
// binary, the first time a test asks for it. It is built without the
// race detector even when the tests have it: the build stays fast, and
// the packages' own tests cover the race detector. A package uses
// LLMProbe or declares its own, and removes what was built in TestMain
// (see Main).
type Binary struct {
	// Env names an environment variable that, when set, holds the binary
	// to run instead of building one (a release build, say).
	Env string
	// LDFlags are go build's -ldflags, e.g. to set the version.
	LDFlags string

	once sync.Once
	dir  string // the temporary directory of a build
	path string
	err  error
}

// LLMProbe is cmd/llmprobe built with plain `go build` (no -ldflags),
// for the packages that need nothing else.
var LLMProbe = &Binary{}

// Path returns the binary, building it on the first call; it fails t when
// the build fails or Env names no file.
func (b *Binary) Path(t testing.TB) string {
	t.Helper()
	var took time.Duration
	b.once.Do(func() {
		if b.Env != "" {
			if p := os.Getenv(b.Env); p != "" {
				if _, err := os.Stat(p); err != nil {
					b.err = fmt.Errorf("$%s: %w", b.Env, err)
				}
				b.path = p
				return
			}
		}
		start := time.Now()
		b.err = b.build()
		took = time.Since(start)
	})
	if took > 0 && b.err == nil {
		t.Logf("built %s in %s", b.path, took.Round(time.Millisecond))
	}
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

func (b *Binary) build() error {
	gobin, err := exec.LookPath("go")
	if err != nil {
		hint := ""
		if b.Env != "" {
			hint = " (or set $" + b.Env + ")"
		}
		return fmt.Errorf("the tests build cmd/llmprobe and need the go command on $PATH%s: %w", hint, err)
	}
	if b.dir, err = os.MkdirTemp("", "llmprobe-test-"); err != nil {
		return err
	}
	b.path = filepath.Join(b.dir, "llmprobe")
	args := []string{"build"}
	if b.LDFlags != "" {
		args = append(args, "-ldflags", b.LDFlags)
	}
	args = append(args, "-o", b.path, Package)
	ctx, cancel := context.WithTimeout(context.Background(), BuildTimeout)
	defer cancel()
	// The working directory, a test's package, is inside the module.
	cmd := exec.CommandContext(ctx, gobin, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build ./cmd/llmprobe: %w\n%s", err, out.String())
	}
	return nil
}

// Remove deletes what Path built. TestMain calls it after the tests.
func (b *Binary) Remove() {
	if b.dir != "" {
		os.RemoveAll(b.dir)
	}
}

// Main runs the tests, removes what LLMProbe and the other binaries built,
// and exits with the tests' code: TestMain of a package that runs the
// binary.
func Main(m *testing.M, others ...*Binary) {
	code := m.Run()
	for _, b := range append(others, LLMProbe) {
		b.Remove()
	}
	os.Exit(code)
}
