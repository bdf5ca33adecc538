// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

// Package exporter turns what the probe engine measures into what people
// and Prometheus read: the llmprobe_* metrics (Metrics, NewStatusCollector),
// the recent-requests log (Recent), the HTTP surface (NewHandler: /metrics,
// /-/healthy, /-/ready, /-/reload, the status page, /config and
// /api/v1/recent), safe configuration reloads (Reloader) and the plan
// figures of the running configuration (Planner, package plan's).
//
// Data flows one way: the engine calls the probe.Observer methods of
// Metrics and Recent (fanned out through probe.Observers) and the exporter
// reads the engine's status at scrape and page time. The probe packages
// never import this one, and it imports only them (probe, probe/wire,
// probe/harness, probe/workload), config, slo, dist, plan and
// internal/bounded: never bench, fit, sim or cmd.
//
// The metric names, types, labels and observation rules are documented in
// docs/metrics.md and pinned by testdata/catalogue.txt.
package exporter
