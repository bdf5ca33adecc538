// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package config

import (
	"net/url"
	"time"

	commoncfg "github.com/prometheus/common/config"
	"github.com/prometheus/common/model"
)

// WorkloadFrom makes a target follow production: the prompt and output
// length distributions of every class of its workload are refitted from
// the served model's own token histograms every refresh interval. The
// classes keep their weights, prefixes, sampling and turns. A refit that
// fails keeps the previous distributions.
type WorkloadFrom struct {
	Prometheus *PrometheusSource `yaml:"prometheus"`
}

// PrometheusSource is a Prometheus that scrapes the served model's
// metrics (vLLM's vllm:request_prompt_tokens and
// vllm:request_generation_tokens, or SGLang's equivalents).
type PrometheusSource struct {
	// URL is Prometheus' base URL.
	URL string `yaml:"url"`
	// Selector holds label matchers for the server's series, e.g.
	// `job="vllm", model_name="llama"`.
	Selector string `yaml:"selector"`
	// Range is the window of requests each refit describes.
	Range model.Duration `yaml:"range"`
	// Refresh is the interval between refits.
	Refresh model.Duration `yaml:"refresh"`
	// PromptMetric and CompletionMetric name the histograms; empty tries
	// vLLM's then SGLang's.
	PromptMetric     string `yaml:"prompt_metric,omitempty"`
	CompletionMetric string `yaml:"completion_metric,omitempty"`
	// HTTPClientConfig holds Prometheus' auth and TLS.
	HTTPClientConfig commoncfg.HTTPClientConfig `yaml:"http_client_config"`
}

// UnmarshalYAML implements yaml.Unmarshaler.
func (p *PrometheusSource) UnmarshalYAML(unmarshal func(any) error) error {
	*p = PrometheusSource{
		Range:            model.Duration(time.Hour),
		Refresh:          model.Duration(10 * time.Minute),
		HTTPClientConfig: commoncfg.DefaultHTTPClientConfig,
	}
	type plain PrometheusSource
	return decodePlain(unmarshal, (*plain)(p))
}

func (w *WorkloadFrom) validate(errs *fieldErrors, path string) {
	p := w.Prometheus
	if p == nil {
		errs.add(path+".prometheus", "required (the only source so far)")
		return
	}
	path += ".prometheus"
	switch u, err := url.Parse(p.URL); {
	case p.URL == "":
		errs.add(path+".url", "required")
	case err != nil:
		errs.add(path+".url", "not a URL: %v", redactURLError(err))
	case u.Scheme != "http" && u.Scheme != "https", u.Host == "":
		errs.add(path+".url", "must be an http(s) URL with a host")
	case u.User != nil:
		errs.add(path+".url", "credentials in the URL are not allowed; use http_client_config.basic_auth")
	}
	if p.Range < model.Duration(time.Second) {
		errs.add(path+".range", "must be at least 1s, got %v", p.Range)
	}
	if p.Refresh < model.Duration(time.Second) {
		errs.add(path+".refresh", "must be at least 1s, got %v", p.Refresh)
	}
	if (p.PromptMetric == "") != (p.CompletionMetric == "") {
		errs.add(path, "set both prompt_metric and completion_metric, or neither")
	}
	if err := p.HTTPClientConfig.Validate(); err != nil {
		errs.add(path+".http_client_config", "%v", err)
	}
}
