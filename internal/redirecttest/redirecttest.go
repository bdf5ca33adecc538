// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

// Package redirecttest holds what the tests of llmprobe's HTTP clients
// share to show that no client follows a redirect elsewhere with its
// credentials: a server that records every request it gets (where a
// redirect points), and a server that answers every request with a 307 to
// it, on another port of the same host or on another host name.
//
// It is test support: only tests import it, and it imports no llmprobe
// package.
package redirecttest

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
)

// Capture is a loopback server that records the method, URL, headers and
// body of every request it gets, and answers each with Body (with
// Content-Type application/json when Body is set).
type Capture struct {
	*httptest.Server
	mu   sync.Mutex
	seen []string
}

// NewCapture starts a Capture that answers body; it stops when the test
// ends.
func NewCapture(t testing.TB, body string) *Capture {
	t.Helper()
	c := &Capture{}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		c.mu.Lock()
		c.seen = append(c.seen, fmt.Sprintf("%s %s %v %s", r.Method, r.URL, r.Header, b))
		c.mu.Unlock()
		if body != "" {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, body)
		}
	}))
	t.Cleanup(c.Close)
	return c
}

// Requests returns what every request so far carried, in order.
func (c *Capture) Requests() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.seen...)
}

// Redirector starts a server that answers every request (its body read)
// with a 307 to to's /capture on the host name given: "127.0.0.1" for
// another port of the same host, "localhost" for another host name. It
// stops when the test ends.
func Redirector(t testing.TB, to *Capture, host string) *httptest.Server {
	t.Helper()
	u, err := url.Parse(to.URL)
	if err != nil {
		t.Fatal(err)
	}
	loc := "http://" + net.JoinHostPort(host, u.Port()) + "/capture"
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Location", loc)
		w.WriteHeader(http.StatusTemporaryRedirect)
	}))
	t.Cleanup(s.Close)
	return s
}
