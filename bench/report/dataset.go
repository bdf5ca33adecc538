// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package report

import (
	"fmt"
	"maps"
	"slices"
)

// Where a dataset's requests take their max_tokens from
// (Dataset.OutputLengths).
const (
	// DatasetOutputsDataset: the dataset's reference answer (ShareGPT's
	// first gpt turn, a JSONL line's completion or trailing assistant
	// message, by the workload's token estimate) or its output_tokens;
	// the workload's draw for prompts that have none.
	DatasetOutputsDataset = "dataset"
	// DatasetOutputsWorkload: the workload class's output_tokens draw.
	DatasetOutputsWorkload = "workload"
)

// DatasetInfo describes the dataset of a run (Report.Dataset).
type DatasetInfo struct {
	Path          string `json:"path"`
	Format        string `json:"format"`
	Prompts       int    `json:"prompts"`
	OutputLengths string `json:"output_lengths"`
	// WithOutputLength counts the prompts with an output length of their
	// own (a reference answer or output_tokens).
	WithOutputLength int            `json:"with_output_length"`
	Skipped          map[string]int `json:"skipped,omitempty"`
	Truncated        string         `json:"truncated,omitempty"`
	// Sent is, per target, how many dataset prompts it was sent; above
	// Prompts the dataset wrapped and prompts repeated (a prefix cache
	// may serve the repeats).
	Sent map[string]int `json:"sent,omitempty"`
}

// describe is the dataset in one line of the text report.
func (info *DatasetInfo) describe() string {
	s := fmt.Sprintf("%s (%s): %d prompts, %d with an output length of their own; max_tokens from the %s",
		info.Path, info.Format, info.Prompts, info.WithOutputLength, info.OutputLengths)
	if info.OutputLengths == DatasetOutputsDataset && info.WithOutputLength < info.Prompts {
		s += " (the workload's for the others)"
	}
	if info.Truncated != "" {
		s += "; " + info.Truncated
	}
	for _, k := range slices.Sorted(maps.Keys(info.Skipped)) {
		s += fmt.Sprintf("; %d skipped: %s", info.Skipped[k], k)
	}
	for _, t := range slices.Sorted(maps.Keys(info.Sent)) {
		if n := info.Sent[t]; n > info.Prompts {
			s += fmt.Sprintf("; %s was sent %d dataset prompts: the dataset wrapped and prompts repeated (a prefix cache may serve the repeats)", t, n)
		}
	}
	return s
}
