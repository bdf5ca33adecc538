// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package httpclient

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestEveryClientIsBuiltHere parses every Go file of the llmprobe binary
// (its packages of this module, tests excluded) and fails on any HTTP
// client built outside this package, or any use of net/http's default
// client: each would follow redirects with its own policy (net/http's or
// prometheus/common's), forwarding credentials and headers to another
// host. It also lists the sites that build clients through New or
// FromTransport, so that a new one is seen in review.
func TestEveryClientIsBuiltHere(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps",
		"-f", `{{if .Module}}{{if eq .Module.Path "github.com/llmprobe/llmprobe"}}{{.Dir}}|{{join .GoFiles ","}}{{end}}{{end}}`,
		"github.com/llmprobe/llmprobe/cmd/llmprobe").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	self, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	forbidden := map[string]string{
		"http.DefaultClient":                  "net/http's default client",
		"http.Get":                            "net/http's default client",
		"http.Head":                           "net/http's default client",
		"http.Post":                           "net/http's default client",
		"http.PostForm":                       "net/http's default client",
		"commoncfg.NewClientFromConfig":       "a prometheus/common client (its own redirect policy)",
		"commoncfg.NewRoundTripperFromConfig": "a prometheus/common round tripper (OAuth2 with its own token client)",
		"commoncfg.NewRoundTripperFromConfigWithContext": "a prometheus/common round tripper (OAuth2 with its own token client)",
		"commoncfg.NewOAuth2RoundTripper":                "prometheus/common's OAuth2 (its token client follows any redirect)",
		"config.NewClientFromConfig":                     "a prometheus/common client (its own redirect policy)",
		"config.NewRoundTripperFromConfig":               "a prometheus/common round tripper",
		"config.NewOAuth2RoundTripper":                   "prometheus/common's OAuth2",
		"oauth2.NewClient":                               "an oauth2 client",
	}
	var sites []string
	files := 0
	fset := token.NewFileSet()
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		dir, names, ok := strings.Cut(line, "|")
		if !ok || names == "" {
			continue
		}
		for _, name := range strings.Split(names, ",") {
			path := filepath.Join(dir, name)
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			files++
			inHere := dir == self
			rel := strings.TrimPrefix(path, filepath.Dir(filepath.Dir(self))+string(filepath.Separator))
			ast.Inspect(f, func(n ast.Node) bool {
				at := func() string { return rel + ":" + strconv.Itoa(fset.Position(n.Pos()).Line) }
				switch n := n.(type) {
				case *ast.CompositeLit:
					switch sel := selector(n.Type); sel {
					case "http.Client":
						if !inHere {
							t.Errorf("%s: an http.Client literal: build it with httpclient.New or FromTransport", at())
						}
					case "api.Config":
						// client_golang's api client: nil Client is its own
						// default round tripper.
						if !slices.ContainsFunc(n.Elts, func(e ast.Expr) bool {
							kv, ok := e.(*ast.KeyValueExpr)
							id, _ := kvKey(kv, ok)
							return id == "Client"
						}) {
							t.Errorf("%s: an api.Config without Client: give it an httpclient client", at())
						}
					}
				case *ast.CallExpr:
					if id, ok := n.Fun.(*ast.Ident); ok && id.Name == "new" && len(n.Args) == 1 && selector(n.Args[0]) == "http.Client" && !inHere {
						t.Errorf("%s: new(http.Client): build it with httpclient.New", at())
					}
					switch sel := selector(n.Fun); {
					case sel == "httpclient.New", sel == "httpclient.FromTransport", sel == "probe.NewHTTPClient", sel == "NewHTTPClient",
						inHere && (sel == "New" || sel == "FromTransport"):
						sites = append(sites, at()+" "+sel)
					}
				case *ast.SelectorExpr:
					if why, bad := forbidden[selector(n)]; bad && !inHere {
						t.Errorf("%s: %s is %s: use an httpclient client", at(), selector(n), why)
					}
				}
				return true
			})
		}
	}
	if files < 50 {
		t.Fatalf("only %d files parsed: go list found too little", files)
	}
	// Every kind of client the binary builds is among the sites.
	for _, want := range []string{"probe/wire/httpclient.go", "probe/wire/client.go", "servermetrics/servermetrics.go", "servermetrics/gpu.go",
		"cmd/llmprobe/fit.go", "cmd/llmprobe/bench.go", "fit/prometheus.go", "httpclient/oauth2.go"} {
		if !slices.ContainsFunc(sites, func(s string) bool { return strings.Contains(s, want) }) {
			t.Errorf("no client is built in %s any more: update this list (sites: %q)", want, sites)
		}
	}
	t.Logf("%d files; clients built at:\n%s", files, strings.Join(sites, "\n"))
}

// selector renders pkg.Name for a selector expression (pointer types and
// parentheses stripped), "" for anything else.
func selector(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
			continue
		case *ast.ParenExpr:
			e = x.X
			continue
		case *ast.SelectorExpr:
			if id, ok := x.X.(*ast.Ident); ok {
				return id.Name + "." + x.Sel.Name
			}
		case *ast.Ident:
			return x.Name
		}
		return ""
	}
}

func kvKey(kv *ast.KeyValueExpr, ok bool) (string, bool) {
	if !ok {
		return "", false
	}
	id, ok := kv.Key.(*ast.Ident)
	if !ok {
		return "", false
	}
	return id.Name, true
}
