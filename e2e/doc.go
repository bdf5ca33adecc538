// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

// Package e2e holds the end-to-end tests of the real llmprobe binary.
//
// The tests build cmd/llmprobe once, on first use (without the race
// detector, to keep the build fast; the packages' own tests run with
// -race), and start it as separate processes on free loopback ports
// (internal/proctest): the simulator (`llmprobe sim`), the daemon
// (`llmprobe run`) and, where the dashboards are checked, a real
// Prometheus 3 from internal/promtest. Nothing is mocked: the tests
// send real signals, rewrite real configuration files, scrape the real
// /metrics and run the real promtool.
//
// They prove the operational contract of docs/config.md, docs/metrics.md
// and docs/dashboards.md from the outside: every dashboard panel returns data
// against the real stack, reloads (SIGHUP and POST /-/reload) swap or refuse
// a configuration as documented, SIGTERM drains or cancels in-flight
// requests within the grace period, the exposition is lint-clean and never
// leaks a secret, a bad configuration fails fast with a positioned error,
// and the README's first command (`llmprobe run --demo`) serves latency
// histograms within seconds.
//
// The package has no non-test code. `go test -short` skips it (it builds a
// binary and runs processes for about a minute). LLMPROBE_E2E_BINARY=path
// tests that binary (a release build, say) instead of building one. The
// Prometheus-based test and the promtool lint need the prometheus and
// promtool binaries (`make tools`) and are skipped without them unless
// LLMPROBE_REQUIRE_TOOLS=1.
//
// It is only tests: no package imports it.
package e2e
