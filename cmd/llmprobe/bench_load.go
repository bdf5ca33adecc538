// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/alecthomas/kingpin/v2"

	"github.com/llmprobe/llmprobe/bench"
	"github.com/llmprobe/llmprobe/bench/report"
)

// loadFlags are bench's flags for what is sent and reported: --dataset,
// --max-requests (--num-prompts), --percentiles and the closed-loop
// --concurrency.
type loadFlags struct {
	dataset       string
	outputLengths string
	maxRequests   int
	numPrompts    int
	percentiles   string
	concurrency   string

	levels []int     // --concurrency, parsed by check
	ps     []float64 // --percentiles, parsed by check
}

func (l *loadFlags) register(cmd *kingpin.CmdClause) {
	cmd.Flag("dataset", "Send real prompts from this file instead of synthesised ones (single-turn classes): a ShareGPT JSON array ([{\"conversations\": [{\"from\": \"human\", \"value\": ...}, {\"from\": \"gpt\", ...}]}]) or JSON Lines of {\"prompt\": ...} or {\"messages\": [...]}, each with an optional \"output_tokens\". Read in the file's order, at most 100000 prompts; each target walks it from the start.").PlaceHolder("FILE").StringVar(&l.dataset)
	cmd.Flag("dataset.output-lengths", "max_tokens of a dataset's requests: dataset (the reference answer's length by the workload's token estimate, or output_tokens; the workload's draw where there is none) or workload (the class's output_tokens).").Default(report.DatasetOutputsDataset).EnumVar(&l.outputLengths, report.DatasetOutputsDataset, report.DatasetOutputsWorkload)
	cmd.Flag("max-requests", "End every stage (and closed-loop level) once each target was sent N requests, or at its duration if sooner.").PlaceHolder("N").IntVar(&l.maxRequests)
	cmd.Flag("num-prompts", "Alias of --max-requests (as in vllm bench).").PlaceHolder("N").IntVar(&l.numPrompts)
	cmd.Flag("percentiles", "Percentiles to report for every metric, in percent, e.g. 50,90,99,99.9, beside the mean and the median (stdout, JSON and Markdown; vllm bench's --metric-percentiles). Default: 90,99.").PlaceHolder("P,P,...").StringVar(&l.percentiles)
	cmd.Flag("concurrency", "Closed-loop levels (saturation runs): N workers per target each send the next request when the previous ended, for --stage.duration (or --max-requests); a list, e.g. 1,4,16, is a concurrency sweep. Reported apart from the open-loop stages, as CLOSED-LOOP: it hides queueing, so its latencies are not those of any arrival rate.").PlaceHolder("N,N,...").StringVar(&l.concurrency)
}

// check validates the flags (usage errors); find says whether a search
// was asked for.
func (l *loadFlags) check(find bool) error {
	switch {
	case l.maxRequests < 0:
		return usagef("--max-requests must be positive, got %d", l.maxRequests)
	case l.numPrompts < 0:
		return usagef("--num-prompts must be positive, got %d", l.numPrompts)
	case l.maxRequests > 0 && l.numPrompts > 0 && l.maxRequests != l.numPrompts:
		return usagef("--max-requests=%d and --num-prompts=%d disagree: give one", l.maxRequests, l.numPrompts)
	}
	if l.numPrompts > 0 {
		l.maxRequests = l.numPrompts
	}
	if l.percentiles != "" {
		ps, err := report.ParsePercentiles(l.percentiles)
		if err != nil {
			return usagef("--percentiles %v", err)
		}
		l.ps = ps
	}
	if l.concurrency != "" {
		for s := range strings.SplitSeq(l.concurrency, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil || n < 1 || n > 100000 {
				return usagef("--concurrency %q: each level must be a whole number of workers from 1 to 100000, e.g. 1,4,16", l.concurrency)
			}
			l.levels = append(l.levels, n)
		}
	}
	if find && l.maxRequests > 0 {
		return usagef("--max-requests (--num-prompts) cannot be combined with --find or --levels: a search sizes its own stages")
	}
	if find && len(l.levels) > 0 {
		return usagef("--concurrency cannot be combined with --find or --levels: a search runs open-loop stages")
	}
	if l.dataset == "" && l.outputLengths != report.DatasetOutputsDataset {
		return usagef("--dataset.output-lengths needs --dataset")
	}
	return nil
}

// apply loads the dataset and sets the options.
func (l *loadFlags) apply(ctx context.Context, opts *bench.Options, stageDuration time.Duration) error {
	opts.MaxRequests = l.maxRequests
	opts.Percentiles = l.ps
	opts.Concurrency = l.levels
	opts.ClosedLoopDuration = stageDuration
	if l.dataset != "" {
		d, err := bench.LoadDataset(ctx, l.dataset, 0, l.outputLengths)
		if err != nil {
			return usagef("--dataset: %v", err)
		}
		opts.Dataset = d
	}
	return nil
}
