// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package proctest

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// ReadyTimeout bounds how long a started server may take to be ready.
const ReadyTimeout = 30 * time.Second

// startAttempts is how many free ports StartServer tries.
const startAttempts = 3

// FreeAddr returns a loopback address whose port was free a moment ago.
// Another process may take it before ours binds it: StartServer retries.
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// StartServer starts a server command of path on a free loopback port
// (see Start): args returns its command line for an address. It waits
// until GET readyPath answers 200 and returns the process and its base
// URL, http://host:port. A port taken in between is retried with another
// one.
func StartServer(t testing.TB, path, readyPath string, opts Options, args func(addr string) []string) (*Process, string) {
	t.Helper()
	var last *Process
	for range startAttempts {
		addr := FreeAddr(t)
		p := Start(t, path, opts, args(addr)...)
		base := "http://" + addr
		err := WaitReady(p, base+readyPath, ReadyTimeout)
		if err == nil {
			return p, base
		}
		last = p
		if p.Exited() && strings.Contains(p.Output(), "address already in use") {
			continue
		}
		t.Fatalf("%s: %v\n%s", p.name, err, Tail(p.Output(), 16<<10))
	}
	t.Fatalf("%s: no free port after %d attempts\n%s", last.name, startAttempts, Tail(last.Output(), 16<<10))
	return nil, ""
}

// StartDaemon starts `llmprobe run` with flags (--web.listen-address is
// given) and returns it once /-/ready answers.
func StartDaemon(t testing.TB, bin string, opts Options, flags ...string) (*Process, string) {
	t.Helper()
	return StartServer(t, bin, "/-/ready", opts, func(addr string) []string {
		return append([]string{"run", "--web.listen-address=" + addr}, flags...)
	})
}

// StartSim starts the simulator, `llmprobe sim`, with flags
// (--web.listen-address is given) and returns it once /health answers;
// the base URL is without /v1.
func StartSim(t testing.TB, bin string, opts Options, flags ...string) (*Process, string) {
	t.Helper()
	return StartServer(t, bin, "/health", opts, func(addr string) []string {
		return append([]string{"sim", "--web.listen-address=" + addr}, flags...)
	})
}

var pollClient = &http.Client{Timeout: 2 * time.Second}

// WaitReady polls url until it answers 200, the process exits, or
// timeout.
func WaitReady(p *Process, url string, timeout time.Duration) error {
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
