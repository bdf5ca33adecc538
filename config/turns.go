// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package config

import (
	"time"

	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"
)

// Turns makes a class multi-turn: each arrival on the timeline starts a
// conversation whose later turns are sent after the previous answer plus
// a think time, carrying the real history.
type Turns struct {
	// Count is the number of turns of a conversation (rounded, at least 1).
	Count Dist `yaml:"count"`
	// ThinkTime is the pause between an answer and the next user message.
	ThinkTime DurationDist `yaml:"think_time"`
	// UserTokens is the length of each later turn's new user message (tool
	// output, follow-up question); the class's prompt_tokens when unset.
	UserTokens Dist `yaml:"user_tokens,omitempty"`
}

func (t *Turns) validate(errs *fieldErrors, path string) {
	if !t.Count.IsSet() {
		errs.add(path+".count", "required")
	} else if err := t.Count.build(errs.samples); err != nil {
		errs.add(path+".count", "%v", err)
	} else if t.Count.Kind == DistFixed && *t.Count.Value < 1 {
		errs.add(path+".count", "must be at least 1 turn, got %v", *t.Count.Value)
	}
	if !t.ThinkTime.IsSet() {
		t.ThinkTime = DurationDist{Dist: Dist{Kind: DistFixed, Value: new(float64)}}
	}
	if err := t.ThinkTime.build(errs.samples); err != nil {
		errs.add(path+".think_time", "%v", err)
	} else if t.ThinkTime.Sampler().Quantile(0) < 0 {
		errs.add(path+".think_time", "can draw negative durations; set min: 0s")
	}
	if t.UserTokens.IsSet() {
		t.UserTokens.validateLength(errs, path+".user_tokens", 1)
	}
}

// DurationDist is a distribution of durations: a bare duration ("5s")
// means fixed; a mapping takes the same kinds and keys as Dist with
// durations as values (mu and sigma are in log-seconds). Samples are in
// seconds.
type DurationDist struct {
	Dist
}

// durationDistYAML is the YAML form of a DurationDist mapping.
type durationDistYAML struct {
	Kind      string                     `yaml:"dist"`
	Value     *model.Duration            `yaml:"value,omitempty"`
	Min       *model.Duration            `yaml:"min,omitempty"`
	Max       *model.Duration            `yaml:"max,omitempty"`
	Mean      *model.Duration            `yaml:"mean,omitempty"`
	Stddev    *model.Duration            `yaml:"stddev,omitempty"`
	Median    *model.Duration            `yaml:"median,omitempty"`
	P99       *model.Duration            `yaml:"p99,omitempty"`
	Mu        *float64                   `yaml:"mu,omitempty"`
	Sigma     *float64                   `yaml:"sigma,omitempty"`
	Quantiles map[float64]model.Duration `yaml:"quantiles,omitempty"`
	File      string                     `yaml:"file,omitempty"`
	Field     string                     `yaml:"field,omitempty"`
}

func seconds(d *model.Duration) *float64 {
	if d == nil {
		return nil
	}
	s := time.Duration(*d).Seconds()
	return &s
}

func duration(s *float64) *model.Duration {
	if s == nil {
		return nil
	}
	d := model.Duration(*s * float64(time.Second))
	return &d
}

// UnmarshalYAML implements yaml.Unmarshaler.
func (d *DurationDist) UnmarshalYAML(unmarshal func(any) error) error {
	var ref nodeRef
	if err := unmarshal(&ref); err != nil {
		return err
	}
	var s string
	if err := unmarshal(&s); err == nil {
		v, err := model.ParseDuration(s)
		if err != nil {
			// A type error, positioned: any other error would stop the
			// decoding of the whole file.
			return &yaml.TypeError{Errors: []string{posLine(ref.node, scopeField, durationMessage(s, true))}}
		}
		*d = DurationDist{Dist{Kind: DistFixed, Value: seconds(&v)}}
		return nil
	}
	var y durationDistYAML
	if err := decodePlain(unmarshal, &y); err != nil {
		return err
	}
	*d = DurationDist{Dist{
		Kind: y.Kind, Value: seconds(y.Value), Min: seconds(y.Min), Max: seconds(y.Max),
		Mean: seconds(y.Mean), Stddev: seconds(y.Stddev), Median: seconds(y.Median), P99: seconds(y.P99),
		Mu: y.Mu, Sigma: y.Sigma, File: y.File, Field: y.Field,
	}}
	if y.Quantiles != nil {
		d.Quantiles = make(map[float64]float64, len(y.Quantiles))
		for p, v := range y.Quantiles {
			d.Quantiles[p] = time.Duration(v).Seconds()
		}
	}
	return nil
}

// MarshalYAML writes durations back as durations.
func (d DurationDist) MarshalYAML() (any, error) {
	if d.Kind == DistFixed && d.Value != nil && d.Min == nil && d.Max == nil {
		return duration(d.Value).String(), nil
	}
	y := durationDistYAML{
		Kind: d.Kind, Value: duration(d.Value), Min: duration(d.Min), Max: duration(d.Max),
		Mean: duration(d.Mean), Stddev: duration(d.Stddev), Median: duration(d.Median), P99: duration(d.P99),
		Mu: d.Mu, Sigma: d.Sigma, File: d.File, Field: d.Field,
	}
	if d.Quantiles != nil {
		y.Quantiles = make(map[float64]model.Duration, len(d.Quantiles))
		for p, v := range d.Quantiles {
			y.Quantiles[p] = *duration(&v)
		}
	}
	return y, nil
}
