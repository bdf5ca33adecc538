// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package config

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestHTTPClientFilesChecked: every file an http_client_config names must
// exist and be a readable regular file when the configuration is loaded
// from a file, or every request would fail later with a misleading error.
func TestHTTPClientFilesChecked(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte("s3cr3t-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "adir"), 0o700); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "x.yml")
	nope := filepath.Join(dir, "nope")
	tests := []struct {
		name, lines string
		want        []string
	}{
		{"present", "    http_client_config:\n      authorization:\n        credentials_file: token\n", nil},
		{"authorization", "    http_client_config:\n      authorization:\n        credentials_file: nope\n",
			[]string{`15:9: targets[0].http_client_config.authorization.credentials_file: file "` + nope + `" does not exist`}},
		{"bearer_token_file", "    http_client_config:\n      bearer_token_file: nope\n",
			[]string{`14:7: targets[0].http_client_config.bearer_token_file: file "` + nope + `" does not exist`}},
		{"basic_auth", "    http_client_config:\n      basic_auth:\n        username_file: nope\n        password_file: adir\n",
			[]string{
				`15:9: targets[0].http_client_config.basic_auth.username_file: file "` + nope + `" does not exist`,
				`16:9: targets[0].http_client_config.basic_auth.password_file: "` + filepath.Join(dir, "adir") + `" is a directory, not a file`,
			}},
		{"oauth2", "    http_client_config:\n      oauth2:\n        client_id: x\n        token_url: http://t/\n        client_secret_file: nope\n        tls_config: {ca_file: nope}\n",
			[]string{
				`17:9: targets[0].http_client_config.oauth2.client_secret_file: file "` + nope + `" does not exist`,
				`18:22: targets[0].http_client_config.oauth2.tls_config.ca_file: file "` + nope + `" does not exist`,
			}},
		{"tls_config", "    http_client_config:\n      tls_config:\n        ca_file: nope\n        cert_file: nope\n        key_file: /nonexistent/key\n",
			[]string{
				`15:9: targets[0].http_client_config.tls_config.ca_file: file "` + nope + `" does not exist`,
				`16:9: targets[0].http_client_config.tls_config.cert_file: file "` + nope + `" does not exist`,
				`17:9: targets[0].http_client_config.tls_config.key_file: file "/nonexistent/key" does not exist`,
			}},
		{"http_headers", "    http_client_config:\n      http_headers:\n        X-Key: {files: [token, nope]}\n",
			[]string{`15:32: targets[0].http_client_config.http_headers.X-Key.files[1]: file "` + nope + `" does not exist`}},
		{"workload_from", "    workload_from:\n      prometheus:\n        url: http://p:9090\n        http_client_config: {authorization: {credentials_file: nope}}\n",
			[]string{`16:46: targets[0].workload_from.prometheus.http_client_config.authorization.credentials_file: file "` + nope + `" does not exist`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := []byte(validBase + tt.lines)
			if err := os.WriteFile(file, doc, 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := LoadFile(file)
			var want []string
			for _, w := range tt.want {
				want = append(want, file+":"+w)
			}
			if got := errString(err); got != strings.Join(want, "\n") {
				t.Errorf("got:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
			}
			if err != nil && strings.Contains(err.Error(), "s3cr3t-token") {
				t.Errorf("error shows a file's content: %v", err)
			}
			// Load checks the content only: the files are the running
			// process's concern (a manifest checked elsewhere names files
			// of the pod it will run in).
			if _, err := Load(doc, file); err != nil {
				t.Errorf("Load: %v", err)
			}
		})
	}
}

func TestHTTPClientFileUnreadable(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root reads every file")
	}
	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	if err := os.WriteFile(token, []byte("x"), 0o000); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "x.yml")
	if err := os.WriteFile(file, []byte(validBase+"    http_client_config: {bearer_token_file: token}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	want := file + `:13:26: targets[0].http_client_config.bearer_token_file: file "` + token + `" cannot be read: permission denied`
	if _, err := LoadFile(file); errString(err) != want {
		t.Errorf("got  %v\nwant %s", err, want)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestLoadFileContext: a load that blocks (a FIFO nobody writes, a hung
// network file system) gives way to SIGTERM: ctx's error comes back
// promptly.
func TestLoadFileContext(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.yml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := LoadFileContext(ctx, fifo)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v, want the context's", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("returned after %v", d)
	}
	// Let the abandoned read finish, if it opened the FIFO: non-blocking,
	// since a reader that saw the context end first never opens it, and a
	// blocking open for writing would then wait for ever (it hung CI for
	// 15 minutes on a busy machine).
	if w, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
		w.Close()
	}

	cancelled, cancel2 := context.WithCancel(context.Background())
	cancel2()
	if _, err := LoadFileContext(cancelled, "testdata/good.yml"); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled context: err = %v", err)
	}
	if _, err := LoadFileContext(context.Background(), "testdata/good.yml"); err != nil {
		t.Errorf("good.yml: %v", err)
	}
}

// TestTargetHTTPDefaults: what the probe engine relies on.
func TestTargetHTTPDefaults(t *testing.T) {
	cfg, err := Load([]byte(validBase+"    workload_from: {prometheus: {url: \"http://p:9090\"}}\n"), "x.yml")
	if err != nil {
		t.Fatal(err)
	}
	tg := cfg.Targets[0]
	if tg.HTTPClientConfig.FollowRedirects {
		t.Error("a target follows redirects by default")
	}
	if !tg.HTTPClientConfig.EnableHTTP2 {
		t.Error("prometheus/common's other defaults are lost")
	}
	if got := tg.IdleConnTimeout(); got != 4*time.Second || DefaultIdleConnTimeout != 4*time.Second {
		t.Errorf("idle_conn_timeout default = %v", got)
	}
	// prometheus/common's UnmarshalYAML starts from its own default
	// (follow); an http_client_config that does not say must not.
	cfg, err = Load([]byte(validBase+"    http_client_config: {basic_auth: {username: u, password: p}}\n"), "x.yml")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Targets[0].HTTPClientConfig.FollowRedirects {
		t.Error("a target with an http_client_config follows redirects by default")
	}
	cfg, err = Load([]byte(validBase+"    idle_conn_timeout: 2500ms\n    http_client_config: {follow_redirects: true}\n"), "x.yml")
	if err != nil {
		t.Fatal(err)
	}
	if tg := cfg.Targets[0]; tg.IdleConnTimeout() != 2500*time.Millisecond || !tg.HTTPClientConfig.FollowRedirects {
		t.Errorf("idle_conn_timeout = %v, follow_redirects = %v", tg.IdleConnTimeout(), tg.HTTPClientConfig.FollowRedirects)
	}
}

// TestTargetHTTPVersion: http_version is "1.1" unless set; "2" on an
// http:// URL is h2c, on https:// prometheus/common's HTTP/2 by ALPN;
// enable_http2 follows it; without it the target behaves as before
// (enable_http2 decides over TLS).
func TestTargetHTTPVersion(t *testing.T) {
	for _, tc := range []struct {
		name, url, lines string
		version          string
		h2c, http2       bool
	}{
		{"default http", "http://127.0.0.1:8000/v1", "", "", false, true},
		{"default https keeps enable_http2", "https://h/v1", "", "", false, true},
		{"default https without enable_http2", "https://h/v1", "    http_client_config: {enable_http2: false}\n", "", false, false},
		{"1.1 https", "https://h/v1", "    http_version: \"1.1\"\n", HTTPVersion11, false, false},
		{"1.1 unquoted", "https://h/v1", "    http_version: 1.1\n", HTTPVersion11, false, false},
		{"2 http is h2c", "http://127.0.0.1:8000/v1", "    http_version: \"2\"\n", HTTPVersion2, true, true},
		{"2 unquoted", "http://127.0.0.1:8000/v1", "    http_version: 2\n", HTTPVersion2, true, true},
		{"2 https is ALPN", "https://h/v1", "    http_version: \"2\"\n    http_client_config: {proxy_url: \"http://p:3128\"}\n", HTTPVersion2, false, true},
		{"2 with enable_http2 true", "http://127.0.0.1:8000/v1", "    http_version: \"2\"\n    http_client_config: {enable_http2: true}\n", HTTPVersion2, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := strings.Replace(validBase, "http://127.0.0.1:8000/v1", tc.url, 1) + tc.lines
			cfg, err := Load([]byte(doc), "x.yml")
			if err != nil {
				t.Fatal(err)
			}
			tg := cfg.Targets[0]
			if got := tg.HTTPVersion; got != tc.version {
				t.Errorf("http_version %q, want %q", got, tc.version)
			}
			if got := tg.H2C(); got != tc.h2c {
				t.Errorf("h2c %v, want %v", got, tc.h2c)
			}
			if got := tg.ClientConfig().EnableHTTP2; got != tc.http2 {
				t.Errorf("enable_http2 %v, want %v", got, tc.http2)
			}
		})
	}
}

// TestIdentityPollInterval: the version endpoint is asked every 5m by
// default; identity.poll_interval changes it, 0s turns it off, and an
// identity section that leaves the key out keeps the default.
func TestIdentityPollInterval(t *testing.T) {
	for doc, want := range map[string]time.Duration{
		"":                                     DefaultVersionPollInterval,
		"    identity: {}\n":                   DefaultVersionPollInterval,
		"    identity: {poll_interval: 30s}\n": 30 * time.Second,
		"    identity: {poll_interval: 0s}\n":  0,
	} {
		cfg, err := Load([]byte(validBase+doc), "x.yml")
		if err != nil {
			t.Fatalf("%q: %v", doc, err)
		}
		if got := cfg.Targets[0].VersionPollInterval(); got != want {
			t.Errorf("%q: poll interval %v, want %v", doc, got, want)
		}
	}
}
