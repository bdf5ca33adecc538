// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package soak

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/llmprobe/llmprobe/internal/promtest"
)

// BinaryEnv names an environment variable holding the llmprobe binary to
// soak (`make soak` sets it to bin/llmprobe); when it is empty the test
// builds cmd/llmprobe into a temporary directory.
const BinaryEnv = "LLMPROBE_SOAK_BINARY"

const (
	// buildTimeout bounds `go build`.
	buildTimeout = 5 * time.Minute
	// readyTimeout bounds how long a started server may take to answer
	// its readiness path.
	readyTimeout = 30 * time.Second
	// stopTimeout is how long a process may take to exit after SIGTERM
	// before it is killed. The daemon's grace period (daemonGrace) is
	// shorter.
	stopTimeout = 30 * time.Second
)

// soakBinary returns the binary to soak: $LLMPROBE_SOAK_BINARY, or one
// built from this module into a temporary directory.
func soakBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv(BinaryEnv); p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("$%s: %v", BinaryEnv, err)
		}
		return p
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("building cmd/llmprobe needs the go command on $PATH (or set $%s): %v", BinaryEnv, err)
	}
	out := filepath.Join(t.TempDir(), "llmprobe")
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, gobin, "build", "-o", out, "github.com/llmprobe/llmprobe/cmd/llmprobe")
	cmd.Dir = promtest.Root(t)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/llmprobe: %v\n%s", err, b)
	}
	return out
}

// tailBuffer keeps the last max bytes written to it, and the first
// maxNotable promslog lines at level WARN or ERROR (and counts them all).
// It is safe for concurrent use. promslog writes one line per Write.
type tailBuffer struct {
	mu           sync.Mutex
	max          int
	buf          []byte
	total        int64
	warn, errors int
	notable      []string
}

const maxNotable = 20

func newTailBuffer(max int) *tailBuffer { return &tailBuffer{max: max} }

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.total += int64(len(p))
	for _, line := range bytes.Split(p, []byte("\n")) {
		w, e := bytes.Contains(line, []byte("level=WARN")), bytes.Contains(line, []byte("level=ERROR"))
		if w {
			b.warn++
		}
		if e {
			b.errors++
		}
		if (w || e) && len(b.notable) < maxNotable {
			b.notable = append(b.notable, string(line[:min(len(line), 1000)]))
		}
	}
	b.buf = append(b.buf, p...)
	if len(b.buf) > 2*b.max {
		b.buf = append(b.buf[:0], b.buf[len(b.buf)-b.max:]...)
	}
	return len(p), nil
}

// Tail returns at most n of the last bytes written.
func (b *tailBuffer) Tail(n int) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.buf
	if len(s) > n {
		s = s[len(s)-n:]
	}
	prefix := ""
	if int64(len(s)) < b.total {
		prefix = "[...]\n"
	}
	return prefix + string(s)
}

// Counts returns the number of bytes written, of WARN and ERROR lines, and
// the first of those lines.
func (b *tailBuffer) Counts() (total int64, warn, errors int, notable []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.total, b.warn, b.errors, append([]string(nil), b.notable...)
}

// process is a running llmprobe command.
type process struct {
	name    string
	cmd     *exec.Cmd
	out     *tailBuffer // stdout and stderr
	done    chan struct{}
	waitErr error // valid once done is closed

	stopOnce sync.Once
	stopErr  error // the first Stop's result
}

// startProcess starts bin with args. The process gets the test's
// environment without OTEL_* variables (no tracing). It is stopped
// (SIGTERM, then SIGKILL after stopTimeout) when the test ends unless the
// test stopped it before, and its last output is logged if the test
// failed.
func startProcess(t *testing.T, bin, name string, args ...string) *process {
	t.Helper()
	p := &process{name: name, out: newTailBuffer(1 << 20), done: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	p.cmd.Env = cleanEnv()
	setParentDeathSignal(p.cmd)
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	go func() {
		p.waitErr = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		if err := p.Stop(stopTimeout); err != nil {
			t.Errorf("%v", err)
		}
		if t.Failed() {
			t.Logf("%s (%s) output:\n%s", name, strings.Join(args, " "), p.out.Tail(32<<10))
		}
	})
	return p
}

// cleanEnv is the test's environment without OTEL_* variables.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OTEL_") {
			env = append(env, kv)
		}
	}
	return env
}

// Exited reports whether the process has exited.
func (p *process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Stop sends SIGTERM and waits up to timeout for the process to exit, then
// kills it. It returns an error when the process had already exited, did
// not exit in time, or exited non-zero. Only the first call acts; later
// calls return nil.
func (p *process) Stop(timeout time.Duration) error {
	first := false
	p.stopOnce.Do(func() {
		first = true
		p.stopErr = p.stop(timeout)
	})
	if !first {
		return nil
	}
	return p.stopErr
}

func (p *process) stop(timeout time.Duration) error {
	if p.Exited() {
		return fmt.Errorf("%s had exited before it was stopped: %v", p.name, p.waitErr)
	}
	start := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return fmt.Errorf("%s: SIGTERM: %v", p.name, err)
	}
	select {
	case <-p.done:
	case <-time.After(timeout):
		_ = p.cmd.Process.Kill()
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
		}
		return fmt.Errorf("%s did not exit within %s of SIGTERM; killed", p.name, timeout)
	}
	if p.waitErr != nil {
		return fmt.Errorf("%s exited after SIGTERM with %v (after %s), want exit status 0", p.name, p.waitErr, time.Since(start).Round(time.Millisecond))
	}
	return nil
}

// freeAddr returns a loopback address whose port was free a moment ago.
// Another process may take it before ours binds it: startServer retries.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// startServer starts an llmprobe server command on a free loopback port:
// args returns its command line for an address. It waits until GET
// readyPath answers 200 and returns the process and its base URL. A port
// taken in between is retried with another one.
func startServer(t *testing.T, bin, name, readyPath string, args func(addr string) []string) (*process, string) {
	t.Helper()
	var last *process
	for attempt := 0; attempt < 3; attempt++ {
		addr := freeAddr(t)
		p := startProcess(t, bin, name, args(addr)...)
		base := "http://" + addr
		err := waitReady(p, base+readyPath, readyTimeout)
		if err == nil {
			return p, base
		}
		last = p
		if p.Exited() && strings.Contains(p.out.Tail(64<<10), "address already in use") {
			continue
		}
		t.Fatalf("%s: %v\n%s", name, err, p.out.Tail(16<<10))
	}
	t.Fatalf("%s: no free port after 3 attempts\n%s", name, last.out.Tail(16<<10))
	return nil, ""
}

var pollClient = &http.Client{Timeout: 2 * time.Second}

// waitReady polls url until it answers 200, the process exits, or timeout.
func waitReady(p *process, url string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if p.Exited() {
			return fmt.Errorf("exited before %s was ready (%v)", url, p.waitErr)
		}
		resp, err := pollClient.Get(url)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("%s not ready after %s", url, timeout)
}

func TestTailBuffer(t *testing.T) {
	b := newTailBuffer(16)
	fmt.Fprintln(b, `time=x level=INFO msg="starting"`)
	fmt.Fprintln(b, `time=x level=WARN msg="harness saturated"`)
	fmt.Fprint(b, "time=x level=ERROR msg=a\ntime=x level=ERROR msg=b\n")
	total, warn, errs, notable := b.Counts()
	if warn != 1 || errs != 2 || len(notable) != 3 || notable[0] != `time=x level=WARN msg="harness saturated"` || notable[2] != "time=x level=ERROR msg=b" {
		t.Errorf("counts: %d WARN, %d ERROR, %q", warn, errs, notable)
	}
	if total != int64(len(`time=x level=INFO msg="starting"`+"\n"+`time=x level=WARN msg="harness saturated"`+"\n"+"time=x level=ERROR msg=a\ntime=x level=ERROR msg=b\n")) {
		t.Errorf("total = %d", total)
	}
	if got := b.Tail(8); got != "[...]\nR msg=b\n" {
		t.Errorf("Tail(8) = %q", got)
	}
	if got := b.Tail(1 << 20); !strings.HasPrefix(got, "[...]\n") || len(got) > len("[...]\n")+32 {
		t.Errorf("Tail keeps at most 2×max bytes: %q", got)
	}
}
