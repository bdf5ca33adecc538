// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

// Package discovery: TEMPORARY (integrator's branch), replaced by the disc helper's version on merge.
package discovery

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"sort"
	"time"

	"github.com/llmprobe/llmprobe/config"
)

type Replica struct {
	Name    string
	Address string
	Labels  map[string]string
}

type Update struct {
	Replicas []Replica
	Err      error
}

type Discoverer interface {
	Mechanism() string
	Run(ctx context.Context, ch chan<- Update)
}

type Options struct{ Logger *slog.Logger }

func New(cfg *config.Discovery, opts Options) (Discoverer, error) {
	if cfg.File == nil {
		return nil, errors.New("temp: file only")
	}
	return &fileSD{cfg: cfg.File}, nil
}

type fileSD struct{ cfg *config.FileSD }

func (f *fileSD) Mechanism() string { return "file" }

func (f *fileSD) Run(ctx context.Context, ch chan<- Update) {
	every := time.Duration(f.cfg.RefreshInterval)
	if every <= 0 {
		every = time.Second
	}
	for {
		u := f.read()
		select {
		case ch <- u:
		case <-ctx.Done():
			return
		}
		select {
		case <-time.After(every):
		case <-ctx.Done():
			return
		}
	}
}

func (f *fileSD) read() Update {
	var out []Replica
	for _, p := range f.cfg.Files {
		b, err := os.ReadFile(p)
		if err != nil {
			return Update{Err: err}
		}
		var groups []struct {
			Targets []string          `json:"targets"`
			Labels  map[string]string `json:"labels"`
		}
		if err := json.Unmarshal(b, &groups); err != nil {
			return Update{Err: err}
		}
		for _, g := range groups {
			for _, t := range g.Targets {
				name := t
				if n := g.Labels["replica"]; n != "" {
					name = n
				}
				out = append(out, Replica{Name: name, Address: t, Labels: map[string]string{"pod": g.Labels["pod"]}})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return Update{Replicas: out}
}
