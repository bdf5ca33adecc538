// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package exporter_test

import (
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	versioncollector "github.com/prometheus/client_golang/prometheus/collectors/version"

	"github.com/llmprobe/llmprobe/config"
	"github.com/llmprobe/llmprobe/exporter"
	"github.com/llmprobe/llmprobe/probe"
)

// Example shows how the daemon wires the exporter around the engine.
func Example() {
	logger := slog.Default()
	reg := prometheus.NewRegistry()

	reg.MustRegister(versioncollector.NewCollector("llmprobe"))
	metrics := exporter.NewMetrics(reg)
	recent := exporter.NewRecent(logger)
	engine := probe.NewEngine(probe.Options{Logger: logger, Observer: probe.Observers{metrics, recent}})
	reg.MustRegister(exporter.NewStatusCollector(engine.Status))

	// Metrics and Recent learn a configuration before the engine starts
	// its targets, so no event of a new target is missed; if the engine
	// refuses it, the Reloader gives them the running one back.
	load := func() (*config.Config, error) { return config.LoadFile("llmprobe.yml") }
	reloader := exporter.NewReloader(load, logger, reg,
		exporter.Infallible(metrics.SetConfig), exporter.Infallible(recent.SetConfig), engine.Apply)
	if err := reloader.Reload(); err != nil {
		return // a bad file at start is fatal; later, SIGHUP and POST /-/reload call Reload
	}

	srv := &http.Server{Addr: ":9477", Handler: exporter.NewHandler(exporter.WebOptions{
		Logger:   logger,
		Gatherer: reg,
		Status:   engine.Status,
		Recent:   recent,
		Metrics:  metrics,
		Reloader: reloader,
		Ready:    func() bool { return reloader.Current() != nil },
		Version:  "v0.1.0",
	})}
	_ = srv // served through exporter-toolkit's web.ListenAndServe
}
