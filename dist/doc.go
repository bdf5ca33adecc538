// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

// Package dist provides the probability distributions llmprobe draws request
// lengths (and other workload quantities) from, and the statistics helpers
// its reports and `llmprobe fit` use.
//
// # Samplers
//
// A [Sampler] is immutable and safe for concurrent use. It holds no random
// state: every draw takes the caller's *rand.Rand (math/rand/v2), so a run
// is reproducible from its seed and goroutines need no locking. Drawing does
// not allocate.
//
// Besides drawing, every Sampler answers Quantile (the inverse CDF) and Mean.
// Both are exact or computed numerically to high accuracy, and both take
// clamping into account, so reports can state what a workload is meant to
// look like next to what was observed.
//
// The constructors reject impossible parameters with errors written for a
// configuration author ("lognormal: p99 (100) must be greater than median
// (120)"); the config package prefixes them with the file position and the
// field path.
//
// # Empirical quantile tables
//
// [Empirical] builds a distribution from a few (p, value) points such as
// {0.5: 1800, 0.9: 4000, 0.99: 7000}. Between two adjacent points, ln(value)
// is interpolated linearly in z = [NormQuantile](p). This is log-linear
// between the points and exact for log-normal data, which production request
// lengths approximate: a table taken from a log-normal distribution
// reproduces that distribution at every p, not just at the points.
//
// Beyond the outermost points the adjacent segment is extended, which gives
// log-normal tails: the heavy tail survives (p99.9 lies beyond p99), and
// the lower tail tends to 0. An explicit p=0 or p=1 point bounds that side
// instead; a segment that ends at p=0 or p=1, where z is infinite,
// interpolates ln(value) linearly in p. A table needs at least two points,
// in any order; each p must be in [0, 1] and given once, and values must be
// positive and non-decreasing in p.
// Drawing is Quantile(U) for U uniform on (0, 1).
//
// [FromSamples] resamples observed values instead (for example lengths read
// from a log with [ReadSamplesFile]): its quantile function interpolates
// linearly between the sorted values, as [Quantile] does.
//
// # Clamping
//
// [Clamp] bounds a distribution: draws outside [min, max] become the bound
// (they are not redrawn, so the clamped mass piles up at the bound, which is
// what a max_tokens limit does to real outputs). Quantile and Mean of the
// clamped distribution account for it.
//
// Token counts are integers; rounding a draw is left to the caller.
//
// dist imports no llmprobe package.
package dist
