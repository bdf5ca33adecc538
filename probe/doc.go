// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

// Package probe is the open-loop engine: it runs one runner per
// configured target and reconciles them with each applied configuration
// (engine.go), walks each target's absolute arrival timeline (Arrivals,
// arrival.go) and admits, drops or dispatches every arrival without ever
// waiting for a response (runner.go), drives multi-turn conversations
// (conversation.go), follows production lengths (the refit loop,
// refit.go), bounds the memory of answers in flight (budget.go), and tells
// its Observers every arrival, drop, send, result and conversation
// (observer.go), with a status snapshot of every target for the gauges
// and the status page; it says in its log when a target's requests
// mostly fail (failing.go).
//
// What to send comes from probe/workload, how it goes over the wire and
// what came back from probe/wire, and whether the harness can vouch for
// its own numbers from probe/harness; probe wires them together. Beside
// its runners, it reads each target's serving-engine metrics with
// servermetrics (serverview.go: the server view and the path gap). It knows
// nothing of Prometheus: it must not import exporter, bench, cmd, sim or
// the test-support packages (its tests may use sim, internal/simtest and
// exporter, the last for the exposition fixture only).
package probe
