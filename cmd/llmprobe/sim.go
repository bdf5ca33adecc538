// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/alecthomas/kingpin/v2"

	"github.com/llmprobe/llmprobe/config"
	"github.com/llmprobe/llmprobe/sim"
)

// simShutdownTimeout bounds how long in-flight streams may take to finish
// after SIGTERM/SIGINT.
const simShutdownTimeout = 30 * time.Second

// registerSim registers `llmprobe sim`, the built-in OpenAI-compatible LLM
// serving simulator (see docs/simulator.md).
func registerSim(app *kingpin.Application) command {
	cmd := app.Command("sim", "Run the built-in OpenAI-compatible LLM serving simulator (a vLLM-like continuous-batching engine without a GPU).")
	var (
		listen     = cmd.Flag("web.listen-address", "Address to serve the OpenAI API, /tokenize, /health and /metrics on.").Default("127.0.0.1:8000").String()
		configFile = cmd.Flag("sim.config.file", "YAML file with the simulator configuration; flags given explicitly override it.").String()
		models     = cmd.Flag("model", "Served model name (repeatable; the first labels the metrics). Default: sim-model.").Strings()

		zero, zeroSet = simBoolFlag(cmd, "sim.zero-latency", "Make every engine step take no time (cache, usage and metrics still work).")

		maxNumSeqs, maxNumSeqsSet   = simIntFlag(cmd, "sim.max-num-seqs", "Largest running batch; further requests wait in a queue.")
		maxModelLen, maxModelLenSet = simIntFlag(cmd, "sim.max-model-len", "Largest prompt + max_tokens of a request.")
		batched, batchedSet         = simIntFlag(cmd, "sim.max-num-batched-tokens", "Token budget of one engine step (decodes take one each, prefill chunks the rest).")
		kvBlocks, kvBlocksSet       = simIntFlag(cmd, "sim.num-kv-blocks", "KV-cache capacity in blocks (running sequences and cached prefixes).")
		blockSize, blockSizeSet     = simIntFlag(cmd, "sim.block-size", "Tokens per KV block (the prefix-cache unit).")

		prefillBase, prefillBaseSet = simDurationFlag(cmd, "sim.prefill-base", "Fixed cost of a step that prefills.")
		prefillTok, prefillTokSet   = simDurationFlag(cmd, "sim.prefill-per-token", "Cost per uncached prompt token prefilled.")
		decodeBase, decodeBaseSet   = simDurationFlag(cmd, "sim.decode-base", "Fixed cost of every step.")
		decodeSeq, decodeSeqSet     = simDurationFlag(cmd, "sim.decode-per-seq", "Cost per sequence in a step.")

		eos, eosSet   = simFloatFlag(cmd, "sim.eos-probability", "Chance per generated token of an early stop (without ignore_eos).")
		seed, seedSet = simUint64Flag(cmd, "sim.seed", "Seed for word choice, early stops and fault draws (0: random).")

		timingSteps   = cmd.Flag("sim.timing-step", "From AFTER (a duration since the start) on, multiply every engine step's duration by FACTOR, e.g. 2m:5 then 12m:1 (repeatable, in increasing AFTER order; replaces the config file's timing_steps).").PlaceHolder("AFTER:FACTOR").Strings()
		requestLogSet = new(bool)
		requestLog    = cmd.Flag("sim.request-log", "Append one JSON line per completion request (ids, timings, token counts, status, fault) to this file; empty: none.").IsSetByUser(requestLogSet).PlaceHolder("PATH").String()
	)
	return command{
		clause: cmd,
		run: func(ctx context.Context, logger *slog.Logger) error {
			cfg := sim.DefaultConfig()
			if *configFile != "" {
				var err error
				if cfg, err = sim.LoadConfigFile(*configFile); err != nil {
					return err
				}
			}
			if len(*models) > 0 {
				cfg.Models = *models
			}
			if *zeroSet {
				cfg.ZeroLatency = *zero
			}
			simSetIf(*maxNumSeqsSet, &cfg.MaxNumSeqs, *maxNumSeqs)
			simSetIf(*maxModelLenSet, &cfg.MaxModelLen, *maxModelLen)
			simSetIf(*batchedSet, &cfg.MaxNumBatchedTokens, *batched)
			simSetIf(*kvBlocksSet, &cfg.NumKVBlocks, *kvBlocks)
			simSetIf(*blockSizeSet, &cfg.BlockSize, *blockSize)
			simSetIf(*prefillBaseSet, &cfg.PrefillBase, *prefillBase)
			simSetIf(*prefillTokSet, &cfg.PrefillPerToken, *prefillTok)
			simSetIf(*decodeBaseSet, &cfg.DecodeBase, *decodeBase)
			simSetIf(*decodeSeqSet, &cfg.DecodePerSeq, *decodeSeq)
			simSetIf(*eosSet, &cfg.EOSProbability, *eos)
			simSetIf(*seedSet, &cfg.Seed, *seed)
			if len(*timingSteps) > 0 {
				cfg.TimingSteps = cfg.TimingSteps[:0:0]
				for _, v := range *timingSteps {
					st, err := sim.ParseTimingStep(v)
					if err != nil {
						return usagef("--sim.timing-step: %w", err)
					}
					cfg.TimingSteps = append(cfg.TimingSteps, st)
				}
			}
			simSetIf(*requestLogSet, &cfg.RequestLog, *requestLog)
			return runSim(ctx, logger, *listen, cfg)
		},
	}
}

func runSim(ctx context.Context, logger *slog.Logger, addr string, cfg sim.Config) error {
	// Server spans when the OTEL_* environment enables tracing (service
	// llmprobe-sim unless OTEL_SERVICE_NAME names it).
	tracing, err := startTracing(ctx, logger, config.Tracing{}, "llmprobe-sim", "")
	if err != nil {
		return err
	}
	defer stopTracing(logger, tracing)
	if tracing != nil {
		cfg.TracerProvider = tracing.TracerProvider()
	}
	s, err := sim.New(cfg, logger)
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		_ = s.Shutdown(context.Background())
		return fmt.Errorf("listen on %q: %w", addr, err)
	}
	attrs := []any{"address", l.Addr().String(), "models", cfg.Models,
		"zero_latency", cfg.ZeroLatency, "max_num_seqs", cfg.MaxNumSeqs, "max_model_len", cfg.MaxModelLen}
	if len(cfg.TimingSteps) > 0 {
		attrs = append(attrs, "timing_steps", len(cfg.TimingSteps))
	}
	if cfg.RequestLog != "" {
		attrs = append(attrs, "request_log", cfg.RequestLog)
	}
	logger.Info("simulator listening", attrs...)

	served := make(chan error, 1)
	go func() { served <- s.Serve(l) }()
	select {
	case err := <-served:
		_ = s.Shutdown(context.Background())
		return err
	case <-ctx.Done():
	}
	logger.Info("simulator shutting down", "timeout", simShutdownTimeout)
	sctx, cancel := context.WithTimeout(context.Background(), simShutdownTimeout)
	defer cancel()
	err = s.Shutdown(sctx)
	if serr := <-served; serr != nil && err == nil {
		err = serr
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("simulator shutdown: streams still running after %s were cut", simShutdownTimeout)
	}
	return err
}

func simSetIf[T any](set bool, dst *T, v T) {
	if set {
		*dst = v
	}
}

// The flags below override the config file only when given: each returns
// its value and whether the user set it.

func simBoolFlag(cmd *kingpin.CmdClause, name, help string) (*bool, *bool) {
	set := new(bool)
	return cmd.Flag(name, help).IsSetByUser(set).Bool(), set
}

func simIntFlag(cmd *kingpin.CmdClause, name, help string) (*int, *bool) {
	set := new(bool)
	return cmd.Flag(name, help).IsSetByUser(set).PlaceHolder(simFlagDefault(name)).Int(), set
}

func simFloatFlag(cmd *kingpin.CmdClause, name, help string) (*float64, *bool) {
	set := new(bool)
	return cmd.Flag(name, help).IsSetByUser(set).PlaceHolder(simFlagDefault(name)).Float64(), set
}

func simUint64Flag(cmd *kingpin.CmdClause, name, help string) (*uint64, *bool) {
	set := new(bool)
	return cmd.Flag(name, help).IsSetByUser(set).PlaceHolder(simFlagDefault(name)).Uint64(), set
}

func simDurationFlag(cmd *kingpin.CmdClause, name, help string) (*time.Duration, *bool) {
	set := new(bool)
	return cmd.Flag(name, help).IsSetByUser(set).PlaceHolder(simFlagDefault(name)).Duration(), set
}

// simFlagDefault shows a flag's default (from sim.DefaultConfig) in --help.
func simFlagDefault(flag string) string {
	d := sim.DefaultConfig()
	switch flag {
	case "sim.max-num-seqs":
		return fmt.Sprint(d.MaxNumSeqs)
	case "sim.max-model-len":
		return fmt.Sprint(d.MaxModelLen)
	case "sim.max-num-batched-tokens":
		return fmt.Sprint(d.MaxNumBatchedTokens)
	case "sim.num-kv-blocks":
		return fmt.Sprint(d.NumKVBlocks)
	case "sim.block-size":
		return fmt.Sprint(d.BlockSize)
	case "sim.prefill-base":
		return d.PrefillBase.String()
	case "sim.prefill-per-token":
		return strings.ReplaceAll(d.PrefillPerToken.String(), "µ", "u")
	case "sim.decode-base":
		return d.DecodeBase.String()
	case "sim.decode-per-seq":
		return strings.ReplaceAll(d.DecodePerSeq.String(), "µ", "u")
	case "sim.eos-probability":
		return fmt.Sprint(d.EOSProbability)
	case "sim.seed":
		return "0"
	}
	return ""
}
