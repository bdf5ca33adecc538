// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

// Package report is what a bench run reports, as data and as documents:
// the report model (Report, StageReport, RunInfo, Quantiles, Samples and
// the results of the SLO, the searches, a replay, the closed-loop levels
// and the dataset), the per-request record (RequestRecord) and its
// writer (RequestLog), the renderers (WriteText, WriteJSON,
// WriteMarkdown, WriteSVG, WritePNG), the formats a report is written in
// by a file's extension (Formats: the list bench's --output and --plot
// take) and the comparison of two reports (ReadReport, Compare,
// WriteCompare).
//
// The figures of the server's own metrics, its GPUs and the cost per
// token are servermetrics' types, shown here. A report is data: report
// reads no configuration and runs nothing. It imports of llmprobe only the
// engine's vocabulary (probe, probe/wire), dist, slo, regression,
// internal/bounded and servermetrics; it must not import bench (which
// fills reports), config, exporter or cmd.
package report
