// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package bench

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/llmprobe/llmprobe/config"
)

// defaultServerMetricsInterval is how often gauges are sampled
// (Options.ServerMetricsInterval).
const defaultServerMetricsInterval = 2 * time.Second

// CheckServerMetrics reports what Run would find wrong with
// opts.ServerMetrics for the targets opts selects (as resolveServerMetrics
// reads them), so that a caller can refuse them before anything is sent.
func CheckServerMetrics(opts Options) error {
	if len(opts.ServerMetrics) == 0 {
		return nil
	}
	targets, err := selectTargets(opts.Config, opts.Targets)
	if err != nil {
		return err
	}
	_, err = resolveServerMetrics(opts.ServerMetrics, targets)
	return err
}

// resolveServerMetrics maps each target to the metrics URL it is
// scraped at. Each spec is a URL or a comma-separated list of them, each
// either http(s)://… or TARGET=http(s)://…. Plain URLs: one applies to
// every target, or as many as the targets, in the targets' order. Named
// ones apply to their target; the two forms cannot be mixed.
func resolveServerMetrics(specs []string, targets []*config.Target) (map[string]string, error) {
	var plain []string
	named := map[string]string{}
	for _, spec := range specs {
		for s := range strings.SplitSeq(spec, ",") {
			s = strings.TrimSpace(s)
			if s == "" {
				continue
			}
			name, u := "", s
			if !strings.HasPrefix(s, "http://") && !strings.HasPrefix(s, "https://") {
				var ok bool
				if name, u, ok = strings.Cut(s, "="); !ok {
					return nil, fmt.Errorf("server metrics %q: want http(s)://HOST/metrics or TARGET=URL", s)
				}
			}
			if pu, err := url.Parse(u); err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" {
				return nil, fmt.Errorf("server metrics %q: not an http(s) URL", s)
			}
			if name == "" {
				plain = append(plain, u)
				continue
			}
			if !slices.ContainsFunc(targets, func(t *config.Target) bool { return t.Name == name }) {
				return nil, fmt.Errorf("server metrics %q: no selected target %q", s, name)
			}
			named[name] = u
		}
	}
	out := map[string]string{}
	switch {
	case len(plain) > 0 && len(named) > 0:
		return nil, errors.New("server metrics: give either plain URLs or TARGET=URL, not both")
	case len(named) > 0:
		return named, nil
	case len(plain) == 1:
		for _, t := range targets {
			out[t.Name] = plain[0]
		}
	case len(plain) == len(targets):
		for i, t := range targets {
			out[t.Name] = plain[i]
		}
	case len(plain) > 0:
		return nil, fmt.Errorf("server metrics: %d URLs for %d targets (give one for all, one per target in order, or TARGET=URL)", len(plain), len(targets))
	}
	return out, nil
}
