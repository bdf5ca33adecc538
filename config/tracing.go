// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package config

import (
	"net"
	"net/url"
	"strconv"
	"strings"
	"unicode"

	commoncfg "github.com/prometheus/common/config"
)

// Tracing configures the OpenTelemetry trace of every request. Every key
// is optional: the standard OTEL_* environment (OTEL_EXPORTER_OTLP_*,
// OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES, OTEL_TRACES_SAMPLER(_ARG))
// is the default, and a key set here overrides it. Tracing is on when an
// endpoint is configured here or in the environment. The section is read
// at start; a reload does not change it.
type Tracing struct {
	// Endpoint is the OTLP collector: host:port (TLS unless Insecure), or
	// a URL whose scheme chooses: http://host:port (plaintext) or
	// https://host:port. Over OTLP/HTTP the traces go to /v1/traces
	// unless the URL has a path, which is then used as it is; over gRPC a
	// URL takes no path. It overrides OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT.
	Endpoint string `yaml:"endpoint,omitempty"`
	// Protocol is the OTLP transport: "grpc" or "http/protobuf". It
	// overrides OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, which overrides
	// OTEL_EXPORTER_OTLP_PROTOCOL; without any of them, grpc.
	Protocol string `yaml:"protocol,omitempty"`
	// Insecure, when set, overrides OTEL_EXPORTER_OTLP_(TRACES_)INSECURE:
	// true sends in plaintext, false requires TLS.
	Insecure *bool `yaml:"insecure,omitempty"`
	// Headers are sent with every export (gRPC metadata or HTTP headers) (e.g. an
	// authorization token). When set they replace
	// OTEL_EXPORTER_OTLP_(TRACES_)HEADERS.
	Headers map[string]commoncfg.Secret `yaml:"headers,omitempty"`
	// SamplingRatio is the fraction of requests traced (a parent-based
	// trace-id ratio sampler). It overrides OTEL_TRACES_SAMPLER(_ARG);
	// without either every request is traced.
	SamplingRatio *float64 `yaml:"sampling_ratio,omitempty"`
	// ServiceName overrides OTEL_SERVICE_NAME (default "llmprobe").
	ServiceName string `yaml:"service_name,omitempty"`
	// RecordContent records prompt and completion text on the spans
	// (gen_ai.input.messages, gen_ai.output.messages). Off by default:
	// prompts may be sensitive, and text makes spans large.
	RecordContent bool `yaml:"record_content,omitempty"`
}

// The OTLP protocols of Tracing.Protocol (the values of
// OTEL_EXPORTER_OTLP_PROTOCOL that llmprobe supports).
const (
	TracingProtocolGRPC         = "grpc"
	TracingProtocolHTTPProtobuf = "http/protobuf"
	// TracingProtocolHTTPJSON is a valid OTLP protocol that llmprobe
	// does not send.
	TracingProtocolHTTPJSON = "http/json"
)

// TracingProtocolProblem describes what is wrong with an OTLP protocol
// value, or returns "".
func TracingProtocolProblem(p string) string {
	switch p {
	case TracingProtocolGRPC, TracingProtocolHTTPProtobuf:
		return ""
	case TracingProtocolHTTPJSON:
		return `http/json is not supported: llmprobe sends OTLP/HTTP as protobuf (use http/protobuf, or grpc)`
	}
	return "unsupported protocol " + strconv.Quote(p) + " (supported: grpc, http/protobuf)"
}

// DefaultTracing is applied before the file's tracing section is decoded:
// everything comes from the environment.
var DefaultTracing = Tracing{}

// UnmarshalYAML implements yaml.Unmarshaler (unknown keys are rejected).
func (t *Tracing) UnmarshalYAML(unmarshal func(any) error) error {
	*t = DefaultTracing
	type plain Tracing
	return decodePlain(unmarshal, (*plain)(t))
}

// validate checks the tracing section.
func (t *Tracing) validate(errs *fieldErrors) {
	const path = "tracing"
	if t.Protocol != "" {
		if msg := TracingProtocolProblem(t.Protocol); msg != "" {
			errs.add(path+".protocol", "%s", msg)
		}
	}
	if t.Endpoint != "" {
		if msg := endpointProblem(t.Endpoint, t.Insecure, t.Protocol == TracingProtocolHTTPProtobuf); msg != "" {
			errs.add(path+".endpoint", "%s", msg)
		}
	}
	for _, name := range sortedKeys(t.Headers) {
		hp := path + ".headers." + name
		if !validMetadataKey(name) {
			errs.add(hp, "invalid header name %q (letters, digits, - _ .; not starting with grpc-)", name)
		}
		if strings.ContainsFunc(string(t.Headers[name]), unicode.IsControl) {
			errs.add(hp, "value must not contain control characters")
		}
	}
	if r := t.SamplingRatio; r != nil && !(*r >= 0 && *r <= 1) {
		errs.add(path+".sampling_ratio", "must be in [0, 1], got %v", *r)
	}
	if t.ServiceName != "" && (strings.TrimSpace(t.ServiceName) == "" || strings.ContainsFunc(t.ServiceName, unicode.IsControl)) {
		errs.add(path+".service_name", "must be a printable, non-blank name")
	}
}

// endpointProblem describes what is wrong with an OTLP endpoint (of
// OTLP/HTTP when http is set, else of OTLP/gRPC), or returns "".
func endpointProblem(ep string, insecure *bool, http bool) string {
	if strings.Contains(ep, "://") {
		u, err := url.Parse(ep)
		switch {
		case err != nil:
			return "not a URL: " + redactURLError(err).Error()
		case u.Scheme != "http" && u.Scheme != "https":
			return "URL scheme must be http or https, got " + strconv.Quote(u.Scheme)
		case u.User != nil:
			return "credentials in the URL are not allowed; use tracing.headers"
		case u.Host == "" || u.Hostname() == "":
			return "missing host"
		case u.RawQuery != "" || u.Fragment != "":
			return "must not have a query or fragment"
		case !http && u.Path != "" && u.Path != "/":
			return "OTLP/gRPC takes no path, got " + strconv.Quote(u.Path) + " (is this an OTLP/HTTP endpoint, usually port 4318? then set tracing.protocol: http/protobuf)"
		case u.Port() != "" && !validPort(u.Port()):
			return "invalid port " + strconv.Quote(u.Port())
		case u.Scheme == "https" && insecure != nil && *insecure:
			return "insecure: true contradicts the https:// scheme"
		}
		return ""
	}
	host, port, err := net.SplitHostPort(ep)
	switch {
	case err != nil:
		return "must be host:port or an http(s):// URL, got " + strconv.Quote(ep)
	case host == "":
		return "missing host"
	case !validPort(port):
		return "invalid port " + strconv.Quote(port)
	}
	return ""
}

func validPort(p string) bool {
	n, err := strconv.Atoi(p)
	return err == nil && n >= 1 && n <= 65535
}

// validMetadataKey reports whether name can be a gRPC metadata key (keys
// are case-insensitive; "grpc-" is reserved; "-bin" keys would need
// base64 values, which headers here are not).
func validMetadataKey(name string) bool {
	if name == "" || strings.HasPrefix(strings.ToLower(name), "grpc-") || strings.HasSuffix(strings.ToLower(name), "-bin") {
		return false
	}
	for _, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
		default:
			return false
		}
	}
	return true
}
