// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

// Package h2test holds the HTTP/2 servers that tests of more than one
// package share where net/http's server cannot be made to misbehave:
// written with x/net's Framer, over h2c or over TLS (ALPN h2, httptest's
// certificate). It is test support: only tests import it, and it imports
// no llmprobe package.
package h2test

import (
	"crypto/tls"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// connLife bounds how long a test server serves one connection.
const connLife = 30 * time.Second

// ResetServer is a loopback HTTP/2 server that answers the HEADERS of
// every request with RST_STREAM of one code and nothing else (it
// acknowledges SETTINGS and PINGs and keeps the connection open): with
// REFUSED_STREAM, a server that refuses every stream.
type ResetServer struct {
	// URL is http://host:port (h2c, HTTP/2 with prior knowledge) or
	// https://host:port (HTTP/2 by ALPN; the client must skip
	// verification or trust httptest's certificate).
	URL     string
	streams atomic.Int64
	conns   atomic.Int64
	code    http2.ErrCode
}

// Streams is the number of streams the server has reset.
func (s *ResetServer) Streams() int64 { return s.streams.Load() }

// Conns is the number of HTTP/2 connections the server has accepted.
func (s *ResetServer) Conns() int64 { return s.conns.Load() }

// ResetEveryStream starts a ResetServer that resets with code, over TLS
// when overTLS, else h2c; it stops when the test ends.
func ResetEveryStream(t testing.TB, code http2.ErrCode, overTLS bool) *ResetServer {
	t.Helper()
	s := &ResetServer{code: code}
	if overTLS {
		srv := httptest.NewUnstartedServer(http.NotFoundHandler())
		srv.EnableHTTP2 = true // ALPN offers h2 only
		srv.Config.ErrorLog = log.New(io.Discard, "", 0)
		srv.Config.TLSNextProto = map[string]func(*http.Server, *tls.Conn, http.Handler){
			"h2": func(_ *http.Server, c *tls.Conn, _ http.Handler) { s.serve(c) },
		}
		srv.StartTLS()
		t.Cleanup(srv.Close)
		s.URL = srv.URL
		return s
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		open = map[net.Conn]bool{}
		done bool
	)
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			if done {
				mu.Unlock()
				c.Close()
				return
			}
			open[c] = true
			mu.Unlock()
			wg.Go(func() {
				defer func() {
					mu.Lock()
					delete(open, c)
					mu.Unlock()
					c.Close()
				}()
				s.serve(c)
			})
		}
	})
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		done = true
		for c := range open {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	s.URL = "http://" + l.Addr().String()
	return s
}

// serve speaks the server's side of one connection: the preface, its
// SETTINGS, then a reset for every stream opened, until the client
// closes the connection or connLife passes.
func (s *ResetServer) serve(c net.Conn) {
	_ = c.SetDeadline(time.Now().Add(connLife))
	preface := make([]byte, len(http2.ClientPreface))
	if _, err := io.ReadFull(c, preface); err != nil || string(preface) != http2.ClientPreface {
		return
	}
	fr := http2.NewFramer(c, c)
	if fr.WriteSettings() != nil {
		return
	}
	s.conns.Add(1)
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() && fr.WriteSettingsAck() != nil {
				return
			}
		case *http2.PingFrame:
			if !f.IsAck() && fr.WritePing(true, f.Data) != nil {
				return
			}
		case *http2.HeadersFrame:
			s.streams.Add(1)
			if fr.WriteRSTStream(f.StreamID, s.code) != nil {
				return
			}
		}
	}
}
