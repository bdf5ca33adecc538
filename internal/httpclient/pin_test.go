// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package httpclient

import (
	"encoding/pem"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	commoncfg "github.com/prometheus/common/config"
)

// hostRecorder records the Host and TLS server name of every request.
type hostRecorder struct {
	mu    sync.Mutex
	hosts []string
	snis  []string
}

func (h *hostRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	h.hosts = append(h.hosts, r.Host)
	if r.TLS != nil {
		h.snis = append(h.snis, r.TLS.ServerName)
	}
	h.mu.Unlock()
	io.WriteString(w, "ok")
}

// TestDialAddressKeepsHostAndSNI: a client pinned to a replica's address
// (a discovered replica behind a service's name) connects there, and the
// URL's host stays the Host header and the TLS server name its
// certificate is checked against, on every transport.
func TestDialAddressKeepsHostAndSNI(t *testing.T) {
	rec := &hostRecorder{}
	plain := httptest.NewServer(rec)
	defer plain.Close()
	h2c := httptest.NewUnstartedServer(rec)
	h2c.Config.Protocols = new(http.Protocols)
	h2c.Config.Protocols.SetHTTP1(true)
	h2c.Config.Protocols.SetUnencryptedHTTP2(true)
	h2c.Start()
	defer h2c.Close()
	tlsSrv := httptest.NewUnstartedServer(rec) // its certificate is for example.com
	tlsSrv.EnableHTTP2 = true
	tlsSrv.StartTLS()
	defer tlsSrv.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: tlsSrv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	port := func(s *httptest.Server) string { _, p, _ := net.SplitHostPort(s.Listener.Addr().String()); return p }
	for _, c := range []struct {
		name, url, dial, wantSNI string
		h2c                      bool
	}{
		{"http", "http://vllm.prod.svc:" + port(plain) + "/v1/models", plain.Listener.Addr().String(), "", false},
		{"h2c", "http://vllm.prod.svc:" + port(h2c) + "/v1/models", h2c.Listener.Addr().String(), "", true},
		{"https", "https://example.com:" + port(tlsSrv) + "/v1/models", tlsSrv.Listener.Addr().String(), "example.com", false},
		{"https-h2", "https://example.com:" + port(tlsSrv) + "/v1/models", tlsSrv.Listener.Addr().String(), "example.com", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := commoncfg.DefaultHTTPClientConfig
			cfg.TLSConfig.CAFile = ca
			conns := &Conns{}
			hc, err := New(cfg, "t", Options{DialAddress: c.dial, H2C: c.h2c, Conns: conns})
			if err != nil {
				t.Fatal(err)
			}
			defer hc.CloseIdleConnections()
			resp, err := hc.Get(c.url)
			if err != nil {
				t.Fatalf("GET %s pinned to %s: %v", c.url, c.dial, err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			rec.mu.Lock()
			host := rec.hosts[len(rec.hosts)-1]
			var sni string
			if c.wantSNI != "" {
				sni = rec.snis[len(rec.snis)-1]
			}
			rec.mu.Unlock()
			u, _ := url.Parse(c.url)
			if host != u.Host {
				t.Errorf("Host = %q, want the URL's %q", host, u.Host)
			}
			if sni != c.wantSNI {
				t.Errorf("TLS server name = %q, want %q", sni, c.wantSNI)
			}
			if conns.Open() != 1 {
				t.Errorf("open connections = %d, want 1 (counted)", conns.Open())
			}
		})
	}
}

// TestDialAddressRefusesProxy: a pinned address cannot go through a
// proxy, which would be dialled in its place.
func TestDialAddressRefusesProxy(t *testing.T) {
	cfg := commoncfg.DefaultHTTPClientConfig
	u, _ := url.Parse("http://proxy.invalid:3128")
	cfg.ProxyURL = commoncfg.URL{URL: u}
	_, err := New(cfg, "t", Options{DialAddress: "127.0.0.1:1"})
	if err == nil || !strings.Contains(err.Error(), "proxy") {
		t.Fatalf("err = %v, want a refusal naming the proxy", err)
	}
}
