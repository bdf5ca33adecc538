// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestIdentityValidation(t *testing.T) {
	with := func(id Identity, steps ...IdentityStep) Config {
		c := DefaultConfig()
		c.Identity, c.IdentitySteps = id, steps
		return c
	}
	tooMany := make([]IdentityStep, maxIdentitySteps+1)
	for i := range tooMany {
		tooMany[i] = IdentityStep{After: time.Duration(i) * time.Second, Version: "v"}
	}
	for name, tc := range map[string]struct {
		cfg  Config
		want []string
	}{
		"newline in server":  {with(Identity{Server: "sim\r\nX-Evil: 1"}), []string{`identity.server: "sim\r\nX-Evil: 1" contains a control character`}},
		"long fingerprint":   {with(Identity{Fingerprint: strings.Repeat("f", 257)}), []string{"identity.fingerprint: longer than 256 bytes"}},
		"padded version":     {with(Identity{Version: " 1.0"}), []string{`identity.version: " 1.0" has leading or trailing space`}},
		"negative after":     {with(Identity{}, IdentityStep{After: -time.Second, Version: "2"}), []string{"identity_steps[0].after: must not be negative, got -1s"}},
		"same after":         {with(Identity{}, IdentityStep{After: time.Second, Version: "2"}, IdentityStep{After: time.Second, Version: "3"}), []string{"identity_steps[1].after: must be later than identity_steps[0].after (1s), got 1s"}},
		"empty step":         {with(Identity{}, IdentityStep{After: time.Second}), []string{"identity_steps[0]: changes nothing: set fingerprint, version or server"}},
		"bad value in step":  {with(Identity{}, IdentityStep{After: time.Second, Fingerprint: "a\x00b"}), []string{"identity_steps[0].fingerprint:"}},
		"too many":           {with(Identity{}, tooMany...), []string{"identity_steps: at most 64 steps, got 65"}},
		"invalid utf-8 step": {with(Identity{}, IdentityStep{Server: "\xff"}), []string{"identity_steps[0].server:"}},
	} {
		err := tc.cfg.Validate()
		if err == nil {
			t.Errorf("%s: no error", name)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q, want it to contain %q", name, err, w)
			}
		}
	}
	ok := with(Identity{Fingerprint: "fp-a", Version: "0.1.0", Server: "llmprobe-sim"},
		IdentityStep{After: 0, Fingerprint: "fp-b"}, IdentityStep{After: time.Minute, Version: "0.2.0", Server: "sim/2"})
	if err := ok.Validate(); err != nil {
		t.Errorf("valid identity rejected: %v", err)
	}
}

func TestIdentityYAML(t *testing.T) {
	cfg, err := parseConfig([]byte("identity: {fingerprint: fp-a, version: 0.1.0, server: llmprobe-sim}\nidentity_steps:\n  - {after: 2m, fingerprint: fp-b, version: 0.2.0}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if want := (Identity{Fingerprint: "fp-a", Version: "0.1.0", Server: "llmprobe-sim"}); cfg.Identity != want {
		t.Errorf("identity %+v, want %+v", cfg.Identity, want)
	}
	if want := (IdentityStep{After: 2 * time.Minute, Fingerprint: "fp-b", Version: "0.2.0"}); len(cfg.IdentitySteps) != 1 || cfg.IdentitySteps[0] != want {
		t.Errorf("identity_steps %+v, want [%+v]", cfg.IdentitySteps, want)
	}
	if cfg, err := parseConfig([]byte("identity_steps: []\n")); err != nil || cfg.IdentitySteps != nil {
		t.Errorf("empty identity_steps: %v, %+v", err, cfg.IdentitySteps)
	}
	for doc, want := range map[string]string{
		"identity_steps:\n  - {after: 2m, version: b}\n  - {after: 1m, version: c}\n": "line 3: identity_steps[1].after: must be later than identity_steps[0].after (2m0s), got 1m0s",
		"identity_steps:\n  - {after: 1s}\n":                                          "line 2: identity_steps[0]: changes nothing",
		"identity: {fingerprnt: x}\n":                                                 "field fingerprnt not found",
		"identity:\n  server: \"a\\nb\"\n":                                            "line 2: identity.server:",
	} {
		_, err := parseConfig([]byte(doc))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want %q", doc, err, want)
		}
	}
}

func TestIdentityScheduleAt(t *testing.T) {
	start := time.Now()
	s := newIdentitySchedule(Identity{Fingerprint: "fp-a", Version: "0.1.0", Server: "sim"},
		[]IdentityStep{{After: time.Second, Fingerprint: "fp-b"}, {After: 3 * time.Second, Version: "0.2.0", Server: "sim/2"}}, start)
	for off, want := range map[time.Duration]Identity{
		-time.Second:           {"fp-a", "0.1.0", "sim"},
		0:                      {"fp-a", "0.1.0", "sim"},
		999 * time.Millisecond: {"fp-a", "0.1.0", "sim"},
		time.Second:            {"fp-b", "0.1.0", "sim"},
		3 * time.Second:        {"fp-b", "0.2.0", "sim/2"},
		time.Hour:              {"fp-b", "0.2.0", "sim/2"},
	} {
		if got := s.at(start.Add(off)).id; got != want {
			t.Errorf("identity at %v: %+v, want %+v", off, got, want)
		}
	}
	none := newIdentitySchedule(Identity{}, nil, start)
	if st := none.at(start); st.fingerprint != nil || st.server != nil || st.version != nil {
		t.Errorf("no identity renders %+v, want nothing", st)
	}
}

// getVersion returns GET /version's status and answer.
func getVersion(t *testing.T, base string) (int, string, http.Header) {
	t.Helper()
	resp, err := testClient.Get(base + "/version")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

// unaryFingerprint posts a non-streaming request and returns its body's
// system_fingerprint (nil when absent) and Server header.
func unaryFingerprint(t *testing.T, url string, body map[string]any) (*string, string) {
	t.Helper()
	body["stream"] = false
	delete(body, "stream_options")
	resp := post(t, url, body)
	defer resp.Body.Close()
	var out struct {
		SystemFingerprint *string `json:"system_fingerprint"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d, %v", resp.StatusCode, err)
	}
	return out.SystemFingerprint, resp.Header.Get("Server")
}

// TestIdentityServed: without an identity the server sends no
// system_fingerprint, no Server header and answers /version with 404;
// with one, every chat and completions chunk and body carries the
// fingerprint, every response (errors and /metrics too) the Server
// header, and /version answers vLLM's {"version"}.
func TestIdentityServed(t *testing.T) {
	base, _ := startSim(t, zeroConfig())
	if status, _, h := getVersion(t, base); status != http.StatusNotFound || h.Get("Server") != "" {
		t.Errorf("no identity: /version %d, Server %q; want 404 and none", status, h.Get("Server"))
	}
	r := stream(t, base+"/v1/chat/completions", chatBody("hi", 3))
	for i, c := range r.chunks {
		if c != nil && c.SystemFingerprint != "" {
			t.Errorf("no identity: chunk %d has system_fingerprint %q", i, c.SystemFingerprint)
		}
	}
	if fp, _ := unaryFingerprint(t, base+"/v1/completions", completionBody("hi", 2)); fp != nil {
		t.Errorf("no identity: body has system_fingerprint %q", *fp)
	}

	cfg := zeroConfig()
	cfg.Identity = Identity{Fingerprint: "fp-a", Version: "0.1.0", Server: "llmprobe-sim"}
	base, s := startSim(t, cfg)
	if got := s.Identity(); got != cfg.Identity {
		t.Errorf("Identity() = %+v", got)
	}
	status, body, h := getVersion(t, base)
	if status != http.StatusOK || strings.TrimSpace(body) != `{"version":"0.1.0"}` || h.Get("Content-Type") != "application/json" || h.Get("Server") != "llmprobe-sim" {
		t.Errorf("/version: %d %q %v", status, body, h)
	}
	for _, path := range []string{"/v1/chat/completions", "/v1/completions"} {
		body := chatBody("hi", 3)
		if path == "/v1/completions" {
			body = completionBody("hi", 3)
		}
		r := stream(t, base+path, body)
		if !r.done || len(r.malformed) > 0 || r.header.Get("Server") != "llmprobe-sim" {
			t.Fatalf("%s: done %v, malformed %v, Server %q", path, r.done, r.malformed, r.header.Get("Server"))
		}
		for i, c := range r.chunks {
			if c != nil && c.SystemFingerprint != "fp-a" {
				t.Errorf("%s chunk %d: system_fingerprint %q, want fp-a", path, i, c.SystemFingerprint)
			}
		}
		if fp, server := unaryFingerprint(t, base+path, body); fp == nil || *fp != "fp-a" || server != "llmprobe-sim" {
			t.Errorf("%s body: system_fingerprint %v, Server %q", path, fp, server)
		}
	}
	resp, err := testClient.Get(base + "/nowhere")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound || resp.Header.Get("Server") != "llmprobe-sim" {
		t.Errorf("404: %d, Server %q", resp.StatusCode, resp.Header.Get("Server"))
	}
}

// TestIdentityStepChangesAtItsInstant: a step 300 ms after the start
// changes the fingerprint, /version and the Server header together; the
// test waits for it (bounded) and checks that nothing but the step's
// values is ever seen after the base's.
func TestIdentityStepChangesAtItsInstant(t *testing.T) {
	cfg := zeroConfig()
	cfg.Identity = Identity{Fingerprint: "fp-a", Version: "0.1.0", Server: "sim/1"}
	cfg.IdentitySteps = []IdentityStep{{After: 300 * time.Millisecond, Fingerprint: "fp-b", Version: "0.2.0", Server: "sim/2"}}
	base, _ := startSim(t, cfg)
	deadline := time.Now().Add(30 * time.Second)
	changed := false
	for !changed && time.Now().Before(deadline) {
		r := stream(t, base+"/v1/chat/completions", chatBody("hi", 1))
		var fp string
		for _, c := range r.chunks {
			if c != nil {
				fp = c.SystemFingerprint
			}
		}
		_, version, _ := getVersion(t, base)
		switch server := r.header.Get("Server"); {
		case fp == "fp-a" && server == "sim/1":
		case fp == "fp-b" && server == "sim/2" && strings.Contains(version, "0.2.0"):
			changed = true
		case fp == "fp-b" && server == "sim/2":
			// /version was asked after the stream: it can only be newer.
			t.Errorf("after the step: /version %q", version)
		default:
			t.Fatalf("fingerprint %q with Server %q", fp, server)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !changed {
		t.Fatal("the identity never changed")
	}
}
