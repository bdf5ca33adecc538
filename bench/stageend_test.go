// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package bench_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmprobe/llmprobe/bench"
	"github.com/llmprobe/llmprobe/bench/report"
	"github.com/llmprobe/llmprobe/config"
)

// TestStageRateAboveCap: a stage above the configuration's cap on
// arrival rates is refused before anything runs, naming the cap.
func TestStageRateAboveCap(t *testing.T) {
	cfg := serverConfig(t, simTarget("a", "http://127.0.0.1:1"))
	_, err := bench.Run(context.Background(), bench.Options{Config: cfg, Stages: []bench.Stage{{Rate: 5, Duration: 200 * time.Millisecond}, {Rate: config.MaxArrivalRate + 1, Duration: 100 * time.Millisecond}}})
	if err == nil || !strings.Contains(err.Error(), "stage 2") || !strings.Contains(err.Error(), fmt.Sprint(config.MaxArrivalRate)) {
		t.Fatalf("a stage above the cap: %v", err)
	}
}

// TestStageDrainReported: requests still running when a stage ends are
// waited for, at most the grace period, and the report says how many
// there were, how long the wait took and how many the grace cut short:
// the stage's wall time beyond its duration is accounted for.
func TestStageDrainReported(t *testing.T) {
	var held atomic.Int64
	// A server that never answers: every request is in flight until the
	// client gives up (or the test ends).
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		held.Add(1)
		select {
		case <-r.Context().Done():
		case <-done:
		}
	}))
	defer srv.Close()
	defer close(done)
	cfg := serverConfig(t, fmt.Sprintf(`  - {name: slow, url: %s/v1, model: m, workload: w, arrival: {process: poisson, rate: 1}, max_inflight: 64}
`, srv.URL))
	grace := 700 * time.Millisecond
	start := time.Now()
	rep, err := bench.Run(context.Background(), bench.Options{
		Config: cfg, Stages: []bench.Stage{{Rate: 20, Duration: 500 * time.Millisecond}}, Warmup: 0, Grace: grace,
	})
	if err != nil {
		t.Fatal(err)
	}
	wall := time.Since(start)
	text := logReport(t, rep)
	s := rep.Stages[0]
	t.Logf("sent %d, in flight at the end %d, drain %s, cut %d, grace %s; wall %s", s.Sent, s.InFlightAtEnd, s.Drain, s.CutAtGrace, s.Grace, wall)
	if s.Sent == 0 || held.Load() == 0 {
		t.Fatalf("nothing was sent: %+v", s)
	}
	if s.InFlightAtEnd != s.Sent || s.CutAtGrace != s.Sent {
		t.Errorf("in flight at the end %d, cut %d; want every one of the %d sent", s.InFlightAtEnd, s.CutAtGrace, s.Sent)
	}
	if s.Grace != grace || s.Drain < grace || s.Drain > wall {
		t.Errorf("drain %s, grace %s (want %s); the run took %s", s.Drain, s.Grace, grace, wall)
	}
	if !strings.Contains(text, fmt.Sprintf("stage 1 slow: %d requests in flight at the stage's end", s.Sent)) ||
		!strings.Contains(text, fmt.Sprintf("%d still running at the grace's end were cancelled", s.Sent)) {
		t.Errorf("the text does not account for the drain")
	}
	var md bytes.Buffer
	if err := rep.WriteMarkdown(&md, report.MarkdownOptions{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "in flight at the stage's end") {
		t.Errorf("the Markdown does not account for the drain")
	}
}
