// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

// Package scrub makes a string fit to be shown: a URL without its
// secrets (URL, and every URL in a text: URLs), and a value without the
// characters that let it rewrite what is around it (Chars). It is the one
// policy for both, used wherever llmprobe shows a URL (logs, errors, the
// status page, /config, bench's and fit's reports, the command line a
// report records) or a string a server or a file supplied (label values,
// the status page, log lines, span attributes).
//
// scrub imports no llmprobe package.
package scrub

import (
	"strings"
	"unicode/utf8"
)

// Mask stands for what URL hides.
const Mask = "xxxxx"

// URL returns s, a URL, with what may be secret in it masked:
//
//   - the user information (user name and password: a token is often
//     passed as the user name) becomes xxxxx;
//   - every query value becomes xxxxx, its key kept
//     (?token=xxxxx&api_key=xxxxx), and a parameter without a value
//     (which may be a key on its own) is masked whole;
//   - the fragment is dropped.
//
// Scheme, host, port and path are kept, so the URL still says where it
// points. s is read as text, not parsed, so a URL that does not parse is
// masked by the same rules; a string without "://" is read from its
// authority on (user:pw@host:port/path).
func URL(s string) string {
	start := 0
	if i := strings.Index(s, "://"); i >= 0 {
		start = i + len("://")
	}
	rest := mask(s[start:])
	if rest == s[start:] {
		return s
	}
	return s[:start] + rest
}

// URLs returns text with URL applied to every URL in it (each
// "scheme://" to the next space, tab, quote, angle bracket, backquote or
// line end).
func URLs(text string) string {
	if !strings.Contains(text, "://") {
		return text
	}
	var b strings.Builder
	b.Grow(len(text))
	for {
		i := strings.Index(text, "://")
		if i < 0 {
			b.WriteString(text)
			return b.String()
		}
		b.WriteString(text[:i+3])
		text = text[i+3:]
		end := strings.IndexAny(text, " \t\r\n\"'<>`")
		if end < 0 {
			end = len(text)
		}
		b.WriteString(mask(text[:end]))
		text = text[end:]
	}
}

// mask applies URL's rules to what follows "://": authority, path,
// query, fragment.
func mask(u string) string {
	if i := strings.IndexByte(u, '#'); i >= 0 {
		u = u[:i]
	}
	authEnd := strings.IndexAny(u, "/?")
	if authEnd < 0 {
		authEnd = len(u)
	}
	if at := strings.LastIndexByte(u[:authEnd], '@'); at >= 0 {
		u = Mask + u[at:]
	}
	q := strings.IndexByte(u, '?')
	if q < 0 || q == len(u)-1 {
		return u
	}
	var b strings.Builder
	b.Grow(len(u))
	b.WriteString(u[:q+1])
	for i, p := range strings.Split(u[q+1:], "&") {
		if i > 0 {
			b.WriteByte('&')
		}
		switch k, v, ok := strings.Cut(p, "="); {
		case !ok:
			if p != "" {
				b.WriteString(Mask)
			}
		case v == "":
			b.WriteString(p)
		default:
			b.WriteString(k)
			b.WriteString("=" + Mask)
		}
	}
	return b.String()
}

// Unsafe reports whether Chars replaces or removes r: a control character
// (C0 — newline and tab included —, DEL, C1), a line or paragraph
// separator, or a character that reorders or hides the text after it
// (IsBidi).
func Unsafe(r rune) bool {
	return r < 0x20 || (r >= 0x7f && r <= 0x9f) || r == 0x2028 || r == 0x2029 || IsBidi(r)
}

// IsBidi reports whether r is an invisible bidirectional formatting
// character: the embeddings and overrides U+202A–U+202E (U+202E,
// RIGHT-TO-LEFT OVERRIDE, shows "exe.txt" for "txt.exe"), the isolates
// U+2066–U+2069 and the marks U+200E, U+200F and U+061C.
func IsBidi(r rune) bool {
	return (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069) || r == 0x200e || r == 0x200f || r == 0x061c
}

// Chars returns s fit to be a label value or to be shown in one line:
// every control character, line or paragraph separator and byte of
// invalid UTF-8 becomes a space (so that words a newline separated stay
// apart), and every bidirectional formatting character (IsBidi) is
// removed. A string that needs none of it is returned as it is, without
// allocating.
func Chars(s string) string {
	i := 0
	for i < len(s) {
		if s[i]-0x20 < 0x5f { // printable ASCII, the common case
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if Unsafe(r) || (r == utf8.RuneError && n <= 1) {
			break
		}
		i += n
	}
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	b.WriteString(s[:i])
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case IsBidi(r):
		case Unsafe(r), r == utf8.RuneError && n <= 1:
			b.WriteByte(' ')
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}
