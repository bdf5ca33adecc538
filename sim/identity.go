// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"
	"unicode"
)

// The server's identity: what it says of its own build, and a schedule of
// changes to it, to reproduce a rollout (a new build, a new engine
// version) at a known instant.
//
//	identity: {fingerprint: fp-a, version: 0.1.0, server: llmprobe-sim}
//	identity_steps:
//	  - {after: 2m, fingerprint: fp-b, version: 0.2.0}
//
// Fingerprint is the system_fingerprint of every chat and completions
// chunk and body (OpenAI's, llama.cpp's field); Version is what GET
// /version answers, vLLM's way ({"version": "0.1.0"}); Server is the HTTP
// Server header of every response. Each left empty is not sent: no
// system_fingerprint, /version answers 404, no Server header (the
// default: none of them). A step sets, from After on (an offset from the
// server's start, New), the fields it names; the others keep their value.
// A response takes the identity in force when its request arrived.

// Identity is Config.Identity, and a step's changes.
type Identity struct {
	Fingerprint string `yaml:"fingerprint"`
	Version     string `yaml:"version"`
	Server      string `yaml:"server"`
}

// IdentityStep is one entry of Config.IdentitySteps.
type IdentityStep struct {
	// After is the offset from the server's start at which the step
	// takes effect.
	After time.Duration `yaml:"after"`
	// The fields set from After on; an empty one is left as it was.
	Fingerprint string `yaml:"fingerprint"`
	Version     string `yaml:"version"`
	Server      string `yaml:"server"`
}

// Bounds of the identity.
const (
	maxIdentitySteps = 64
	maxIdentityValue = 256
)

func (c *Config) validateIdentity() []error {
	var errs []error
	bad := func(path, format string, args ...any) {
		errs = append(errs, &fieldError{path: path, msg: fmt.Sprintf(format, args...)})
	}
	value := func(path, v string) {
		switch {
		case len(v) > maxIdentityValue:
			bad(path, "longer than %d bytes", maxIdentityValue)
		case strings.ContainsFunc(v, func(r rune) bool { return unicode.IsControl(r) || r == unicode.ReplacementChar }):
			// It goes in a header and in JSON: a newline would break both.
			bad(path, "%q contains a control character or invalid UTF-8", v)
		case v != strings.TrimSpace(v):
			bad(path, "%q has leading or trailing space", v)
		}
	}
	value("identity.fingerprint", c.Identity.Fingerprint)
	value("identity.version", c.Identity.Version)
	value("identity.server", c.Identity.Server)
	if len(c.IdentitySteps) > maxIdentitySteps {
		bad("identity_steps", "at most %d steps, got %d", maxIdentitySteps, len(c.IdentitySteps))
	}
	for i, st := range c.IdentitySteps {
		path := fmt.Sprintf("identity_steps[%d]", i)
		switch {
		case st.After < 0:
			bad(path+".after", "must not be negative, got %s", st.After)
		case i > 0 && st.After <= c.IdentitySteps[i-1].After:
			bad(path+".after", "must be later than identity_steps[%d].after (%s), got %s", i-1, c.IdentitySteps[i-1].After, st.After)
		}
		if st.Fingerprint == "" && st.Version == "" && st.Server == "" {
			bad(path, "changes nothing: set fingerprint, version or server")
		}
		value(path+".fingerprint", st.Fingerprint)
		value(path+".version", st.Version)
		value(path+".server", st.Server)
	}
	return errs
}

// scaleIdentitySteps returns the steps with their After multiplied by
// the schedule scale (Config.ScheduleScale).
func scaleIdentitySteps(steps []IdentityStep, scale float64) []IdentityStep {
	if scale == 1 || len(steps) == 0 {
		return steps
	}
	out := make([]IdentityStep, len(steps))
	for i, st := range steps {
		out[i] = st
		out[i].After = scaleAfter(st.After, scale)
	}
	return out
}

// identityState is the identity in force from one instant on, rendered.
type identityState struct {
	after       time.Duration
	id          Identity
	fingerprint []byte // `,"system_fingerprint":"…"` for a chunk, or empty
	server      []string
	version     []byte // GET /version's answer, nil for 404
}

// identitySchedule answers the identity in force at an instant.
type identitySchedule struct {
	start  time.Time
	states []identityState // states[0] from the start; then one per step
}

func newIdentitySchedule(base Identity, steps []IdentityStep, start time.Time) identitySchedule {
	s := identitySchedule{start: start}
	cur := base
	s.states = append(s.states, renderIdentity(0, cur))
	for _, st := range steps {
		if st.Fingerprint != "" {
			cur.Fingerprint = st.Fingerprint
		}
		if st.Version != "" {
			cur.Version = st.Version
		}
		if st.Server != "" {
			cur.Server = st.Server
		}
		s.states = append(s.states, renderIdentity(st.After, cur))
	}
	return s
}

func renderIdentity(after time.Duration, id Identity) identityState {
	st := identityState{after: after, id: id}
	if id.Fingerprint != "" {
		b, _ := json.Marshal(id.Fingerprint)
		st.fingerprint = append([]byte(`,"system_fingerprint":`), b...)
	}
	if id.Server != "" {
		st.server = []string{id.Server}
	}
	if id.Version != "" {
		b, _ := json.Marshal(struct {
			Version string `json:"version"`
		}{id.Version})
		st.version = append(b, '\n')
	}
	return st
}

// at returns the state of the last step whose instant is at or before
// now (the base before the first).
func (s *identitySchedule) at(now time.Time) *identityState {
	if len(s.states) == 1 {
		return &s.states[0]
	}
	el := now.Sub(s.start)
	i := sort.Search(len(s.states), func(i int) bool { return i > 0 && s.states[i].after > el })
	return &s.states[i-1]
}

// Identity returns the identity in force now.
func (s *Server) Identity() Identity { return s.identity.at(time.Now()).id }

// handleVersion answers GET /version as vLLM does, while a version is set.
func (s *Server) handleVersion(w http.ResponseWriter, _ *http.Request) {
	st := s.identity.at(time.Now())
	if st.version == nil {
		writeError(w, &apiError{status: http.StatusNotFound, typ: "invalid_request_error", code: "not_found", message: "this server reports no version"})
		return
	}
	w.Header()["Content-Type"] = jsonContentType
	_, _ = w.Write(st.version)
}
