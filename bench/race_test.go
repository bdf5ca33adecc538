// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

//go:build race

package bench_test

// raceEnabled is true under the race detector, which slows the client
// and an in-process simulator several times over.
const raceEnabled = true
