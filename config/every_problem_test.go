// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEveryProblemReported: one load of a file reports all its problems,
// each at file:line:column with its field path. An unknown key hides
// nothing else (not the checks of the mapping it sits in: a
// distribution's, an http_client_config's own), and a file an
// http_client_config names is checked even when that http_client_config
// has other problems (two auths, an unknown TLS version, an unknown key).
// A secret file's content never appears.
func TestEveryProblemReported(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte("s3cr3t-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "x.yml")
	doc := `bogus_top: 1
workloads:
  w:
    classes:
      - name: c
        prompt_tokens: {dist: lognormal, median: 10, p99: 5, bogus: 1}
        output_tokens: 10
        sampling: {temperature: 9, topp: 1}
targets:
  - name: t
    url: http://127.0.0.1:8000/v1
    model: m
    workload: w
    arrival: {rate: -1, rat: 2}
    http_client_config:
      authorization: {credentials_file: missing-token}
      basic_auth: {username: u, password_file: nopw}
      tls_config: {ca_file: noca.pem, cert_file: nocert.pem, key_file: nokey.pem}
  - name: u
    url: http://127.0.0.1:8000/v1
    model: m
    workload: w
    arrival: {rate: 1}
    http_client_config:
      tls_config: {ca_file: noca.pem, min_version: TLS99}
      basic_auth: {username: u, password_file: token}
  - name: v
    url: http://127.0.0.1:8000/v1
    model: m
    workload: w
    arrival: {rate: 1}
    http_client_config:
      authorization: {credentials: abc}
      basic_auth: {username: u, password_file: nopw}
      typo: 1
`
	if err := os.WriteFile(file, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	p := func(name string) string { return `"` + filepath.Join(dir, name) + `"` }
	want := []string{
		`1:1: bogus_top: unknown field "bogus_top"`,
		`6:9: workloads.w.classes[0].prompt_tokens: lognormal: p99 (5) must be greater than median (10)`,
		`6:62: workloads.w.classes[0].prompt_tokens.bogus: unknown field "bogus"`,
		`8:20: workloads.w.classes[0].sampling.temperature: must be in [0, 2], got 9`,
		`8:36: workloads.w.classes[0].sampling.topp: unknown field "topp" (did you mean "top_p"?)`,
		`14:15: targets[0].arrival.rate: must be a positive number of requests per second, got -1`,
		`14:25: targets[0].arrival.rat: unknown field "rat"`,
		`15:5: targets[0].http_client_config: at most one of basic_auth, oauth2 & authorization must be configured`,
		`16:23: targets[0].http_client_config.authorization.credentials_file: file ` + p("missing-token") + ` does not exist`,
		`17:33: targets[0].http_client_config.basic_auth.password_file: file ` + p("nopw") + ` does not exist`,
		`18:20: targets[0].http_client_config.tls_config.ca_file: file ` + p("noca.pem") + ` does not exist`,
		`18:39: targets[0].http_client_config.tls_config.cert_file: file ` + p("nocert.pem") + ` does not exist`,
		`18:62: targets[0].http_client_config.tls_config.key_file: file ` + p("nokey.pem") + ` does not exist`,
		`25:20: targets[1].http_client_config.tls_config.ca_file: file ` + p("noca.pem") + ` does not exist`,
		`25:39: targets[1].http_client_config.tls_config.min_version: unknown TLS version: TLS99`,
		`32:5: targets[2].http_client_config: at most one of basic_auth, oauth2 & authorization must be configured`,
		`34:33: targets[2].http_client_config.basic_auth.password_file: file ` + p("nopw") + ` does not exist`,
		`35:7: targets[2].http_client_config.typo: unknown field "typo"`,
	}
	for i := range want {
		want[i] = file + ":" + want[i]
	}
	_, err := LoadFile(file)
	if got := errString(err); got != strings.Join(want, "\n") {
		t.Errorf("got:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
	}
	if err != nil && strings.Contains(err.Error(), "s3cr3t") {
		t.Errorf("an error shows a secret file's content:\n%v", err)
	}
}

// TestFilesCheckedThroughAliases: the files are found where the file
// puts them, through anchors and merge keys too; and merging an
// http_client_config anchored in another target is valid.
func TestFilesCheckedThroughAliases(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "x.yml")
	doc := validBase + `    http_client_config: &hc
      tls_config: {ca_file: /nonexistent/ca.pem}
  - name: u
    url: http://127.0.0.1:8000/v1
    model: m
    workload: w
    arrival: {rate: 1}
    http_client_config:
      <<: *hc
      follow_redirects: true
`
	if err := os.WriteFile(file, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := LoadFile(file)
	// The second target's tls_config comes from the merge: its error sits
	// at the http_client_config that merges it.
	want := file + `:14:20: targets[0].http_client_config.tls_config.ca_file: file "/nonexistent/ca.pem" does not exist` + "\n" +
		file + `:20:5: targets[1].http_client_config.tls_config.ca_file: file "/nonexistent/ca.pem" does not exist`
	if got := errString(err); got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
	// With the file present the configuration is valid (the merge of an
	// http_client_config anchored in another target used to be refused:
	// "unknown anchor 'hc' referenced").
	ca := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(ca, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte(strings.ReplaceAll(doc, "/nonexistent/ca.pem", ca)), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadFile(file)
	if err != nil {
		t.Fatalf("valid file refused:\n%v", err)
	}
	if got := cfg.Targets[1].HTTPClientConfig; got.TLSConfig.CAFile != ca || !got.FollowRedirects {
		t.Errorf("targets[1].http_client_config = ca_file %q, follow_redirects %v; want the merged ca_file and true", got.TLSConfig.CAFile, got.FollowRedirects)
	}
}
