// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package httpclient

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	commoncfg "github.com/prometheus/common/config"
)

// TestTokenErrorNeverShowsTheSecret: a token endpoint that refuses and
// echoes the form it was sent (the client secret, plain and
// form-encoded) in its answer, as verbose identity providers and
// hostile servers do: the TokenError that fit, bench and the probe print
// keeps the endpoint's reason but no byte run of the secret.
func TestTokenErrorNeverShowsTheSecret(t *testing.T) {
	const secret = "s3cr3t/with+chars&more"
	token := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil {
			t.Error(err)
		}
		_, pass, _ := r.BasicAuth() // form-encoded, as RFC 6749 says
		if pass == "" {
			pass = r.PostForm.Get("client_secret")
		} else if p, err := url.QueryUnescape(pass); err == nil {
			pass = p
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, `{"error":"invalid_client","error_description":"client secret %s (%s) is wrong"}`, pass, url.QueryEscape(pass))
	}))
	defer token.Close()
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		t.Error("the target was reached without a token")
	}))
	defer target.Close()

	c, err := New(commoncfg.HTTPClientConfig{OAuth2: &commoncfg.OAuth2{
		ClientID: "probe", ClientSecret: commoncfg.Secret(secret), TokenURL: token.URL + "/token",
	}}, "test", Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Get(target.URL)
	var te *TokenError
	if !errors.As(err, &te) {
		t.Fatalf("error %v, want a TokenError", err)
	}
	msg := err.Error()
	t.Log(msg)
	if !strings.Contains(msg, "invalid_client") {
		t.Errorf("the endpoint's reason is lost: %s", msg)
	}
	for _, s := range []string{secret, url.QueryEscape(secret), "s3cr3t"} {
		if strings.Contains(msg, s) {
			t.Errorf("the error shows %q: %s", s, msg)
		}
	}
}
