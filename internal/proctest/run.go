// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package proctest

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// RunTimeout bounds a command Run runs.
const RunTimeout = 2 * time.Minute

// Result is how a command ended and what it wrote.
type Result struct {
	Code           int // exit code
	Stdout, Stderr string
	// PeakRSS is the command's peak resident set in bytes (Linux; 0
	// elsewhere): at least the test process' own when it started (see
	// ResetPeakRSS). Wall is how long it ran.
	PeakRSS int64
	Wall    time.Duration
}

// Run runs path with args to its end (bounded to RunTimeout), with the
// test's environment without OTEL_* plus env, and returns its exit code
// and output. It fails t when the command cannot start or does not end in
// time.
func Run(t testing.TB, path string, env []string, args ...string) Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), RunTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Env = append(CleanEnv(), env...)
	cmd.WaitDelay = pipeDelay
	setParentDeathSignal(cmd)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	wall := time.Since(start)
	line := strings.Join(append([]string{path}, args...), " ")
	if ctx.Err() != nil {
		t.Fatalf("%s: not done after %s\nstdout:\n%s\nstderr:\n%s", line, RunTimeout, stdout.String(), stderr.String())
	}
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("%s: %v", line, err)
	}
	return Result{Code: cmd.ProcessState.ExitCode(), Stdout: stdout.String(), Stderr: stderr.String(),
		PeakRSS: peakRSS(cmd.ProcessState), Wall: wall}
}
