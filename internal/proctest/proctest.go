// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

// Package proctest runs programs as child processes of a test: the
// llmprobe binary (built once per test binary, see Binary), as the daemon
// (`llmprobe run`), the simulator (`llmprobe sim`) or any other command,
// and the other real servers the tests start (internal/promtest's
// Prometheus).
//
// A started process gets the test's environment without OTEL_* variables
// (no tracing unless a test asks for it), writes into bounded buffers,
// dies with the test binary on Linux (parent-death signal: a test killed
// by its timeout leaves nothing running), and is stopped when the test
// ends: SIGTERM, then SIGKILL after a bound. A process still running then
// must exit 0; its output is logged when the test failed. Servers listen
// on a free loopback port and are ready once their readiness path answers
// 200 (StartServer, StartDaemon, StartSim).
//
// It is test-only code: only _test.go files and internal/promtest import
// it. It imports nothing of llmprobe but internal/testio, and must never
// import probe, exporter, bench or sim: it runs the binary, not the code
// (internal/layout's test holds it to both). The bench and sim benchmarks that
// re-execute their own test binary to serve from a separate process keep
// their own start: their child talks to them over stdin and stdout.
package proctest

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/llmprobe/llmprobe/internal/testio"
)

const (
	// StopTimeout is how long a process may take to exit after the
	// cleanup's SIGTERM before it is killed.
	StopTimeout = 30 * time.Second
	// pipeDelay bounds how long Wait waits for the output pipes once the
	// process has exited (a grandchild may hold them).
	pipeDelay = 5 * time.Second
	// logTail is how much of a process' output a failed test logs.
	logTail = 48 << 10
)

// Options configure a started process.
type Options struct {
	// Name is the process in messages; it defaults to the program's base
	// name and first argument, e.g. "llmprobe run".
	Name string
	// Env is added to the environment (the test's, without OTEL_*).
	Env []string
	// Output, when set, also receives everything the process writes to
	// stdout and stderr, e.g. to count its log lines.
	Output io.Writer
}

// Process is a running child process.
type Process struct {
	name           string
	cmd            *exec.Cmd
	stdout, stderr testio.Buffer
	done           chan struct{} // closed when the process has exited
	waitErr        error         // valid once done is closed

	stopOnce sync.Once
	stopped  chan struct{} // closed when a Stop began
}

// Spawn starts path with args and returns the running process. Nothing
// stops it but Stop (and, on Linux, the death of the test binary); tests
// use Start, which stops it when the test ends.
func Spawn(path string, opts Options, args ...string) (*Process, error) {
	name := opts.Name
	if name == "" {
		name = filepath.Base(path)
		if len(args) > 0 {
			name += " " + args[0]
		}
	}
	p := &Process{name: name, done: make(chan struct{}), stopped: make(chan struct{})}
	p.cmd = exec.Command(path, args...)
	p.cmd.Env = append(CleanEnv(), opts.Env...)
	p.cmd.Stdout, p.cmd.Stderr = io.Writer(&p.stdout), io.Writer(&p.stderr)
	if opts.Output != nil {
		p.cmd.Stdout, p.cmd.Stderr = io.MultiWriter(&p.stdout, opts.Output), io.MultiWriter(&p.stderr, opts.Output)
	}
	p.cmd.WaitDelay = pipeDelay
	setParentDeathSignal(p.cmd)
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	go func() {
		p.waitErr = p.cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// Start starts path with args for the test t, failing it when the
// program cannot start. When the test ends a process still running is
// stopped (SIGTERM, then SIGKILL after StopTimeout) and fails the test
// unless it exits 0; a failed test logs the end of its output.
func Start(t testing.TB, path string, opts Options, args ...string) *Process {
	t.Helper()
	p, err := Spawn(path, opts, args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		select {
		case <-p.stopped: // the test stopped it, and judged how
		case <-p.done: // it ended on its own
		default:
			if err := p.Stop(StopTimeout); err != nil {
				t.Error(err)
			}
		}
		if t.Failed() {
			t.Logf("%s (%s) output:\n%s", p.name, strings.Join(args, " "), Tail(p.Output(), logTail))
		}
	})
	return p
}

// CleanEnv is the test's environment without OTEL_* variables.
func CleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OTEL_") {
			env = append(env, kv)
		}
	}
	return env
}

// Tail returns at most the last n bytes of s, marked as cut when it is.
func Tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "[...]\n" + s[len(s)-n:]
}

// Name is the process' name in messages.
func (p *Process) Name() string { return p.name }

// Pid is the process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// PeakRSS is the process' peak resident set in bytes, so far while it
// runs (VmHWM), over its life once it has exited; 0 where unknown (only
// Linux measures it). It is at least the test process' own when it
// started (see ResetPeakRSS).
func (p *Process) PeakRSS() int64 {
	if p.Exited() {
		return peakRSS(p.cmd.ProcessState)
	}
	return livePeakRSS(p.Pid())
}

// Stdout is what the process wrote to stdout (bounded, see
// testio.MaxBuffer).
func (p *Process) Stdout() string { return p.stdout.String() }

// Stderr is what the process wrote to stderr (promslog's output).
func (p *Process) Stderr() string { return p.stderr.String() }

// Output is everything the process wrote, stdout then stderr.
func (p *Process) Output() string {
	return "--- stdout\n" + p.stdout.String() + "--- stderr\n" + p.stderr.String()
}

// Signal sends sig to the process, failing t when it cannot.
func (p *Process) Signal(t testing.TB, sig os.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signalling %s with %v: %v", p.name, sig, err)
	}
}

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has exited.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Err is what waiting for the process returned (nil for exit status 0);
// it is valid once Done is closed.
func (p *Process) Err() error {
	<-p.done
	return p.waitErr
}

// Wait waits up to timeout for the process to exit and returns its exit
// code (-1 when a signal killed it). ok is false on timeout.
func (p *Process) Wait(timeout time.Duration) (code int, ok bool) {
	select {
	case <-p.done:
		return p.cmd.ProcessState.ExitCode(), true
	case <-time.After(timeout):
		return 0, false
	}
}

// Stop sends SIGTERM and waits up to timeout for the process to exit,
// then kills it. It returns an error when the process had exited before,
// did not exit in time, or exited non-zero. Only the first call acts;
// later calls return nil.
func (p *Process) Stop(timeout time.Duration) error {
	var err error
	p.stopOnce.Do(func() {
		close(p.stopped)
		err = p.stop(timeout)
	})
	return err
}

func (p *Process) stop(timeout time.Duration) error {
	if p.Exited() {
		return fmt.Errorf("%s had exited before it was stopped: %v", p.name, p.waitErr)
	}
	start := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("%s: SIGTERM: %v", p.name, err)
	}
	select {
	case <-p.done:
	case <-time.After(timeout):
		_ = p.cmd.Process.Kill()
		select {
		case <-p.done:
		case <-time.After(pipeDelay + 5*time.Second):
		}
		return fmt.Errorf("%s did not exit within %s of SIGTERM; killed", p.name, timeout)
	}
	if p.waitErr != nil {
		return fmt.Errorf("%s exited after SIGTERM with %v (after %s), want exit status 0", p.name, p.waitErr, time.Since(start).Round(time.Millisecond))
	}
	return nil
}
