// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package httpclient

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	conntrack "github.com/mwitkow/go-conntrack"
	commoncfg "github.com/prometheus/common/config"
)

// HTTP/2 without TLS (h2c) and connection counting.
//
// prometheus/common builds the innermost *http.Transport itself and has
// no way to speak h2c: with enable_http2 its transport offers HTTP/1.1
// and HTTP/2, and net/http speaks HTTP/2 to an http:// URL only when the
// transport's Protocols hold UnencryptedHTTP2 and not HTTP1 (prior
// knowledge: no Upgrade dance). So for Options.H2C the transport is
// built here, with the settings prometheus/common gives its own (the
// conntrack dialer with the client's name, the pool sizes, no
// compression, the idle timeout, the TLS handshake and 100-continue
// timeouts, HTTP/2's ping timeout), and wrapped in prometheus/common's
// exported round trippers in the order it uses: authorization (or the
// old bearer_token), basic_auth, http_headers. OAuth2 goes on top in New
// as for every client. What prometheus/common adds besides is left out
// on purpose: the proxy (config validation refuses a proxy for h2c),
// secret references (no secret manager: refused too), the reloading TLS
// round tripper (TLS matters to an h2c client only for a same-host
// redirect to https, which then speaks HTTP/2 by ALPN with the TLS
// settings read once), and the stripping of http_headers on cross-host
// redirects (Policy refuses every cross-host redirect before it is
// sent). TestH2CSendsWhatHTTP1Sends guards the two paths against
// drifting apart.

// Conns counts a client's open connections: each successful dial adds
// one, its Close (by the transport, or by the server through a failed
// read) takes it away once.
type Conns struct{ n atomic.Int64 }

// Open is the number of connections open now.
func (c *Conns) Open() int64 {
	if c == nil {
		return 0
	}
	return c.n.Load()
}

// dial returns a dial function that counts the connections it opens in
// c (nil: no counting) around next; with sniff, each connection also
// notes what its server sent first (AnsweredHTTP1), even uncounted.
func (c *Conns) dial(next func(ctx context.Context, network, addr string) (net.Conn, error), sniff bool) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := next(ctx, network, addr)
		if err != nil || (c == nil && !sniff) {
			return conn, err
		}
		if c != nil {
			c.n.Add(1)
		}
		return &countedConn{Conn: conn, c: c, sniff: sniff}, nil
	}
}

// pinDial returns next, or with addr set a dial function that connects
// to addr whatever address it is asked for (Options.DialAddress).
func pinDial(next func(ctx context.Context, network, addr string) (net.Conn, error), addr string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	if addr == "" {
		return next
	}
	return func(ctx context.Context, network, _ string) (net.Conn, error) { return next(ctx, network, addr) }
}

type countedConn struct {
	net.Conn
	c     *Conns // nil: not counted
	once  sync.Once
	sniff bool
	first atomic.Int32 // what the first bytes read were: 0 none yet, firstHTTP1, firstOther
}

const (
	firstHTTP1 = 1 // "HTTP/": an HTTP/1.x answer
	firstOther = 2 // anything else (an HTTP/2 server's SETTINGS)
)

func (cc *countedConn) Read(b []byte) (int, error) {
	n, err := cc.Conn.Read(b)
	if cc.sniff && n > 0 && cc.first.Load() == 0 {
		kind := int32(firstOther)
		if m := min(n, 5); string(b[:m]) == "HTTP/"[:m] {
			kind = firstHTTP1
		}
		cc.first.CompareAndSwap(0, kind)
	}
	return n, err
}

func (cc *countedConn) Close() error {
	if cc.c != nil {
		cc.once.Do(func() { cc.c.n.Add(-1) })
	}
	return cc.Conn.Close()
}

// SpokeFirst reports, for a connection of an H2C client (the Conn of
// httptrace's GotConn), whether its server sent anything yet (known) and
// whether that was an HTTP/1.x answer (http1) rather than HTTP/2 frames.
// Connections of other clients are unknown.
func SpokeFirst(conn net.Conn) (known, http1 bool) {
	cc, ok := conn.(*countedConn)
	if !ok || !cc.sniff {
		return false, false
	}
	switch cc.first.Load() {
	case firstHTTP1:
		return true, true
	case firstOther:
		return true, false
	}
	return false, false
}

// defaultIdleConnTimeout is prometheus/common's default.
const defaultIdleConnTimeout = 5 * time.Minute

// newH2CRoundTripper is the round tripper of cfg (OAuth2 excepted) over
// a transport that speaks h2c to http:// URLs and HTTP/2 by ALPN to
// https:// ones.
func newH2CRoundTripper(cfg commoncfg.HTTPClientConfig, name string, o Options) (http.RoundTripper, error) {
	if cfg.ProxyURL.URL != nil || cfg.ProxyFromEnvironment {
		return nil, errors.New("h2c (HTTP/2 with prior knowledge) cannot go through a proxy")
	}
	tlsConfig, err := commoncfg.NewTLSConfig(&cfg.TLSConfig)
	if err != nil {
		return nil, err
	}
	idle := o.IdleConnTimeout
	if idle <= 0 {
		idle = defaultIdleConnTimeout
	}
	// Outermost, so that httptrace's GotConn hands the wire client this
	// connection (SpokeFirst).
	dial := o.Conns.dial(pinDial(conntrack.NewDialContextFunc(
		conntrack.DialWithTracing(),
		conntrack.DialWithName(name),
	), o.DialAddress), true)
	tr := &http.Transport{
		MaxIdleConns:          20000,
		MaxIdleConnsPerHost:   1000,
		TLSClientConfig:       tlsConfig,
		DisableCompression:    true,
		IdleConnTimeout:       idle,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		DialContext:           dial,
		Protocols:             new(http.Protocols),
		HTTP2:                 &http.HTTP2Config{SendPingTimeout: time.Minute},
	}
	tr.Protocols.SetUnencryptedHTTP2(true)
	tr.Protocols.SetHTTP2(true)
	var rt http.RoundTripper = tr
	if a := cfg.Authorization; a != nil {
		s, err := commonSecret(a.Credentials, a.CredentialsFile, a.CredentialsRef)
		if err != nil {
			return nil, fmt.Errorf("unable to use credentials: %w", err)
		}
		rt = commoncfg.NewAuthorizationCredentialsRoundTripper(a.Type, s, rt)
	}
	if cfg.BearerToken != "" || cfg.BearerTokenFile != "" {
		s, _ := commonSecret(cfg.BearerToken, cfg.BearerTokenFile, "")
		rt = commoncfg.NewAuthorizationCredentialsRoundTripper("Bearer", s, rt)
	}
	if b := cfg.BasicAuth; b != nil {
		user, err := commonSecret(commoncfg.Secret(b.Username), b.UsernameFile, b.UsernameRef)
		if err != nil {
			return nil, fmt.Errorf("unable to use username: %w", err)
		}
		pass, err := commonSecret(b.Password, b.PasswordFile, b.PasswordRef)
		if err != nil {
			return nil, fmt.Errorf("unable to use password: %w", err)
		}
		rt = commoncfg.NewBasicAuthRoundTripper(user, pass, rt)
	}
	if cfg.HTTPHeaders != nil {
		rt = commoncfg.NewHeadersRoundTripper(cfg.HTTPHeaders, rt)
	}
	return rt, nil
}

// commonSecret is prometheus/common's choice of a secret: the inline value,
// else the file (read at each request), else nothing; a reference needs
// a secret manager, which llmprobe has not.
func commonSecret(text commoncfg.Secret, file, ref string) (commoncfg.SecretReader, error) {
	switch {
	case text != "":
		return commoncfg.NewInlineSecret(string(text)), nil
	case file != "":
		return commoncfg.NewFileSecret(file), nil
	case ref != "":
		return nil, errors.New("cannot use secret ref without manager")
	}
	return nil, nil
}
