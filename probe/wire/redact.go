// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package wire

import (
	"encoding/base64"
	"encoding/hex"
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
//     connect headers, the password (else the user name) and query values
//     of proxy_url and oauth2's token_url (files are re-read at most once per
//     redactorFileTTL, so a rotated secret is scrubbed too);
//   - the Authorization (and Proxy-Authorization) value the request
//     actually carried, captured by the connection trace: an OAuth2 access
//     token is known only then;
//   - each of these in its common encodings: as is, base64 (standard and
//     URL alphabets, padded or not, and — from redactMinEncoded bytes —
//     what the secret alone decides of its encoding inside a longer base64
//     text, at each of the 3 places of a group it can start at), hex,
//     URL-escaped (as a query value, as a path, every byte escaped), basic
//     auth's base64("user:password"), and the credential after an auth
//     scheme;
//   - in any letter case (ASCII): a server that upper-cases what it quotes,
//     or writes hex or percent escapes in capitals, shows no secret either;
//   - a trailing prefix of any of them (>= redactMinPartial bytes), which is
//     what is left of a secret when the server's text was cut at a read or
//     length limit.
//
// Secrets are replaced by "[secret]". Declared secrets are scrubbed at
// any length (one shorter than matchGram bytes only as it is written: in
// any letter case it would shred every message); plain http_headers
// values, a URL's query values and user name without a password from
// redactMinHeader bytes on, so that a header such as "X-Debug: 1" does not
// shred every message.
//
// The sets of forms are built once (per file refresh, per distinct
// Authorization value) into a matcher, which finds them all in one pass
// over a text whatever their number: scrubbing the short strings of a
// successful response (its id and model) allocates nothing, and the cost
// of a message grows with its length, not with the number of forms.

const (
	redactMark       = "[secret]"
	redactMinPartial = 4
	redactMinHeader  = 4
	redactMinEncoded = 8 // the shortest secret whose hex, percent and in-text base64 forms are scrubbed
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

// formSet is an immutable set of forms and their matcher.
type formSet struct {
	forms  []string
	m      *matcher
	readAt time.Time
}

// authSet is a formSet extended with the forms of captured header values.
type authSet struct {
	base *formSet
	auth [2]string
	m    *matcher
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
		var plain []string
		if pw, ok := u.User.Password(); ok {
			add(commoncfg.Secret(pw))
		} else {
			plain = append(plain, u.User.Username()) // https://TOKEN@host
		}
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
	r.base.Store(&formSet{forms: r.static, m: newMatcher(r.static)})
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
	forms = sortForms(forms)
	set = &formSet{forms: forms, m: newMatcher(forms), readAt: time.Now()}
	r.base.Store(set)
	return set
}

// requestSet returns the matcher of the forms to scrub from what the
// server sent for a request that carried the given Authorization /
// Proxy-Authorization values (empty when none); nil when there are none.
func (r *Redactor) requestSet(auth [2]string) *matcher {
	var base *formSet
	if r != nil {
		base = r.baseSet()
	}
	if auth == ([2]string{}) {
		if base == nil {
			return nil
		}
		return base.m
	}
	if r != nil {
		if c := r.auth.Load(); c != nil && c.base == base && c.auth == auth {
			return c.m
		}
	}
	var forms []string
	if base != nil {
		forms = slices.Clone(base.forms)
	}
	for _, v := range auth {
		forms = appendAuthForms(forms, v)
	}
	m := newMatcher(forms)
	if r != nil {
		r.auth.Store(&authSet{base: base, auth: auth, m: m})
	}
	return m
}

// Scrub returns s without any of the redactor's secrets (declared or from
// files), a cut one at its end included: for what servers say in logs
// (calibration, refits).
func (r *Redactor) Scrub(s string) string {
	if r == nil || s == "" {
		return s
	}
	return scrubSecrets(s, r.baseSet().m, true)
}

// scrubSecrets removes every form m matches from s and, with tail, a
// beginning of one at the end of s (before the ellipsis truncate adds).
func scrubSecrets(s string, m *matcher, tail bool) string {
	if m == nil || s == "" {
		return s
	}
	for _, f := range m.short {
		if strings.Contains(s, f) {
			s = strings.ReplaceAll(s, f, redactMark)
		}
	}
	s = m.replace(s)
	if tail {
		s = m.replaceTail(s)
	}
	return s
}

// matchGram is how many bytes of a form the matcher's filter reads: its
// shortest form (shorter ones are matched as they are, matcher.short),
// and no more than redactMinPartial, the shortest cut piece looked for.
const matchGram = 4

// matcher finds a set of forms in a text, ASCII letter case ignored, in
// one pass: at each place of the text, the lower-cased matchGram bytes
// that start there are looked up in a bit filter of the forms' first
// matchGram bytes, and only where it holds them are the forms that start
// so compared. Immutable once built.
type matcher struct {
	forms  []string           // lower-cased, deduplicated, longest first
	starts map[uint32][]int32 // a form's first matchGram bytes → its index in forms, longest first
	filter [1 << (filterBits - 6)]uint64
	maxLen int
	short  []string // forms shorter than matchGram, matched as they are
}

// filterBits is the log2 of the filter's size: 16384 bits (2 KiB), a few
// percent false hits for the hundreds of forms of a target's secrets.
const filterBits = 14

// lowerASCII maps each byte to its lower case (ASCII letters only).
var lowerASCII = func() (t [256]byte) {
	for i := range t {
		t[i] = byte(i)
		if 'A' <= i && i <= 'Z' {
			t[i] += 'a' - 'A'
		}
	}
	return t
}()

// newMatcher builds the matcher of forms (nil when there are none).
func newMatcher(forms []string) *matcher {
	m := &matcher{starts: map[uint32][]int32{}}
	var lower []string
	for _, f := range forms {
		if len(f) < matchGram {
			m.short = append(m.short, f)
			continue
		}
		b := []byte(f)
		for i, c := range b {
			b[i] = lowerASCII[c]
		}
		lower = append(lower, string(b))
	}
	m.forms, m.short = sortForms(lower), sortForms(m.short)
	if len(m.forms) == 0 && len(m.short) == 0 {
		return nil
	}
	for i, f := range m.forms {
		g := gram(f, 0)
		m.starts[g] = append(m.starts[g], int32(i))
		h := gramHash(g)
		m.filter[h>>6] |= 1 << (h & 63)
		m.maxLen = max(m.maxLen, len(f))
	}
	return m
}

// gram is the lower-cased matchGram bytes of s at i, as a number.
func gram(s string, i int) uint32 {
	return uint32(lowerASCII[s[i]])<<24 | uint32(lowerASCII[s[i+1]])<<16 | uint32(lowerASCII[s[i+2]])<<8 | uint32(lowerASCII[s[i+3]])
}

func gramHash(g uint32) uint32 { return (g * 0x9e3779b1) >> (32 - filterBits) }

// maybe reports whether a form may start with the bytes g stands for.
func (m *matcher) maybe(g uint32) bool {
	h := gramHash(g)
	return m.filter[h>>6]&(1<<(h&63)) != 0
}

// at returns the length of the longest form that s holds whole at i
// (with prefix: of which s from i on is a beginning, shorter than the
// form), or -1. g is gram(s, i), and maybe(g) holds.
func (m *matcher) at(s string, i int, g uint32, prefix bool) int {
	rest := s[i:]
	for _, fi := range m.starts[g] {
		f := m.forms[fi]
		switch {
		case !prefix && len(f) <= len(rest) && equalLower(rest[:len(f)], f):
			return len(f)
		case prefix && len(f) > len(rest) && equalLower(rest, f[:len(rest)]):
			return len(rest)
		}
	}
	return -1
}

// equalLower reports whether s, lower-cased, is f.
func equalLower(s, f string) bool {
	for i := 0; i < len(s); i++ {
		if lowerASCII[s[i]] != f[i] {
			return false
		}
	}
	return true
}

// replace replaces every stretch of s that forms cover (overlapping and
// adjacent ones merged) with redactMark.
func (m *matcher) replace(s string) string {
	if len(s) < matchGram || len(m.forms) == 0 {
		return s
	}
	var b strings.Builder
	at, from, to := 0, -1, -1 // s[:at] is written; [from, to) is the stretch found last
	g := gram(s, 0)
	for i := 0; ; i++ {
		if !m.maybe(g) {
			// the common case, checked inline
		} else if n := m.at(s, i, g, false); n > 0 {
			if from >= 0 && i <= to {
				to = max(to, i+n)
			} else {
				if from >= 0 {
					b.Grow(len(s))
					b.WriteString(s[at:from])
					b.WriteString(redactMark)
					at = to
				}
				from, to = i, i+n
			}
		}
		if i+matchGram >= len(s) {
			break
		}
		g = g<<8 | uint32(lowerASCII[s[i+matchGram]])
	}
	if from < 0 {
		return s
	}
	b.Grow(len(s) - at)
	b.WriteString(s[at:from])
	b.WriteString(redactMark)
	b.WriteString(s[to:])
	return b.String()
}

// replaceTail replaces the longest end of s (before an ellipsis) that is
// a beginning of a form, of redactMinPartial bytes or more.
func (m *matcher) replaceTail(s string) string {
	s, ellipsis := strings.CutSuffix(s, "…")
	for i := max(0, len(s)-m.maxLen+1); i+redactMinPartial <= len(s); i++ {
		if g := gram(s, i); m.maybe(g) && m.at(s, i, g, true) > 0 {
			s = s[:i] + redactMark
			break
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
func scrubCut(s string, n int, m *matcher) string {
	s = scrubSecrets(s, m, true)
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return scrubSecrets(s+"…", m, true)
}

// appendForms appends a secret and its encodings: URL-escaped (as a
// query value, as a path, every byte escaped), hex and base64.
func appendForms(dst []string, s string) []string {
	dst = append(dst, s, url.QueryEscape(s), url.PathEscape(s))
	if len(s) >= redactMinEncoded {
		var b strings.Builder
		for i := 0; i < len(s); i++ {
			b.WriteByte('%')
			b.WriteString(hex.EncodeToString([]byte{s[i]}))
		}
		dst = append(dst, b.String(), hex.EncodeToString([]byte(s)))
	}
	return appendEncoded(dst, s)
}

// appendEncoded appends the base64 forms of s: its encoding alone and,
// from redactMinEncoded bytes, the part of its encoding that s alone
// decides inside a longer text, at each of the 3 places of a 3-byte group
// it can start at (the characters that mix bits of s with those of the
// bytes around it are left out).
func appendEncoded(dst []string, s string) []string {
	b := []byte(s)
	for _, enc := range [...]*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
		dst = append(dst, enc.EncodeToString(b))
	}
	if len(s) < redactMinEncoded {
		return dst
	}
	for pad := range 3 {
		for _, enc := range [...]*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
			full := enc.EncodeToString(append(make([]byte, pad), b...))
			dst = append(dst, full[(8*pad+5)/6:8*(pad+len(b))/6])
		}
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
