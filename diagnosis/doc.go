// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

// Package diagnosis names why a target is slow: from what the probe saw
// and what the serving engine says of itself, read interval by read
// interval, a [Judge] per target (or replica) returns a [Verdict] once a
// minute — one [Cause] of a fixed list (harness, path, queueing, prefill,
// decode, kv_pressure, prefix_cache, deploy, none, unknown), the figures
// that decided it ([Evidence], names from the fixed list [EvidenceNames])
// and one sentence built from those figures alone.
//
// The input is an [Interval]: scalars that merge over a window (sums and
// counts as [Mean], counter deltas, gauges at the read), so that the
// caller's conversion of an engine's reading is plain field copying and
// the judge holds running sums, not samples: the recent window (2
// minutes) as a short ring of intervals, the history as decaying sums
// (half-life [HistoryHalfLife]), the state before the last identity change
// for [DeployWindow]. A judge holds about 4 KiB at 15 s reads and 1 req/s
// (a kept interval is 312 bytes and its sample), at most about 210 KiB
// (MaxRecent intervals of MaxProbeSample values), whatever the daemon's
// uptime.
//
// Like regression, a Judge is a pure function of its inputs: no
// goroutines, clocks or I/O (the caller passes every time), so the same
// code is evaluated offline over simulated days in this package's tests.
// Figures a server sends may be anything: NaN, infinities and negative
// deltas are taken as absent, never as numbers, and a window without a
// usable server view is judged unknown, never guessed. The rules, their
// thresholds and why are in docs/design.md ("Diagnosis").
//
// diagnosis imports no llmprobe package.
package diagnosis
