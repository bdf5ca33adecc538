// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

// Package layout holds no code: its test declares which llmprobe package
// may import which (the layering docs/architecture.md draws) and fails on
// any import against it, tests included, for every build target the
// module is built for. A new package must be given its place in the
// table before the test passes.
//
// It imports nothing, and nothing may import it.
package layout
