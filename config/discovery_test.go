// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
)

// discoveryBase is a target without url; lines appended to it start at
// line 10, under the target (indent 4).
const discoveryBase = `workloads:
  w:
    classes:
      - {name: c, prompt_tokens: 10, output_tokens: 10}
targets:
  - name: pool
    model: m
    workload: w
    arrival: {rate: 1}
`

func TestDiscoveryGood(t *testing.T) {
	t.Run("dns defaults", func(t *testing.T) {
		cfg, err := Load([]byte(discoveryBase+`    discovery:
      dns: {names: [vllm-headless.prod.svc.cluster.local], port: 8000}
`), "/etc/llmprobe/x.yml")
		if err != nil {
			t.Fatal(err)
		}
		tg := cfg.Targets[0]
		d := tg.Discovery
		if d.Mechanism() != "dns" || d.GracePeriod != model.Duration(5*time.Minute) {
			t.Errorf("discovery = %+v, mechanism %q", d, d.Mechanism())
		}
		if d.DNS.Type != "A" || d.DNS.Port != 8000 || d.DNS.RefreshInterval != model.Duration(30*time.Second) || d.DNS.Server != "" {
			t.Errorf("dns = %+v", d.DNS)
		}
		if tg.RatePer != RatePerTarget || tg.MaxReplicas != DefaultMaxReplicas || tg.URL != "" {
			t.Errorf("rate_per %q, max_replicas %d, url %q", tg.RatePer, tg.MaxReplicas, tg.URL)
		}
	})
	t.Run("srv with url and server", func(t *testing.T) {
		cfg, err := Load([]byte(discoveryBase+`    url: https://vllm.prod.svc:8000/v1
    rate_per: replica
    max_replicas: 4096
    discovery:
      grace_period: 0s
      dns: {names: [_http._tcp.vllm.prod.svc.cluster.local., other.example], type: SRV, refresh_interval: 1s, server: "[::1]:53"}
`), "x.yml")
		if err != nil {
			t.Fatal(err)
		}
		tg := cfg.Targets[0]
		if tg.RatePer != RatePerReplica || tg.MaxReplicas != 4096 || tg.Discovery.GracePeriod != 0 || tg.Discovery.DNS.Type != "SRV" || tg.Discovery.DNS.Server != "[::1]:53" {
			t.Errorf("target = %+v, dns %+v", tg, tg.Discovery.DNS)
		}
	})
	t.Run("file relative to the config", func(t *testing.T) {
		dir := t.TempDir()
		cfgPath := filepath.Join(dir, "llmprobe.yml")
		if err := os.WriteFile(cfgPath, []byte(discoveryBase+`    discovery:
      file: {files: [sd/pool.json, "sd/*.yml", /abs/pool.yaml]}
`), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := LoadFile(cfgPath)
		if err != nil {
			t.Fatal(err)
		}
		f := cfg.Targets[0].Discovery.File
		want := []string{filepath.Join(dir, "sd/pool.json"), filepath.Join(dir, "sd/*.yml"), "/abs/pool.yaml"}
		if strings.Join(f.Files, ",") != strings.Join(want, ",") || f.RefreshInterval != model.Duration(5*time.Minute) {
			t.Errorf("file = %+v, want files %v refresh 5m", f, want)
		}
		if cfg.Targets[0].Discovery.Mechanism() != "file" {
			t.Errorf("mechanism %q", cfg.Targets[0].Discovery.Mechanism())
		}
	})
	t.Run("kubernetes", func(t *testing.T) {
		for _, k := range []string{
			`{namespace: prod, service: vllm, port: http}`,
			`{namespace: prod, service: vllm, port: "8000"}`,
			`{namespace: prod, service: vllm}`,
			`{namespace: prod, selector: "app=vllm,tier in (gpu)", port: "8000", kubeconfig: kube/config}`,
		} {
			cfg, err := Load([]byte(discoveryBase+"    discovery:\n      kubernetes: "+k+"\n"), "/etc/llmprobe/x.yml")
			if err != nil {
				t.Errorf("%s: %v", k, err)
				continue
			}
			ks := cfg.Targets[0].Discovery.Kubernetes
			if cfg.Targets[0].Discovery.Mechanism() != "kubernetes" || ks.Namespace != "prod" {
				t.Errorf("%s: %+v", k, ks)
			}
			if ks.Kubeconfig != "" && ks.Kubeconfig != "/etc/llmprobe/kube/config" {
				t.Errorf("%s: kubeconfig %q, want anchored at the config's directory", k, ks.Kubeconfig)
			}
		}
	})
	t.Run("no discovery", func(t *testing.T) {
		cfg, err := Load([]byte(discoveryBase+"    url: http://127.0.0.1:8000/v1\n"), "x.yml")
		if err != nil {
			t.Fatal(err)
		}
		if tg := cfg.Targets[0]; tg.Discovery != nil || tg.RatePer != "" || tg.MaxReplicas != 0 {
			t.Errorf("target without discovery: %+v", tg)
		}
	})
}

// TestDiscoveryErrors: every problem of a discovery section, rate_per
// and max_replicas, with its position.
func TestDiscoveryErrors(t *testing.T) {
	tests := []struct{ name, lines, want string }{
		{"url required without discovery", "",
			`x.yml:6:5: targets[0].url: required (or a discovery section)`},
		{"rate_per without discovery", "    url: http://h:1/v1\n    rate_per: replica\n",
			`x.yml:11:5: targets[0].rate_per: applies only to a target with discovery`},
		{"max_replicas without discovery", "    url: http://h:1/v1\n    max_replicas: 8\n",
			`x.yml:11:5: targets[0].max_replicas: applies only to a target with discovery`},
		{"h2c through a proxy without url", "    http_version: \"2\"\n    http_client_config: {proxy_url: \"http://proxy:3128\"}\n    discovery: {dns: {names: [a.example], port: 80}}\n",
			`x.yml:10:5: targets[0].http_version: "2" on an http:// URL is h2c (HTTP/2 with prior knowledge), which cannot go through proxy_url or proxy_from_environment; drop the proxy or use an https:// URL`},
		{"no mechanism", "    discovery: {grace_period: 1m}\n",
			`x.yml:10:5: targets[0].discovery: exactly one of file, dns or kubernetes is required`},
		{"two mechanisms", "    discovery:\n      file: {files: [a.json]}\n      dns: {names: [a.example], port: 80}\n",
			`x.yml:10:5: targets[0].discovery: exactly one of file, dns or kubernetes is allowed, got file and dns`},
		{"unknown mechanism", "    discovery: {consul: {}}\n",
			`x.yml:10:5: targets[0].discovery: exactly one of file, dns or kubernetes is required` + "\n" +
				`x.yml:10:17: targets[0].discovery.consul: unknown field "consul"`},
		{"bad rate_per", "    rate_per: pod\n    discovery: {dns: {names: [a.example], port: 80}}\n",
			`x.yml:10:5: targets[0].rate_per: must be "replica" or "target", got "pod"`},
		{"max_replicas zero", "    max_replicas: 0\n    discovery: {dns: {names: [a.example], port: 80}}\n",
			`x.yml:10:5: targets[0].max_replicas: must be from 1 to 4096, got 0`},
		{"max_replicas too many", "    max_replicas: 4097\n    discovery: {dns: {names: [a.example], port: 80}}\n",
			`x.yml:10:5: targets[0].max_replicas: must be from 1 to 4096, got 4097`},
		{"grace period too long", "    discovery:\n      grace_period: 2d\n      dns: {names: [a.example], port: 80}\n",
			`x.yml:11:7: targets[0].discovery.grace_period: must be from 0s to 1d, got 2d`},
		{"grace period as number", "    discovery:\n      grace_period: 5\n      dns: {names: [a.example], port: 80}\n",
			`x.yml:11:7: targets[0].discovery.grace_period: not a valid duration "5" ` + durationHint},

		// dns
		{"dns no names", "    discovery:\n      dns: {port: 80}\n",
			`x.yml:11:7: targets[0].discovery.dns.names: at least one name is required`},
		{"dns empty name", "    discovery:\n      dns:\n        names: [a.example, \"\"]\n        port: 80\n",
			`x.yml:12:28: targets[0].discovery.dns.names[1]: must not be empty`},
		{"dns bad name", "    discovery:\n      dns:\n        names: [\"bad name\"]\n        port: 80\n",
			`x.yml:12:17: targets[0].discovery.dns.names[0]: "bad name" is not a valid DNS name`},
		{"dns bad type", "    discovery:\n      dns:\n        names: [a.example]\n        type: CNAME\n        port: 80\n",
			`x.yml:13:9: targets[0].discovery.dns.type: must be A, AAAA or SRV, got "CNAME"`},
		{"dns port required", "    discovery:\n      dns:\n        names: [a.example]\n        type: AAAA\n",
			`x.yml:11:7: targets[0].discovery.dns.port: required with type AAAA (1 to 65535)`},
		{"dns port range", "    discovery:\n      dns:\n        names: [a.example]\n        port: 70000\n",
			`x.yml:13:9: targets[0].discovery.dns.port: must be from 1 to 65535, got 70000`},
		{"dns port with srv", "    discovery:\n      dns:\n        names: [_http._tcp.a.example]\n        type: SRV\n        port: 80\n",
			`x.yml:14:9: targets[0].discovery.dns.port: not allowed with type SRV: the records carry the port`},
		{"dns refresh too short", "    discovery:\n      dns:\n        names: [a.example]\n        port: 80\n        refresh_interval: 100ms\n",
			`x.yml:14:9: targets[0].discovery.dns.refresh_interval: must be from 1s to 1d, got 100ms`},
		{"dns server without port", "    discovery:\n      dns:\n        names: [a.example]\n        port: 80\n        server: 10.0.0.53\n",
			`x.yml:14:9: targets[0].discovery.dns.server: must be host:port, got "10.0.0.53"`},
		{"dns server bad port", "    discovery:\n      dns:\n        names: [a.example]\n        port: 80\n        server: \"10.0.0.53:0\"\n",
			`x.yml:14:9: targets[0].discovery.dns.server: invalid port "0"`},
		{"dns unknown key", "    discovery:\n      dns:\n        names: [a.example]\n        port: 80\n        ttl: 5s\n",
			`x.yml:14:9: targets[0].discovery.dns.ttl: unknown field "ttl"`},

		// file
		{"file no files", "    discovery:\n      file: {refresh_interval: 1m}\n",
			`x.yml:11:7: targets[0].discovery.file.files: at least one file is required`},
		{"file empty path", "    discovery:\n      file:\n        files: [\"\"]\n",
			`x.yml:12:17: targets[0].discovery.file.files[0]: must not be empty`},
		{"file glob in a directory", "    discovery:\n      file:\n        files: [\"/etc/*/pool.json\"]\n",
			`x.yml:12:17: targets[0].discovery.file.files[0]: "/etc/*/pool.json": a glob is allowed only in the last element of the path`},
		{"file bad glob", "    discovery:\n      file:\n        files: [\"/etc/[.json\"]\n",
			`x.yml:12:17: targets[0].discovery.file.files[0]: "/etc/[.json": bad glob: syntax error in pattern`},
		{"file extension", "    discovery:\n      file:\n        files: [/etc/pool.txt]\n",
			`x.yml:12:17: targets[0].discovery.file.files[0]: "/etc/pool.txt": must end in .json, .yml or .yaml (file_sd)`},
		{"file refresh zero", "    discovery:\n      file:\n        files: [/etc/pool.json]\n        refresh_interval: 0s\n",
			`x.yml:13:9: targets[0].discovery.file.refresh_interval: must be from 1s to 1d, got 0s`},

		// kubernetes
		{"kubernetes namespace required", "    discovery:\n      kubernetes: {service: vllm}\n",
			`x.yml:11:7: targets[0].discovery.kubernetes.namespace: required`},
		{"kubernetes bad namespace", "    discovery:\n      kubernetes:\n        namespace: Prod\n        service: vllm\n",
			`x.yml:12:9: targets[0].discovery.kubernetes.namespace: invalid namespace "Prod": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`},
		{"kubernetes neither", "    discovery:\n      kubernetes: {namespace: prod}\n",
			`x.yml:11:7: targets[0].discovery.kubernetes: exactly one of service or selector is required`},
		{"kubernetes both", "    discovery:\n      kubernetes: {namespace: prod, service: vllm, selector: app=vllm}\n",
			`x.yml:11:7: targets[0].discovery.kubernetes: exactly one of service or selector is allowed, got both`},
		{"kubernetes bad service", "    discovery:\n      kubernetes:\n        namespace: prod\n        service: 1vllm\n",
			`x.yml:13:9: targets[0].discovery.kubernetes.service: invalid service name "1vllm": a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')`},
		{"kubernetes bad selector", "    discovery:\n      kubernetes:\n        namespace: prod\n        selector: \"app in vllm\"\n",
			`x.yml:13:9: targets[0].discovery.kubernetes.selector: invalid label selector: unable to parse requirement: found 'vllm' expected: '('`},
		{"kubernetes port range", "    discovery:\n      kubernetes:\n        namespace: prod\n        service: vllm\n        port: \"0\"\n",
			`x.yml:14:9: targets[0].discovery.kubernetes.port: must be from 1 to 65535, got 0`},
		{"kubernetes bad port name", "    discovery:\n      kubernetes:\n        namespace: prod\n        service: vllm\n        port: Http_Port\n",
			`x.yml:14:9: targets[0].discovery.kubernetes.port: invalid port name "Http_Port": must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load([]byte(discoveryBase+tt.lines), "x.yml")
			if err == nil {
				t.Fatalf("no error, want %s", tt.want)
			}
			if got := err.Error(); got != tt.want {
				t.Errorf("got\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}
