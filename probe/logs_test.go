// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package probe_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/llmprobe/llmprobe/internal/testio"
)

// Reading what the engine logs: JSON lines, parsed.

// logRecord is one line of a JSON slog handler's output.
type logRecord map[string]any

func (r logRecord) str(k string) string {
	switch v := r[k].(type) {
	case string:
		return v
	case float64:
		return fmt.Sprint(v)
	case nil:
		return ""
	default:
		return fmt.Sprint(v)
	}
}

func (r logRecord) time(t *testing.T) time.Time {
	t.Helper()
	at, err := time.Parse(time.RFC3339Nano, r.str("time"))
	if err != nil {
		t.Fatalf("log time %q: %v", r.str("time"), err)
	}
	return at
}

// jsonLogger is a logger writing JSON lines (debug level and up) to buf.
func jsonLogger(buf *testio.Buffer) *slog.Logger {
	return slog.New(slog.NewJSONHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// records parses every line written to buf, failing the test on a line
// that is not a JSON object.
func records(t *testing.T, buf *testio.Buffer) []logRecord {
	t.Helper()
	var out []logRecord
	sc := bufio.NewScanner(strings.NewReader(buf.String()))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var r logRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		out = append(out, r)
	}
	return out
}

// waitLog polls buf until cond holds of its records, for at most d.
func waitLog(t *testing.T, buf *testio.Buffer, what string, d time.Duration, cond func([]logRecord) bool) {
	t.Helper()
	for deadline := time.Now().Add(d); !cond(records(t, buf)); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s never happened within %v; the log:\n%s", what, d, buf.String())
		}
	}
}

// byTarget returns the records of target that keep says to keep.
func byTarget(rs []logRecord, target string, keep func(logRecord) bool) []logRecord {
	var out []logRecord
	for _, r := range rs {
		if r.str("target") == target && keep(r) {
			out = append(out, r)
		}
	}
	return out
}

// checkSpacing fails the test when two of a target's lines are closer
// than every (less the time a loaded machine may take between the judge's
// tick and the write), or when there are more than the time allows.
func checkSpacing(t *testing.T, what string, lines []logRecord, every time.Duration, end time.Time) {
	t.Helper()
	if len(lines) == 0 {
		return
	}
	first := lines[0].time(t)
	for i := 1; i < len(lines); i++ {
		if gap := lines[i].time(t).Sub(lines[i-1].time(t)); gap < every-time.Second {
			t.Errorf("%s: lines %d and %d only %v apart, want one per %v", what, i-1, i, gap, every)
		}
	}
	if most := int(end.Sub(first)/every) + 1; len(lines) > most {
		t.Errorf("%s: %d lines in %v, want at most %d (one per %v)", what, len(lines), end.Sub(first), most, every)
	}
}
