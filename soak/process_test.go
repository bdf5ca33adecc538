// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package soak

import (
	"bytes"
	"fmt"
	"sync"
	"testing"

	"github.com/llmprobe/llmprobe/internal/proctest"
)

// BinaryEnv names an environment variable holding the llmprobe binary to
// soak (`make soak` sets it to bin/llmprobe); when it is empty the test
// builds cmd/llmprobe into a temporary directory.
const BinaryEnv = "LLMPROBE_SOAK_BINARY"

// stopTimeout is how long a process may take to exit after SIGTERM before
// it is killed. The daemon's grace period (daemonGrace) is shorter.
const stopTimeout = proctest.StopTimeout

var llmprobe = &proctest.Binary{Env: BinaryEnv}

func TestMain(m *testing.M) { proctest.Main(m, llmprobe) }

// soakBinary returns the binary to soak: $LLMPROBE_SOAK_BINARY, or one
// built from this module.
func soakBinary(t *testing.T) string {
	t.Helper()
	return llmprobe.Path(t)
}

// logCounts counts what a process writes: bytes, and promslog lines at
// level WARN or ERROR, the first maxNotable of which it keeps. It is safe
// for concurrent use. promslog writes one line per Write.
type logCounts struct {
	mu           sync.Mutex
	total        int64
	warn, errors int
	notable      []string
}

const maxNotable = 20

func (c *logCounts) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.total += int64(len(p))
	for _, line := range bytes.Split(p, []byte("\n")) {
		w, e := bytes.Contains(line, []byte("level=WARN")), bytes.Contains(line, []byte("level=ERROR"))
		if w {
			c.warn++
		}
		if e {
			c.errors++
		}
		if (w || e) && len(c.notable) < maxNotable {
			c.notable = append(c.notable, string(line[:min(len(line), 1000)]))
		}
	}
	return len(p), nil
}

// Counts returns the number of bytes written, of WARN and ERROR lines, and
// the first of those lines.
func (c *logCounts) Counts() (total int64, warn, errors int, notable []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total, c.warn, c.errors, append([]string(nil), c.notable...)
}

// process is a running llmprobe command (stopped when the test ends, see
// proctest.Start) and the counts of its output.
type process struct {
	*proctest.Process
	log *logCounts
}

// startServer starts an llmprobe server command of bin on a free loopback
// port: args returns its command line for an address. It waits until GET
// readyPath answers 200 and returns the process and its base URL. (A
// start retried on another port counts the failed attempt's few lines
// too.)
func startServer(t *testing.T, bin, name, readyPath string, args func(addr string) []string) (*process, string) {
	t.Helper()
	log := &logCounts{}
	p, base := proctest.StartServer(t, bin, readyPath, proctest.Options{Name: name, Output: log}, args)
	return &process{Process: p, log: log}, base
}

func TestLogCounts(t *testing.T) {
	c := &logCounts{}
	fmt.Fprintln(c, `time=x level=INFO msg="starting"`)
	fmt.Fprintln(c, `time=x level=WARN msg="harness saturated"`)
	fmt.Fprint(c, "time=x level=ERROR msg=a\ntime=x level=ERROR msg=b\n")
	total, warn, errs, notable := c.Counts()
	if warn != 1 || errs != 2 || len(notable) != 3 || notable[0] != `time=x level=WARN msg="harness saturated"` || notable[2] != "time=x level=ERROR msg=b" {
		t.Errorf("counts: %d WARN, %d ERROR, %q", warn, errs, notable)
	}
	if total != int64(len(`time=x level=INFO msg="starting"`+"\n"+`time=x level=WARN msg="harness saturated"`+"\n"+"time=x level=ERROR msg=a\ntime=x level=ERROR msg=b\n")) {
		t.Errorf("total = %d", total)
	}
}
