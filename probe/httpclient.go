// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package probe

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	commoncfg "github.com/prometheus/common/config"
)

// HTTP clients for targets (and for the servers llmprobe asks about them:
// /tokenize, Prometheus for workload_from).
//
// They are prometheus/common clients (auth, TLS, proxy, headers from
// http_client_config) with two changes:
//
//   - Redirects. prometheus/common strips only Authorization, Cookie and
//     Proxy-* on a cross-host redirect, so a key in http_headers (X-Api-Key)
//     would reach whatever host a target redirects to, and the probe would
//     measure that host as a success. Here a redirect to another host is
//     always refused, before anything is sent to it (error type
//     redirect_cross_host). A redirect to the same host (same scheme and
//     host:port, or http to https on the same host name) is followed only
//     with follow_redirects: true (llmprobe's default is false: error type
//     redirect); more than maxRedirects is redirect_loop.
//   - Idle connections are closed after the target's idle_conn_timeout,
//     below the keep-alive timeout of common servers, so that a request
//     rarely lands on a connection the server has just closed (see the
//     client's retry for when it does).

const maxRedirects = 10

// NewHTTPClient returns the HTTP client for one target's (or one
// auxiliary server's) http_client_config. name labels its connections.
func NewHTTPClient(cfg commoncfg.HTTPClientConfig, name string, idleTimeout time.Duration) (*http.Client, error) {
	var opts []commoncfg.HTTPClientOption
	if idleTimeout > 0 {
		opts = append(opts, commoncfg.WithIdleConnTimeout(idleTimeout))
	}
	c, err := commoncfg.NewClientFromConfig(cfg, name, opts...)
	if err != nil {
		return nil, err
	}
	c.CheckRedirect = redirectPolicy(cfg.FollowRedirects)
	return c, nil
}

// RedirectError is why a redirect was not followed. The client reports it
// as outcome http_error with ErrorType Kind.
type RedirectError struct {
	Kind   string // redirect, redirect_cross_host, redirect_loop
	Status int    // the redirect response's status code
	To     string // the redirect's destination, without userinfo or query
}

func (e *RedirectError) Error() string {
	switch e.Kind {
	case "redirect_cross_host":
		return fmt.Sprintf("HTTP %d redirect to another host (%s) refused: credentials and headers are never sent to another host", e.Status, e.To)
	case "redirect_loop":
		return fmt.Sprintf("HTTP %d: more than %d redirects (last to %s)", e.Status, maxRedirects, e.To)
	}
	return fmt.Sprintf("HTTP %d redirect to %s not followed (follow_redirects is false)", e.Status, e.To)
}

func redirectPolicy(follow bool) func(*http.Request, []*http.Request) error {
	return func(req *http.Request, via []*http.Request) error {
		e := &RedirectError{To: redactURL(req.URL.String())}
		if req.Response != nil {
			e.Status = req.Response.StatusCode
		}
		switch {
		case !sameHost(via[0].URL, req.URL):
			e.Kind = "redirect_cross_host"
		case !follow:
			e.Kind = "redirect"
		case len(via) > maxRedirects:
			e.Kind = "redirect_loop"
		default:
			return nil
		}
		return e
	}
}

// sameHost reports whether a redirect from a to b stays on the same
// server: same scheme and host:port, or an upgrade from http to https on
// the same host name (default ports).
func sameHost(a, b *url.URL) bool {
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
