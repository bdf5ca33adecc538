// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package config

import (
	"errors"
	"io"
	"strings"

	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"
)

// A configuration built in memory.
//
// A program that makes its configuration from its own options (bench's
// quick start: --url, --model, --random-input-len, ...) builds it of the
// types a file decodes into, starting from the defaults a file's sections
// get (New, NewTarget, NewClass), and checks it by the rules a loaded file
// is checked by (Validate): every rule applies, whoever wrote the values.

// New is a configuration with the defaults of a file that leaves out
// global and tracing, and no workload or target.
func New() *Config { return &Config{Global: DefaultGlobal, Tracing: DefaultTracing} }

// NewTarget is a target with the defaults of a file's target that sets
// nothing but its name, url, model and workload (api chat, Poisson
// arrivals, max_inflight 64, tokenize auto, ...).
func NewTarget() *Target {
	return &Target{
		API:              APIChat,
		Tokenize:         TokenizeAuto,
		PromptFormat:     PromptFormatText,
		Arrival:          Arrival{Process: ProcessPoisson, Burstiness: 1},
		MaxInflight:      DefaultMaxInflight,
		IdleTimeout:      model.Duration(DefaultIdleConnTimeout),
		HTTPClientConfig: DefaultTargetHTTPClientConfig,
		Identity:         TargetIdentity{PollInterval: model.Duration(DefaultVersionPollInterval)},
	}
}

// NewClass is a class with the defaults of a file's class: weight 1 and
// DefaultSampling.
func NewClass() *Class { return &Class{Weight: 1, Sampling: DefaultSampling} }

// Validate checks c, built in memory, by every rule Load checks a decoded
// file by, and builds its distributions' samplers (Dist.Sampler is nil
// until then). Its error is Errors, each naming its field by path
// (targets[0].url, workloads.w.classes[0].prompt_tokens) without a file
// or line. Relative file names (samples, traces) are read from the
// working directory.
func (c *Config) Validate() error {
	fe := fieldErrors{samples: map[[2]string]samplesRead{}}
	c.validate(&fe)
	if len(fe.errs) > 0 {
		return report(fe.errs, "")
	}
	return nil
}

// ParseDist reads a distribution written as a file writes one
// (prompt_tokens: ...): a number, or a mapping such as YAML's flow form
// {dist: lognormal, median: 512, p99: 4096}. Its errors are worded as a
// file's, without file or line. Its parameters are checked with the
// configuration that holds it (Validate).
func ParseDist(spec string) (Dist, error) {
	var d Dist
	dec := yaml.NewDecoder(strings.NewReader(spec))
	dec.KnownFields(true)
	err := dec.Decode(&d)
	switch {
	case errors.Is(err, io.EOF) || err == nil && !d.IsSet():
		return d, errors.New("empty: want a number or a distribution")
	case err != nil:
		errs := translate(typeErrorLines(err), "", nodeIndex{})
		msgs := make([]string, len(errs))
		for i, e := range errs {
			msgs[i] = e.Msg
		}
		return d, errors.New(strings.Join(msgs, "; "))
	}
	return d, nil
}
