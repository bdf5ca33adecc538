// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package config

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"

	"github.com/llmprobe/llmprobe/dist"
)

// Distribution kinds (the `dist:` key).
const (
	DistFixed     = "fixed"
	DistUniform   = "uniform"
	DistNormal    = "normal"
	DistLogNormal = "lognormal"
	DistEmpirical = "empirical"
)

// Dist describes a distribution of numbers: a bare number means fixed,
// otherwise a mapping with a `dist:` kind and its parameters, optionally
// clamped to min/max:
//
//	fixed      value
//	uniform    min, max
//	normal     mean, stddev
//	lognormal  median + p99, or mu + sigma
//	empirical  quantiles {p: value, ...}, or file (+ field for JSONL)
type Dist struct {
	Kind      string              `yaml:"dist"`
	Value     *float64            `yaml:"value,omitempty"`
	Min       *float64            `yaml:"min,omitempty"`
	Max       *float64            `yaml:"max,omitempty"`
	Mean      *float64            `yaml:"mean,omitempty"`
	Stddev    *float64            `yaml:"stddev,omitempty"`
	Median    *float64            `yaml:"median,omitempty"`
	P99       *float64            `yaml:"p99,omitempty"`
	Mu        *float64            `yaml:"mu,omitempty"`
	Sigma     *float64            `yaml:"sigma,omitempty"`
	Quantiles map[float64]float64 `yaml:"quantiles,omitempty"`
	File      string              `yaml:"file,omitempty"`
	Field     string              `yaml:"field,omitempty"`

	sampler dist.Sampler
	dir     string // directory relative files are resolved against
}

// UnmarshalYAML implements yaml.Unmarshaler: a scalar number is a fixed
// distribution, a mapping is decoded field by field.
func (d *Dist) UnmarshalYAML(unmarshal func(any) error) error {
	var v float64
	if err := unmarshal(&v); err == nil {
		*d = Dist{Kind: DistFixed, Value: &v}
		return nil
	}
	*d = Dist{}
	type plain Dist
	return decodePlain(unmarshal, (*plain)(d))
}

// MarshalYAML writes a fixed distribution as a bare number.
func (d Dist) MarshalYAML() (any, error) {
	if d.Kind == DistFixed && d.Value != nil && d.Min == nil && d.Max == nil {
		return *d.Value, nil
	}
	type plain Dist
	return plain(d), nil
}

// Sampler returns the validated sampler; nil before validation succeeded.
func (d *Dist) Sampler() dist.Sampler { return d.sampler }

// IsSet reports whether the distribution was given at all.
func (d *Dist) IsSet() bool { return d.Kind != "" }

// params lists which parameters were given, by YAML name.
func (d *Dist) params() []string {
	var p []string
	add := func(name string, set bool) {
		if set {
			p = append(p, name)
		}
	}
	add("value", d.Value != nil)
	add("mean", d.Mean != nil)
	add("stddev", d.Stddev != nil)
	add("median", d.Median != nil)
	add("p99", d.P99 != nil)
	add("mu", d.Mu != nil)
	add("sigma", d.Sigma != nil)
	add("quantiles", d.Quantiles != nil)
	add("file", d.File != "")
	add("field", d.Field != "")
	return p
}

// allowed parameters per kind (min and max are always allowed). For
// uniform, min and max are the parameters themselves.
var distParams = map[string][]string{
	DistFixed:     {"value"},
	DistUniform:   {},
	DistNormal:    {"mean", "stddev"},
	DistLogNormal: {"median", "p99", "mu", "sigma"},
	DistEmpirical: {"quantiles", "file", "field"},
}

// build validates the parameters and constructs the sampler; samples
// files are read through the load's cache.
func (d *Dist) build(files map[[2]string]samplesRead) error {
	allowed, ok := distParams[d.Kind]
	if !ok {
		if d.Kind == "" {
			return errors.New(`missing "dist" (one of fixed, uniform, normal, lognormal, empirical)`)
		}
		return fmt.Errorf("unknown dist %q (one of fixed, uniform, normal, lognormal, empirical)", d.Kind)
	}
	for _, p := range d.params() {
		if !slices.Contains(allowed, p) {
			return fmt.Errorf("%q does not apply to dist %s (allowed: %s)", p, d.Kind, strings.Join(append(slices.Clone(allowed), "min", "max"), ", "))
		}
	}
	for name, v := range map[string]*float64{"min": d.Min, "max": d.Max} {
		if v != nil && (math.IsNaN(*v) || math.IsInf(*v, 0)) {
			return fmt.Errorf("%s must be a finite number", name)
		}
	}
	if d.Min != nil && d.Max != nil && *d.Min > *d.Max {
		return fmt.Errorf("min (%v) is greater than max (%v)", *d.Min, *d.Max)
	}

	var (
		s   dist.Sampler
		err error
	)
	switch d.Kind {
	case DistFixed:
		if d.Value == nil {
			return errors.New(`dist fixed needs "value"`)
		}
		s = dist.Fixed(*d.Value)
	case DistUniform:
		if d.Min == nil || d.Max == nil {
			return errors.New(`dist uniform needs "min" and "max"`)
		}
		s, err = dist.Uniform(*d.Min, *d.Max)
	case DistNormal:
		if d.Mean == nil || d.Stddev == nil {
			return errors.New(`dist normal needs "mean" and "stddev"`)
		}
		s, err = dist.Normal(*d.Mean, *d.Stddev)
	case DistLogNormal:
		switch {
		case d.Median != nil && d.P99 != nil && d.Mu == nil && d.Sigma == nil:
			s, err = dist.LogNormalFromMedianP99(*d.Median, *d.P99)
		case d.Mu != nil && d.Sigma != nil && d.Median == nil && d.P99 == nil:
			s, err = dist.LogNormal(*d.Mu, *d.Sigma)
		default:
			return errors.New(`dist lognormal needs either "median" and "p99", or "mu" and "sigma"`)
		}
	case DistEmpirical:
		switch {
		case d.Quantiles != nil && d.File == "":
			if d.Field != "" {
				return errors.New(`"field" applies only with "file"`)
			}
			points := make([]dist.Point, 0, len(d.Quantiles))
			for p, v := range d.Quantiles {
				points = append(points, dist.Point{P: p, V: v})
			}
			slices.SortFunc(points, func(a, b dist.Point) int {
				switch {
				case a.P < b.P:
					return -1
				case a.P > b.P:
					return 1
				}
				return 0
			})
			s, err = dist.Empirical(points)
		case d.File != "" && d.Quantiles == nil:
			s, err = readSamples(files, d.resolve(d.File), d.Field)
		default:
			return errors.New(`dist empirical needs either "quantiles" or "file"`)
		}
	}
	if err != nil {
		return err
	}
	if d.Min != nil || d.Max != nil {
		lo, hi := math.Inf(-1), math.Inf(1)
		if d.Min != nil {
			lo = *d.Min
		}
		if d.Max != nil {
			hi = *d.Max
		}
		s = dist.Clamp(s, lo, hi)
	}
	d.sampler = s
	return nil
}

func (d *Dist) resolve(file string) string {
	if filepath.IsAbs(file) || d.dir == "" {
		return file
	}
	return filepath.Join(d.dir, file)
}

// validateLength builds a token-length distribution: it must be given,
// and can only produce values >= least (draws are rounded and clamped to
// least at sampling time, so only a fixed value or a bound below it is an
// error).
func (d *Dist) validateLength(errs *fieldErrors, path string, least float64) {
	d.validateAtLeast(errs, path, least, "tokens")
}

// validateAtLeast is validateLength for a count in unit (tokens, pixels).
func (d *Dist) validateAtLeast(errs *fieldErrors, path string, least float64, unit string) {
	if !d.IsSet() {
		errs.add(path, "required")
		return
	}
	if err := d.build(errs.samples); err != nil {
		errs.add(path, "%v", err)
		return
	}
	if d.Kind == DistFixed && *d.Value < least {
		errs.add(path, "must be at least %v %s, got %v", least, unit, *d.Value)
	}
	if d.Max != nil && *d.Max < least {
		errs.add(path+".max", "must be at least %v %s, got %v", least, unit, *d.Max)
	}
}
