// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package exporter

import (
	"encoding/json"
	"net/http"
	"slices"

	"github.com/llmprobe/llmprobe/probe/wire"
)

// GET /api/v1/recent: each target's recent requests (the status page's
// ring, global.recent_requests per target) as JSON, for `llmprobe plan
// --from`: the latencies and token counts of each, its class and outcome.
// It holds no error message, no trace id, no text and no secret, and is
// bounded by the rings (at most 10000 requests per target).

// RecentAPI is the answer of /api/v1/recent.
type RecentAPI struct {
	Targets []RecentAPITarget `json:"targets"`
}

// RecentAPITarget is one target's recent requests, newest first.
type RecentAPITarget struct {
	Target   string             `json:"target"`
	Requests []RecentAPIRequest `json:"requests"`
}

// RecentAPIRequest is one ended request. Latencies are in seconds, 0
// when the request has none (no first token, fewer than 2 output tokens).
type RecentAPIRequest struct {
	Class        string  `json:"class"`
	Time         float64 `json:"time"` // Unix seconds it was handed to the HTTP client
	Outcome      string  `json:"outcome"`
	Warmup       bool    `json:"warmup"`
	TTFT         float64 `json:"ttft_seconds"`
	TPOT         float64 `json:"tpot_seconds"`
	E2E          float64 `json:"e2e_seconds"`
	PromptTokens int     `json:"prompt_tokens"`
	OutputTokens int     `json:"output_tokens"`
}

// API returns every target's recent requests (target: only that one's),
// targets by name.
func (r *Recent) API(target string) RecentAPI {
	rings := *r.rings.Load()
	names := make([]string, 0, len(rings))
	for name := range rings {
		if target == "" || name == target {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	out := RecentAPI{Targets: make([]RecentAPITarget, 0, len(names))}
	for _, name := range names {
		recent, _ := r.Snapshot(name)
		t := RecentAPITarget{Target: name, Requests: make([]RecentAPIRequest, 0, len(recent))}
		for _, e := range recent {
			q := RecentAPIRequest{
				Class: e.Class, Time: float64(e.Time.UnixNano()) / 1e9, Outcome: string(e.Outcome), Warmup: e.Warmup,
				E2E: e.E2E.Seconds(), PromptTokens: e.PromptTokens, OutputTokens: e.OutputTokens,
			}
			if e.FirstToken {
				q.TTFT = e.TTFT.Seconds()
			}
			if e.Outcome == wire.OutcomeSuccess && e.OutputTokens >= 2 {
				q.TPOT = e.TPOT.Seconds()
			}
			t.Requests = append(t.Requests, q)
		}
		out.Targets = append(out.Targets, t)
	}
	return out
}

// recentAPI serves /api/v1/recent (?target=NAME: one target).
func (w *web) recentAPI(rw http.ResponseWriter, r *http.Request) {
	if w.o.Recent == nil {
		writeText(rw, http.StatusServiceUnavailable, "no recent requests are kept")
		return
	}
	rw.Header().Set("Content-Type", "application/json")
	rw.Header().Set("X-Content-Type-Options", "nosniff")
	if err := json.NewEncoder(rw).Encode(w.o.Recent.API(r.URL.Query().Get("target"))); err != nil {
		w.o.Logger.Debug("serving /api/v1/recent", "err", err)
	}
}
