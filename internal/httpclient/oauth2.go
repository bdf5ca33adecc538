// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package httpclient

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
	commoncfg "github.com/prometheus/common/config"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/llmprobe/llmprobe/internal/scrub"
)

// OAuth2.
//
// prometheus/common's OAuth2 round tripper fetches tokens with an
// http.Client of its own that follows every redirect: a token endpoint
// answering 307 gets the form body (client_secret) re-sent to any host,
// and to another port of the same host the Authorization: Basic header
// too. This round tripper does what prometheus/common's does (client
// credentials or the JWT bearer grant, golang.org/x/oauth2's token
// sources, the secret's file read again on each request and the token
// source rebuilt when it changes) with a token client built by New:
// TLS and proxy from the oauth2 block, the target's redirect policy.
//
// It also waits for a token no longer than the request's context (the
// token sources take none), with one fetch in flight at a time.

const (
	grantTypeJWTBearer = "urn:ietf:params:oauth:grant-type:jwt-bearer"
	tokenTimeout       = 30 * time.Second // bounds one token request
)

// TokenError is a failure to get an OAuth2 access token: the token
// endpoint refused, redirected or could not be reached, or the client
// secret could not be read. Nothing was sent to the target.
type TokenError struct {
	Err      error
	TokenURL string
	// secret is the client secret (or key) the request was made with: a
	// token endpoint's answer, which golang.org/x/oauth2 quotes in its
	// error, may echo it, plain or form-encoded.
	secret string
}

func (e *TokenError) Error() string {
	msg := strings.TrimPrefix(e.Err.Error(), "oauth2: ")
	if e.TokenURL != "" {
		msg = strings.ReplaceAll(msg, e.TokenURL, scrub.URL(e.TokenURL))
	}
	if e.secret != "" {
		for _, s := range []string{e.secret, url.QueryEscape(e.secret), url.PathEscape(e.secret)} {
			msg = strings.ReplaceAll(msg, s, "<secret>")
		}
	}
	return "OAuth2 token request failed: " + msg
}

func (e *TokenError) Unwrap() error { return e.Err }

type oauth2RT struct {
	cfg    *commoncfg.OAuth2
	follow bool
	name   string
	next   http.RoundTripper
	secret commoncfg.SecretReader
	fixed  bool   // the secret never changes (inline): read once
	static string // the fixed secret

	mu     sync.Mutex
	last   string             // the secret src was built with
	src    oauth2.TokenSource // nil until the first request
	client *http.Client       // src's token client
	tok    *oauth2.Token      // the last token fetched
	fetch  *tokenFetch        // the fetch in flight, if any
}

type tokenFetch struct {
	done chan struct{}
	tok  *oauth2.Token
	err  error
}

func newOAuth2(o *commoncfg.OAuth2, follow bool, name string, next http.RoundTripper) (http.RoundTripper, error) {
	var (
		secret commoncfg.SecretReader
		err    error
	)
	if o.GrantType == grantTypeJWTBearer {
		secret, err = secretOf("client_certificate_key", o.ClientCertificateKey, o.ClientCertificateKeyFile, o.ClientCertificateKeyRef)
	} else {
		secret, err = secretOf("client_secret", o.ClientSecret, o.ClientSecretFile, o.ClientSecretRef)
	}
	if err != nil {
		return nil, err
	}
	rt := &oauth2RT{cfg: o, follow: follow, name: name, next: next, secret: secret, fixed: secret.Immutable()}
	if rt.fixed {
		if rt.static, err = secret.Fetch(context.Background()); err != nil {
			return nil, err
		}
	}
	return rt, nil
}

func secretOf(key string, s commoncfg.Secret, file, ref string) (commoncfg.SecretReader, error) {
	switch {
	case ref != "":
		return nil, fmt.Errorf("oauth2 %s_ref needs a secret manager, which llmprobe does not have: use %s or %s_file", key, key, key)
	case file != "":
		return commoncfg.NewFileSecret(file), nil
	}
	return commoncfg.NewInlineSecret(string(s)), nil
}

func (rt *oauth2RT) RoundTrip(req *http.Request) (*http.Response, error) {
	tok, secret, err := rt.token(req)
	if err != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, &TokenError{Err: err, TokenURL: rt.cfg.TokenURL, secret: secret}
	}
	r2 := req.Clone(req.Context())
	tok.SetAuthHeader(r2)
	return rt.next.RoundTrip(r2)
}

// token returns a valid token, fetching one when there is none, and the
// secret it was fetched with.
func (rt *oauth2RT) token(req *http.Request) (*oauth2.Token, string, error) {
	ctx := req.Context()
	secret := rt.static
	if !rt.fixed {
		s, err := rt.secret.Fetch(ctx)
		if err != nil {
			return nil, "", fmt.Errorf("reading the client secret: %w", err)
		}
		secret = s
	}
	rt.mu.Lock()
	if rt.src == nil || (!rt.fixed && secret != rt.last) {
		if err := rt.rebuild(req.UserAgent(), secret); err != nil {
			rt.mu.Unlock()
			return nil, secret, err
		}
	}
	if tok := rt.tok; tok.Valid() {
		rt.mu.Unlock()
		return tok, secret, nil
	}
	f := rt.fetch
	if f == nil {
		f = &tokenFetch{done: make(chan struct{})}
		rt.fetch = f
		src := rt.src
		go func() {
			f.tok, f.err = src.Token()
			rt.mu.Lock()
			if rt.fetch == f {
				rt.fetch = nil
				if f.err == nil {
					rt.tok = f.tok
				}
			}
			rt.mu.Unlock()
			close(f.done)
		}()
	}
	rt.mu.Unlock()
	select {
	case <-f.done:
		return f.tok, secret, f.err
	case <-ctx.Done():
		return nil, secret, ctx.Err()
	}
}

// rebuild makes the token source for secret (rt.mu held).
func (rt *oauth2RT) rebuild(userAgent, secret string) error {
	o := rt.cfg
	hc := commoncfg.HTTPClientConfig{TLSConfig: o.TLSConfig, ProxyConfig: o.ProxyConfig, FollowRedirects: rt.follow}
	var wrap func(http.RoundTripper) http.RoundTripper
	if userAgent != "" {
		wrap = func(t http.RoundTripper) http.RoundTripper { return commoncfg.NewUserAgentRoundTripper(userAgent, t) }
	}
	client, err := New(hc, rt.name+"_oauth2", Options{IdleConnTimeout: 10 * time.Second, Timeout: tokenTimeout, Wrap: wrap})
	if err != nil {
		return err
	}
	ctx := context.WithValue(context.Background(), oauth2.HTTPClient, client)
	params := url.Values{}
	for k, v := range o.EndpointParams {
		params.Set(k, v)
	}
	var src oauth2.TokenSource
	if o.GrantType == grantTypeJWTBearer {
		sig := jwt.SigningMethodRS256
		switch o.SignatureAlgorithm {
		case jwt.SigningMethodRS384.Name:
			sig = jwt.SigningMethodRS384
		case jwt.SigningMethodRS512.Name:
			sig = jwt.SigningMethodRS512
		}
		iss := o.Iss
		if iss == "" {
			iss = o.ClientID
		}
		src = (&commoncfg.JwtGrantTypeConfig{
			PrivateKey: []byte(secret), PrivateKeyID: o.ClientCertificateKeyID, Scopes: o.Scopes,
			TokenURL: o.TokenURL, SigningAlgorithm: sig, Iss: iss, Subject: o.ClientID,
			Audience: o.Audience, PrivateClaims: o.Claims, EndpointParams: params,
		}).TokenSource(ctx)
	} else {
		src = (&clientcredentials.Config{
			ClientID: o.ClientID, ClientSecret: secret, Scopes: o.Scopes,
			TokenURL: o.TokenURL, EndpointParams: params,
		}).TokenSource(ctx)
	}
	if rt.client != nil {
		rt.client.CloseIdleConnections()
	}
	rt.client, rt.src, rt.last, rt.tok, rt.fetch = client, src, secret, nil, nil
	return nil
}

// CloseIdleConnections closes the idle connections of the token client
// and of the transport below.
func (rt *oauth2RT) CloseIdleConnections() {
	rt.mu.Lock()
	c := rt.client
	rt.mu.Unlock()
	if c != nil {
		c.CloseIdleConnections()
	}
	if ci, ok := rt.next.(interface{ CloseIdleConnections() }); ok {
		ci.CloseIdleConnections()
	}
}

// IsTokenError reports whether err is (or wraps) a *TokenError.
func IsTokenError(err error) bool {
	var te *TokenError
	return errors.As(err, &te)
}
