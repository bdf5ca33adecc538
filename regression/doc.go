// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

// Package regression decides whether a series of per-request values (a
// target's TTFT, TPOT or E2E, or its errors) got worse than it was, and
// since when: the statistics behind "did this endpoint get worse, since
// which deploy".
//
// A [Detector] is a pure function of the samples and their times: no
// goroutines, clocks or I/O, so the daemon feeds it as requests finish
// and evaluates it once a minute, and the same code runs offline over
// simulated months at millions of samples per second. It holds at most
// about 61 KiB.
//
// The method (docs/design.md, "Regression detection", gives the reasons
// and the measured figures): a frozen baseline of up to 4096 values, each
// new sample placed against it once on arrival; tests of the last n
// samples for geometric n against the baseline — a one-sided
// Mann–Whitney U of the placements (the median test, with its variance
// corrected for serial correlation), an exact exceedance count above the
// baseline's p99 (the tail test) and Fisher's exact test of error counts
// (the errors test) — each at a per-test level (1e-7 for the tail test,
// 1e-8 for the others) and behind an effect gate, so that a real but
// small shift does not page. An alarm
// holds at a laxer level, is dated by a change-point estimate (or the
// deploy, [Detector.Cut]) and becomes the baseline after a day.
//
// [Run], [Step] and [Summarise] run a detector offline over a simulated
// [Series] (simulate.go): the code the figures are measured with, and
// what `llmprobe plan` predicts a class's detection delays with.
//
// [MannWhitney] (two-sided) is also what `llmprobe bench compare` tests
// medians with, so the daemon and the comparison of reports share one
// implementation.
//
// regression imports no llmprobe package.
package regression
