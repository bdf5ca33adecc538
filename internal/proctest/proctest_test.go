// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package proctest

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// childEnv makes the test binary act as the child process the tests
// start, as os.Args[1:] say: see child.
const childEnv = "PROCTEST_CHILD"

var childOpts = Options{Env: []string{childEnv + "=1"}}

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(child(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// child is a small program:
//
//	serve ADDR     serves 200 on /ready at ADDR until SIGTERM, then exits 0
//	exit CODE      writes a line to stdout and one to stderr, exits CODE
//	env            prints its environment
//	term-exit CODE waits for SIGTERM, then exits CODE
//	hang           ignores SIGTERM (until killed, at most 5 minutes)
//
// It writes "started" to stderr once it handles (or ignores) SIGTERM.
func child(args []string) int {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM)
	if args[0] == "hang" {
		signal.Ignore(syscall.SIGTERM)
	}
	fmt.Fprintln(os.Stderr, "started")
	switch args[0] {
	case "serve":
		l, err := net.Listen("tcp", args[1])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Fprintln(os.Stderr, "listening on", l.Addr())
		go http.Serve(l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/ready" {
				http.NotFound(w, r)
			}
		}))
		<-sigs
		return 0
	case "exit":
		fmt.Println("to stdout")
		fmt.Fprintln(os.Stderr, "to stderr")
		code, _ := strconv.Atoi(args[1])
		return code
	case "env":
		for _, kv := range os.Environ() {
			fmt.Println(kv)
		}
		return 0
	case "term-exit":
		<-sigs
		code, _ := strconv.Atoi(args[1])
		return code
	case "hang":
		time.Sleep(5 * time.Minute)
		return 0
	}
	return 2
}

// started starts the child with args and waits until it handles SIGTERM.
func started(t *testing.T, tb testing.TB, args ...string) *Process {
	t.Helper()
	p := Start(tb, os.Args[0], childOpts, args...)
	for deadline := time.Now().Add(ReadyTimeout); !strings.Contains(p.Stderr(), "started\n"); {
		if time.Now().After(deadline) || p.Exited() {
			t.Fatalf("the child did not start:\n%s", p.Output())
		}
		time.Sleep(10 * time.Millisecond)
	}
	return p
}

func TestRun(t *testing.T) {
	r := Run(t, os.Args[0], childOpts.Env, "exit", "3")
	if r.Code != 3 || r.Stdout != "to stdout\n" || r.Stderr != "started\nto stderr\n" {
		t.Errorf("Run = %+v, want exit code 3 and a line on each stream", r)
	}
	if r.Wall <= 0 || runtime.GOOS == "linux" && r.PeakRSS < 1<<20 {
		t.Errorf("Run took %v, peak RSS %d bytes: want both measured", r.Wall, r.PeakRSS)
	}
}

// TestEnvironment: a child gets the test's environment without OTEL_*,
// plus what the test adds.
func TestEnvironment(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	t.Setenv("PROCTEST_KEPT", "yes")
	r := Run(t, os.Args[0], append(childOpts.Env, "PROCTEST_ADDED=1"), "env")
	for _, want := range []string{"PROCTEST_KEPT=yes\n", "PROCTEST_ADDED=1\n"} {
		if !strings.Contains(r.Stdout, want) {
			t.Errorf("the child's environment lacks %q:\n%s", want, r.Stdout)
		}
	}
	if strings.Contains(r.Stdout, "OTEL_") {
		t.Errorf("the child's environment has an OTEL_ variable:\n%s", r.Stdout)
	}
}

func TestStartServer(t *testing.T) {
	p, base := StartServer(t, os.Args[0], "/ready", childOpts, func(addr string) []string { return []string{"serve", addr} })
	resp, err := http.Get(base + "/ready")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET /ready: %s", resp.Status)
	}
	if !strings.Contains(p.Stderr(), "listening on "+strings.TrimPrefix(base, "http://")) {
		t.Errorf("stderr = %q", p.Stderr())
	}
	if err := p.Stop(StopTimeout); err != nil {
		t.Error(err)
	}
	if !p.Exited() || p.Err() != nil {
		t.Errorf("after Stop: exited %v, %v", p.Exited(), p.Err())
	}
	if err := p.Stop(StopTimeout); err != nil {
		t.Errorf("a second Stop: %v", err)
	}
}

// TestStartServerRetriesTakenPort: a server that cannot bind its port is
// started again on another one.
func TestStartServerRetriesTakenPort(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	calls := 0
	_, base := StartServer(t, os.Args[0], "/ready", childOpts, func(addr string) []string {
		calls++
		if calls == 1 {
			addr = taken.Addr().String()
		}
		return []string{"serve", addr}
	})
	if calls != 2 || base == "http://"+taken.Addr().String() {
		t.Errorf("%d attempts, serving at %s (the taken port is %s)", calls, base, taken.Addr())
	}
}

func TestStopErrors(t *testing.T) {
	t.Run("non-zero exit", func(t *testing.T) {
		p := started(t, t, "term-exit", "3")
		err := p.Stop(StopTimeout)
		if err == nil || !strings.Contains(err.Error(), "exit status 3") {
			t.Errorf("Stop = %v, want an error naming exit status 3", err)
		}
	})
	t.Run("ignores SIGTERM", func(t *testing.T) {
		p := started(t, t, "hang")
		err := p.Stop(time.Second)
		if err == nil || !strings.Contains(err.Error(), "killed") {
			t.Errorf("Stop = %v, want an error saying it was killed", err)
		}
		if code, ok := p.Wait(time.Second); !ok || code != -1 {
			t.Errorf("exit code %d (%v), want -1: killed", code, ok)
		}
	})
	t.Run("exited before", func(t *testing.T) {
		p := Start(t, os.Args[0], childOpts, "exit", "0")
		if code, ok := p.Wait(ReadyTimeout); !ok || code != 0 {
			t.Fatalf("exit code %d (%v)", code, ok)
		}
		if err := p.Stop(StopTimeout); err == nil || !strings.Contains(err.Error(), "had exited before") {
			t.Errorf("Stop = %v, want an error saying it had exited", err)
		}
	})
}

// recorder is a testing.TB whose cleanups, errors and logs a test
// inspects.
type recorder struct {
	testing.TB
	cleanups []func()
	errors   []string
	logs     []string
}

func (r *recorder) Helper()           {}
func (r *recorder) Cleanup(f func())  { r.cleanups = append(r.cleanups, f) }
func (r *recorder) Error(args ...any) { r.errors = append(r.errors, fmt.Sprint(args...)) }
func (r *recorder) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}
func (r *recorder) Logf(format string, args ...any) {
	r.logs = append(r.logs, fmt.Sprintf(format, args...))
}
func (r *recorder) Failed() bool { return len(r.errors) > 0 }

func (r *recorder) end() {
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
}

// TestCleanup: at the end of a test a process still running is stopped
// and must exit 0, and a failed test shows its output; one the test
// stopped, or that ended on its own, is left as it is.
func TestCleanup(t *testing.T) {
	t.Run("clean exit", func(t *testing.T) {
		r := &recorder{TB: t}
		p := started(t, r, "term-exit", "0")
		r.end()
		if !p.Exited() || len(r.errors) > 0 || len(r.logs) > 0 {
			t.Errorf("exited %v, errors %q, logs %q", p.Exited(), r.errors, r.logs)
		}
	})
	t.Run("bad exit", func(t *testing.T) {
		r := &recorder{TB: t}
		p := started(t, r, "term-exit", "4")
		r.end()
		if !p.Exited() || len(r.errors) != 1 || !strings.Contains(r.errors[0], "exit status 4") {
			t.Errorf("exited %v, errors %q, want one naming exit status 4", p.Exited(), r.errors)
		}
		if len(r.logs) != 1 || !strings.Contains(r.logs[0], "proctest.test term-exit (term-exit 4) output:\n--- stdout\n--- stderr\nstarted\n") {
			t.Errorf("logs %q, want the output", r.logs)
		}
	})
	t.Run("stopped by the test", func(t *testing.T) {
		r := &recorder{TB: t}
		p := started(t, r, "term-exit", "5")
		if err := p.Stop(StopTimeout); err == nil {
			t.Error("Stop: no error for exit status 5")
		}
		r.end()
		if len(r.errors) > 0 {
			t.Errorf("the cleanup judged a process the test stopped: %q", r.errors)
		}
	})
	t.Run("ended on its own", func(t *testing.T) {
		r := &recorder{TB: t}
		p := Start(r, os.Args[0], childOpts, "exit", "6")
		if code, ok := p.Wait(ReadyTimeout); !ok || code != 6 {
			t.Fatalf("exit code %d (%v)", code, ok)
		}
		r.end()
		if len(r.errors) > 0 {
			t.Errorf("the cleanup judged a process that had ended: %q", r.errors)
		}
	})
}

func TestBinaryFromEnv(t *testing.T) {
	t.Setenv("PROCTEST_BINARY", os.Args[0])
	b := &Binary{Env: "PROCTEST_BINARY"}
	if got := b.Path(t); got != os.Args[0] {
		t.Errorf("Path = %q, want $PROCTEST_BINARY %q", got, os.Args[0])
	}
	b.Remove() // nothing built: nothing removed
	if _, err := os.Stat(os.Args[0]); err != nil {
		t.Error(err)
	}
}

// TestBinaryBuild builds cmd/llmprobe, once, with the -ldflags given.
func TestBinaryBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cmd/llmprobe")
	}
	b := &Binary{Env: "PROCTEST_UNSET", LDFlags: "-X github.com/prometheus/common/version.Version=0.0.0-proctest"}
	t.Setenv("PROCTEST_UNSET", "")
	defer b.Remove()
	bin := b.Path(t)
	if again := b.Path(t); again != bin {
		t.Errorf("a second Path = %q, want %q", again, bin)
	}
	r := Run(t, bin, nil, "--version")
	if r.Code != 0 || !strings.HasPrefix(r.Stdout, "llmprobe, version 0.0.0-proctest ") {
		t.Errorf("llmprobe --version: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	b.Remove()
	if _, err := os.Stat(bin); !os.IsNotExist(err) {
		t.Errorf("after Remove: %v", err)
	}
}
