// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

// Package promtest runs the real Prometheus tools in tests: it locates the
// promtool and prometheus binaries, runs `promtool check rules` and
// `promtool test rules`, and starts a real Prometheus server on a free
// loopback port with a given scrape configuration, queried through its HTTP
// API.
//
// Binaries are found through $PROMTOOL / $PROMETHEUS (exported by the
// Makefile), else <module root>/bin/<name> (where `make tools` installs
// them); RequireTool finds the others the tests run (helm, amtool,
// kustomize, kubeconform, vegeta) the same way, as $HELM and so on. When a binary is missing a test is skipped, unless
// LLMPROBE_REQUIRE_TOOLS=1, in which case it fails: CI sets it, so a missing
// tool can never turn the checks into silent skips.
//
// It is test support: only tests import it, and it imports no llmprobe
// package but internal/testio.
package promtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// RequireToolsEnv is the environment variable that turns a missing tool
// from a skip into a failure.
const RequireToolsEnv = "LLMPROBE_REQUIRE_TOOLS"

// Tool names.
const (
	PromtoolName   = "promtool"
	PrometheusName = "prometheus"
)

// envVar returns the environment variable naming a tool's path:
// PROMTOOL, PROMETHEUS, AMTOOL.
func envVar(name string) string { return strings.ToUpper(name) }

// LookupTool returns the path of the named binary: $NAME (upper case) when
// set, else <module root>/bin/name. It does not search $PATH: tests must run
// the pinned version `make tools` installs, not whatever is on the machine.
func LookupTool(name string) (string, error) {
	if p := os.Getenv(envVar(name)); p != "" {
		if err := executable(p); err != nil {
			return "", fmt.Errorf("$%s=%s: %w", envVar(name), p, err)
		}
		return p, nil
	}
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	p := filepath.Join(root, "bin", name)
	if err := executable(p); err != nil {
		return "", fmt.Errorf("%s not found (set $%s or run `make tools`): %w", name, envVar(name), err)
	}
	return p, nil
}

func executable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if fi.IsDir() {
		return fmt.Errorf("%s is a directory", p)
	}
	if fi.Mode()&0o111 == 0 {
		return fmt.Errorf("%s is not executable", p)
	}
	return nil
}

// ModuleRoot returns the directory holding go.mod, searching upwards from
// the working directory (a test's working directory is its package).
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("go.mod not found above the working directory")
		}
		dir = parent
	}
}

// Root returns the module root, failing the test when there is none.
func Root(tb testing.TB) string {
	tb.Helper()
	root, err := ModuleRoot()
	if err != nil {
		tb.Fatal(err)
	}
	return root
}

// RequireTool returns the path of the named binary. When it is missing the
// test is skipped, or fails when LLMPROBE_REQUIRE_TOOLS=1.
func RequireTool(t testing.TB, name string) string {
	t.Helper()
	p, err := LookupTool(name)
	if err == nil {
		return p
	}
	if os.Getenv(RequireToolsEnv) == "1" {
		t.Fatalf("%v (%s=1 makes a missing tool an error)", err, RequireToolsEnv)
	}
	t.Skipf("skipping: %v", err)
	return ""
}

// Promtool returns the promtool binary, or skips/fails t (see RequireTool).
func Promtool(t testing.TB) string {
	t.Helper()
	return RequireTool(t, PromtoolName)
}

// PrometheusBinary returns the prometheus binary, or skips/fails t.
func PrometheusBinary(t testing.TB) string {
	t.Helper()
	return RequireTool(t, PrometheusName)
}

// RunPromtool runs promtool with args in dir (the working directory matters
// for `test rules`, whose rule_files are relative to the test file) and
// returns its combined output. err is non-nil when promtool exits non-zero.
func RunPromtool(t testing.TB, dir string, args ...string) (string, error) {
	t.Helper()
	return RunCommand(t, dir, Promtool(t), args...)
}

// RunCommand runs bin with args in dir (the current directory when empty),
// bounded to 5 minutes, and returns its combined output. err is non-nil when
// it exits non-zero or times out.
func RunCommand(t testing.TB, dir, bin string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	err := cmd.Run()
	name := filepath.Base(bin) + " " + strings.Join(args, " ")
	if ctx.Err() != nil {
		return out.String(), fmt.Errorf("%s: timed out: %w", name, ctx.Err())
	}
	if err != nil {
		return out.String(), fmt.Errorf("%s: %w", name, err)
	}
	return out.String(), nil
}

// CheckRules runs `promtool check rules` on the files and fails t, showing
// promtool's output, when any of them is invalid. It returns the output.
func CheckRules(t testing.TB, files ...string) string {
	t.Helper()
	if len(files) == 0 {
		t.Fatal("CheckRules: no files given")
	}
	out, err := RunPromtool(t, "", append([]string{"check", "rules"}, files...)...)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	return out
}

// TestRules runs `promtool test rules` on the unit-test files (each in its
// own directory, so relative rule_files resolve) and fails t, showing
// promtool's output, when a test fails. It returns the output.
func TestRules(t testing.TB, files ...string) string {
	t.Helper()
	if len(files) == 0 {
		t.Fatal("TestRules: no files given")
	}
	var all strings.Builder
	for _, f := range files {
		abs, err := filepath.Abs(f)
		if err != nil {
			t.Fatal(err)
		}
		out, err := RunPromtool(t, filepath.Dir(abs), "test", "rules", filepath.Base(abs))
		if err != nil {
			// promtool's rule tests are deterministic, but a week-long test
			// (alerts/tests/regression.yml) has, rarely and only on a loaded
			// machine, come back with no alert where every rerun gives it:
			// retry once, and say so, before failing.
			first := out
			if out, err = RunPromtool(t, filepath.Dir(abs), "test", "rules", filepath.Base(abs)); err == nil {
				t.Logf("%s: promtool test rules failed once and passed when rerun; the first run said:\n%s", f, first)
			}
		}
		all.WriteString(out)
		if err != nil {
			t.Errorf("%s: %v\n%s", f, err, out)
		}
	}
	return all.String()
}
