// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

// Package httpclient builds every HTTP client llmprobe uses: the probe's
// clients for targets, /tokenize and workload_from's Prometheus, fit's
// Prometheus client, bench's server-metrics, GPU and health-check clients,
// and the OAuth2 token client inside any of them. They are
// prometheus/common clients (auth, TLS, proxy, headers from an
// http_client_config) with one redirect policy:
//
//   - A redirect to another host is always refused, before anything is
//     sent to it (RedirectError kind redirect_cross_host). prometheus/common
//     strips only Authorization, Cookie and Proxy-* on a cross-host
//     redirect, and net/http treats another port of the same host name as
//     the same host, so a key in http_headers, a basic-auth header or an
//     OAuth2 client secret in a 307's re-sent body would otherwise reach
//     whatever a server redirects to.
//   - A redirect to the same host (same scheme and host:port, or http to
//     https on the same host name) is followed only with follow_redirects:
//     true (RedirectError kind redirect otherwise); more than MaxRedirects
//     is redirect_loop.
//
// OAuth2's token requests go through a client built here too, with the
// same policy (prometheus/common builds its own token client, which
// follows any redirect): a failure to get a token is a *TokenError.
//
// A test (sites_test.go) fails when a client is built anywhere else in
// the binary.
//
// httpclient imports internal/scrub (what is shown of a URL) and no
// other llmprobe package; probe/wire wraps it for targets.
package httpclient

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	commoncfg "github.com/prometheus/common/config"

	"github.com/llmprobe/llmprobe/internal/scrub"
)

// MaxRedirects is the number of same-host redirects followed at most.
const MaxRedirects = 10

// Plain is the configuration of a client that no configuration file
// describes (bench's server-metrics, GPU and health-check clients, fit
// without --prometheus.config.file): prometheus/common's defaults
// (same-host redirects followed, HTTP/2) with the environment's proxy, as
// net/http's default client has.
var Plain = func() commoncfg.HTTPClientConfig {
	c := commoncfg.DefaultHTTPClientConfig
	c.ProxyFromEnvironment = true
	return c
}()

// Options adjust a client.
type Options struct {
	// IdleConnTimeout closes idle connections after it (0:
	// prometheus/common's default, 5m).
	IdleConnTimeout time.Duration
	// Timeout bounds each request, its body included (0: none).
	Timeout time.Duration
	// Wrap, when set, wraps the configured round tripper (a size limit).
	Wrap func(http.RoundTripper) http.RoundTripper
	// H2C speaks HTTP/2 with prior knowledge (h2c) to http:// URLs, and
	// HTTP/2 by ALPN (no HTTP/1.1) to https:// ones, over a transport
	// built here (h2c.go); otherwise prometheus/common's transport, whose
	// enable_http2 decides over TLS and which speaks HTTP/1.1 to http://.
	H2C bool
	// Conns, when set, counts the client's open connections.
	Conns *Conns
	// DialAddress, when set, is the host:port every connection goes to,
	// whatever the request URL's host, which stays the Host header and
	// the TLS server name: a discovered replica behind a service's name.
	// It cannot go with a proxy (refused).
	DialAddress string
}

// New returns the client for an http_client_config. name labels its
// connections.
func New(cfg commoncfg.HTTPClientConfig, name string, o Options) (*http.Client, error) {
	var opts []commoncfg.HTTPClientOption
	if o.IdleConnTimeout > 0 {
		opts = append(opts, commoncfg.WithIdleConnTimeout(o.IdleConnTimeout))
	}
	if o.DialAddress != "" && (cfg.ProxyURL.URL != nil || cfg.ProxyFromEnvironment) {
		return nil, errors.New("a discovered replica's address cannot be dialled through a proxy")
	}
	if o.Conns != nil || o.DialAddress != "" {
		opts = append(opts, commoncfg.WithDialContextFunc(o.Conns.dial(pinDial((&net.Dialer{}).DialContext, o.DialAddress), false)))
	}
	oauth := cfg.OAuth2
	cfg.OAuth2 = nil // added below, with a token client of our own
	var rt http.RoundTripper
	var err error
	if o.H2C {
		rt, err = newH2CRoundTripper(cfg, name, o)
	} else {
		rt, err = commoncfg.NewRoundTripperFromConfig(cfg, name, opts...)
	}
	if err != nil {
		return nil, err
	}
	if oauth != nil {
		if rt, err = newOAuth2(oauth, cfg.FollowRedirects, name, rt); err != nil {
			return nil, err
		}
	}
	if o.Wrap != nil {
		rt = o.Wrap(rt)
	}
	return FromTransport(rt, cfg.FollowRedirects, o.Timeout), nil
}

// FromTransport returns a client sending through rt with the redirect
// policy (follow: whether same-host redirects are followed), for a
// transport that no http_client_config describes (the probe's default
// client for a library user that gives none).
func FromTransport(rt http.RoundTripper, follow bool, timeout time.Duration) *http.Client {
	return &http.Client{Transport: rt, Timeout: timeout, CheckRedirect: Policy(follow)}
}

// RedirectError is why a redirect was not followed.
type RedirectError struct {
	Kind   string // redirect, redirect_cross_host, redirect_loop
	Status int    // the redirect response's status code
	To     string // the redirect's destination, masked (scrub.URL)
}

func (e *RedirectError) Error() string {
	switch e.Kind {
	case "redirect_cross_host":
		return fmt.Sprintf("HTTP %d redirect to another host (%s) refused: credentials and headers are never sent to another host", e.Status, e.To)
	case "redirect_loop":
		return fmt.Sprintf("HTTP %d: more than %d redirects (last to %s)", e.Status, MaxRedirects, e.To)
	}
	return fmt.Sprintf("HTTP %d redirect to %s not followed (follow_redirects is false)", e.Status, e.To)
}

// Policy is the CheckRedirect of every client.
func Policy(follow bool) func(*http.Request, []*http.Request) error {
	return func(req *http.Request, via []*http.Request) error {
		e := &RedirectError{To: scrub.URL(req.URL.String())}
		if req.Response != nil {
			e.Status = req.Response.StatusCode
		}
		switch {
		case !SameHost(via[0].URL, req.URL):
			e.Kind = "redirect_cross_host"
		case !follow:
			e.Kind = "redirect"
		case len(via) > MaxRedirects:
			e.Kind = "redirect_loop"
		default:
			return nil
		}
		return e
	}
}

// SameHost reports whether a redirect from a to b stays on the same
// server: same scheme and host:port, or an upgrade from http to https on
// the same host name (default ports).
func SameHost(a, b *url.URL) bool {
	if strings.EqualFold(a.Scheme, b.Scheme) {
		return strings.EqualFold(canonicalHostPort(a), canonicalHostPort(b))
	}
	return strings.EqualFold(a.Scheme, "http") && strings.EqualFold(b.Scheme, "https") &&
		strings.EqualFold(a.Hostname(), b.Hostname()) &&
		(a.Port() == "" || a.Port() == "80") && (b.Port() == "" || b.Port() == "443")
}

func canonicalHostPort(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = "80"
		if strings.EqualFold(u.Scheme, "https") {
			port = "443"
		}
	}
	return u.Hostname() + ":" + port
}
