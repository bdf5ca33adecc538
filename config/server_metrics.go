// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package config

import (
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	commoncfg "github.com/prometheus/common/config"
	"github.com/prometheus/common/model"
)

// Server view (docs/config.md "server_metrics"): a target may name its
// serving engine's own /metrics, which the daemon reads beside its probes
// (probe/serverview.go), and a Prometheus for its GPUs' series.
const (
	// DefaultServerMetricsInterval is server_metrics.interval's default.
	DefaultServerMetricsInterval = 15 * time.Second
	// MinServerMetricsInterval is its least value.
	MinServerMetricsInterval = time.Second
	// MaxServerMetricsTimeout bounds server_metrics.timeout, and is its
	// default when the interval is longer.
	MaxServerMetricsTimeout = 10 * time.Second
)

// ServerMetrics is where a target's serving engine says what it sees of
// itself (its Prometheus exposition): URL, one origin for the whole
// target, or Path (and Port) on each replica of a discovery target.
type ServerMetrics struct {
	// URL is the engine's /metrics (a plain target, or one origin for all
	// the replicas of a discovery target: then only the target is read).
	URL string `yaml:"url,omitempty"`
	// Path is read from each discovered replica's own address (discovery
	// targets only), or from its host at Port.
	Path string `yaml:"path,omitempty"`
	Port int    `yaml:"port,omitempty"`
	// Interval is the time between reads (default 15s, at least 1s).
	Interval model.Duration `yaml:"interval"`
	// Timeout bounds one read (default min(interval, 10s)).
	Timeout model.Duration `yaml:"timeout,omitempty"`
	// HTTPClientConfig is the metrics origin's own auth and TLS: the
	// target's http_client_config (its API key) is never sent there.
	HTTPClientConfig commoncfg.HTTPClientConfig `yaml:"http_client_config"`
}

// UnmarshalYAML implements yaml.Unmarshaler.
func (s *ServerMetrics) UnmarshalYAML(unmarshal func(any) error) error {
	*s = ServerMetrics{Interval: model.Duration(DefaultServerMetricsInterval), HTTPClientConfig: commoncfg.DefaultHTTPClientConfig}
	type plain ServerMetrics
	err := decodePlain(unmarshal, (*plain)(s))
	// As a target's: redirects are not followed unless the file says.
	var ref nodeRef
	if uerr := unmarshal(&ref); uerr == nil && !setsKey(ref.node, "http_client_config", "follow_redirects") {
		s.HTTPClientConfig.FollowRedirects = false
	}
	return err
}

// ReadTimeout is the effective timeout of one read.
func (s *ServerMetrics) ReadTimeout() time.Duration {
	if s.Timeout > 0 {
		return time.Duration(s.Timeout)
	}
	return min(time.Duration(s.Interval), MaxServerMetricsTimeout)
}

// ReplicaURL is the URL of a replica's metrics: its address (host:port)
// with Path, or its host at Port.
func (s *ServerMetrics) ReplicaURL(address string) string {
	if s.Port > 0 {
		host, _, err := net.SplitHostPort(address)
		if err != nil {
			host = strings.Trim(address, "[]") // no port
		}
		address = net.JoinHostPort(host, strconv.Itoa(s.Port))
	}
	return "http://" + address + s.Path
}

func (s *ServerMetrics) validate(errs *fieldErrors, path string, discovery bool) {
	switch {
	case s.URL == "" && s.Path == "":
		errs.add(path, "set url (the engine's /metrics) or, on a discovery target, path (read from each replica)")
	case s.URL != "" && s.Path != "":
		errs.add(path+".path", "set url or path, not both")
	case s.URL != "":
		validateHTTPURL(errs, path+".url", s.URL)
		if s.Port != 0 {
			errs.add(path+".port", "applies only with path (the replica's host at this port)")
		}
	default:
		if !discovery {
			errs.add(path+".path", "needs a discovery section (each replica's address); set url on a target without one")
		}
		if !strings.HasPrefix(s.Path, "/") || strings.ContainsAny(s.Path, "?# ") {
			errs.add(path+".path", "must be a URL path beginning with / (no query), got %q", s.Path)
		}
		if s.Port < 0 || s.Port > 65535 {
			errs.add(path+".port", "must be a port from 1 to 65535, got %d", s.Port)
		}
	}
	if d := time.Duration(s.Interval); d < MinServerMetricsInterval {
		errs.add(path+".interval", "must be at least %v, got %v", model.Duration(MinServerMetricsInterval), s.Interval)
	}
	switch d := time.Duration(s.Timeout); {
	case d < 0:
		errs.add(path+".timeout", "must not be negative, got %v", s.Timeout)
	case d > 0 && d > time.Duration(s.Interval):
		errs.add(path+".timeout", "must be at most the interval (%v), got %v", s.Interval, s.Timeout)
	}
	if err := s.HTTPClientConfig.Validate(); err != nil {
		errs.add(path+".http_client_config", "%v", err)
	}
}

// validateHTTPURL checks an http(s) URL with a host and no credentials.
func validateHTTPURL(errs *fieldErrors, path, raw string) {
	switch u, err := url.Parse(raw); {
	case err != nil:
		errs.add(path, "not a URL: %v", redactURLError(err))
	case u.Scheme != "http" && u.Scheme != "https", u.Host == "":
		errs.add(path, "must be an http(s) URL with a host")
	case u.User != nil:
		errs.add(path, "credentials in the URL are not allowed; use http_client_config.basic_auth")
	}
}

// Diagnosis is global.diagnosis: where the daemon finds what the server
// view needs beyond the engines' own metrics.
type Diagnosis struct {
	// Prometheus, when set, is asked each server_metrics interval for the
	// GPUs' dcgm-exporter series (DCGM_FI_DEV_GPU_UTIL, ...).
	Prometheus *DiagnosisPrometheus `yaml:"prometheus,omitempty"`
}

// DiagnosisPrometheus is a Prometheus scraping dcgm-exporter.
type DiagnosisPrometheus struct {
	URL string `yaml:"url"`
	// Selector holds label matchers added to the DCGM series, e.g.
	// `namespace="llm"`; a discovered replica's pod, namespace and node
	// (Hostname) labels are added where discovery knows them.
	Selector         string                     `yaml:"selector"`
	HTTPClientConfig commoncfg.HTTPClientConfig `yaml:"http_client_config"`
}

// UnmarshalYAML implements yaml.Unmarshaler.
func (p *DiagnosisPrometheus) UnmarshalYAML(unmarshal func(any) error) error {
	*p = DiagnosisPrometheus{HTTPClientConfig: commoncfg.DefaultHTTPClientConfig}
	type plain DiagnosisPrometheus
	err := decodePlain(unmarshal, (*plain)(p))
	var ref nodeRef
	if uerr := unmarshal(&ref); uerr == nil && !setsKey(ref.node, "http_client_config", "follow_redirects") {
		p.HTTPClientConfig.FollowRedirects = false
	}
	return err
}

func (d *Diagnosis) validate(errs *fieldErrors, path string) {
	p := d.Prometheus
	if p == nil {
		return
	}
	path += ".prometheus"
	if p.URL == "" {
		errs.add(path+".url", "required")
	} else {
		validateHTTPURL(errs, path+".url", p.URL)
	}
	if sel := strings.TrimSpace(p.Selector); sel != "" && (strings.Count(sel, "{") > 1 || strings.Count(sel, "}") > 1) {
		errs.add(path+".selector", "must be label matchers like `namespace=\"llm\"`, got %q", p.Selector)
	}
	if err := p.HTTPClientConfig.Validate(); err != nil {
		errs.add(path+".http_client_config", "%v", err)
	}
}
