// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"os"
	"time"

	"github.com/alecthomas/kingpin/v2"

	"github.com/llmprobe/llmprobe/bench"
	"github.com/llmprobe/llmprobe/tracefile"
)

// replayFlags are bench's --replay flags: a trace's records sent at
// their recorded offsets, as one stage (bench/replay.go).
type replayFlags struct {
	path      string
	format    string
	blockSize int
	timeScale float64
	start     time.Duration
	duration  time.Duration

	flags  givenFlags // --replay.* and --time-scale
	replay *bench.Replay
}

func (r *replayFlags) register(cmd *kingpin.CmdClause) {
	flag := func(name, help string) *kingpin.FlagClause { return r.flags.flag(cmd, name, help) }
	cmd.Flag("replay", "Replay this trace as one stage instead of --stage: each record is sent at its recorded offset (÷ --time-scale), open-loop, to every target, with its prompt and output lengths (and Mooncake's hash_ids as shared prefixes). Mooncake JSONL, Azure or BurstGPT CSV, llmprobe --requests JSONL or an access log; gzip or zstd. With --max-requests, the first N records.").PlaceHolder("FILE").StringVar(&r.path)
	flag("replay.format", "The trace's format: auto (detected), mooncake, azure, burstgpt, llmprobe or accesslog.").Default(string(tracefile.Auto)).
		EnumVar(&r.format, string(tracefile.Auto), string(tracefile.Mooncake), string(tracefile.Azure), string(tracefile.BurstGPT), string(tracefile.LLMProbe), string(tracefile.AccessLog))
	flag("replay.block-size", "Tokens per hash_ids block of the trace (0: the format's, 512 for Mooncake).").Default("0").IntVar(&r.blockSize)
	flag("time-scale", "Replay speed: the trace's offsets are divided by this (2 replays twice as fast, 0.5 at half speed).").Default("1").Float64Var(&r.timeScale)
	flag("replay.start", "Skip the trace's records before this offset from its first one; the replay starts there.").Default("0s").DurationVar(&r.start)
	flag("replay.duration", "Replay only this much of the trace's time from --replay.start (0: to its end).").Default("0s").DurationVar(&r.duration)
}

// check validates the flags against the rest of the command line, before
// anything is read or sent: stages says --stage was given.
func (r *replayFlags) check(o *benchOptions) error {
	if r.path == "" {
		if name := r.flags.first(); name != "" {
			return usagef("--%s needs --replay=FILE", name)
		}
		return nil
	}
	switch {
	case len(o.stages) > 0:
		return usagef("--replay cannot be combined with --stage: a replay is a stage of its own, paced by the trace")
	case o.find.active():
		return usagef("--replay cannot be combined with --find or --levels: a search sizes its own stages, a replay follows the trace")
	case o.load.concurrency != "":
		return usagef("--replay cannot be combined with --concurrency: a replay is open-loop, each record sent at its offset")
	case o.load.dataset != "":
		return usagef("--replay cannot be combined with --dataset: the trace's records make the requests")
	case o.stageDurationSet:
		return usagef("--stage.duration does not apply to --replay: the trace gives the stage its length (--replay.duration, --time-scale)")
	case !(r.timeScale > 0) || r.timeScale > 1e9:
		return usagef("--time-scale must be a positive factor (2 replays twice as fast), got %v", r.timeScale)
	case r.blockSize < 0:
		return usagef("--replay.block-size must not be negative, got %d", r.blockSize)
	case r.start < 0:
		return usagef("--replay.start must not be negative, got %v", r.start)
	case r.duration < 0:
		return usagef("--replay.duration must not be negative, got %v", r.duration)
	}
	if fi, err := os.Stat(r.path); err != nil {
		return usagef("--replay %q: %v", r.path, errors.Unwrap(err))
	} else if fi.IsDir() {
		return usagef("--replay %q: is a directory, want a trace file", r.path)
	}
	return nil
}

// open reads the trace through to the end of the window to replay (every
// record checked, before anything is sent); a bad trace is a usage error.
func (r *replayFlags) open(ctx context.Context, maxRequests int) error {
	if r.path == "" {
		return nil
	}
	rp, err := bench.OpenReplay(ctx, bench.ReplayOptions{
		Path: r.path, Format: tracefile.Format(r.format), BlockSize: r.blockSize,
		TimeScale: r.timeScale, Start: r.start, Duration: r.duration, MaxRequests: maxRequests,
	})
	if err != nil {
		if ctx.Err() != nil {
			return err
		}
		return usagef("--replay: %v", err)
	}
	r.replay = rp
	return nil
}
