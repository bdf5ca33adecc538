// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package bench

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// recorder records what reaches it (the host a redirect points at).
type recorder struct {
	*httptest.Server
	mu   sync.Mutex
	seen []string
}

func newRecorder(t *testing.T) *recorder {
	r := &recorder{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.seen = append(r.seen, fmt.Sprintf("%s %s %v %s", req.Method, req.URL, req.Header, body))
		r.mu.Unlock()
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *recorder) requests() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.seen...)
}

// redirector answers every request with a 307 to the recorder, on the
// host name given (another port of the same host, or another host).
func redirector(t *testing.T, to *recorder, host string) *httptest.Server {
	u, _ := url.Parse(to.URL)
	loc := "http://" + net.JoinHostPort(host, u.Port()) + "/capture"
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Location", loc)
		w.WriteHeader(http.StatusTemporaryRedirect)
	}))
	t.Cleanup(s.Close)
	return s
}

// TestBenchClientsRefuseRedirectsElsewhere: the server-metrics scrape and
// the GPU query (credentials in their URLs) do not follow a redirect to
// another port or another host: net/http would send the basic auth of
// the URL to another port of the same host name.
func TestBenchClientsRefuseRedirectsElsewhere(t *testing.T) {
	capture := newRecorder(t)
	for _, host := range []string{"127.0.0.1", "localhost"} {
		t.Run(host, func(t *testing.T) {
			red := redirector(t, capture, host)
			withAuth := strings.Replace(red.URL, "http://", "http://bench:bench-secret-pw@", 1)
			res := scrapeServer(context.Background(), serverMetricsClient(), withAuth+"/metrics")
			if res.err == nil || !strings.Contains(res.err.Error(), "redirect") {
				t.Errorf("server metrics: err = %v, want a refused redirect", res.err)
			}
			gpu := queryGPU(context.Background(), withAuth, `gpu="0"`, time.Now(), time.Minute)
			if len(gpu.Errors) == 0 {
				t.Errorf("GPU query: no error")
			}
			if got := capture.requests(); len(got) != 0 {
				t.Fatalf("the other server received %d requests: %q", len(got), got)
			}
		})
	}
}
