// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package exporter

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llmprobe/llmprobe/internal/testio"
	"github.com/llmprobe/llmprobe/probe"
)

// TestReloadErrorsNeverShowNewSecrets: a file that fails to load because
// of what it writes under a secret key (a string where the authorization
// mapping belongs, a header written whole as a key) does not get its new
// secret shown by the /-/reload answer, the status page or the log: the
// scrubber knows only the running configuration's secrets, so the
// configuration's errors must not quote them.
func TestReloadErrorsNeverShowNewSecrets(t *testing.T) {
	path := filepath.Join(t.TempDir(), "llmprobe.yml")
	good := `
global: {warmup: 0s}
workloads:
  w:
    classes:
      - {name: chat, prompt_tokens: 8, output_tokens: 4}
targets:
  - name: t
    url: http://127.0.0.1:1/v1
    model: m
    workload: w
    arrival: {process: constant, rate: 0.1}
    http_client_config:
      %s
`
	writeFile(t, path, fmt.Sprintf(good, "authorization: {credentials: OLD-secret-0a1b2c3d}"))
	logs := &testio.Buffer{}
	d := startDaemon(t, path, newTextLogger(logs), probe.Options{})
	defer d.stop(t)
	d.reload(t)
	srv := d.web.srv
	for _, bad := range []struct{ yml, field string }{
		{`authorization: "Bearer NEWSECRET-r1x"`, "http_client_config.authorization"},
		{`authorization: {Bearer NEWSECRET-r2x}`, "http_client_config.authorization"},
		{`http_headers: {X-Api-Key: "NEWSECRET-r3x"}`, "http_headers.X-Api-Key"},
		{`basic_auth: [probe, NEWSECRET-r4x]`, "http_client_config.basic_auth"},
	} {
		writeFile(t, path, fmt.Sprintf(good, bad.yml))
		resp, answer := fetch(t, "POST", srv.URL+"/-/reload", nil, "")
		if resp.StatusCode == 200 {
			t.Fatalf("reload of %s succeeded", bad.yml)
		}
		_, page := fetch(t, "GET", srv.URL+"/", nil, "")
		for name, text := range map[string]string{"/-/reload": answer, "/": page, "log": logs.String()} {
			for _, piece := range []string{"NEWSE", "WSECR", "ECRET-r"} {
				if i := strings.Index(text, piece); i >= 0 {
					t.Errorf("%s: %s shows the new secret: ...%s...", bad.yml, name, text[max(i-80, 0):min(i+40, len(text))])
					break
				}
			}
		}
		if !strings.Contains(answer, bad.field) || !strings.Contains(page, bad.field) {
			t.Errorf("%s: the answer or the page does not name %s:\n%s", bad.yml, bad.field, answer)
		}
	}
}
