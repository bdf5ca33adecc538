// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// FaultHeader is the request header that asks for one fault exactly. Its
// value (case-insensitive) is one of:
//
//	http_500        500 with an OpenAI-style error body
//	http_503        503 with an OpenAI-style error body
//	http_429        429 with Retry-After and an OpenAI-style error body
//	reset:K         abort the TCP connection (RST) after K tokens
//	stall_first:D   wait D (a Go duration) before the first token
//	stall:K:D       wait D after K tokens
//	malformed:K     after K tokens, send an event that is not valid JSON,
//	                then go on normally
//	no_done:K       after K tokens, end the response cleanly without the
//	                finish event, usage and [DONE] (streaming only)
//	empty           a normal response with no generated token, finish
//	                reason "stop" and completion_tokens 0
//
// When fewer than K tokens are generated, the fault fires after the last
// one (before the finish event). Any other value is answered with 400.
const FaultHeader = "X-Sim-Fault"

// maxFaultDuration bounds injected stalls.
const maxFaultDuration = time.Hour

// maxFaultAfterTokens bounds K in fault specifications.
const maxFaultAfterTokens = 1 << 24

type faultKind uint8

const (
	faultNone faultKind = iota
	faultHTTP500
	faultHTTP503
	faultHTTP429
	faultReset
	faultStallFirst
	faultStall
	faultMalformed
	faultNoDone
	faultEmpty
	numFaultKinds
)

var faultKindName = [numFaultKinds]string{
	faultNone:       "none",
	faultHTTP500:    "http_500",
	faultHTTP503:    "http_503",
	faultHTTP429:    "http_429",
	faultReset:      "reset",
	faultStallFirst: "stall_first",
	faultStall:      "stall",
	faultMalformed:  "malformed",
	faultNoDone:     "no_done",
	faultEmpty:      "empty",
}

func (k faultKind) String() string {
	if k < numFaultKinds {
		return faultKindName[k]
	}
	return "unknown"
}

// faultKindNames lists the kinds a client or config can ask for.
func faultKindNames() []string {
	return faultKindName[faultHTTP500:]
}

// fault is the fault chosen for one request.
type fault struct {
	kind       faultKind
	after      int           // reset, stall, malformed, no_done: tokens before it fires
	duration   time.Duration // stall_first, stall
	retryAfter time.Duration // http_429
}

// firesAfter reports whether the fault fires once tokens have been written
// (and nothing else remains to be written when final is true).
func (f *fault) firesAt(written int, final bool) bool {
	return written == f.after || (final && written < f.after)
}

// maxHeaderEcho bounds how much of a bad header value is echoed in errors.
const maxHeaderEcho = 64

// parseFaultHeader parses an X-Sim-Fault value. retryAfter is the
// configured Retry-After for http_429.
func parseFaultHeader(v string, retryAfter time.Duration) (fault, error) {
	orig := v
	v = strings.ToLower(strings.TrimSpace(v))
	name, rest, hasArgs := strings.Cut(v, ":")
	bad := func(why string) (fault, error) {
		return fault{}, fmt.Errorf("invalid %s value %q: %s", FaultHeader, truncate(orig, maxHeaderEcho), why)
	}
	noArgs := func(k faultKind) (fault, error) {
		if hasArgs {
			return bad(name + " takes no argument")
		}
		return fault{kind: k, retryAfter: retryAfter}, nil
	}
	switch name {
	case "http_500":
		return noArgs(faultHTTP500)
	case "http_503":
		return noArgs(faultHTTP503)
	case "http_429":
		return noArgs(faultHTTP429)
	case "empty":
		return noArgs(faultEmpty)
	case "reset", "malformed", "no_done":
		if !hasArgs {
			return bad(name + " needs a token count, e.g. " + name + ":3")
		}
		k, err := parseAfterTokens(rest)
		if err != nil {
			return bad(err.Error())
		}
		kind := map[string]faultKind{"reset": faultReset, "malformed": faultMalformed, "no_done": faultNoDone}[name]
		return fault{kind: kind, after: k}, nil
	case "stall_first":
		if !hasArgs {
			return bad("stall_first needs a duration, e.g. stall_first:2s")
		}
		d, err := parseFaultDuration(rest)
		if err != nil {
			return bad(err.Error())
		}
		return fault{kind: faultStallFirst, duration: d}, nil
	case "stall":
		ks, ds, ok := strings.Cut(rest, ":")
		if !hasArgs || !ok {
			return bad("stall needs a token count and a duration, e.g. stall:3:2s")
		}
		k, err := parseAfterTokens(ks)
		if err != nil {
			return bad(err.Error())
		}
		d, err := parseFaultDuration(ds)
		if err != nil {
			return bad(err.Error())
		}
		return fault{kind: faultStall, after: k, duration: d}, nil
	}
	return bad("unknown fault (valid: http_500, http_503, http_429, reset:K, stall_first:D, stall:K:D, malformed:K, no_done:K, empty)")
}

func parseAfterTokens(s string) (int, error) {
	k, err := strconv.Atoi(s)
	if err != nil || k < 0 || k > maxFaultAfterTokens {
		return 0, fmt.Errorf("token count must be an integer between 0 and %d", maxFaultAfterTokens)
	}
	return k, nil
}

func parseFaultDuration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 || d > maxFaultDuration {
		return 0, fmt.Errorf("duration must be a Go duration between 0s and %s", maxFaultDuration)
	}
	return d, nil
}

// faultTable is the configured random faults, as cumulative probabilities.
type faultTable struct {
	any    bool
	cum    [numFaultKinds]float64
	faults [numFaultKinds]fault
}

func newFaultTable(c *FaultConfig) *faultTable {
	t := &faultTable{}
	sum := 0.0
	for _, s := range c.specs() {
		sum += s.spec.Probability
		t.cum[s.kind] = sum
		t.faults[s.kind] = fault{
			kind:       s.kind,
			after:      s.spec.AfterTokens,
			duration:   s.spec.Duration,
			retryAfter: s.spec.RetryAfter,
		}
		if s.spec.Probability > 0 {
			t.any = true
		}
	}
	return t
}

// pick maps a uniform draw u in [0,1) to a fault (or none).
func (t *faultTable) pick(u float64) fault {
	for k := faultHTTP500; k < numFaultKinds; k++ {
		if u < t.cum[k] && t.faults[k].kind != faultNone {
			return t.faults[k]
		}
	}
	return fault{}
}

// retryAfterSeconds renders a Retry-After value: whole seconds, at least 1.
func retryAfterSeconds(d time.Duration) string {
	s := int64((d + time.Second - 1) / time.Second)
	if s < 1 {
		s = 1
	}
	return strconv.FormatInt(s, 10)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
