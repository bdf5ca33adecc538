// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package wire

import (
	"strconv"
	"strings"

	"github.com/llmprobe/llmprobe/internal/scrub"
)

// What a server writes (error bodies, error events, messages that quote
// the request) is cleaned before it is stored: secrets scrubbed, echoes
// of the prompt removed, URLs stripped of credentials and queries,
// control characters replaced, and cut.

// serverText cleans the messages a server writes for one request.
type serverText struct {
	secrets *matcher // the forms to scrub (Redactor.requestSet)
	req     *Request
}

// clean removes the request's secrets and any echo of its prompt from a
// message written by the server (it may quote the request: a 401 that
// repeats the headers, pydantic's 'input', a proxy's body dump), then
// sanitises and truncates it. Secrets go first, before a cut could leave
// a piece of one.
func (t *serverText) clean(msg string) string {
	msg = scrubSecrets(msg, t.secrets, true)
	for _, marker := range [...]string{`'input'`, `"input"`} {
		if i := strings.Index(msg, marker); i >= 0 {
			msg = msg[:i] + "[input redacted]"
		}
	}
	if req := t.req; req != nil {
		texts := make([]string, 0, len(req.Messages)+1)
		for _, m := range req.Messages {
			texts = append(texts, m.Content)
		}
		texts = append(texts, req.Prompt)
		msg = redactEchoes(msg, texts...)
	}
	return sanitizeWith(msg, t.secrets)
}

// quote quotes a server's header value for a message, sanitised and cut
// to n bytes with scrubCut (the message goes on after it).
func (t *serverText) quote(v string, n int) string {
	return strconv.Quote(sanitizeCut(v, n, t.secrets))
}

// SanitizeMessage removes URL credentials and queries, replaces control
// characters and invalid UTF-8, and truncates (scrubCut).
func SanitizeMessage(msg string) string {
	return sanitizeWith(msg, nil)
}

// sanitizeWith is sanitizeMessage scrubbing the given secret forms before
// the cut.
func sanitizeWith(msg string, m *matcher) string {
	return sanitizeCut(msg, maxErrorMessage, m)
}

// SanitizeCut is how text a server sent is made fit for an error message
// or a log line: URLs masked (scrub.URLs), control characters, line
// separators and invalid UTF-8 replaced and bidirectional overrides
// removed (scrub.Chars), and cut to n bytes with scrubCut (which marks
// the cut). SanitizeMessage is SanitizeCut at the length of Result.Error.
func SanitizeCut(s string, n int) string { return sanitizeCut(s, n, nil) }

// sanitizeCut is SanitizeCut scrubbing the given secret forms before the
// cut.
func sanitizeCut(s string, n int, m *matcher) string {
	s = scrub.URLs(s)
	// Read at most a few times the message limit; a rune cut here is
	// invalid UTF-8, which Chars replaces.
	return scrubCut(scrub.Chars(s[:min(len(s), 4*maxErrorMessage)]), n, m)
}
