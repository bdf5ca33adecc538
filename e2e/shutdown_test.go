// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

const (
	logWaiting   = "waiting for in-flight requests"
	logCancelled = "cancelled the remaining in-flight requests"
	logStopped   = "llmprobe stopped"
)

// TestShutdown proves the SIGTERM contract: scheduling stops, requests in
// flight may finish within global.shutdown_grace_period, the rest are
// cancelled when it ends, and the process exits 0 either way. Requests
// are held in flight by the simulator's stall_first fault, sent through the
// target's http_client_config.http_headers.
func TestShutdown(t *testing.T) {
	binary(t)
	t.Run("in-flight requests finish within the grace period", func(t *testing.T) {
		const stall = 4 * time.Second
		simURL, daemon, daemonURL := startStalled(t, stall, 20*time.Second)
		waitInflight(t, daemonURL, 4)

		start := time.Now()
		daemon.Signal(t, syscall.SIGTERM)
		// While it drains (the newest request has about 3s of stall left),
		// the daemon is not ready, still serves its metrics, and schedules
		// nothing new.
		// (The signal is handled asynchronously: give it a moment.)
		for deadline := time.Now().Add(time.Second); ; time.Sleep(20 * time.Millisecond) {
			code, _, body := httpDo(t, http.MethodGet, daemonURL+"/-/ready", nil)
			if code == http.StatusServiceUnavailable {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("GET /-/ready 1s into draining: HTTP %d %q, want 503", code, strings.TrimSpace(body))
				break
			}
		}
		scheduled := func() float64 {
			e, _ := scrape(t, daemonURL)
			v, _ := e.sum("llmprobe_requests_scheduled_total", map[string]string{"target": "stalled"})
			return v
		}
		before := scheduled()
		time.Sleep(time.Second) // 4 arrivals at 4/s, had scheduling gone on
		if after := scheduled(); after != before {
			t.Errorf("llmprobe_requests_scheduled_total went from %g to %g after SIGTERM", before, after)
		}
		code, ok := daemon.Wait(30 * time.Second)
		took := time.Since(start)
		if !ok {
			t.Fatalf("the daemon did not exit within 30s of SIGTERM (grace period 20s)")
		}
		t.Logf("exited %d, %s after SIGTERM", code, took.Round(time.Millisecond))
		if code != 0 {
			t.Errorf("exit code %d after SIGTERM, want 0", code)
		}
		// At 4 requests/s the last one sent before SIGTERM still had most
		// of its 4s stall ahead: a daemon that waited cannot be quick.
		if took < stall/3 {
			t.Errorf("exited %s after SIGTERM: too soon to have waited for requests stalled %s", took, stall)
		}
		logs := daemon.Stderr()
		for _, want := range []string{logWaiting, logStopped} {
			if !strings.Contains(logs, want) {
				t.Errorf("the log lacks %q", want)
			}
		}
		if strings.Contains(logs, logCancelled) {
			t.Errorf("requests were cancelled although the grace period (20s) covered them")
		}
		// Every request the simulator received was answered to the end.
		received, completed := simCounts(t, simURL, 5*time.Second, func(received, completed float64) bool {
			return received > 0 && completed == received
		})
		if received == 0 || completed != received {
			t.Errorf("the simulator received %g requests and completed %g: in-flight requests were cut", received, completed)
		}
	})

	t.Run("the grace period bounds the wait", func(t *testing.T) {
		const stall, grace = 60 * time.Second, time.Second
		simURL, daemon, daemonURL := startStalled(t, stall, grace)
		waitInflight(t, daemonURL, 2)

		start := time.Now()
		daemon.Signal(t, syscall.SIGTERM)
		code, ok := daemon.Wait(20 * time.Second)
		took := time.Since(start)
		if !ok {
			t.Fatalf("the daemon did not exit within 20s of SIGTERM (grace period %s, requests stalled %s)", grace, stall)
		}
		t.Logf("exited %d, %s after SIGTERM", code, took.Round(time.Millisecond))
		if code != 0 {
			t.Errorf("exit code %d after SIGTERM, want 0", code)
		}
		if took < grace/2 {
			t.Errorf("exited %s after SIGTERM: it did not wait for the grace period (%s)", took, grace)
		}
		logs := daemon.Stderr()
		for _, want := range []string{logWaiting, logCancelled, logStopped} {
			if !strings.Contains(logs, want) {
				t.Errorf("the log lacks %q", want)
			}
		}
		// The stalled requests were cancelled: none completed, and the
		// simulator let go of them (nothing left running or waiting).
		received, completed := simCounts(t, simURL, 0, nil)
		if received == 0 || completed != 0 {
			t.Errorf("the simulator received %g requests and completed %g, want > 0 and 0", received, completed)
		}
		pollScrape(t, simURL, 10*time.Second, "the simulator still holds requests the daemon cancelled", func(e exposition) bool {
			running, _ := e.sum("vllm:num_requests_running", nil)
			waiting, _ := e.sum("vllm:num_requests_waiting", nil)
			return running == 0 && waiting == 0
		})
	})
}

// startStalled starts a simulator and a daemon probing it with every
// request stalled before its first token.
func startStalled(t *testing.T, stall, grace time.Duration) (simURL string, daemon *process, daemonURL string) {
	t.Helper()
	_, simURL = startSim(t)
	cfg := filepath.Join(t.TempDir(), "llmprobe.yml")
	writeFileAtomic(t, cfg, renderFixture(t, "shutdown.yml", map[string]string{
		"SIM_URL": simURL, "STALL": stall.String(), "GRACE": grace.String(),
	}))
	daemon, daemonURL = startDaemon(t, cfg)
	return simURL, daemon, daemonURL
}

// waitInflight waits until the daemon has at least n requests in flight.
func waitInflight(t *testing.T, daemonURL string, n float64) {
	t.Helper()
	pollScrape(t, daemonURL, 15*time.Second, "requests are not in flight", func(e exposition) bool {
		v, _ := e.sum("llmprobe_inflight_requests", map[string]string{"target": "stalled"})
		return v >= n
	})
}

// simCounts returns how many stalled requests the simulator received and
// how many it completed, polling up to timeout until cond accepts them
// (once when cond is nil).
func simCounts(t *testing.T, simURL string, timeout time.Duration, cond func(received, completed float64) bool) (received, completed float64) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		e, _ := scrape(t, simURL)
		received, _ = e.sum("llmprobe_sim_faults_injected_total", map[string]string{"fault": "stall_first"})
		completed, _ = e.sum("vllm:request_success_total", nil)
		if cond == nil || cond(received, completed) || time.Now().After(deadline) {
			return received, completed
		}
		time.Sleep(100 * time.Millisecond)
	}
}
