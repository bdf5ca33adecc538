// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package wire

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"unicode"
)

// swapCase turns upper-case letters into lower case and back.
func swapCase(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsUpper(r) {
			return unicode.ToLower(r)
		}
		return unicode.ToUpper(r)
	}, s)
}

// percentAll escapes every byte of s (%73%6B...), as a URL encoder that
// escapes everything does.
func percentAll(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		fmt.Fprintf(&b, "%%%02X", s[i])
	}
	return b.String()
}

// blobPrefix is what a server base64-encodes before a quoted value:
// with 0, 1 or 2 bytes before it, the value starts at each of the 3
// places a byte can take in a base64 group.
const blobPrefix = "Authorization: "

// echoEncodings is every way the echoing server of
// TestEchoedSecretEncodingsAreScrubbed quotes a value v: its case
// changed, hex (both cases), percent-encoded whole or as a query value,
// and base64 (standard and URL alphabets, padded or not) of a longer
// text that holds it at each of the 3 alignments.
func echoEncodings(v string) map[string]string {
	m := map[string]string{
		"upper":   strings.ToUpper(v),
		"swapped": swapCase(v),
		"hex":     hex.EncodeToString([]byte(v)),
		"HEX":     strings.ToUpper(hex.EncodeToString([]byte(v))),
		"percent": percentAll(v),
		"query":   strings.ToLower(url.QueryEscape(v)),
	}
	for name, enc := range map[string]*base64.Encoding{"std": base64.StdEncoding, "url": base64.URLEncoding, "raw": base64.RawStdEncoding} {
		for pad := range 3 {
			m[fmt.Sprintf("base64 %s at %d", name, (pad+len(blobPrefix))%3)] = enc.EncodeToString([]byte(strings.Repeat("x", pad) + blobPrefix + v + " end"))
		}
	}
	return m
}

// base64Core is the part of base64(pad bytes + s + more) that s alone
// decides, whatever comes before and after it: what must not survive of
// an encoded secret.
func base64Core(s string, pad int, enc *base64.Encoding) string {
	full := enc.EncodeToString([]byte(strings.Repeat("\x00", pad) + s))
	return full[(8*pad+5)/6 : 8*(pad+len(s))/6]
}

// assertNoEncodedSecret fails t when s holds a recognisable piece of one
// of the hostile secrets in any of the encodings, in any letter case.
func assertNoEncodedSecret(t *testing.T, what, s string) {
	t.Helper()
	low := strings.ToLower(s)
	for _, sec := range []string{hostileBearer, hostileAPIKey} {
		pieces := []string{sec, hex.EncodeToString([]byte(sec)), percentAll(sec)}
		for pad := range 3 {
			for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
				pieces = append(pieces, base64Core(sec, pad, enc))
			}
		}
		for _, p := range pieces {
			p = strings.ToLower(p)
			for _, piece := range []string{p[:12], p[len(p)-12:]} {
				if strings.Contains(low, piece) {
					t.Errorf("%s shows %q of secret %q (as %q): %q", what, piece, sec, p, s)
				}
			}
		}
	}
}

// TestEchoedSecretEncodingsAreScrubbed: a server that quotes the
// request's credentials with their case changed, in hex, percent-encoded
// or inside base64 of a longer text — in an error body, an error event,
// the response id and model, its Server header and system_fingerprint —
// gets none of them into the result.
func TestEchoedSecretEncodingsAreScrubbed(t *testing.T) {
	for name := range echoEncodings("x") {
		for _, code := range []int{401, 200} {
			t.Run(fmt.Sprintf("%s %d", name, code), func(t *testing.T) {
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					io.Copy(io.Discard, r.Body)
					auth, key := r.Header.Get("Authorization"), r.Header.Get("X-Api-Key")
					_, cred, _ := strings.Cut(auth, " ")
					quoted := fmt.Sprintf("denied: authorization %s credential %s key %s", echoEncodings(auth)[name], echoEncodings(cred)[name], echoEncodings(key)[name])
					if code != 200 {
						w.Header().Set("Content-Type", "application/json")
						w.WriteHeader(code)
						fmt.Fprintf(w, `{"error":{"message":%s}}`, mustJSON(quoted))
						return
					}
					w.Header().Set("Content-Type", "text/event-stream")
					w.Header().Set("Server", echoEncodings(cred)[name])
					fmt.Fprintf(w, "data: {\"id\":%s,\"model\":%s,\"system_fingerprint\":%s,\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\n",
						mustJSON(echoEncodings(key)[name]), mustJSON(echoEncodings(cred)[name]), mustJSON(echoEncodings(key)[name]))
					fmt.Fprintf(w, "data: {\"error\":{\"message\":%s}}\n\n", mustJSON(quoted))
				}))
				defer srv.Close()
				c := hostileClient(t, srv.URL, hostileHTTPConfig(false))
				var res Result
				c.Do(context.Background(), hostileRequest("tell me a story about the sea", 8), &res)
				if res.Outcome == OutcomeSuccess || !strings.Contains(res.Error, "denied") {
					t.Fatalf("the echo did not come back as a failure: %+v", res)
				}
				for what, s := range map[string]string{"error": res.Error, "id": res.ResponseID, "model": res.ResponseModel,
					"server": res.Server, "fingerprint": res.SystemFingerprint, "finish reason": res.FinishReason} {
					assertNoEncodedSecret(t, what, s)
				}
			})
		}
	}
}

// TestRedactorScrubsEncodings: Redactor.Scrub (what refits and
// calibration log) knows the same encodings, and leaves alone what only
// looks like one.
func TestRedactorScrubsEncodings(t *testing.T) {
	r := NewRedactor(hostileHTTPConfig(false))
	for name, form := range echoEncodings(hostileAPIKey) {
		msg := "refused (" + form + ") at 12:00"
		got := r.Scrub(msg)
		assertNoEncodedSecret(t, name, got)
		if !strings.HasPrefix(got, "refused (") || !strings.HasSuffix(got, ") at 12:00") || !strings.Contains(got, redactMark) {
			t.Errorf("%s: scrubbed %q to %q", name, msg, got)
		}
	}
	for _, keep := range []string{
		"plain message, nothing secret",
		"SK-LIVE-BEARER is a prefix of no key here", // 14 bytes of a secret's start, not at the end
		hex.EncodeToString([]byte("an unrelated text, hex-encoded")),
		base64.StdEncoding.EncodeToString([]byte("an unrelated text, base64-encoded")),
	} {
		if got := r.Scrub(keep); got != keep {
			t.Errorf("Scrub(%q) = %q, want it unchanged", keep, got)
		}
	}
}
