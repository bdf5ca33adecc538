// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

// Package fit derives a workload from production data: the distributions
// of prompt and completion lengths, read from an access log or from a
// serving engine's own token histograms in Prometheus, turned into
// empirical quantile tables that llmprobe's configuration accepts.
//
// # Sources
//
// [FromAccessLog] reads JSON lines (one request a line, plain or gzipped).
// The token counts are found by dotted field paths; the defaults cover
// vLLM-style top-level `prompt_tokens`/`completion_tokens`, an OpenAI
// response's `usage.*` (also `usage.input_tokens`/`output_tokens`), the
// OpenAI Batch API output (`response.body.usage.*`) and OpenTelemetry
// GenAI attributes (`gen_ai.usage.input_tokens`, a key with dots in it).
// A line that cannot be used (invalid JSON, a missing or non-numeric
// count) is skipped and counted by reason, never fatal; only a log without
// a single usable line is an error.
//
// [FromPrometheus] queries the increase of a token histogram over a time
// range through the Prometheus HTTP API: vLLM's
// vllm:request_prompt_tokens / vllm:request_generation_tokens, or SGLang's
// sglang:prompt_tokens_histogram / sglang:generation_tokens_histogram, as
// native histograms when they are stored so and as classic buckets
// otherwise.
//
// [FromTrace] reads a request trace of any tracefile format (Mooncake,
// Azure, BurstGPT, llmprobe's --requests, access logs), streamed in
// bounded memory, and adds its joint picture ([Joint]): the prompt x
// output 2-D histogram, their Spearman rank correlation, the prefix reuse
// its hash_ids imply (unbounded, and through an LRU of N blocks), the
// session lengths and the rate curve. Its tables come from a uniform
// reservoir of (prompt, output) pairs.
//
// # Fitting
//
// Each length becomes a [Lengths]: count, mean, extremes, data quantiles,
// a config-ready quantile table and a log-normal fit (for reference and
// for the reader's intuition; the table is what llmprobe draws from).
//
// From samples, quantiles are type 7 ([dist.Quantile]) and the log-normal
// is the maximum-likelihood fit of [dist.FitLogNormal]. From a histogram,
// a quantile is interpolated within its bucket log-linearly (token counts
// spread evenly in ln(tokens) across a bucket, which suits their skew far
// better than Prometheus' linear interpolation; the first bucket, whose
// lower edge is 0, is linear), and the log-normal is the binned maximum-
// likelihood fit: it maximises Σ nᵢ·ln(Φ(zᵢ) − Φ(zᵢ₋₁)) over the buckets,
// started from the least-squares line through (NormQuantile(F), ln le).
//
// The quantile table lists p = 0.5, 0.9 and 0.99 always, and 0.01, 0.1,
// 0.25, 0.75, 0.95 and 0.999 when the data supports them: when at least
// [MinTail] observations lie beyond the point (n·min(p, 1−p) ≥ MinTail).
// Values are whole tokens (rounded, at least 1, non-decreasing), and the
// observed minimum and maximum become the table's min/max clamps.
//
// # Output
//
// [WriteWorkload] writes a complete configuration file (global defaults,
// the fitted workload, one example target) with a header comment that
// says where the numbers came from; [WriteSummary] prints the summary
// table; [WritePlot] draws the length histograms as SVG or PNG.
//
// fit imports config, dist, tracefile, internal/bounded and internal/httpclient only;
// never the probe, exporter, bench or cmd (probe/workload imports fit for
// the refits of workload_from).
package fit
