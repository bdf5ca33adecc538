// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

// Package workload is what to send: the compiled workload of a target
// and the requests it becomes.
//
// It holds the compiled weighted mix of classes and what one arrival
// draws from it (Workload, Class, Plan, Turns; workload.go), the
// per-target Builder that turns a Plan into a request in the target's
// API, model and prompt format, and a conversation's answer into its next
// turn (builder.go), the history a conversation carries (conversation.go),
// prompt synthesis with predictable token counts (prompt.go, the
// 2,000-word vocabulary vocab.go and vocab.txt, token-id prompts
// prompt_ids.go, CountTokens), synthetic images (images.go), the
// per-target length model and its calibration from a server's /tokenize
// (calibrate.go), and the length samplers a refit draws from
// (refit.go: the refit loop itself is the engine's).
//
// Nothing here decides when a request is sent or how it is measured:
// that is the engine's (probe) and the client's (probe/wire). It may
// import probe/wire, config, dist and fit; it must not import probe,
// probe/harness, exporter, bench, sim or cmd.
package workload
