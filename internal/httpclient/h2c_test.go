// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package httpclient

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	commoncfg "github.com/prometheus/common/config"
)

// protoServer serves HTTP/1.1 and h2c on one port (as the simulator
// does) and records the protocol and headers of every request.
type protoServer struct {
	URL string
	mu  sync.Mutex
	got []seenRequest
}

type seenRequest struct {
	proto  string
	header http.Header
}

func newProtoServer(t *testing.T) *protoServer {
	t.Helper()
	ps := &protoServer{}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		ps.mu.Lock()
		ps.got = append(ps.got, seenRequest{r.Proto, r.Header.Clone()})
		ps.mu.Unlock()
		_, _ = io.WriteString(w, "ok")
	})}
	srv.Protocols = new(http.Protocols)
	srv.Protocols.SetHTTP1(true)
	srv.Protocols.SetUnencryptedHTTP2(true)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	ps.URL = "http://" + l.Addr().String()
	return ps
}

func (ps *protoServer) last(t *testing.T) seenRequest {
	t.Helper()
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if len(ps.got) == 0 {
		t.Fatal("the server got no request")
	}
	return ps.got[len(ps.got)-1]
}

// TestH2CSendsWhatHTTP1Sends: h2c's transport is built by llmprobe
// under prometheus/common's round trippers (h2c.go), HTTP/1.1's by
// prometheus/common: the same http_client_config (authorization inline
// and from a file, basic_auth, the old bearer_token, http_headers with
// values, secrets and files, OAuth2) must put the same credentials and
// headers on the wire over both, to a real server, and each path must
// speak its protocol; the connections each opens are counted and
// uncounted when closed.
func TestH2CSendsWhatHTTP1Sends(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	credFile := write("cred", "file-token-123\n")
	passFile := write("pass", "file-password")
	headerFile := write("header", " from-a-file \n")
	secretFile := write("client-secret", "oauth-secret")
	token := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		if _, pass, _ := r.BasicAuth(); pass != "oauth-secret" && r.PostForm.Get("client_secret") != "oauth-secret" {
			http.Error(w, `{"error":"invalid_client"}`, http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"access_token":"oauth-access-42","token_type":"Bearer","expires_in":3600}`)
	}))
	defer token.Close()
	headers := &commoncfg.Headers{Headers: map[string]commoncfg.Header{
		"X-Api-Key":   {Secrets: []commoncfg.Secret{"header-secret-1"}},
		"X-Team":      {Values: []string{"a", "b"}},
		"X-From-File": {Files: []string{headerFile}},
	}}
	cases := map[string]commoncfg.HTTPClientConfig{
		"authorization":      {Authorization: &commoncfg.Authorization{Type: "Bearer", Credentials: "inline-token"}, HTTPHeaders: headers},
		"authorization file": {Authorization: &commoncfg.Authorization{Type: "Token", CredentialsFile: credFile}, HTTPHeaders: headers},
		"bearer_token":       {BearerToken: "old-style"},
		"basic_auth":         {BasicAuth: &commoncfg.BasicAuth{Username: "user", PasswordFile: passFile}, HTTPHeaders: headers},
		"oauth2":             {OAuth2: &commoncfg.OAuth2{ClientID: "probe", ClientSecretFile: secretFile, TokenURL: token.URL + "/token"}, HTTPHeaders: headers},
		"headers only":       {HTTPHeaders: headers},
	}
	wire := []string{"Authorization", "X-Api-Key", "X-Team", "X-From-File", "User-Agent", "Accept-Encoding"}
	srv := newProtoServer(t)
	for name, cfg := range cases {
		t.Run(name, func(t *testing.T) {
			var sent [2]http.Header
			for i, h2c := range []bool{false, true} {
				conns := &Conns{}
				c, err := New(cfg, "h2c_test", Options{H2C: h2c, Conns: conns})
				if err != nil {
					t.Fatal(err)
				}
				req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/chat/completions", strings.NewReader(`{}`))
				req.Header.Set("User-Agent", "llmprobe-test")
				resp, err := c.Do(req)
				if err != nil {
					t.Fatalf("h2c %v: %v", h2c, err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				want := map[bool]string{false: "HTTP/1.1", true: "HTTP/2.0"}[h2c]
				got := srv.last(t)
				if got.proto != want || resp.Proto != want {
					t.Errorf("h2c %v: the server saw %s, the client %s; want %s", h2c, got.proto, resp.Proto, want)
				}
				if n := conns.Open(); n != 1 {
					t.Errorf("h2c %v: %d connections open after one request, want 1", h2c, n)
				}
				c.CloseIdleConnections()
				waitConns(t, conns, 0)
				sent[i] = http.Header{}
				for _, k := range wire {
					if v, ok := got.header[k]; ok {
						sent[i][k] = v
					}
				}
			}
			for _, k := range wire {
				if !slices.Equal(sent[0][k], sent[1][k]) {
					t.Errorf("%s: HTTP/1.1 sent %q, h2c %q", k, sent[0][k], sent[1][k])
				}
			}
			if cfg.Authorization != nil || cfg.BasicAuth != nil || cfg.OAuth2 != nil || cfg.BearerToken != "" {
				if len(sent[1]["Authorization"]) != 1 || sent[1]["Authorization"][0] == "" {
					t.Errorf("no Authorization sent: %q", sent[1]["Authorization"])
				}
			}
			if cfg.HTTPHeaders != nil && (sent[1].Get("X-From-File") != "from-a-file" || sent[1].Get("X-Api-Key") != "header-secret-1") {
				t.Errorf("configured headers not sent: %v", sent[1])
			}
		})
	}
}

// waitConns waits (bounded) until conns holds want: a closed
// connection's Close may run on the transport's goroutine.
func waitConns(t *testing.T, conns *Conns, want int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for conns.Open() != want {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections open, want %d", conns.Open(), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestH2CRefusesAProxy: h2c has no proxy (config validation says so
// first); a client asked for one is an error, never a silent direct
// connection.
func TestH2CRefusesAProxy(t *testing.T) {
	cfg := commoncfg.HTTPClientConfig{}
	cfg.ProxyFromEnvironment = true
	if _, err := New(cfg, "h2c_test", Options{H2C: true}); err == nil || !strings.Contains(err.Error(), "proxy") {
		t.Fatalf("error %v, want one about the proxy", err)
	}
}
