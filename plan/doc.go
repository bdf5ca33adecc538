// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

// Package plan answers, before a probe is deployed and while it runs, how
// much probing is enough (`llmprobe plan`, docs/plan.md): for every target
// and class of a configuration, at the class's share of its target's
// rate,
//
//   - the detection delay (median, p90) and miss rate of the shipped
//     regression detector for the regressions on-call cares about (median
//     TTFT +25% and +50%, p99 ×2, TPOT and E2E +25%, errors 1% → 5%),
//     from the detector itself run offline (package regression's Step,
//     the code its figures are measured with) on the class's latency
//     shape: a reference model over the class's lengths
//     (docs/design.md, "Planning the rate") or the daemon's recent
//     samples; beside it the false-alarm rate's union bound;
//   - whether the SLO burn-rate alerts' windows hold enough requests to
//     ever fire;
//   - the tokens a day the class spends and, with the target's pricing,
//     what they cost;
//   - and the inverse: the lowest rate that meets a detection goal
//     (Goal), with its cost.
//
// [Plan] is a pure function of the configuration and [Options]: no I/O,
// no clock; its simulations run on Options.Workers goroutines it waits
// for, and a fixed seed makes the figures the same on every run and
// machine. The daemon computes it once per configuration, off the request
// path.
//
// plan imports config, dist, slo, regression, alerts (the burn-rate
// windows), servermetrics (the GPU cost per token), probe/workload (the
// classes' samplers) and probe/wire (which APIs carry chat messages) of
// llmprobe; it must not import probe, exporter, bench or cmd.
package plan
