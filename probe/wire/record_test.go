// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package wire

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmprobe/llmprobe/internal/simtest"
	"github.com/llmprobe/llmprobe/sim"
)

// The client's timing judged against the server's own record of the same
// request (internal/simtest): the simulator's request log, or the write
// instants a fixture server keeps. The client can only be later than the
// server, and only by what the machine delays a goroutine; a test that
// compared it with a configured pause or timing model failed on a busy
// machine although the client was right.

// startRecordedSim is startSim's simulator with its request log.
func startRecordedSim(t *testing.T, mod func(*sim.Config)) *simtest.Server {
	t.Helper()
	return simtest.Start(t, simConfig(mod))
}

// clientTiming is what res measured, for simtest.Check: the first answer
// only when reasoning came before it (otherwise it is the first token).
func clientTiming(res *Result) simtest.Timing {
	tm := simtest.Timing{TTFT: res.TTFT, Last: res.E2E}
	if res.FirstAnswer && res.ReasoningChunks > 0 {
		tm.TTFA = res.TTFA
	}
	return tm
}

// checkRecord checks res against the simulator's line for it.
func checkRecord(t *testing.T, srv *simtest.Server, res *Result, slack simtest.Slack) {
	t.Helper()
	if err := simtest.Check(clientTiming(res), srv.Entry(t, res.ResponseID), slack); err != nil {
		t.Error(err)
	}
}

// measured is one request measured with the slack it ran with.
type measured struct {
	res   *Result
	slack simtest.Slack
}

// doTimed sends req, retrying (simtest.Retry) while the machine delays
// goroutines too much to tell instants resolution apart.
func doTimed(t *testing.T, lat *simtest.Lateness, c *Client, req *Request, resolution time.Duration) measured {
	t.Helper()
	return simtest.Retry(t, 3, func(int) (measured, string) {
		var m measured
		var why string
		m.slack, why = lat.During(resolution, func() { m.res = do(t, c, req) })
		return m, why
	})
}

// serverTimes is a fixture server's own record of the last request it
// served: when its handler received it and when each step's write began.
// Both are taken before what they mark can reach the client, so a client
// instant (from its Start, before it wrote the request) is never earlier
// than the server's (from its receipt).
type serverTimes struct {
	mu       sync.Mutex
	received time.Time
	wrote    []time.Time // by step index
}

func (s *serverTimes) begin() {
	s.mu.Lock()
	s.received, s.wrote = time.Now(), s.wrote[:0]
	s.mu.Unlock()
}

func (s *serverTimes) write() {
	s.mu.Lock()
	s.wrote = append(s.wrote, time.Now())
	s.mu.Unlock()
}

// at is step i's write instant from the receipt.
func (s *serverTimes) at(t *testing.T, i int) time.Duration {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if i >= len(s.wrote) {
		t.Fatalf("the fixture wrote %d steps, not step %d", len(s.wrote), i)
	}
	return s.wrote[i].Sub(s.received)
}

// timedFixture is fixtureServer recording serverTimes.
func timedFixture(t *testing.T, contentType string, st []streamStep) (string, *serverTimes) {
	t.Helper()
	times := &serverTimes{}
	srv, _ := fixtureServerTimed(t, contentType, st, times)
	return srv.URL, times
}

// checkEvents checks each token-bearing event of res, and its first
// answer when answerStep ≥ 0, against the steps that carried them: the
// client's instant (TTFT, then TTFT + the ITLs one by one) lies in
// [server's, server's + slack.Late]. It needs one ITL per event after the
// first (no per-chunk usage splitting a chunk into several gaps).
func checkEvents(t *testing.T, res *Result, times *serverTimes, tokenSteps []int, answerStep int, slack simtest.Slack) {
	t.Helper()
	if len(tokenSteps) != res.Chunks || len(res.ITLs) != res.Chunks-1 {
		t.Fatalf("%d token chunks with %d ITLs, the fixture sent %d", res.Chunks, len(res.ITLs), len(tokenSteps))
	}
	var bad []string
	within := func(name string, client time.Duration, step int) {
		server := times.at(t, step)
		if d := client - server; d < 0 || d > slack.Late {
			bad = append(bad, fmt.Sprintf("%s at %v, written at %v (%+v; slack %v)", name, client, server, d, slack.Late))
		}
	}
	at := res.TTFT
	for k, step := range tokenSteps {
		if k > 0 {
			at += res.ITLs[k-1]
		}
		within(fmt.Sprintf("token event %d", k+1), at, step)
	}
	if answerStep >= 0 {
		within("first answer", res.TTFA, answerStep)
	}
	if len(bad) > 0 {
		t.Errorf("the client's instants contradict the server's writes: %s", strings.Join(bad, "; "))
	}
}
