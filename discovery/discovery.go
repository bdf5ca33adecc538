// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

// Package discovery finds the replicas behind a target (docs/config.md
// "Replica discovery"): A/AAAA or SRV records re-resolved on an interval
// (dns), Prometheus file_sd files watched for changes (file), or a
// Service's EndpointSlices or pods by label selector watched through the
// Kubernetes API (kubernetes). A Discoverer sends the whole current set
// after every refresh; a refresh that fails sends an error instead, and
// the caller keeps its last set: a failure never empties a target.
//
// Of llmprobe it imports config, internal/bounded and internal/scrub
// only; the engine (probe) and cmd/llmprobe import it, never the other
// way round, and it never imports probe or exporter.
package discovery

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"k8s.io/client-go/kubernetes"

	"github.com/llmprobe/llmprobe/config"
	"github.com/llmprobe/llmprobe/internal/scrub"
)

// Replica is one discovered replica.
type Replica struct {
	Name    string            // the `replica` label: pod name where known, else Address
	Address string            // host:port that is dialled (IPv6 in brackets)
	Labels  map[string]string // join labels where known: "pod", "namespace", "node" (only these keys)
}

// Update is the outcome of one refresh.
type Update struct {
	Replicas []Replica // the whole current set, sorted by Name, unique by Name; nil when Err != nil
	Err      error     // a refresh that failed: the caller keeps its last set
}

// Discoverer finds the replicas of one target.
type Discoverer interface {
	Mechanism() string // "file", "dns", "kubernetes"
	// Run sends one Update after every refresh attempt (periodic
	// re-resolve, file change or periodic re-read, watch event) — the
	// whole set, or an error — until ctx is done, then returns. The first
	// Update comes as soon as the first attempt ends. Sends never block
	// past ctx.Done().
	Run(ctx context.Context, ch chan<- Update)
}

// Options are what a Discoverer needs besides its configuration.
type Options struct {
	Logger *slog.Logger
	// Kubernetes, when set, is the clientset to watch with (tests:
	// k8s.io/client-go/kubernetes/fake); nil: built from
	// KubernetesSD.Kubeconfig or the in-cluster config.
	Kubernetes kubernetes.Interface
}

// Join label keys (the only keys of Replica.Labels).
const (
	LabelPod       = "pod"
	LabelNamespace = "namespace"
	LabelNode      = "node"
)

// New returns the Discoverer of cfg's mechanism. cfg is expected to have
// been validated (config.Load); New refuses what it cannot run.
func New(cfg *config.Discovery, opts Options) (Discoverer, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg == nil {
		return nil, errors.New("discovery: no configuration")
	}
	switch cfg.Mechanism() {
	case config.DiscoveryMechanismDNS:
		return newDNS(cfg.DNS, opts)
	case config.DiscoveryMechanismFile:
		return newFile(cfg.File, opts)
	case config.DiscoveryMechanismKubernetes:
		return newKubernetes(cfg.Kubernetes, opts)
	}
	return nil, errors.New("discovery: exactly one of file, dns or kubernetes is required")
}

// normalize cleans the names and labels of replicas of control and
// bidirectional formatting characters (scrub.Chars: they are label
// values, log fields and lines of the status page), sorts them by Name
// and keeps the first of each Name (the inputs come in a stable order:
// the first is the same every time). It never returns nil, so that an
// empty set is told from an error.
func normalize(rs []Replica) []Replica {
	for i := range rs {
		rs[i].Name = scrub.Chars(rs[i].Name)
		for k, v := range rs[i].Labels {
			rs[i].Labels[k] = scrub.Chars(v)
		}
	}
	slices.SortStableFunc(rs, func(a, b Replica) int {
		return cmp.Compare(a.Name, b.Name)
	})
	rs = slices.CompactFunc(rs, func(a, b Replica) bool { return a.Name == b.Name })
	if rs == nil {
		rs = []Replica{}
	}
	return rs
}

// send delivers u unless ctx is done first; it reports whether it did.
func send(ctx context.Context, ch chan<- Update, u Update) bool {
	select {
	case ch <- u:
		return true
	case <-ctx.Done():
		return false
	}
}

// failed is the Update of a refresh that failed.
func failed(err error) Update { return Update{Err: err} }

// mechanismError names the mechanism in err.
func mechanismError(mechanism string, err error) error {
	return fmt.Errorf("%s discovery: %w", mechanism, err)
}
