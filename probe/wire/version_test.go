// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package wire

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	commoncfg "github.com/prometheus/common/config"

	"github.com/llmprobe/llmprobe/sim"
)

// versionServer answers the given paths with their bodies (status 200,
// JSON) and everything else with 404, recording the paths asked.
type versionServer struct {
	*httptest.Server
	mu    sync.Mutex
	asked []string
}

func newVersionServer(t *testing.T, answers map[string]string) *versionServer {
	t.Helper()
	v := &versionServer{}
	v.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v.mu.Lock()
		v.asked = append(v.asked, r.Method+" "+r.URL.Path)
		v.mu.Unlock()
		body, ok := answers[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, body)
	}))
	t.Cleanup(v.Close)
	return v
}

func (v *versionServer) paths() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]string(nil), v.asked...)
}

func newVersionClient(t *testing.T, base string, hc commoncfg.HTTPClientConfig) *VersionClient {
	t.Helper()
	httpClient, err := NewHTTPClient(hc, "version", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(httpClient.CloseIdleConnections)
	vc, err := NewVersionClient(base, httpClient, "llmprobe-test", NewRedactor(hc))
	if err != nil {
		t.Fatal(err)
	}
	return vc
}

// TestVersionFromSimulator: the simulator answers GET /version vLLM's
// way, at the root next to /v1; without a version every endpoint is
// absent, which is ErrNoVersionEndpoint.
func TestVersionFromSimulator(t *testing.T) {
	base := startSim(t, func(c *sim.Config) { c.Identity.Version = "0.1.0" })
	got, err := newVersionClient(t, base, commoncfg.DefaultHTTPClientConfig).Fetch(context.Background(), "")
	if err != nil || got != (VersionInfo{Endpoint: "/version", Version: "0.1.0"}) {
		t.Errorf("Fetch = %+v, %v", got, err)
	}
	_, err = newVersionClient(t, startSim(t, nil), commoncfg.DefaultHTTPClientConfig).Fetch(context.Background(), "")
	if !errors.Is(err, ErrNoVersionEndpoint) {
		t.Errorf("no version: %v, want ErrNoVersionEndpoint", err)
	}
}

// TestVersionShapes: what TGI, llama.cpp, SGLang and Ollama answer (their
// source: router/src/lib.rs Info, tools/server props, http_server.py
// get_server_info, server/routes.go /api/version), each found after the
// 404s of the endpoints before it.
func TestVersionShapes(t *testing.T) {
	for _, tc := range []struct {
		name    string
		answers map[string]string
		want    VersionInfo
	}{
		{"vLLM", map[string]string{"/version": `{"version":"0.11.0"}`}, VersionInfo{"/version", "0.11.0"}},
		{"TGI", map[string]string{"/info": `{"model_id":"bigscience/bloom-560m","model_sha":"e985a63c","model_dtype":"torch.float16","max_concurrent_requests":128,"version":"3.3.4","sha":"9f8a3c1d2e4b5a6978","docker_label":"sha-9f8a3c1"}`}, VersionInfo{"/info", "3.3.4+9f8a3c1d"}},
		{"TGI without sha", map[string]string{"/info": `{"model_id":"m","version":"2.0.4","sha":null}`}, VersionInfo{"/info", "2.0.4"}},
		{"llama.cpp", map[string]string{"/props": `{"default_generation_settings":{"n_ctx":4096},"total_slots":4,"model_path":"/models/qwen.gguf","chat_template":"{{x}}","build_info":"b6490-1a2b3c4d"}`}, VersionInfo{"/props", "b6490-1a2b3c4d"}},
		{"SGLang", map[string]string{"/get_server_info": `{"model_path":"Qwen/Qwen3-8B","tp_size":1,"internal_states":[{"last_gen_throughput":12.5}],"version":"0.5.3"}`}, VersionInfo{"/get_server_info", "0.5.3"}},
		{"newer SGLang", map[string]string{"/server_info": `{"version":"0.5.9"}`}, VersionInfo{"/server_info", "0.5.9"}},
		{"Ollama", map[string]string{"/api/version": `{"version":"0.17.4"}`}, VersionInfo{"/api/version", "0.17.4"}},
		{"a gateway's own /info without a version", map[string]string{"/info": `{"name":"gateway"}`, "/props": `{"build_info":"b1-x"}`}, VersionInfo{"/props", "b1-x"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newVersionServer(t, tc.answers)
			got, err := newVersionClient(t, srv.URL+"/v1", commoncfg.DefaultHTTPClientConfig).Fetch(context.Background(), "")
			if err != nil || got != tc.want {
				t.Errorf("Fetch = %+v, %v; want %+v", got, err, tc.want)
			}
			for _, p := range srv.paths() {
				if !strings.HasPrefix(p, "GET /") || strings.HasPrefix(p, "GET /v1") {
					t.Errorf("asked %q: want GETs at the root", p)
				}
			}
		})
	}
}

// TestVersionPrefersWhatWorked: the endpoint that answered last is asked
// first, alone when it answers; a path prefix before /v1 is kept.
func TestVersionPrefersWhatWorked(t *testing.T) {
	srv := newVersionServer(t, map[string]string{"/gw/info": `{"version":"3.0.0"}`, "/gw/version": `{"version":"9.9.9"}`})
	vc := newVersionClient(t, srv.URL+"/gw/v1/", commoncfg.DefaultHTTPClientConfig)
	got, err := vc.Fetch(context.Background(), "/info")
	if err != nil || got != (VersionInfo{"/info", "3.0.0"}) {
		t.Errorf("Fetch = %+v, %v", got, err)
	}
	if p := srv.paths(); len(p) != 1 || p[0] != "GET /gw/info" {
		t.Errorf("asked %v, want only GET /gw/info", p)
	}
}

// TestVersionAllAbsent: a server with none of the endpoints is asked each
// once and says so with ErrNoVersionEndpoint, not a fault.
func TestVersionAllAbsent(t *testing.T) {
	srv := newVersionServer(t, nil)
	_, err := newVersionClient(t, srv.URL+"/v1", commoncfg.DefaultHTTPClientConfig).Fetch(context.Background(), "/props")
	if !errors.Is(err, ErrNoVersionEndpoint) {
		t.Errorf("err %v", err)
	}
	if p := srv.paths(); len(p) != len(VersionEndpoints) || p[0] != "GET /props" {
		t.Errorf("asked %v", p)
	}
}

// TestVersionHostileAnswers: a huge, malformed or mistyped answer, an
// HTTP error, a secret in the version: each is bounded and reported (the
// first problem, with its endpoint), never a crash, never a secret.
func TestVersionHostileAnswers(t *testing.T) {
	huge := `{"version":"` + strings.Repeat("9", 2*MaxVersionAnswer) + `"}`
	for _, tc := range []struct {
		name    string
		handler http.HandlerFunc
		want    string // in the error; "" for a success
		version string
	}{
		{"huge", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, huge) }, "/version: answer larger than 1 MiB", ""},
		{"endless", func(w http.ResponseWriter, r *http.Request) {
			chunk := []byte(strings.Repeat(" ", 64<<10))
			for i := 0; i < 64 && r.Context().Err() == nil; i++ {
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
		}, "larger than 1 MiB", ""},
		{"not JSON", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "<html>hello</html>") }, "/version: the answer is not JSON", ""},
		{"a list", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, `[1,2]`) }, "/version: the answer is a JSON array, not an object", ""},
		{"a number", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, `{"version": 5}`) }, `/version: "version" is a JSON number, not a string`, ""},
		{"HTTP 500", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(500) }, "/version: HTTP 500", ""},
		{"secret", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, `{"version":"1.0 `+hostileBearer+`"}`) }, "", "1.0 [secret]"},
		{"control characters", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, `{"version":"1.0\n\u001b[2J"}`) }, "", "1.0  [2J"},
		{"long", func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, `{"version":"`+strings.Repeat("v", 300)+`"}`)
		}, "", strings.Repeat("v", MaxIdentityValue) + "…"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/version" {
					http.NotFound(w, r)
					return
				}
				tc.handler(w, r)
			}))
			defer srv.Close()
			got, err := newVersionClient(t, srv.URL+"/v1", hostileHTTPConfig(false)).Fetch(context.Background(), "")
			switch {
			case tc.want == "" && (err != nil || got.Version != tc.version):
				t.Errorf("Fetch = %+v, %v; want version %q", got, err, tc.version)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("Fetch = %+v, %v; want an error with %q", got, err, tc.want)
			}
			if err != nil && (strings.Contains(err.Error(), hostileBearer) || len(err.Error()) > 300) {
				t.Errorf("error %q", err)
			}
		})
	}
}

// TestVersionRedirectElsewhereRefused: a version endpoint that redirects
// to another host gets no request sent there, whatever follow_redirects
// says (internal/httpclient's policy): it is reported, not followed.
func TestVersionRedirectElsewhereRefused(t *testing.T) {
	other := newHeaderRecorder(t)
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/version", http.StatusFound)
	}))
	defer redirector.Close()
	for _, follow := range []bool{false, true} {
		_, err := newVersionClient(t, redirector.URL+"/v1", hostileHTTPConfig(follow)).Fetch(context.Background(), "")
		if err == nil || !strings.Contains(err.Error(), "redirect") {
			t.Errorf("follow=%v: err %v, want a refused redirect", follow, err)
		}
		if n := len(other.requests()); n != 0 {
			t.Fatalf("follow=%v: the other host got %d requests", follow, n)
		}
	}
}
