// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package wire

import (
	"net/http"
	"time"

	commoncfg "github.com/prometheus/common/config"

	"github.com/llmprobe/llmprobe/internal/httpclient"
)

// HTTP clients for targets (and for the servers llmprobe asks about them:
// /tokenize, Prometheus for workload_from) come from internal/httpclient,
// as every client of the binary does: prometheus/common clients (auth,
// TLS, proxy, headers from http_client_config) with one redirect policy,
// an OAuth2 token client that keeps to it, and:
//
//   - Redirects. A redirect to another host is always refused, before
//     anything is sent to it (error type redirect_cross_host). A redirect
//     to the same host (same scheme and host:port, or http to https on the
//     same host name) is followed only with follow_redirects: true
//     (llmprobe's default is false: error type redirect); more than 10 is
//     redirect_loop.
//   - OAuth2. A failure to get a token (the token endpoint refused,
//     redirected, could not be reached) is connect_error "oauth2": the
//     request never left.
//   - Idle connections are closed after the target's idle_conn_timeout,
//     below the keep-alive timeout of common servers, so that a request
//     rarely lands on a connection the server has just closed (see the
//     client's retry for when it does).

// ErrorTypeOAuth2 is the error type (outcome connect_error) of a request
// for which no OAuth2 access token could be had.
const ErrorTypeOAuth2 = "oauth2"

// NewHTTPClient returns the HTTP client for one target's (or one
// auxiliary server's) http_client_config. name labels its connections.
func NewHTTPClient(cfg commoncfg.HTTPClientConfig, name string, idleTimeout time.Duration) (*http.Client, error) {
	return NewTargetHTTPClient(cfg, name, HTTPOptions{IdleTimeout: idleTimeout})
}

// HTTPOptions are a target's transport settings besides its
// http_client_config.
type HTTPOptions struct {
	// IdleTimeout closes idle connections (idle_conn_timeout).
	IdleTimeout time.Duration
	// H2C speaks HTTP/2 with prior knowledge to http:// URLs
	// (http_version "2"); over TLS, cfg.EnableHTTP2 decides.
	H2C bool
	// Conns, when set, counts the open connections.
	Conns *httpclient.Conns
	// DialAddress, when set, is where every connection goes (a
	// discovered replica; httpclient.Options.DialAddress).
	DialAddress string
}

// NewTargetHTTPClient is NewHTTPClient with a target's transport
// settings.
func NewTargetHTTPClient(cfg commoncfg.HTTPClientConfig, name string, o HTTPOptions) (*http.Client, error) {
	return httpclient.New(cfg, name, httpclient.Options{IdleConnTimeout: o.IdleTimeout, H2C: o.H2C, Conns: o.Conns, DialAddress: o.DialAddress})
}
