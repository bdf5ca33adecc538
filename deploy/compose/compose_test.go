// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

// Package compose holds the docker compose files of the local stack; its
// test checks the OpenTelemetry Collector overlay (otel-collector.yml)
// without Docker. (deploy/deploy_test.go checks docker-compose.yml.)
package compose

import (
	"context"
	"net"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/llmprobe/llmprobe/exporter"
	"github.com/llmprobe/llmprobe/internal/otlptest"
)

type composeFile struct {
	Services map[string]struct {
		Image       string            `yaml:"image"`
		Command     []string          `yaml:"command"`
		Volumes     []string          `yaml:"volumes"`
		Environment map[string]string `yaml:"environment"`
		DependsOn   []string          `yaml:"depends_on"`
	} `yaml:"services"`
}

func decode(t *testing.T, file string, v any) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	dec.KnownFields(false)
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
}

// collectorConfig is the part of the collector's configuration checked.
type collectorConfig struct {
	Receivers struct {
		OTLP struct {
			Protocols struct {
				GRPC *struct {
					Endpoint string `yaml:"endpoint"`
				} `yaml:"grpc"`
				HTTP *struct {
					Endpoint string `yaml:"endpoint"`
				} `yaml:"http"`
			} `yaml:"protocols"`
		} `yaml:"otlp"`
	} `yaml:"receivers"`
	Processors map[string]any `yaml:"processors"`
	Exporters  map[string]struct {
		Endpoint string `yaml:"endpoint"`
	} `yaml:"exporters"`
	Service struct {
		Pipelines map[string]struct {
			Receivers  []string `yaml:"receivers"`
			Processors []string `yaml:"processors"`
			Exporters  []string `yaml:"exporters"`
		} `yaml:"pipelines"`
	} `yaml:"service"`
}

// TestCollectorOverlay: the overlay adds a collector whose mounted
// configuration receives OTLP over gRPC on 4317 and HTTP on 4318 (on all
// interfaces), exports traces to debug and to a service of the base
// stack; llmprobe and the simulator, with the environment compose merges,
// point at the collector's port of their protocol; and that environment,
// aimed at loopback receivers, really exports a span over that protocol
// through llmprobe's pipeline.
func TestCollectorOverlay(t *testing.T) {
	var base, overlay composeFile
	decode(t, "docker-compose.yml", &base)
	decode(t, "otel-collector.yml", &overlay)

	col, ok := overlay.Services["otel-collector"]
	if !ok || col.Image == "" {
		t.Fatal("otel-collector.yml: no otel-collector service with an image")
	}
	var cfgPath string
	for _, a := range col.Command {
		if v, ok := strings.CutPrefix(a, "--config="); ok {
			cfgPath = v
		}
	}
	var host string
	for _, v := range col.Volumes {
		parts := strings.Split(v, ":")
		if len(parts) >= 2 && parts[1] == cfgPath {
			host = parts[0]
		}
	}
	if cfgPath == "" || host == "" {
		t.Fatalf("otel-collector: command %q, volumes %q: want --config=FILE mounted from this directory", col.Command, col.Volumes)
	}
	var cc collectorConfig
	decode(t, filepath.FromSlash(host), &cc)
	for name, ep := range map[string]string{"grpc": endpointOf(cc.Receivers.OTLP.Protocols.GRPC), "http": endpointOf(cc.Receivers.OTLP.Protocols.HTTP)} {
		want := map[string]string{"grpc": "4317", "http": "4318"}[name]
		h, p, err := net.SplitHostPort(ep)
		if err != nil || h != "0.0.0.0" || p != want {
			t.Errorf("receivers.otlp.protocols.%s.endpoint %q, want 0.0.0.0:%s (the collector binds localhost by default)", name, ep, want)
		}
	}
	pl, ok := cc.Service.Pipelines["traces"]
	if !ok || !slices.Contains(pl.Receivers, "otlp") || !slices.Contains(pl.Exporters, "debug") {
		t.Errorf("traces pipeline %+v: want the otlp receiver and the debug exporter", pl)
	}
	for _, p := range pl.Processors {
		if _, ok := cc.Processors[p]; !ok {
			t.Errorf("traces pipeline: processor %q is not configured", p)
		}
	}
	for _, e := range pl.Exporters {
		exp, ok := cc.Exporters[e]
		if !ok {
			t.Errorf("traces pipeline: exporter %q is not configured", e)
			continue
		}
		if exp.Endpoint != "" {
			h, _, err := net.SplitHostPort(exp.Endpoint)
			if _, inBase := base.Services[h]; err != nil || !inBase {
				t.Errorf("exporter %s: endpoint %q is not a service of docker-compose.yml", e, exp.Endpoint)
			}
		}
	}

	grpcRecv, httpRecv := otlptest.Start(t), otlptest.StartHTTP(t)
	for _, name := range []string{"llmprobe", "sim"} {
		t.Run(name, func(t *testing.T) {
			env := map[string]string{}
			for k, v := range base.Services[name].Environment {
				env[k] = v
			}
			for k, v := range overlay.Services[name].Environment {
				env[k] = v
			}
			if !slices.Contains(overlay.Services[name].DependsOn, "otel-collector") {
				t.Errorf("%s does not depend on otel-collector", name)
			}
			proto := env["OTEL_EXPORTER_OTLP_PROTOCOL"]
			u, err := url.Parse(env["OTEL_EXPORTER_OTLP_ENDPOINT"])
			wantPort := map[string]string{"grpc": "4317", "http/protobuf": "4318"}[proto]
			if err != nil || u.Hostname() != "otel-collector" || wantPort == "" || u.Port() != wantPort {
				t.Fatalf("%s: OTEL_EXPORTER_OTLP_PROTOCOL=%q OTEL_EXPORTER_OTLP_ENDPOINT=%q: want the collector's port of the protocol", name, proto, env["OTEL_EXPORTER_OTLP_ENDPOINT"])
			}
			// The same environment, the collector replaced by a loopback
			// receiver of the protocol.
			recv := grpcRecv
			if proto == "http/protobuf" {
				recv = httpRecv
			}
			for _, k := range []string{"OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
				"OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS", "OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES",
				"OTEL_TRACES_SAMPLER", "OTEL_BSP_MAX_QUEUE_SIZE", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "OTEL_EXPORTER_OTLP_COMPRESSION"} {
				t.Setenv(k, "")
			}
			for k, v := range env {
				t.Setenv(k, v)
			}
			u.Host = recv.Addr
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", u.String())
			before := len(recv.Requests())
			tr, err := exporter.NewTracing(context.Background(), exporter.TracingOptions{DefaultServiceName: name})
			if err != nil || tr == nil {
				t.Fatalf("NewTracing with the compose environment: %v, %v", tr, err)
			}
			_, span := tr.Tracer().Start(context.Background(), "compose")
			span.End()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := tr.Shutdown(ctx); err != nil {
				t.Errorf("export: %v", err)
			}
			reqs := recv.Requests()[before:]
			if len(reqs) != 1 || reqs[0].Protocol != proto || reqs[0].Spans != 1 {
				t.Fatalf("requests %+v, want one %s export of one span", reqs, proto)
			}
			if proto == "http/protobuf" && reqs[0].Path != path.Join(u.Path, "/v1/traces") {
				t.Errorf("OTLP/HTTP path %q, want /v1/traces", reqs[0].Path)
			}
		})
	}
}

func endpointOf(p *struct {
	Endpoint string `yaml:"endpoint"`
}) string {
	if p == nil {
		return ""
	}
	return p.Endpoint
}
