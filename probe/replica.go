// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package probe

import (
	"time"

	"github.com/llmprobe/llmprobe/probe/harness"
)

// A target with a discovery block stands for every replica its discovery
// finds (docs/design.md "Replicas"): each replica is probed by a runner of
// its own, with its own open-loop arrival process, schedule, in-flight
// budget and verdict, and the target's figures are the sums of its
// replicas'. Observers get the replica's name with every event; the
// target-level metrics sum them, the replica-level ones keep them apart.

// ReplicaStatus is one discovered replica of a target, live or retired
// within the grace period.
type ReplicaStatus struct {
	// Name is the `replica` label: the pod's name where discovery knows
	// it, else Address.
	Name    string
	Address string // host:port dialled
	// Labels are the join labels discovery knows: "pod", "namespace",
	// "node" (only these keys).
	Labels map[string]string
	Since  time.Time // when it was first probed
	// Started is when its runner started: later than Since after a
	// reload that changed the target (or the replica's address)
	// restarted it, with a new warm-up.
	Started time.Time

	// Gone is when discovery stopped listing it (zero while listed): it
	// sends no more, its in-flight requests end and count, and its series
	// go once the grace period has passed (ReplicaObserver), or at once
	// when more than max_replicas are retired (folded; see
	// DiscoveryStatus.Folded).
	Gone time.Time

	RequestedRate float64 // this process' share, req/s
	AchievedRate  float64 // sent per second over the judgement window
	Scheduled     uint64
	Sent          uint64
	Dropped       map[DropReason]uint64
	Inflight      int64
	MaxInflight   int64
	LagP99        time.Duration
	Warmup        bool

	Saturated         bool
	SaturationReason  string
	SaturationReasons []harness.SaturationReason
	Overloaded        bool
	OverloadReason    string
	Connections       int64
	Protocol          string
	// Failing is the replica's own failing verdict (nil once retired).
	Failing *FailingStatus
	// Server is the replica's server view (server_metrics: path), and
	// Diagnosis its latest verdict (nil before the first).
	Server    *ServerStatus
	Diagnosis *Diagnosis
}

// DiscoveryStatus is the state of a target's discovery.
type DiscoveryStatus struct {
	Mechanism string // "file", "dns" or "kubernetes"
	// Replicas is the number of replicas probed (at most MaxReplicas);
	// Discovered the number the last successful refresh listed, OverLimit
	// those beyond max_replicas that are not probed.
	Replicas    int
	Discovered  int
	OverLimit   int
	MaxReplicas int
	// Refreshes counts every refresh attempt, Failures those that failed
	// (the last known set was kept).
	Refreshes uint64
	Failures  uint64
	// LastSuccess is when a refresh last succeeded (zero before one);
	// LastError is the last failure's message (secrets removed), "" after
	// a success.
	LastSuccess time.Time
	LastError   string
	// Changes counts replicas added and removed since start.
	Added, Removed uint64
	// Folded counts retired replicas whose series were removed before
	// their grace period was over, because more than MaxReplicas were
	// retired (the replica label has at most 2 × MaxReplicas values).
	Folded uint64
}

// ReplicaObserver is told when a vanished replica's grace period is over,
// or when it is folded before (more than max_replicas retired), and its
// series should go (no later event of the runner that probed it carries
// its name): an engine's Observer that implements it gets ReplicaRemoved
// (Observers forwards it to those of its observers that do). It must not
// block.
type ReplicaObserver interface {
	ReplicaRemoved(target, replica string)
}

// ReplicaRemoved implements ReplicaObserver.
func (os Observers) ReplicaRemoved(target, replica string) {
	for _, o := range os {
		if ro, ok := o.(ReplicaObserver); ok {
			ro.ReplicaRemoved(target, replica)
		}
	}
}
