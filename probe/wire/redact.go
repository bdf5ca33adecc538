// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package wire

import (
	"encoding/base64"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	commoncfg "github.com/prometheus/common/config"
)

// Secret scrubbing.
//
// Servers echo requests back: a 401 that quotes the request headers, a
// gateway's debug page, a validation error that repeats its input. Any such
// text reaches the status page, the debug log and the span's error
// attribute, so every string a server supplies passes through a Redactor
// first. It removes:
//
//   - every secret the target's http_client_config names: basic-auth
//     password, authorization credentials, bearer token, OAuth2 client
//     secret, TLS keys, http_headers values, secrets and files, proxy
//     connect headers, the user information and query values of proxy_url
//     and oauth2's token_url (files are re-read at most once per
//     redactorFileTTL, so a rotated secret is scrubbed too);
//   - the Authorization (and Proxy-Authorization) value the request
//     actually carried, captured by the connection trace: an OAuth2 access
//     token is known only then;
//   - each of these in its common encodings: as is, base64 (standard and
//     URL alphabets, padded or not), URL-escaped, basic auth's
//     base64("user:password"), and the credential after an auth scheme;
//   - a trailing prefix of any of them (>= redactMinPartial bytes), which is
//     what is left of a secret when the server's text was cut at a read or
//     length limit.
//
// Secrets are replaced by "[secret]". Declared secrets are scrubbed at
// any length; plain http_headers values from redactMinHeader bytes on, so
// that a header such as "X-Debug: 1" does not shred every message.
//
// The sets of forms are built once (per file refresh, per distinct
// Authorization value) and kept sorted longest first, so that scrubbing the
// short strings of a successful response (its id and model) costs a few
// substring searches and allocates nothing.

const (
	redactMark       = "[secret]"
	redactMinPartial = 4
	redactMinHeader  = 4
	redactorFileTTL  = 5 * time.Second
)

// Redactor scrubs the secrets of one target's HTTP configuration from
// server-supplied text. A nil *Redactor scrubs only what a request
// carried. It is safe for concurrent use.
type Redactor struct {
	static []string // declared inline secrets, in every form
	files  []string // files holding secrets

	mu   sync.Mutex // serialises refreshes of base
	base atomic.Pointer[formSet]
	auth atomic.Pointer[authSet] // the last request's set, reused while its Authorization is the same
}

// formSet is an immutable set of forms, longest first.
type formSet struct {
	forms  []string
	readAt time.Time
}

// authSet is a formSet extended with the forms of captured header values.
type authSet struct {
	base  *formSet
	auth  [2]string
	forms []string
}

// NewRedactor collects the secrets an HTTP client configuration declares.
func NewRedactor(cfg commoncfg.HTTPClientConfig) *Redactor {
	r := &Redactor{}
	add := func(s commoncfg.Secret) {
		if s != "" {
			r.static = appendForms(r.static, string(s))
		}
	}
	file := func(f string) {
		if f != "" {
			r.files = append(r.files, f)
		}
	}
	if a := cfg.BasicAuth; a != nil {
		add(a.Password)
		file(a.PasswordFile)
		if a.Password != "" {
			r.static = appendEncoded(r.static, a.Username+":"+string(a.Password))
		}
	}
	if a := cfg.Authorization; a != nil {
		add(a.Credentials)
		file(a.CredentialsFile)
	}
	add(cfg.BearerToken)
	file(cfg.BearerTokenFile)
	if o := cfg.OAuth2; o != nil {
		add(o.ClientSecret)
		file(o.ClientSecretFile)
		add(o.ClientCertificateKey)
		file(o.ClientCertificateKeyFile)
		add(o.TLSConfig.Key)
		for _, vs := range o.ProxyConnectHeader {
			for _, v := range vs {
				add(v)
			}
		}
	}
	add(cfg.TLSConfig.Key)
	// A URL's user information and query values: a server may quote the
	// URL it was asked at (a token endpoint's error, a proxy's page).
	urlSecrets := func(u *url.URL) {
		if u == nil {
			return
		}
		if pw, ok := u.User.Password(); ok {
			add(commoncfg.Secret(pw))
		}
		plain := []string{u.User.Username()}
		for _, vs := range u.Query() {
			plain = append(plain, vs...)
		}
		for _, v := range plain {
			if len(v) >= redactMinHeader {
				r.static = appendForms(r.static, v)
			}
		}
	}
	urlSecrets(cfg.ProxyURL.URL)
	if o := cfg.OAuth2; o != nil {
		u, _ := url.Parse(o.TokenURL)
		urlSecrets(u)
		urlSecrets(o.ProxyURL.URL)
	}
	for _, vs := range cfg.ProxyConnectHeader {
		for _, v := range vs {
			add(v)
		}
	}
	if h := cfg.HTTPHeaders; h != nil {
		for _, hv := range h.Headers {
			for _, v := range hv.Values {
				// Plain values are not declared secret, but API keys often
				// end up there.
				if len(v) >= redactMinHeader {
					r.static = appendForms(r.static, v)
				}
			}
			for _, v := range hv.Secrets {
				add(v)
			}
			for _, f := range hv.Files {
				file(f)
			}
		}
	}
	r.static = sortForms(r.static)
	r.base.Store(&formSet{forms: r.static})
	return r
}

// baseSet returns the declared secrets and the files' current contents.
func (r *Redactor) baseSet() *formSet {
	set := r.base.Load()
	if len(r.files) == 0 || time.Since(set.readAt) < redactorFileTTL {
		return set
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if set = r.base.Load(); time.Since(set.readAt) < redactorFileTTL {
		return set
	}
	forms := slices.Clone(r.static)
	for _, f := range r.files {
		if b, err := os.ReadFile(f); err == nil {
			if s := strings.TrimSpace(string(b)); s != "" {
				forms = appendForms(forms, s)
			}
			if s := string(b); s != "" {
				forms = appendForms(forms, s)
			}
		}
	}
	set = &formSet{forms: sortForms(forms), readAt: time.Now()}
	r.base.Store(set)
	return set
}

// requestSet returns the forms to scrub from what the server sent for a
// request that carried the given Authorization / Proxy-Authorization
// values (empty when none).
func (r *Redactor) requestSet(auth [2]string) []string {
	var base *formSet
	if r != nil {
		base = r.baseSet()
	}
	if auth == ([2]string{}) {
		if base == nil {
			return nil
		}
		return base.forms
	}
	if r != nil {
		if c := r.auth.Load(); c != nil && c.base == base && c.auth == auth {
			return c.forms
		}
	}
	var forms []string
	if base != nil {
		forms = slices.Clone(base.forms)
	}
	for _, v := range auth {
		forms = appendAuthForms(forms, v)
	}
	forms = sortForms(forms)
	if r != nil {
		r.auth.Store(&authSet{base: base, auth: auth, forms: forms})
	}
	return forms
}

// Scrub returns s without any of the redactor's secrets (declared or from
// files), a cut one at its end included: for what servers say in logs
// (calibration, refits).
func (r *Redactor) Scrub(s string) string {
	if r == nil || s == "" {
		return s
	}
	return scrubSecrets(s, r.baseSet().forms, true)
}

// scrubSecrets removes every form in forms (sorted longest first, so that
// a secret containing another is removed whole) from s and, with tail, a
// beginning of one at the end of s (before the ellipsis truncate adds).
func scrubSecrets(s string, forms []string, tail bool) string {
	if s == "" {
		return s
	}
	for _, f := range forms {
		if strings.Contains(s, f) {
			s = strings.ReplaceAll(s, f, redactMark)
		}
	}
	if !tail {
		return s
	}
	s, ellipsis := strings.CutSuffix(s, "…")
	for _, f := range forms {
		for k := min(len(f)-1, len(s)); k >= redactMinPartial; k-- {
			if strings.HasSuffix(s, f[:k]) {
				s = s[:len(s)-k] + redactMark
				break
			}
		}
	}
	if ellipsis {
		s += "…"
	}
	return s
}

// scrubCut is the one way server-supplied text is shortened: secrets are
// scrubbed first, whole, before the cut could leave a piece of one that
// no longer matches; then s is cut to at most n bytes on a rune boundary
// (an ellipsis marks the cut) and a beginning of a secret ending at the cut
// (redactMinPartial bytes or more) is scrubbed too. Text that goes on
// after the cut (a quoted header) is therefore safe: the scrub of the
// whole message later looks for cut secrets only at its end.
func scrubCut(s string, n int, forms []string) string {
	s = scrubSecrets(s, forms, true)
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return scrubSecrets(s+"…", forms, true)
}

// appendForms appends a secret and its encodings.
func appendForms(dst []string, s string) []string {
	dst = append(dst, s)
	if q := url.QueryEscape(s); q != s {
		dst = append(dst, q)
	}
	return appendEncoded(dst, s)
}

// appendEncoded appends the base64 forms of s.
func appendEncoded(dst []string, s string) []string {
	b := []byte(s)
	for _, enc := range [...]*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
		dst = append(dst, enc.EncodeToString(b))
	}
	return dst
}

// appendAuthForms appends the forms of an Authorization value: the value,
// the credential after the scheme and, for basic auth, the decoded
// user:password and the password.
func appendAuthForms(dst []string, v string) []string {
	if len(v) < redactMinHeader {
		return dst
	}
	dst = appendForms(dst, v)
	scheme, cred, ok := strings.Cut(v, " ")
	if !ok || len(cred) < redactMinHeader {
		return dst
	}
	dst = appendForms(dst, cred)
	if strings.EqualFold(scheme, "basic") {
		if dec, err := base64.StdEncoding.DecodeString(cred); err == nil {
			dst = append(dst, string(dec))
			if _, pass, ok := strings.Cut(string(dec), ":"); ok && pass != "" {
				dst = appendForms(dst, pass)
			}
		}
	}
	return dst
}

// sortForms dedupes forms and sorts them longest first.
func sortForms(forms []string) []string {
	forms = slices.DeleteFunc(forms, func(s string) bool { return s == "" })
	slices.Sort(forms)
	forms = slices.Compact(forms)
	slices.SortStableFunc(forms, func(a, b string) int { return len(b) - len(a) })
	return forms
}

// authHeader reports which captured slot a request header fills: 0 for
// Authorization, 1 for Proxy-Authorization, -1 for any other (HTTP/2
// writes names in lower case).
func authHeader(key string) int {
	switch {
	case strings.EqualFold(key, "Authorization"):
		return 0
	case strings.EqualFold(key, "Proxy-Authorization"):
		return 1
	}
	return -1
}

// Prompt echoes.
//
// A server's error text may quote part of the prompt: pydantic's 'input',
// a context-length error that repeats the start of the message, a proxy
// that logs the body. redactEchoes finds every stretch of at least
// 2·echoBlock−1 bytes that the message shares with a prompt text, in one
// pass over each text (a rolling hash of echoBlock-byte windows against
// the message's aligned blocks), and replaces it.

const (
	echoBlock = 12
	echoMark  = "[prompt redacted]"
	echoBase  = 1099511628211 // FNV-1a's 64-bit prime, as a polynomial base
)

// redactEchoes replaces the parts of msg that appear in any of texts.
func redactEchoes(msg string, texts ...string) string {
	if len(msg) < 2*echoBlock-1 {
		return msg
	}
	blocks := map[uint64][]int{}
	for i := 0; i+echoBlock <= len(msg); i += echoBlock {
		h := blockHash(msg[i : i+echoBlock])
		blocks[h] = append(blocks[h], i)
	}
	var spans [][2]int // [start, end) in msg
	covered := make([]bool, len(msg)/echoBlock+1)
	var pow uint64 = 1
	for range echoBlock - 1 {
		pow *= echoBase
	}
	for _, text := range texts {
		if len(text) < echoBlock {
			continue
		}
		h := blockHash(text[:echoBlock])
		for j := 0; ; j++ {
			for _, i := range blocks[h] {
				if covered[i/echoBlock] || msg[i:i+echoBlock] != text[j:j+echoBlock] {
					continue
				}
				l, r := 0, 0
				for i-l > 0 && j-l > 0 && msg[i-l-1] == text[j-l-1] {
					l++
				}
				for i+echoBlock+r < len(msg) && j+echoBlock+r < len(text) && msg[i+echoBlock+r] == text[j+echoBlock+r] {
					r++
				}
				sp := [2]int{i - l, i + echoBlock + r}
				spans = append(spans, sp)
				// A block inside a found stretch is not matched again,
				// which keeps the pass linear.
				for b := (sp[0] + echoBlock - 1) / echoBlock; b*echoBlock+echoBlock <= sp[1]; b++ {
					covered[b] = true
				}
			}
			if j+echoBlock >= len(text) {
				break
			}
			h = (h-uint64(text[j])*pow)*echoBase + uint64(text[j+echoBlock])
		}
	}
	if len(spans) == 0 {
		return msg
	}
	slices.SortFunc(spans, func(a, b [2]int) int { return a[0] - b[0] })
	merged := spans[:1]
	for _, sp := range spans[1:] {
		if last := &merged[len(merged)-1]; sp[0] <= last[1] {
			last[1] = max(last[1], sp[1])
		} else {
			merged = append(merged, sp)
		}
	}
	var b strings.Builder
	at := 0
	for _, sp := range merged {
		b.WriteString(msg[at:sp[0]])
		b.WriteString(echoMark)
		at = sp[1]
	}
	b.WriteString(msg[at:])
	return b.String()
}

func blockHash(s string) uint64 {
	var h uint64
	for i := 0; i < len(s); i++ {
		h = h*echoBase + uint64(s[i])
	}
	return h
}
