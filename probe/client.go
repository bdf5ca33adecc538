// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package probe

import (
	"cmp"
	"fmt"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/llmprobe/llmprobe/config"
	"github.com/llmprobe/llmprobe/internal/httpclient"
	"github.com/llmprobe/llmprobe/probe/wire"
)

// ClientOptions are the parts of a target's client that come from its
// caller rather than from the target's configuration.
type ClientOptions struct {
	Timeout       time.Duration
	UserAgent     string
	RecordContent bool
	Tracer        trace.Tracer
	Propagator    propagation.TextMapPropagator
	// Inspect is wire.ClientConfig.Inspect (nil: none).
	Inspect func(trace.Span, *wire.Result)
	// Conns, when set, counts the HTTP client's open connections.
	Conns *httpclient.Conns
	// DialAddress, when set, is where every connection goes: a
	// discovered replica (httpclient.Options.DialAddress).
	DialAddress string
}

// NewTargetClient builds the wire client of t and the HTTP client under
// it the one way every request to a target is sent: t's
// http_client_config (auth, TLS, proxy, the one redirect policy) with
// its http_version (HTTP/1.1, HTTP/2 by ALPN, or h2c), its
// configured headers known to the redactor, its provider. The caller
// closes the HTTP client's idle connections when done.
func NewTargetClient(t *config.Target, o ClientOptions) (*wire.Client, *http.Client, error) {
	hc, err := wire.NewTargetHTTPClient(t.ClientConfig(), t.Name, wire.HTTPOptions{IdleTimeout: t.IdleConnTimeout(), H2C: t.H2C(), Conns: o.Conns, DialAddress: o.DialAddress})
	if err != nil {
		return nil, nil, fmt.Errorf("http_client_config: %w", err)
	}
	var configured []string
	if hh := t.HTTPClientConfig.HTTPHeaders; hh != nil {
		for name := range hh.Headers {
			configured = append(configured, name)
		}
	}
	client, err := wire.NewClient(wire.ClientConfig{
		ConfiguredHeaders: configured,
		BaseURL:           t.URL,
		HTTPClient:        hc,
		H2C:               t.H2C(),
		Timeout:           o.Timeout,
		UserAgent:         o.UserAgent,
		RecordContent:     o.RecordContent,
		Provider:          cmp.Or(t.Provider, wire.DefaultProviderFor(wire.API(t.API))),
		Tracer:            o.Tracer,
		Propagator:        o.Propagator,
		Redactor:          wire.NewRedactor(t.HTTPClientConfig),
		Inspect:           o.Inspect,
	})
	if err != nil {
		hc.CloseIdleConnections()
		return nil, nil, err
	}
	return client, hc, nil
}
