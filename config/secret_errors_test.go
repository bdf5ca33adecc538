// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package config

import (
	"strings"
	"testing"
)

// TestErrorsNeverQuoteSecrets: an error about a value under a key that
// can hold a secret (authorization, basic_auth, bearer_token, oauth2,
// http_headers, proxy headers and URL, TLS keys, tracing headers) never
// quotes it, whatever its shape (a string where a mapping belongs, a key
// where a value belongs, a list, a mapping), neither in its message nor
// in its path. It still names the field and says what is wrong.
func TestErrorsNeverQuoteSecrets(t *testing.T) {
	const head = "workloads:\n  w:\n    classes:\n      - {name: c, prompt_tokens: 8, output_tokens: 4}\n"
	target := func(hc string) string {
		return head + "targets:\n  - name: t\n    url: http://127.0.0.1:1/v1\n    model: m\n    workload: w\n" +
			"    arrival: {process: constant, rate: 1}\n    http_client_config:\n      " + hc + "\n"
	}
	cases := []struct {
		name, yml string
		want      []string // in the error
	}{
		{"authorization string", target(`authorization: "Bearer NEWSECRET-a1"`),
			[]string{"http_client_config.authorization", "cannot use a string as a mapping"}},
		{"authorization plain", target(`authorization: Bearer NEWSECRET-a2`),
			[]string{"http_client_config.authorization", "cannot use a string as a mapping"}},
		{"authorization key", target(`authorization: {Bearer NEWSECRET-a3}`),
			[]string{"http_client_config.authorization", "unknown field"}},
		{"authorization bare key", target(`authorization: {NEWSECRET-a4}`),
			[]string{"http_client_config.authorization", "unknown field"}},
		{"credentials mapping", target(`authorization: {credentials: {NEWSECRET-a5: x}}`),
			[]string{"authorization.credentials", "cannot use a mapping as a string"}},
		{"credentials list", target(`authorization: {credentials: [NEWSECRET-a6]}`),
			[]string{"authorization.credentials", "cannot use a list as a string"}},
		{"basic_auth string", target(`basic_auth: "probe:NEWSECRET-b1"`),
			[]string{"http_client_config.basic_auth", "cannot use a string as a mapping"}},
		{"password mapping", target(`basic_auth: {username: u, password: {NEWSECRET-b2: 1}}`),
			[]string{"basic_auth.password"}},
		{"bearer_token mapping", target(`bearer_token: {NEWSECRET-c1: 1}`),
			[]string{"http_client_config.bearer_token"}},
		{"oauth2 string", target(`oauth2: "NEWSECRET-d1"`),
			[]string{"http_client_config.oauth2", "cannot use a string as a mapping"}},
		{"oauth2 endpoint_params string", target(`oauth2: {client_id: x, token_url: "http://t/", client_secret: NEWSECRET-d2, endpoint_params: "NEWSECRET-d3"}`),
			[]string{"oauth2.endpoint_params", "cannot use a string as a mapping"}},
		{"oauth2 unknown key", target(`oauth2: {client_id: x, token_url: "http://t/", NEWSECRET-d4: 1}`),
			[]string{"http_client_config.oauth2", "unknown field"}},
		{"header string", target(`http_headers: {X-Api-Key: "NEWSECRET-e1"}`),
			[]string{"http_headers.X-Api-Key", "cannot use a string as a mapping"}},
		{"header values string", target(`http_headers: {X-Api-Key: {values: "NEWSECRET-e2"}}`),
			[]string{"http_headers.X-Api-Key.values", "cannot use a string as a list"}},
		{"header secrets mapping", target(`http_headers: {X-Api-Key: {secrets: {NEWSECRET-e3: 1}}}`),
			[]string{"http_headers.X-Api-Key.secrets", "cannot use a mapping as a list"}},
		{"header name with a value", target(`http_headers: {"X-Api-Key: NEWSECRET-e4": {values: 1}}`),
			[]string{"http_client_config.http_headers"}},
		{"tls key mapping", target(`tls_config: {key: {NEWSECRET-f1: 1}}`),
			[]string{"tls_config.key", "cannot use a mapping as a string"}},
		{"proxy header string", target("proxy_url: http://127.0.0.1:3128\n      proxy_connect_header: \"NEWSECRET-g1\""),
			[]string{"http_client_config.proxy_connect_header", "cannot use a string as a mapping"}},
		{"proxy url", target(`proxy_url: "http://u:NEWSECRET-g2@127.0.0.1:3128 x"`),
			[]string{"http_client_config.proxy_url"}},
		{"long value", target(`authorization: "Bearer NEWSECRET-` + strings.Repeat("h", 80) + `"`),
			[]string{"http_client_config.authorization", "cannot use a string as a mapping"}},
		{"workload_from", head + "targets:\n  - name: t\n    url: http://127.0.0.1:1/v1\n    model: m\n    workload: w\n" +
			"    arrival: {process: constant, rate: 1}\n    workload_from:\n      prometheus:\n        url: http://127.0.0.1:9090\n" +
			"        http_client_config: {authorization: \"Bearer NEWSECRET-i1\"}\n",
			[]string{"workload_from.prometheus.http_client_config.authorization", "cannot use a string as a mapping"}},
		{"tracing headers", head + "targets:\n  - name: t\n    url: http://127.0.0.1:1/v1\n    model: m\n    workload: w\n" +
			"    arrival: {process: constant, rate: 1}\ntracing: {endpoint: \"127.0.0.1:4317\", headers: \"authorization=Bearer NEWSECRET-j1\"}\n",
			[]string{"tracing.headers", "cannot use a string as a mapping"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load([]byte(tc.yml), "x.yml")
			if err == nil {
				t.Fatal("loaded")
			}
			msg := err.Error()
			for _, piece := range []string{"NEWSE", "WSECR", "CRET-", "ET-a", "hhhhh"} {
				if strings.Contains(msg, piece) {
					t.Errorf("the error quotes the secret (%q):\n%s", piece, msg)
				}
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("the error lacks %q:\n%s", w, msg)
				}
			}
		})
	}
	// Values elsewhere are still quoted.
	_, err := Load([]byte(target(`follow_redirects: "maybe-not"`)), "x.yml")
	if err == nil || !strings.Contains(err.Error(), `"maybe-not"`) {
		t.Errorf("a value outside the secret keys is no longer quoted: %v", err)
	}
}
