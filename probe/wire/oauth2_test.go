// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package wire

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmprobe/llmprobe/internal/redirecttest"

	commoncfg "github.com/prometheus/common/config"
)

const (
	oauthClientID     = "probe-client"
	oauthClientSecret = "oauth-client-secret-7a6b5c4d3e2f1009"
	oauthAccessToken  = "at-access-token-0f1e2d3c4b5a6978"
)

func oauthConfig(tokenURL string, follow bool) commoncfg.HTTPClientConfig {
	cfg := commoncfg.DefaultHTTPClientConfig
	cfg.FollowRedirects = follow
	cfg.OAuth2 = &commoncfg.OAuth2{ClientID: oauthClientID, ClientSecret: oauthClientSecret, TokenURL: tokenURL}
	return cfg
}

// TestOAuth2TokenRedirectIsRefused: a token endpoint that redirects
// elsewhere (another host, or another port of the same host) must not
// get the token client to send the client secret there, in the form body
// or as basic auth. The request fails before the target sees it, with
// the error type oauth2.
func TestOAuth2TokenRedirectIsRefused(t *testing.T) {
	other := redirecttest.NewCapture(t, `{"access_token":"stolen","token_type":"bearer","expires_in":3600}`)
	target := newHeaderRecorder(t)
	for _, host := range []string{"localhost", "127.0.0.1"} {
		for _, follow := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/follow=%v", host, follow), func(t *testing.T) {
				token := redirecttest.Redirector(t, other, host)
				hc := oauthConfig(token.URL+"/token", follow)
				c := hostileClient(t, target.URL, hc)
				before, beforeTarget := len(other.Requests()), len(target.requests())
				var res Result
				c.Do(context.Background(), hostileRequest("hello there", 4), &res)
				if got := other.Requests()[before:]; len(got) != 0 {
					t.Fatalf("the other server received %d requests: %q", len(got), got)
				}
				if n := len(target.requests()) - beforeTarget; n != 0 {
					t.Fatalf("the target received %d requests without a token", n)
				}
				if res.Outcome != OutcomeConnectError || res.ErrorType != ErrorTypeOAuth2 {
					t.Fatalf("outcome %s/%s (%s), want connect_error/oauth2", res.Outcome, res.ErrorType, res.Error)
				}
				if !strings.Contains(res.Error, "token") || strings.Contains(res.Error, oauthClientSecret) {
					t.Fatalf("error %q", res.Error)
				}
			})
		}
	}
}

// TestOAuth2Token: the token endpoint gets the client credentials, the
// target the access token; a failing token endpoint is error type oauth2
// (not dial), its words scrubbed of the client secret.
func TestOAuth2Token(t *testing.T) {
	var mu sync.Mutex
	var fetches int
	var fail bool
	token := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		fetches++
		failing := fail
		mu.Unlock()
		form, _ := url.ParseQuery(string(body))
		user, pass, _ := r.BasicAuth()
		if failing {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprintf(w, `{"error":"invalid_client","error_description":"bad secret %s / %s"}`, pass+form.Get("client_secret"),
				base64.StdEncoding.EncodeToString([]byte(user+":"+pass)))
			return
		}
		if (user != oauthClientID || pass != oauthClientSecret) && form.Get("client_secret") != oauthClientSecret {
			http.Error(w, "bad client", http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"access_token":%q,"token_type":"bearer","expires_in":3600}`, oauthAccessToken)
	}))
	defer token.Close()
	target := newHeaderRecorder(t)
	c := hostileClient(t, target.URL, oauthConfig(token.URL+"/token", false))
	for range 3 {
		var res Result
		c.Do(context.Background(), hostileRequest("hello there", 4), &res)
		if res.Outcome != OutcomeSuccess {
			t.Fatalf("outcome %s/%s: %s", res.Outcome, res.ErrorType, res.Error)
		}
	}
	for _, h := range target.requests() {
		if got := h.Get("Authorization"); got != "Bearer "+oauthAccessToken {
			t.Fatalf("the target got Authorization %q", got)
		}
	}
	if fetches != 1 {
		t.Errorf("%d token fetches for 3 requests, want 1", fetches)
	}

	mu.Lock()
	fail = true
	mu.Unlock()
	c = hostileClient(t, target.URL, oauthConfig(token.URL+"/token", false))
	var res Result
	c.Do(context.Background(), hostileRequest("hello there", 4), &res)
	if res.Outcome != OutcomeConnectError || res.ErrorType != ErrorTypeOAuth2 {
		t.Fatalf("outcome %s/%s (%s), want connect_error/oauth2", res.Outcome, res.ErrorType, res.Error)
	}
	if !strings.Contains(res.Error, "invalid_client") {
		t.Errorf("error %q does not say what the token endpoint said", res.Error)
	}
	assertNoSecret(t, res.Error)
	for _, s := range []string{oauthClientSecret, oauthClientSecret[:12], base64.StdEncoding.EncodeToString([]byte(oauthClientID + ":" + oauthClientSecret))[:16]} {
		if strings.Contains(res.Error, s) {
			t.Errorf("error %q shows %q", res.Error, s)
		}
	}
}

// TestOAuth2SecretFileRotation: a client_secret_file that changes is read
// again, and a new token fetched with the new secret.
func TestOAuth2SecretFileRotation(t *testing.T) {
	var mu sync.Mutex
	var secrets []string
	token := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		form, _ := url.ParseQuery(string(body))
		_, pass, _ := r.BasicAuth()
		mu.Lock()
		secrets = append(secrets, pass+form.Get("client_secret"))
		n := len(secrets)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"access_token":"tok-%d","token_type":"bearer","expires_in":3600}`, n)
	}))
	defer token.Close()
	target := newHeaderRecorder(t)
	file := filepath.Join(t.TempDir(), "secret")
	writeTestFile(t, file, "first-secret\n")
	hc := commoncfg.DefaultHTTPClientConfig
	hc.OAuth2 = &commoncfg.OAuth2{ClientID: oauthClientID, ClientSecretFile: file, TokenURL: token.URL + "/token"}
	c := hostileClient(t, target.URL, hc)
	do := func() {
		t.Helper()
		var res Result
		c.Do(context.Background(), hostileRequest("hello there", 4), &res)
		if res.Outcome != OutcomeSuccess {
			t.Fatalf("outcome %s/%s: %s", res.Outcome, res.ErrorType, res.Error)
		}
	}
	do()
	do()
	writeTestFile(t, file, "second-secret\n")
	do()
	mu.Lock()
	defer mu.Unlock()
	if len(secrets) != 2 || secrets[0] != "first-secret" || secrets[1] != "second-secret" {
		t.Errorf("token fetches with secrets %q, want first-secret then second-secret", secrets)
	}
	reqs := target.requests()
	if got := reqs[len(reqs)-1].Get("Authorization"); got != "Bearer tok-2" {
		t.Errorf("after the rotation the target got %q", got)
	}
}

// TestOAuth2TokenWaitIsBounded: a token endpoint that never answers holds
// a request no longer than its context (a timeout, not oauth2), and
// concurrent requests share one token fetch.
func TestOAuth2TokenWaitIsBounded(t *testing.T) {
	release := make(chan struct{})
	var mu sync.Mutex
	fetches := 0
	token := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		fetches++
		mu.Unlock()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer token.Close()
	defer close(release)
	target := newHeaderRecorder(t)
	c := hostileClient(t, target.URL, oauthConfig(token.URL+"/token", false))
	var wg sync.WaitGroup
	results := make([]Result, 8)
	for i := range results {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			c.Do(ctx, hostileRequest("hello there", 4), &results[i])
		})
	}
	wg.Wait()
	for _, res := range results {
		if res.Outcome != OutcomeTimeout {
			t.Errorf("outcome %s/%s (%s), want timeout", res.Outcome, res.ErrorType, res.Error)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if fetches != 1 {
		t.Errorf("%d token fetches for 8 concurrent requests, want 1", fetches)
	}
	if n := len(target.requests()); n != 0 {
		t.Errorf("the target got %d requests without a token", n)
	}
}
