// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

// Package simtest holds what tests share to judge a client's timing on a
// busy machine: the simulator on loopback with its request log (the
// server's own record of every request, sim.RequestLogEntry), a check of
// what a client measured of a request against that record, a watch on
// how late this process' goroutines wake up (which bounds how far the two
// may honestly differ), and a bounded retry for measurements the harness
// itself says not to trust. Listen is the one in-process start of the
// simulator for any test, with or without a request log.
//
// A machine that is busy slows the simulator and the client alike; a
// test that compares the client with the configured timing model fails
// there although nothing is wrong. Compared with the server's record of
// the same request, the client can only be later than the server (it
// sends before the server receives, and reads after the server writes),
// and only by the delay of a loopback hop and of waking its goroutine:
// the check is one-sided, with a bound that grows with the lateness
// measured while the request ran, and so still catches a client that
// stamps an event at the wrong instant.
//
// It is test support: only tests import it, and it imports no llmprobe
// package but sim.
package simtest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/llmprobe/llmprobe/sim"
)

// LogWait bounds how long Entry waits for a request's line: the
// simulator writes its log at most 100 ms after a request ends, and a
// busy machine adds its delay.
const LogWait = 30 * time.Second

// Server is a simulator serving on a loopback port for one test, with its
// request log in the test's temporary directory.
type Server struct {
	Sim     *sim.Server
	Base    string // http://127.0.0.1:PORT
	LogPath string
}

// Start serves cfg (its RequestLog replaced by a file of the test's) on
// 127.0.0.1 until the test ends.
func Start(t testing.TB, cfg sim.Config) *Server {
	t.Helper()
	cfg.RequestLog = filepath.Join(t.TempDir(), "sim-requests.jsonl")
	srv, base := Listen(t, cfg)
	return &Server{Sim: srv, Base: base, LogPath: cfg.RequestLog}
}

// Listen serves cfg as it is on 127.0.0.1 until the test ends, and
// returns the server and its base URL (http://127.0.0.1:PORT): the
// simulator of a test that needs no request log of its own.
func Listen(t testing.TB, cfg sim.Config) (*sim.Server, string) {
	t.Helper()
	srv, base, err := sim.Listen("127.0.0.1:0", cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	return srv, base
}

// URL is the OpenAI base URL, Base + "/v1".
func (s *Server) URL() string { return s.Base + "/v1" }

// Entry returns the simulator's line for the request whose response id
// (what the client read in the body) or X-Request-Id is id, waiting up to
// LogWait for it to be written.
func (s *Server) Entry(t testing.TB, id string) sim.RequestLogEntry {
	t.Helper()
	if id == "" {
		t.Fatal("simtest: no request id to find in the simulator's request log")
	}
	deadline := time.Now().Add(LogWait)
	for {
		for _, e := range ReadLog(t, s.LogPath) {
			if e.ID == id || e.XRequestID == id {
				return e
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("simtest: the simulator's request log %s has no line for %q after %v", s.LogPath, id, LogWait)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ReadLog parses the request log at path (also one a simulator in another
// process writes); a missing file is an empty log, a partly written last
// line is left for the next read.
func ReadLog(t testing.TB, path string) []sim.RequestLogEntry {
	t.Helper()
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	if i := bytes.LastIndexByte(data, '\n'); i >= 0 {
		data = data[:i+1]
	} else {
		data = nil
	}
	var out []sim.RequestLogEntry
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		var e sim.RequestLogEntry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("simtest: %s line %d: %v", path, n, err)
		}
		out = append(out, e)
	}
	return out
}

// Seconds converts a request log figure.
func Seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// Timing is what a client measured of one streamed request, each instant
// from when it began to send the request.
type Timing struct {
	TTFT time.Duration // the first token-bearing event
	// TTFA is the first answer event; 0 leaves it out (no reasoning).
	TTFA time.Duration
	Last time.Duration // the last token-bearing event (E2E in llmprobe's terms)
}

// Slack is how far a client's instant for an event may honestly be from
// the server's record of it.
type Slack struct {
	// Early: the server stamps an event right after its write returns,
	// so a client on another core may read it a little before.
	Early time.Duration
	// Late: the request's way to the server and the event's way back,
	// each a loopback hop plus the wait for a goroutine to run.
	Late time.Duration
}

func (s Slack) String() string { return fmt.Sprintf("−%v/+%v", s.Early, s.Late) }

// Check returns what in got the server's record e contradicts: an event
// the client saw earlier than the server sent it (beyond s.Early), or
// later than s.Late after. It compares the first token, the first answer
// token (when got.TTFA and the record's ttfa_seconds are set) and the
// last token (the record's ttft + tpot × (tokens − 1)); a TTFA in got
// without one in the record is an error.
func Check(got Timing, e sim.RequestLogEntry, s Slack) error {
	if e.TTFTSeconds == nil {
		return fmt.Errorf("the server logged no first token (%s %s, status %d, %q)", e.API, e.ID, e.Status, e.Error)
	}
	ttft := Seconds(*e.TTFTSeconds)
	last := ttft
	if e.TPOTSeconds != nil && e.CompletionTokens >= 2 {
		last += Seconds(*e.TPOTSeconds * float64(e.CompletionTokens-1))
	}
	type event struct {
		name         string
		client, serv time.Duration
	}
	evs := []event{{"first token", got.TTFT, ttft}, {"last token", got.Last, last}}
	if got.TTFA != 0 {
		if e.TTFASeconds == nil {
			return fmt.Errorf("the client saw a first answer token at %v, the server logged none after its %d reasoning tokens", got.TTFA, e.ReasoningTokens)
		}
		evs = append(evs, event{"first answer token", got.TTFA, Seconds(*e.TTFASeconds)})
	}
	var bad []string
	for _, ev := range evs {
		if d := ev.client - ev.serv; d < -s.Early || d > s.Late {
			bad = append(bad, fmt.Sprintf("%s at %v, the server's at %v (%+v, slack %v)", ev.name, ev.client, ev.serv, d, s))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("the client's timing contradicts the server's record of %s: %s", e.ID, strings.Join(bad, "; "))
	}
	return nil
}

// Retry runs measure until it says its measurement can be trusted (an
// empty reason), at most attempts times, and returns that measurement.
// When every attempt was untrustworthy it fails the test with the last
// reason: a figure from an untrusted measurement is never asserted.
// measure reports real failures on t itself.
func Retry[T any](t testing.TB, attempts int, measure func(attempt int) (T, string)) T {
	t.Helper()
	return RetryFor(t, attempts, 0, measure)
}

// RetryFor is Retry that starts no new attempt once budget (when
// positive) has passed since the first began: a long measurement retried
// on a busy machine must not outlast the test's time limit.
func RetryFor[T any](t testing.TB, attempts int, budget time.Duration, measure func(attempt int) (T, string)) T {
	t.Helper()
	start := time.Now()
	var why string
	n := 0
	for n < attempts && (n == 0 || budget <= 0 || time.Since(start) < budget) {
		n++
		v, reason := measure(n)
		if reason == "" {
			return v
		}
		why = reason
		t.Logf("attempt %d of %d not trusted: %s", n, attempts, reason)
	}
	t.Fatalf("not trusted in %d attempts over %v, so not judged: %s", n, time.Since(start).Round(time.Second), why)
	panic("unreachable")
}
