// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

// Package harness is the harness' judgement of itself: can the numbers
// this process measures be trusted, and did it deliver the load it was
// asked for?
//
// It holds the process monitor (harness.go: runtime/metrics scheduler
// latencies, the threads' run-queue wait from schedstat, the cgroup's CPU
// throttling, and a heartbeat that measures how late a woken reader
// runs), the sliding window of one target's scheduled, sent, late and
// dropped arrivals and schedule lag (window.go), the verdicts drawn from
// both (judge.go), the precise sleeper that the engine's arrival loop and
// the heartbeat share (sleeper_*.go, so that the heartbeat measures the
// very wake-ups the arrivals rely on), and the cgroup memory limit the
// binary's soft limit comes from (memlimit_*.go, which shares the cgroup
// finder).
//
// It knows nothing of requests, protocols or workloads: the engine
// (package probe) feeds it counts and instants. It must not import any
// llmprobe package but config (for the thresholds of global.saturation);
// in particular never probe, probe/wire, probe/workload or exporter.
package harness
