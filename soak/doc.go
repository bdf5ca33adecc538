// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

// Package soak is the soak test of the llmprobe binary: `make soak` runs
// the real daemon against the real simulator (`llmprobe sim`) at a steady
// open-loop rate for an hour, scrapes the daemon's own /metrics at a fixed
// interval, and fails when memory or goroutines drift, when requests fail
// or are dropped, or when the daemon cannot deliver the requested rate.
//
// Beside it, the discovery churn tests (TestChurnFile, TestChurnDNS) run
// the daemon for 10 minutes on a target whose replicas discovery replaces
// with 64 new names every 0.2 s, and fail when its RSS drifts or a family
// has more than 2 × max_replicas values of the replica label.
//
// The package has no code of its own; everything is in its tests, and the
// soak test skips itself unless LLMPROBE_SOAK=1 (set by `make soak`), the
// churn tests unless LLMPROBE_CHURN=1, so `go test ./...` only runs the
// fast unit tests of its helpers. See docs/soak.md.
//
// It is only tests: no package imports it.
package soak
