// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/llmprobe/llmprobe/internal/simtest"
)

// TestSelftest runs `llmprobe selftest` on a short, low ladder: it ramps
// against a zero-latency simulator child, prints each step and the
// ceiling, and saves the result; `llmprobe run` then warns at start when a
// configuration asks for more than the saved ceiling.
func TestSelftest(t *testing.T) {
	out := filepath.Join(t.TempDir(), "selftest.json")
	// Its steps are judged by the harness' own verdict: on a machine too
	// busy for 20 or 40 req/s to be honest it says so, and the ladder is
	// run again (at most three times) before the test fails with its
	// words.
	stdout := simtest.RetryFor(t, 3, 60*time.Second, func(int) (string, string) {
		code, stdout, stderr := runCommand(t, "selftest", "--step.duration=2s", "--start-rate=20", "--max-rate=40", "--bisections=0", "--output="+out)
		if code != 0 {
			t.Fatalf("selftest exited %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
		}
		for _, line := range strings.Split(stdout, "\n") {
			if strings.Contains(line, "NOT HONEST: ") {
				return stdout, strings.Join(strings.Fields(line), " ")
			}
		}
		return stdout, ""
	})
	for _, want := range []string{"zero-latency simulator", "20 req/s", "40 req/s", "honest", "This host drives at least 40 req/s", "saved to " + out} {
		if !strings.Contains(stdout, want) {
			t.Errorf("the output lacks %q:\n%s", want, stdout)
		}
	}
	var res struct {
		Ceiling float64   `json:"ceiling_requests_per_second"`
		At      time.Time `json:"measured_at"`
		Procs   int       `json:"gomaxprocs"`
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &res); err != nil || res.Ceiling != 40 || res.At.IsZero() || res.Procs < 1 {
		t.Fatalf("saved result %s: %+v %v", data, res, err)
	}

	// A configuration above the saved ceiling: the daemon says so at start.
	_, simURL := startSim(t, "--sim.zero-latency")
	cfg := filepath.Join(t.TempDir(), "llmprobe.yml")
	writeFileAtomic(t, cfg, `
workloads:
  w: {classes: [{name: c, prompt_tokens: 16, output_tokens: 4}]}
targets:
  - {name: t, url: `+simURL+`/v1, model: `+simModel+`, workload: w, arrival: {rate: 60}}
`)
	daemon, _ := startDaemon(t, cfg, "--selftest.file="+out)
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(daemon.Output(), "above what this host drives with an honest verdict") {
		if time.Now().After(deadline) {
			t.Fatalf("no warning about the rate above the ceiling:\n%s", tail(daemon.Output(), 4<<10))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !strings.Contains(daemon.Output(), `ceiling=40/s`) {
		t.Errorf("the warning does not name the saved ceiling:\n%s", grepLines(daemon.Output(), "honest verdict", 3))
	}
}
