// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package probe

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmprobe/llmprobe/config"
	"github.com/llmprobe/llmprobe/probe/harness"
)

// verdictServer answers every completion at once with a short stream.
func verdictServer(t *testing.T) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" {
			http.NotFound(w, r)
			return
		}
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/v1"
}

func verdictConfig(t *testing.T, url string, rate float64) *config.Config {
	t.Helper()
	cfg, err := config.Load([]byte(fmt.Sprintf(`
global: {warmup: 0s}
workloads:
  w: {classes: [{name: c, prompt_tokens: 8, output_tokens: 2}]}
targets:
  - {name: t, url: %s, model: m, workload: w, tokenize: "off", arrival: {process: constant, rate: %v}}
`, url, rate)), "verdict.yml")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestOneStallDoesNotFlag: at the rates the daemon is meant for, one
// 100 ms stall of the arrival loop makes one send late by 100 ms (the p99
// of a one-minute window at 1 req/s is its maximum, so the old rule
// flagged it), and must not raise the verdict.
func TestOneStallDoesNotFlag(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for up to 9 s")
	}
	for _, rate := range []float64{0.2, 1, 10} {
		t.Run(fmt.Sprint(rate), func(t *testing.T) {
			t.Parallel()
			e := NewEngine(Options{Observer: Observers{}})
			var n atomic.Int64
			stalledAt := make(chan time.Time, 1)
			e.arrivalHook = func(time.Time) {
				if n.Add(1) == 1 {
					time.Sleep(100 * time.Millisecond)
					stalledAt <- time.Now()
				}
			}
			if err := e.Apply(verdictConfig(t, verdictServer(t), rate)); err != nil {
				t.Fatal(err)
			}
			defer e.Shutdown(context.Background())
			at := <-stalledAt
			for time.Since(at) < 3*time.Second {
				st := e.Status()[0]
				// The inflation reasons judge the whole (possibly loaded)
				// test process; the stall is the send side's business.
				if slices.Contains(st.SaturationReasons, harness.ReasonLateSends) || slices.Contains(st.SaturationReasons, harness.ReasonLateDrops) {
					t.Fatalf("one stall flagged the harness: %s", st.SaturationReason)
				}
				time.Sleep(100 * time.Millisecond)
			}
			if st := e.Status()[0]; st.LateSends != 1 {
				t.Fatalf("late sends %d, want the stalled one counted", st.LateSends)
			}
		})
	}
}

// TestSustainedLateSendsFlag: an arrival loop that is late on every send
// is flagged within seconds, with its reason.
func TestSustainedLateSendsFlag(t *testing.T) {
	e := NewEngine(Options{Observer: Observers{}})
	e.arrivalHook = func(time.Time) { time.Sleep(100 * time.Millisecond) }
	if err := e.Apply(verdictConfig(t, verdictServer(t), 10)); err != nil {
		t.Fatal(err)
	}
	defer e.Shutdown(context.Background())
	start := time.Now()
	for {
		st := e.Status()[0]
		if slices.Contains(st.SaturationReasons, harness.ReasonLateSends) {
			if st.Overloaded {
				t.Fatalf("reasons %v overloaded %v: %s", st.SaturationReasons, st.Overloaded, st.SaturationReason)
			}
			t.Logf("flagged after %v: %s", time.Since(start).Round(100*time.Millisecond), st.SaturationReason)
			return
		}
		if time.Since(start) > 10*time.Second {
			t.Fatalf("not flagged within 10 s (late sends %d)", st.LateSends)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
