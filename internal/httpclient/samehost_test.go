// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package httpclient

import (
	"net/url"
	"testing"
)

// TestSameHost: a redirect stays on the same server only to the same
// host and port (the scheme's default port counting as given), and
// never downgrades from https.
func TestSameHost(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"http://h:8000/v1", "http://h:8000/x", true},
		{"http://h/v1", "http://H:80/x", true},
		{"http://h:8000/v1", "http://h:8001/v1", false},
		{"http://h/v1", "https://h/v1", true},
		{"http://h:8000/v1", "https://h:8443/v1", false},
		{"https://h/v1", "http://h/v1", false}, // a downgrade
		{"http://h/v1", "http://h.evil/v1", false},
		{"http://127.0.0.1:1/", "http://localhost:1/", false},
	} {
		a, b := mustURL(t, tc.a), mustURL(t, tc.b)
		if got := SameHost(a, b); got != tc.want {
			t.Errorf("SameHost(%s, %s) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
