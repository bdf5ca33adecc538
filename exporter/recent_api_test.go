// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package exporter

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestRecentAPI: /api/v1/recent serves each target's recent requests as
// JSON, newest first (?target=: one target's), with latencies and token
// counts but no error message and no trace id.
func TestRecentAPI(t *testing.T) {
	f := newWebFixture(t, nil)
	base := time.Unix(1_700_000_000, 0)
	ok := successResult("alpha", "model-a", "chat")
	ok.Dispatched = base
	f.recent.Observe(ok)
	bad := failedResult("alpha", "model-a", "agent", 7)
	bad.Dispatched = base.Add(time.Second)
	bad.Error = "429 from https://user:hunter2@api.example/v1 (failure 7)"
	f.recent.Observe(bad)
	f.recent.Observe(successResult("beta", "model-b", "ping"))

	code, h, body := f.do(t, "GET", "/api/v1/recent", nil)
	if code != 200 || h.Get("Content-Type") != "application/json" {
		t.Fatalf("/api/v1/recent = %d %s: %s", code, h.Get("Content-Type"), body)
	}
	var api RecentAPI
	if err := json.Unmarshal([]byte(body), &api); err != nil {
		t.Fatal(err)
	}
	if len(api.Targets) != 2 || api.Targets[0].Target != "alpha" || api.Targets[1].Target != "beta" {
		t.Fatalf("targets: %+v", api.Targets)
	}
	rs := api.Targets[0].Requests
	if len(rs) != 2 {
		t.Fatalf("alpha: %+v", rs)
	}
	want0 := RecentAPIRequest{Class: "agent", Time: float64(base.Unix() + 1), Outcome: "http_error", E2E: bad.E2E.Seconds(), PromptTokens: bad.PromptTokens, OutputTokens: bad.OutputTokens}
	want1 := RecentAPIRequest{Class: "chat", Time: float64(base.Unix()), Outcome: "success", TTFT: 0.25, TPOT: ok.TPOT.Seconds(), E2E: 0.62, PromptTokens: 100, OutputTokens: 16}
	if rs[0] != want0 || rs[1] != want1 {
		t.Errorf("alpha's requests:\n%+v\n%+v\nwant\n%+v\n%+v", rs[0], rs[1], want0, want1)
	}
	for _, secret := range []string{"hunter2", "Too Many", "failure 7", testTraceID} {
		if strings.Contains(body, secret) {
			t.Errorf("the answer holds %q: %s", secret, body)
		}
	}
	_, _, one := f.do(t, "GET", "/api/v1/recent?target=beta", nil)
	if err := json.Unmarshal([]byte(one), &api); err != nil || len(api.Targets) != 1 || api.Targets[0].Target != "beta" || len(api.Targets[0].Requests) != 1 {
		t.Errorf("?target=beta: %s", one)
	}
	_, _, none := f.do(t, "GET", "/api/v1/recent?target=nope", nil)
	if strings.TrimSpace(none) != `{"targets":[]}` {
		t.Errorf("?target=nope: %s", none)
	}
}
