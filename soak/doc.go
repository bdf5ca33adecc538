// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

// Package soak is the soak test of the llmprobe binary: `make soak` runs
// the real daemon against the real simulator (`llmprobe sim`) at a steady
// open-loop rate for an hour, scrapes the daemon's own /metrics at a fixed
// interval, and fails when memory or goroutines drift, when requests fail
// or are dropped, or when the daemon cannot deliver the requested rate.
//
// The package has no code of its own; everything is in its tests, and the
// soak test skips itself unless LLMPROBE_SOAK=1 (set by `make soak`), so
// `go test ./...` only runs the fast unit tests of its helpers. See
// docs/soak.md.
//
// It is only tests: no package imports it.
package soak
