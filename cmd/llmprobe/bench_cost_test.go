// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"testing"
)

// TestBenchCostUsage: a GPU price or count that cannot give a cost per
// token is one line "llmprobe: error: ..." and exit code 2, before any
// simulator or stage starts.
func TestBenchCostUsage(t *testing.T) {
	bin := binary(t)
	expectBenchUsageErrors(t, bin, []usageCase{
		{[]string{"--stage=1:1s", "--gpu.price-per-hour=2.5"}, "--gpu.price-per-hour needs the number of GPUs: --gpu.count, or --prometheus.url"},
		{[]string{"--stage=1:1s", "--gpu.price-per-hour=-1", "--gpu.count=1"}, "--gpu.price-per-hour must be 0 (none) or positive, got -1"},
		{[]string{"--stage=1:1s", "--gpu.price-per-hour=NaN", "--gpu.count=1"}, "--gpu.price-per-hour must be 0 (none) or positive, got NaN"},
		{[]string{"--stage=1:1s", "--gpu.count=-2"}, "--gpu.count must not be negative, got -2"},
	})
}
