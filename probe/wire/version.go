// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package wire

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/llmprobe/llmprobe/internal/bounded"
)

// Version endpoints: what a server says of its own build, asked at a low
// rate by the engine (probe/identity.go), never on a request's path. They
// live at the server's root, next to /v1 (a base URL's trailing /v1 is
// dropped; a gateway's path prefix before it is kept):
//
//	GET /version          vLLM: {"version": "0.11.0"}
//	GET /info             TGI: {"version": "3.3.4", "sha": "<git commit>",
//	                      "model_id", "model_sha", "docker_label", ...}
//	GET /props            llama.cpp: {"build_info": "b6490-1a2b3c4d",
//	                      "model_path", "total_slots", ...}
//	GET /get_server_info  SGLang: its server arguments flattened, with
//	                      "version": "0.5.3" (newer SGLang: /server_info)
//	GET /api/version      Ollama: {"version": "0.17.4"} (its OpenAI API
//	                      is at /v1, its own at /api)
//
// They are tried in that order, the one that answered last time first. A
// 404 (405, 501) is the normal answer of a server without that endpoint
// and moves on quietly; so does a 200 whose answer lacks the field (a
// gateway's own /info). One GET each, through the target's own HTTP
// client (its auth, TLS and redirect policy: a redirect to another host
// is refused), with a short timeout and an answer of at most
// MaxVersionAnswer bytes. The version is cleaned like every identity value
// (identity.go).

// VersionEndpoints are the endpoints asked, in order.
var VersionEndpoints = [...]string{"/version", "/info", "/props", "/get_server_info", "/server_info", "/api/version"}

// Bounds of a version request.
const (
	// MaxVersionAnswer bounds an answer (SGLang's holds every server
	// argument and per-rank state: tens of KiB).
	MaxVersionAnswer = 1 << 20
	// VersionTimeout bounds each GET, its answer included.
	VersionTimeout = 5 * time.Second
)

// ErrNoVersionEndpoint is the error of a server that has none of the
// version endpoints (every one answered 404 or the like): not a fault.
var ErrNoVersionEndpoint = errors.New("no version endpoint (" + strings.Join(VersionEndpoints[:], ", ") + ") answered")

// VersionInfo is what a version endpoint said.
type VersionInfo struct {
	Endpoint string // one of VersionEndpoints
	// Version is the server's version, cleaned: vLLM's, SGLang's and
	// Ollama's "version", TGI's "version" with "+" and the first 8 digits
	// of its "sha" when given, llama.cpp's "build_info".
	Version string
}

// VersionClient asks one server's version endpoints.
type VersionClient struct {
	hc        *http.Client
	root      string // the server's root URL, without a trailing slash
	userAgent string
	redactor  *Redactor
}

// NewVersionClient returns a client of the version endpoints of the server
// at baseURL (the target's OpenAI base URL) through hc (the target's
// client, built by internal/httpclient).
func NewVersionClient(baseURL string, hc *http.Client, userAgent string, r *Redactor) (*VersionClient, error) {
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, fmt.Errorf("invalid base URL: %s", SanitizeMessage(err.Error()))
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, errors.New("base URL must be an http or https URL with a host")
	}
	u.Path = strings.TrimSuffix(strings.TrimSuffix(u.Path, "/"), "/v1")
	u.RawPath, u.RawQuery, u.Fragment, u.RawFragment = "", "", "", ""
	if hc == nil {
		hc = defaultHTTPClient()
	}
	if userAgent == "" {
		userAgent = "llmprobe"
	}
	return &VersionClient{
		hc:        bounded.Client(hc, MaxVersionAnswer, "the version endpoint's answer"),
		root:      strings.TrimSuffix(u.String(), "/"),
		userAgent: userAgent,
		redactor:  r,
	}, nil
}

// Fetch asks the endpoints, prefer (the one that answered last, or "")
// first, and returns the first answer that names a version. When none
// does, the error is ErrNoVersionEndpoint if every endpoint is absent,
// else the first other problem (an HTTP error, a malformed or too large
// answer, a refused redirect, a connection error), cleaned of secrets.
func (c *VersionClient) Fetch(ctx context.Context, prefer string) (VersionInfo, error) {
	order := make([]string, 0, len(VersionEndpoints))
	for _, ep := range VersionEndpoints {
		if ep == prefer {
			order = append(order, ep)
		}
	}
	for _, ep := range VersionEndpoints {
		if ep != prefer {
			order = append(order, ep)
		}
	}
	var first error
	for _, ep := range order {
		v, err := c.ask(ctx, ep)
		switch {
		case err == nil:
			return VersionInfo{Endpoint: ep, Version: v}, nil
		case errors.Is(err, errAbsent):
		case ctx.Err() != nil:
			return VersionInfo{}, fmt.Errorf("%s: %s", ep, c.clean(err.Error()))
		case first == nil:
			first = fmt.Errorf("%s: %s", ep, c.clean(err.Error()))
		}
	}
	if first != nil {
		return VersionInfo{}, first
	}
	return VersionInfo{}, ErrNoVersionEndpoint
}

// errAbsent: the server has no such endpoint (or it says no version).
var errAbsent = errors.New("absent")

// ask GETs one endpoint and reads its version.
func (c *VersionClient) ask(ctx context.Context, ep string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, VersionTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.root+ep, nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", c.userAgent)
	resp, err := c.hc.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotFound, http.StatusMethodNotAllowed, http.StatusNotImplemented:
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
		return "", errAbsent
	default:
		return "", fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		var tl *bounded.TooLargeError
		if errors.As(err, &tl) {
			return "", fmt.Errorf("answer larger than %s", bounded.Size(tl.Limit))
		}
		return "", fmt.Errorf("reading the answer: %w", err)
	}
	v, err := parseVersion(ep, raw)
	if err != nil {
		return "", err
	}
	if v = CleanIdentity(v, c.redactor); v == "" {
		return "", errAbsent
	}
	return v, nil
}

// versionAnswer holds the fields of every endpoint's answer that name a
// build; each is a string or absent (null).
type versionAnswer struct {
	Version   *string `json:"version"`
	SHA       *string `json:"sha"`        // TGI
	BuildInfo *string `json:"build_info"` // llama.cpp
}

// parseVersion reads the version from an endpoint's answer.
func parseVersion(ep string, raw []byte) (string, error) {
	var a versionAnswer
	if err := json.Unmarshal(raw, &a); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			if te.Field == "" {
				return "", fmt.Errorf("the answer is a JSON %s, not an object", SanitizeCut(te.Value, 16))
			}
			return "", fmt.Errorf("%q is a JSON %s, not a string", te.Field, SanitizeCut(te.Value, 16))
		}
		return "", errors.New("the answer is not JSON")
	}
	str := func(p *string) string {
		if p == nil {
			return ""
		}
		return strings.TrimSpace(*p)
	}
	switch ep {
	case "/props":
		return str(a.BuildInfo), nil
	case "/info":
		v, sha := str(a.Version), str(a.SHA)
		if v != "" && sha != "" {
			v += "+" + sha[:min(len(sha), 8)]
		}
		return v, nil
	}
	return str(a.Version), nil
}

// clean makes an error's text fit for a log line and the status page.
func (c *VersionClient) clean(msg string) string {
	var m *matcher
	if c.redactor != nil {
		m = c.redactor.baseSet().m
	}
	return sanitizeWith(msg, m)
}
