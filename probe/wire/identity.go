// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package wire

import (
	"sync/atomic"
)

// What a response says of the serving stack, for the target's identity
// (probe/identity.go): Result.ResponseModel (the model the server
// answered with), Result.SystemFingerprint (the system_fingerprint of
// chat and completions chunks and bodies: OpenAI's "fp_…", llama.cpp's
// build_info "b4567-1a2b3c4", TGI's "<version>-<docker label>"; vLLM
// and the Responses and Messages APIs send none) and Result.Server (the
// HTTP Server header: "uvicorn" for vLLM and SGLang, "llama.cpp", a
// gateway's own).
//
// These values end up in label values, log lines and the status page,
// so each is cleaned as every server-supplied text is (servertext.go):
// the target's secrets and any echo of the prompt removed, URLs masked,
// control characters, line separators and invalid UTF-8 replaced and
// bidirectional formatting characters removed (internal/scrub), and cut
// to MaxIdentityValue bytes (an ellipsis marks the cut). The values repeat on every response, so the client keeps the
// last cleaned value of each and cleans again only when the raw value
// (or the set of secrets) changes: the hot path allocates nothing for
// them.

// MaxIdentityValue is the most bytes kept of each identity value (before
// the ellipsis that marks a cut).
const MaxIdentityValue = 64

// identityMemo is a cleaned value and what it was cleaned from.
type identityMemo struct {
	raw     string
	secrets *matcher // the set it was scrubbed of (requestSet reuses it)
	clean   string
}

// identityCleaner cleans a client's identity values, remembering the last
// of each.
type identityCleaner struct {
	server, fingerprint identitySlot
}

// identitySlot remembers the last cleaned value of one kind.
type identitySlot struct{ last atomic.Pointer[identityMemo] }

// clean sets res.Server from the raw header value and cleans
// res.SystemFingerprint, scrubbing the secrets sec matches and the prompt
// of req.
func (c *identityCleaner) clean(res *Result, rawServer string, sec *matcher, req *Request) {
	res.Server = c.server.cleaned(rawServer, sec, req)
	res.SystemFingerprint = c.fingerprint.cleaned(res.SystemFingerprint, sec, req)
}

// cleaned returns raw cleaned, from the memo when it holds raw.
func (m *identitySlot) cleaned(raw string, sec *matcher, req *Request) string {
	if raw == "" {
		return ""
	}
	p := &m.last
	if memo := p.Load(); memo != nil && memo.raw == raw && memo.secrets == sec {
		return memo.clean
	}
	out, echoed := cleanIdentity(raw, sec, req)
	if !echoed {
		// A value cleaned of a prompt's echo depends on that prompt: not
		// kept for the next request.
		p.Store(&identityMemo{raw: raw, secrets: sec, clean: out})
	}
	return out
}

// cleanIdentity cleans one identity value; echoed says whether an echo
// of the prompt was removed.
func cleanIdentity(raw string, sec *matcher, req *Request) (string, bool) {
	s := raw[:min(len(raw), 4*MaxIdentityValue)] // bounds the work; the cut below is within
	s = scrubSecrets(s, sec, len(raw) > len(s))
	echoed := false
	if req != nil {
		texts := make([]string, 0, len(req.Messages)+1)
		for _, m := range req.Messages {
			texts = append(texts, m.Content)
		}
		texts = append(texts, req.Prompt)
		if e := redactEchoes(s, texts...); e != s {
			s, echoed = e, true
		}
	}
	return sanitizeCut(s, MaxIdentityValue, sec), echoed
}

// CleanIdentity cleans a value that a server's version endpoint gave
// (version.go) as the identity values of responses are, scrubbing the
// redactor's secrets.
func CleanIdentity(raw string, r *Redactor) string {
	var sec *matcher
	if r != nil {
		sec = r.baseSet().m
	}
	s, _ := cleanIdentity(raw, sec, nil)
	return s
}
