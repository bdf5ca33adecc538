// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package wire

import (
	"strings"
	"testing"
)

// BenchmarkScrubSecrets is the cost of scrubbing what a server sent for
// one request with the secrets of hostileHTTPConfig and the request's
// Authorization value: a successful response's id and model (every
// request), a 1 KiB error body without a secret, and one quoting the
// bearer token.
func BenchmarkScrubSecrets(b *testing.B) {
	r := NewRedactor(hostileHTTPConfig(false))
	set := r.requestSet([2]string{"Bearer " + hostileBearer, ""})
	body := strings.Repeat(`{"error":{"message":"The model is overloaded, retry later","type":"server_error","param":null,"code":503}} `, 10)[:1024]
	for _, bc := range []struct {
		name string
		msgs []string
		tail bool
	}{
		{"success", []string{"chatcmpl-9f3c1e2d4b5a69788796a1b2", "meta-llama/Llama-3.1-8B-Instruct"}, false},
		{"error_1KiB", []string{body}, true},
		{"error_echo", []string{body[:512] + "Authorization: Bearer " + hostileBearer + body[:480]}, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			n := 0
			for _, m := range bc.msgs {
				n += len(m)
			}
			b.SetBytes(int64(n))
			b.ReportAllocs()
			for b.Loop() {
				for _, m := range bc.msgs {
					_ = scrubSecrets(m, set, bc.tail)
				}
			}
		})
	}
}
