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
// and its report shows the figures. The daemon reads each target's
// server with the same reader and engine table (reading.go): Read gives a
// Reading, one read reduced to the series of the target's model (its
// model_name, where the engine labels one) of the figures the diagnosis
// needs, kept per series so that a counter reset of one engine core is
// told apart, with no parsed families kept; Delta gives the Window
// between two readings: histogram deltas (TTFT, ITL, prompt length, with
// quantiles and the bucket holding each), means of queue, prefill and
// decode time from _sum/_count, counter deltas (a series whose value fell
// counts its new value, as Prometheus' rate does; a histogram bucket by
// bucket), and the gauges at the later read; a missing figure says why.
// bench's deltas (NewStats) are computed with the same per-series pieces. servermetrics imports of
// llmprobe only internal/bounded, internal/httpclient and internal/scrub:
// it must not import bench, bench/report, probe, exporter, config or cmd.
package servermetrics
