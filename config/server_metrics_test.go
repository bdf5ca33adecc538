// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package config

import (
	"testing"
	"time"
)

func TestServerMetricsGood(t *testing.T) {
	cfg, err := Load([]byte(`global:
  diagnosis:
    prometheus:
      url: http://prometheus:9090
      selector: 'namespace="llm"'
`+discoveryBase+`    url: http://gw:8000/v1
    server_metrics:
      url: http://engine:8000/metrics
      http_client_config: {bearer_token: metrics-token}
  - name: pool2
    model: m
    workload: w
    arrival: {rate: 1}
    discovery: {dns: {names: [a.example], port: 8000}}
    server_metrics: {path: /metrics, port: 9000, interval: 30s}
`), "x.yml")
	if err != nil {
		t.Fatal(err)
	}
	sm := cfg.Targets[0].ServerMetrics
	if sm.URL != "http://engine:8000/metrics" || time.Duration(sm.Interval) != 15*time.Second || sm.ReadTimeout() != 10*time.Second || sm.HTTPClientConfig.FollowRedirects {
		t.Errorf("plain: %+v timeout %v", sm, sm.ReadTimeout())
	}
	sm = cfg.Targets[1].ServerMetrics
	if sm.ReplicaURL("10.0.0.7:8000") != "http://10.0.0.7:9000/metrics" || sm.ReplicaURL("[::1]:8000") != "http://[::1]:9000/metrics" || sm.ReadTimeout() != 10*time.Second {
		t.Errorf("replica url %q %q", sm.ReplicaURL("10.0.0.7:8000"), sm.ReplicaURL("[::1]:8000"))
	}
	sm.Port = 0
	if got := sm.ReplicaURL("10.0.0.7:8000"); got != "http://10.0.0.7:8000/metrics" {
		t.Errorf("replica url without port: %q", got)
	}
	if p := cfg.Global.Diagnosis.Prometheus; p == nil || p.URL != "http://prometheus:9090" || p.Selector != `namespace="llm"` {
		t.Errorf("diagnosis: %+v", p)
	}
}

// TestServerMetricsErrors: every mistake names the file, line and field.
func TestServerMetricsErrors(t *testing.T) {
	tests := []struct{ name, lines, want string }{
		{"neither url nor path", "    url: http://h:1/v1\n    server_metrics: {interval: 5s}\n",
			`x.yml:11:5: targets[0].server_metrics: set url (the engine's /metrics) or, on a discovery target, path (read from each replica)`},
		{"both", "    url: http://h:1/v1\n    server_metrics:\n      url: http://e:1/metrics\n      path: /metrics\n",
			`x.yml:13:7: targets[0].server_metrics.path: set url or path, not both`},
		{"path without discovery", "    url: http://h:1/v1\n    server_metrics:\n      path: /metrics\n",
			`x.yml:12:7: targets[0].server_metrics.path: needs a discovery section (each replica's address); set url on a target without one`},
		{"bad path", "    discovery: {dns: {names: [a.example], port: 80}}\n    server_metrics:\n      path: metrics\n",
			`x.yml:12:7: targets[0].server_metrics.path: must be a URL path beginning with / (no query), got "metrics"`},
		{"credentials in url", "    url: http://h:1/v1\n    server_metrics:\n      url: http://u:secret@e:1/metrics\n",
			`x.yml:12:7: targets[0].server_metrics.url: credentials in the URL are not allowed; use http_client_config.basic_auth`},
		{"interval too short", "    url: http://h:1/v1\n    server_metrics:\n      url: http://e:1/metrics\n      interval: 100ms\n",
			`x.yml:13:7: targets[0].server_metrics.interval: must be at least 1s, got 100ms`},
		{"timeout over interval", "    url: http://h:1/v1\n    server_metrics:\n      url: http://e:1/metrics\n      interval: 2s\n      timeout: 5s\n",
			`x.yml:14:7: targets[0].server_metrics.timeout: must be at most the interval (2s), got 5s`},
		{"port with url", "    url: http://h:1/v1\n    server_metrics:\n      url: http://e:1/metrics\n      port: 9000\n",
			`x.yml:13:7: targets[0].server_metrics.port: applies only with path (the replica's host at this port)`},
		{"unknown key", "    url: http://h:1/v1\n    server_metrics:\n      url: http://e:1/metrics\n      every: 5s\n",
			`x.yml:13:7: targets[0].server_metrics.every: unknown field "every"`},
		{"two auths", "    url: http://h:1/v1\n    server_metrics:\n      url: http://e:1/metrics\n      http_client_config: {bearer_token: a, basic_auth: {username: u, password: p}}\n",
			`x.yml:13:7: targets[0].server_metrics.http_client_config: at most one of basic_auth, oauth2, bearer_token & bearer_token_file must be configured`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load([]byte(discoveryBase+tt.lines), "x.yml")
			if err == nil {
				t.Fatal("no error")
			}
			if got := err.Error(); got != tt.want {
				t.Errorf("got\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
	_, err := Load([]byte("global:\n  diagnosis:\n    prometheus: {selector: 'a=\"b\"'}\n"+discoveryBase+"    url: http://h:1/v1\n"), "x.yml")
	if want := `x.yml:3:5: global.diagnosis.prometheus.url: required`; err == nil || err.Error() != want {
		t.Errorf("diagnosis without url: %v, want %s", err, want)
	}
}
