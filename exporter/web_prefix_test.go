// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package exporter

import (
	"html"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"
)

// noRedirects is a client that returns redirects instead of following them.
var noRedirects = &http.Client{
	Timeout:       10 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

func fetch(t *testing.T, method, rawURL string, header http.Header, body string) (*http.Response, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, rawURL, rd)
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := noRedirects.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, rawURL, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

var linkRE = regexp.MustCompile(`<(a|form)\b[^>]*?\b(href|action)="([^"]*)"`)

// pageLinks returns the href of every link and the action of every form
// of a page (fragment-only links left out).
func pageLinks(page string) (links, actions []string) {
	for _, m := range linkRE.FindAllStringSubmatch(page, -1) {
		v := html.UnescapeString(m[3])
		switch {
		case strings.HasPrefix(v, "#"):
		case m[1] == "form":
			actions = append(actions, v)
		default:
			links = append(links, v)
		}
	}
	return links, actions
}

// TestRoutePrefixBehindReverseProxy serves llmprobe behind a real
// httputil.ReverseProxy at /llmprobe/, both ways a proxy does it: passing
// the path through (--web.external-url=<proxy>/llmprobe/, the route prefix
// defaulting to its path) and stripping the prefix (--web.route-prefix=/).
// Every endpoint answers under the prefix, every link and the reload form
// of the pages work through the proxy, the form's POST comes back with 303
// to the page, and a browser POST carrying the proxy's origin passes the
// cross-origin protection although the proxy rewrites Host.
func TestRoutePrefixBehindReverseProxy(t *testing.T) {
	for _, mode := range []string{"pass-through", "strip"} {
		t.Run(mode, func(t *testing.T) {
			// The proxy's address must be known before llmprobe's options.
			proxyLn := httptest.NewUnstartedServer(nil)
			proxyURL := "http://" + proxyLn.Listener.Addr().String()
			ext, prefix, err := ParseWebURLs(proxyURL+"/llmprobe/", map[string]string{"pass-through": "", "strip": "/"}[mode])
			if err != nil {
				t.Fatal(err)
			}
			if want := map[string]string{"pass-through": "/llmprobe", "strip": ""}[mode]; prefix != want {
				t.Fatalf("route prefix = %q, want %q", prefix, want)
			}
			f := newWebFixture(t, func(o *WebOptions) { o.ExternalURL, o.RoutePrefix = ext, prefix })
			backend, _ := url.Parse(f.srv.URL)
			proxy := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
				pr.SetURL(backend) // rewrites Host to the backend's
				pr.SetXForwarded()
				if mode == "strip" {
					pr.Out.URL.Path = strings.TrimPrefix(pr.In.URL.Path, "/llmprobe")
					pr.Out.URL.RawPath = ""
				}
			}}
			mux := http.NewServeMux()
			mux.Handle("/llmprobe/", proxy)
			proxyLn.Config.Handler = mux
			proxyLn.Start()
			t.Cleanup(proxyLn.Close)

			for _, path := range []string{"/", "/metrics", "/-/healthy", "/-/ready", "/config"} {
				if resp, body := fetch(t, "GET", proxyURL+"/llmprobe"+path, nil, ""); resp.StatusCode != 200 {
					t.Errorf("GET /llmprobe%s through the proxy = %d %.200q", path, resp.StatusCode, body)
				}
			}
			if resp, body := fetch(t, "PUT", proxyURL+"/llmprobe/-/reload", nil, ""); resp.StatusCode != 200 || strings.TrimSpace(body) != "Reloaded" {
				t.Errorf("PUT /llmprobe/-/reload through the proxy = %d %q", resp.StatusCode, body)
			}
			if mode == "pass-through" {
				// Directly: the routes are under the prefix only, and / leads there.
				if resp, _ := fetch(t, "GET", f.srv.URL+"/metrics", nil, ""); resp.StatusCode != http.StatusNotFound {
					t.Errorf("GET /metrics without the prefix = %d, want 404", resp.StatusCode)
				}
				for _, p := range []string{"/", "/llmprobe"} {
					if resp, _ := fetch(t, "GET", f.srv.URL+p, nil, ""); resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "/llmprobe/" {
						t.Errorf("GET %s = %d Location %q, want 302 to /llmprobe/", p, resp.StatusCode, resp.Header.Get("Location"))
					}
				}
			}

			// Follow every link of both pages, through the proxy.
			seen := map[string]bool{}
			queue := []string{"/llmprobe/"}
			var actions []string
			for len(queue) > 0 {
				p := queue[0]
				queue = queue[1:]
				if seen[p] {
					continue
				}
				seen[p] = true
				resp, body := fetch(t, "GET", proxyURL+p, nil, "")
				if resp.StatusCode != 200 {
					t.Errorf("link %s through the proxy = %d %.200q", p, resp.StatusCode, body)
					continue
				}
				if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
					continue
				}
				if !strings.Contains(body, `content="5; url=/llmprobe/"`) && strings.Contains(body, "http-equiv") {
					t.Errorf("%s refreshes to the wrong place", p)
				}
				links, acts := pageLinks(body)
				for _, l := range links {
					if !strings.HasPrefix(l, "/llmprobe/") {
						t.Errorf("%s links to %q, outside /llmprobe/", p, l)
						continue
					}
					queue = append(queue, l)
				}
				actions = append(actions, acts...)
			}
			for _, want := range []string{"/llmprobe/", "/llmprobe/metrics", "/llmprobe/config", "/llmprobe/-/healthy", "/llmprobe/-/ready"} {
				if !seen[want] {
					t.Errorf("the pages never link to %s (followed %v)", want, seen)
				}
			}
			if len(actions) == 0 {
				t.Fatal("the status page has no reload form")
			}
			for _, a := range actions {
				if a != "/llmprobe/-/reload" {
					t.Errorf("form action %q, want /llmprobe/-/reload", a)
				}
				// Submitted as a browser does: same-origin, the form's field.
				resp, body := fetch(t, "POST", proxyURL+a, http.Header{
					"Content-Type":   {"application/x-www-form-urlencoded"},
					"Origin":         {proxyURL},
					"Sec-Fetch-Site": {"same-origin"},
				}, "from=status-page")
				if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/llmprobe/?reload=ok" {
					t.Fatalf("form POST %s = %d Location %q %q, want 303 to /llmprobe/?reload=ok", a, resp.StatusCode, resp.Header.Get("Location"), body)
				}
				resp, body = fetch(t, "GET", proxyURL+resp.Header.Get("Location"), nil, "")
				if resp.StatusCode != 200 || !strings.Contains(body, `id="reload-outcome"`) || !strings.Contains(body, "Configuration reloaded at") {
					t.Errorf("the page after the form's redirect = %d, lacks the outcome", resp.StatusCode)
				}
			}
			// An older browser sends Origin without Sec-Fetch-Site; the proxy
			// rewrote Host, so only the external URL makes it same-origin.
			form := http.Header{"Content-Type": {"application/x-www-form-urlencoded"}, "Origin": {proxyURL}}
			if resp, body := fetch(t, "POST", proxyURL+"/llmprobe/-/reload", form, "from=status-page"); resp.StatusCode != http.StatusSeeOther {
				t.Errorf("POST with the external origin through a Host-rewriting proxy = %d %q, want 303", resp.StatusCode, body)
			}
			form.Set("Origin", "http://evil.example")
			if resp, _ := fetch(t, "POST", proxyURL+"/llmprobe/-/reload", form, "from=status-page"); resp.StatusCode != http.StatusForbidden {
				t.Errorf("POST from another origin = %d, want 403", resp.StatusCode)
			}
		})
	}
}

func TestParseWebURLs(t *testing.T) {
	for _, c := range []struct {
		ext, prefix     string
		wantExt, wantPx string
		bad             bool
	}{
		{"", "", "", "", false},
		{"", "/", "", "", false},
		{"", "llmprobe/", "", "/llmprobe", false},
		{"http://proxy.example/llmprobe/", "", "http://proxy.example/llmprobe", "/llmprobe", false},
		{"https://proxy.example:8443/a/b", "/", "https://proxy.example:8443/a/b", "", false},
		{"https://proxy.example", "/x", "https://proxy.example", "/x", false},
		{"proxy.example/llmprobe", "", "", "", true},
		{"ftp://proxy.example/", "", "", "", true},
		{"http://user:pw@proxy.example/", "", "", "", true},
		{"http://proxy.example/?q=1", "", "", "", true},
		{"", "/a/../b", "", "", true},
		{"", "/a?b", "", "", true},
	} {
		ext, px, err := ParseWebURLs(c.ext, c.prefix)
		if c.bad {
			if err == nil {
				t.Errorf("ParseWebURLs(%q, %q) accepted", c.ext, c.prefix)
			}
			continue
		}
		got := ""
		if ext != nil {
			got = ext.String()
		}
		if err != nil || got != c.wantExt || px != c.wantPx {
			t.Errorf("ParseWebURLs(%q, %q) = %q, %q, %v; want %q, %q", c.ext, c.prefix, got, px, err, c.wantExt, c.wantPx)
		}
	}
}

// The handler with a route prefix counts as wired only if nothing of it
// answers outside the prefix.
func TestRoutePrefixServesNothingElse(t *testing.T) {
	f := newWebFixture(t, func(o *WebOptions) { o.RoutePrefix = "/llmprobe" })
	for _, p := range []string{"/config", "/-/healthy", "/-/reload", "/llmprobex/metrics"} {
		if resp, _ := fetch(t, "GET", f.srv.URL+p, nil, ""); resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s = %d, want 404", p, resp.StatusCode)
		}
	}
	for _, p := range []string{"/llmprobe/-/healthy", "/llmprobe/metrics"} {
		if resp, _ := fetch(t, "GET", f.srv.URL+p, nil, ""); resp.StatusCode != 200 {
			t.Errorf("GET %s = %d, want 200", p, resp.StatusCode)
		}
	}
}

func newTextLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}
