// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBadConfigAtStart proves that a bad configuration fails fast and says
// where: `llmprobe run` exits 1 logging file:line:column and the field
// path, and `llmprobe check-config` exits 1 naming the bad file among good
// ones, 0 when every file is good.
func TestBadConfigAtStart(t *testing.T) {
	good := filepath.Join("testdata", "check-good.yml")
	bad := filepath.Join("testdata", "check-bad.yml")
	badText, err := os.ReadFile(bad)
	if err != nil {
		t.Fatal(err)
	}
	line, col := keyPosition(t, string(badText), "rat")
	where := position(bad, line, col) + ": targets[0].arrival.rat: unknown field"

	t.Run("run", func(t *testing.T) {
		code, stdout, stderr := runCommand(t, "run", "--config.file="+bad, "--web.listen-address=127.0.0.1:0")
		if code != 1 {
			t.Errorf("llmprobe run with a bad config exited %d, want 1\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
		}
		if !strings.Contains(stderr, where) {
			t.Errorf("stderr does not name %q:\n%s", where, stderr)
		}
		if strings.Contains(stderr, "shutting down") {
			t.Errorf("the daemon started probing before failing:\n%s", stderr)
		}
	})

	t.Run("check-config good and bad", func(t *testing.T) {
		code, stdout, stderr := runCommand(t, "check-config", good, bad)
		if code != 1 {
			t.Errorf("check-config good bad exited %d, want 1", code)
		}
		if want := "SUCCESS: " + good; !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
		if strings.Contains(stdout, bad) {
			t.Errorf("stdout mentions the bad file as if it were valid:\n%s", stdout)
		}
		for _, want := range []string{"FAILED: " + bad, where + ` "rat"`} {
			if !strings.Contains(stderr, want) {
				t.Errorf("stderr lacks %q:\n%s", want, stderr)
			}
		}
		if strings.Contains(stderr, good) {
			t.Errorf("stderr reports the good file:\n%s", stderr)
		}
	})

	t.Run("check-config good", func(t *testing.T) {
		code, stdout, stderr := runCommand(t, "check-config", good)
		if code != 0 {
			t.Errorf("check-config good exited %d, want 0\nstderr:\n%s", code, stderr)
		}
		if want := "SUCCESS: " + good + " is valid (1 targets, 1 workloads, 2 classes)"; !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	})
}
