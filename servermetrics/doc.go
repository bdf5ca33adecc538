// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

// Package servermetrics reads what the serving side says of itself: the
// serving engine's own Prometheus exposition (vLLM, SGLang, llama.cpp,
// TGI), its GPUs' dcgm-exporter series in a Prometheus, and the energy and
// cost per generated token they give.
//
// An engine's exposition is read bounded, as a stream (exposition.go:
// only the families of the engine table are kept, parsed family by
// family); the engine is recognised by the families a page holds, and
// each figure of the table (Engine, Engines: the per-engine mapping of
// names) is taken from it. Over a window (Sampler: a scrape at its start,
// every interval, and at its end), counters and histograms are the
// difference between the window's first and last successful scrape (the
// histograms' quantiles estimated from their bucket deltas, as
// histogram_quantile does) and gauges are averaged over every successful
// scrape; NewStats turns the scrapes into Stats, saying why any figure is
// missing. QueryGPU averages dcgm-exporter's series over a window, and
// StageCost gives the energy and cost per generated token from the GPUs'
// power and number and the tokens generated. A figure a server or
// Prometheus sent may be NaN or ±Inf: Float writes it as null in JSON.
//
// bench scrapes beside every stage (--server-metrics, --prometheus.url)
// and its report shows the figures; the daemon's side may read a server
// with the same reader and engine table. servermetrics imports of
// llmprobe only internal/bounded, internal/httpclient and internal/scrub:
// it must not import bench, bench/report, probe, exporter, config or cmd.
package servermetrics
