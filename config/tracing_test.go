// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package config

import (
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

const tracingBase = `
workloads:
  w:
    classes:
      - {name: c, prompt_tokens: 10, output_tokens: 10}
targets:
  - {name: t, url: "http://127.0.0.1:8000/v1", model: m, workload: w, arrival: {rate: 1}}
`

func TestTracingDefaults(t *testing.T) {
	cfg, err := Load([]byte(tracingBase), "t.yml")
	if err != nil {
		t.Fatal(err)
	}
	tr := cfg.Tracing
	if tr.Endpoint != "" || tr.Insecure != nil || tr.Headers != nil || tr.SamplingRatio != nil || tr.ServiceName != "" || tr.RecordContent {
		t.Errorf("tracing defaults = %+v, want everything from the environment", tr)
	}
}

func TestTracingGood(t *testing.T) {
	cfg, err := Load([]byte(tracingBase+`
tracing:
  endpoint: collector.observability:4317
  insecure: true
  headers: {Authorization: "Bearer s3cret", x-scope-orgid: tenant-1}
  sampling_ratio: 0.25
  service_name: llmprobe-eu
  record_content: true
`), "t.yml")
	if err != nil {
		t.Fatal(err)
	}
	tr := cfg.Tracing
	if tr.Endpoint != "collector.observability:4317" || tr.Insecure == nil || !*tr.Insecure ||
		tr.SamplingRatio == nil || *tr.SamplingRatio != 0.25 || tr.ServiceName != "llmprobe-eu" || !tr.RecordContent {
		t.Errorf("tracing = %+v", tr)
	}
	if string(tr.Headers["Authorization"]) != "Bearer s3cret" || string(tr.Headers["x-scope-orgid"]) != "tenant-1" {
		t.Errorf("headers = %v", tr.Headers)
	}
	// Header values are secrets: a config dump hides them.
	out, err := yaml.Marshal(cfg.Tracing)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "s3cret") || !strings.Contains(string(out), "<secret>") {
		t.Errorf("marshalled tracing section shows a header value:\n%s", out)
	}

	for _, ep := range []string{"http://otel:4317", "https://otel.example.com", "https://otel.example.com:443/", "[::1]:4317"} {
		if _, err := Load([]byte(tracingBase+"tracing: {endpoint: \""+ep+"\"}\n"), "t.yml"); err != nil {
			t.Errorf("endpoint %q: %v", ep, err)
		}
	}
	// Over OTLP/HTTP an endpoint may have a path (the exporter's, used as
	// it is).
	for _, sec := range []string{
		`{protocol: http/protobuf, endpoint: "http://otel:4318/v1/traces"}`,
		`{protocol: http/protobuf, endpoint: "https://otel.example.com/tenant-a/v1/traces"}`,
		`{protocol: http/protobuf, endpoint: "otel:4318", insecure: true}`,
		`{protocol: grpc, endpoint: "otel:4317"}`,
		`{protocol: http/protobuf}`,
	} {
		cfg, err := Load([]byte(tracingBase+"tracing: "+sec+"\n"), "t.yml")
		if err != nil {
			t.Errorf("%s: %v", sec, err)
		} else if want := map[bool]string{true: "http/protobuf", false: "grpc"}[strings.Contains(sec, "http/protobuf")]; cfg.Tracing.Protocol != want {
			t.Errorf("%s: protocol %q", sec, cfg.Tracing.Protocol)
		}
	}
	if _, err := Load([]byte(tracingBase+"tracing: {sampling_ratio: 0}\n"), "t.yml"); err != nil {
		t.Errorf("sampling_ratio 0: %v", err)
	}
}

func TestTracingBad(t *testing.T) {
	for _, tc := range []struct{ section, want string }{
		{`{endpoint: "otel"}`, `tracing.endpoint: must be host:port or an http(s):// URL, got "otel"`},
		{`{endpoint: ":4317"}`, `tracing.endpoint: missing host`},
		{`{endpoint: "otel:99999"}`, `tracing.endpoint: invalid port "99999"`},
		{`{endpoint: "grpc://otel:4317"}`, `tracing.endpoint: URL scheme must be http or https, got "grpc"`},
		{`{endpoint: "http://otel:4318/v1/traces"}`, `tracing.endpoint: OTLP/gRPC takes no path, got "/v1/traces"`},
		{`{endpoint: "http://u:p@otel:4317"}`, `tracing.endpoint: credentials in the URL are not allowed; use tracing.headers`},
		{`{endpoint: "http://otel:4317?x=1"}`, `tracing.endpoint: must not have a query or fragment`},
		{`{endpoint: "https://otel:4317", insecure: true}`, `tracing.endpoint: insecure: true contradicts the https:// scheme`},
		// Not a header name: maybe a header written whole ("name: value").
		{`{headers: {"bad name": x}}`, `tracing.headers: invalid header name "[secret]"`},
		{`{headers: {grpc-timeout: x}}`, `tracing.headers.grpc-timeout: invalid header name`},
		{`{headers: {x-token: "a\nb"}}`, `tracing.headers.x-token: value must not contain control characters`},
		{`{sampling_ratio: 1.5}`, `tracing.sampling_ratio: must be in [0, 1], got 1.5`},
		{`{sampling_ratio: -0.1}`, `tracing.sampling_ratio: must be in [0, 1], got -0.1`},
		{`{service_name: " "}`, `tracing.service_name: must be a printable, non-blank name`},
		{`{endpont: "otel:4317"}`, `tracing.endpont: unknown field "endpont"`},
		{`{protocol: http/json}`, `tracing.protocol: http/json is not supported: llmprobe sends OTLP/HTTP as protobuf (use http/protobuf, or grpc)`},
		{`{protocol: thrift}`, `tracing.protocol: unsupported protocol "thrift" (supported: grpc, http/protobuf)`},
		{`{protocol: GRPC}`, `tracing.protocol: unsupported protocol "GRPC"`},
		{`{protocol: grpc, endpoint: "http://otel:4318/v1/traces"}`, `tracing.endpoint: OTLP/gRPC takes no path, got "/v1/traces" (is this an OTLP/HTTP endpoint, usually port 4318? then set tracing.protocol: http/protobuf)`},
		{`{protocol: http/protobuf, endpoint: "http://otel:4318/v1/traces?x=1"}`, `tracing.endpoint: must not have a query or fragment`},
		{`{protocol: http/protobuf, endpoint: "https://otel:4318", insecure: true}`, `tracing.endpoint: insecure: true contradicts the https:// scheme`},
		{`{protocol: http/protobuf, endpoint: "otel"}`, `tracing.endpoint: must be host:port or an http(s):// URL, got "otel"`},
		{`{record_content: maybe}`, `cannot use string "maybe" as a boolean (true or false)`},
	} {
		_, err := Load([]byte(tracingBase+"tracing: "+tc.section+"\n"), "t.yml")
		if err == nil {
			t.Errorf("%s: no error, want %q", tc.section, tc.want)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %q, want it to contain %q", tc.section, err, tc.want)
		}
		if !strings.HasPrefix(err.Error(), "t.yml:") {
			t.Errorf("%s: error %q is not positioned in the file", tc.section, err)
		}
	}
}
