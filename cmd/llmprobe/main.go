// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

// Command llmprobe is a Prometheus-native continuous benchmarking exporter
// for OpenAI-compatible LLM serving endpoints.
//
// Each subcommand lives in its own file and registers itself through a
// register* function returning a command; main only wires flags, logging
// and signals.
//
// It may import every production package of the module (never the
// test-support packages outside its tests); no package imports it.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/common/promslog"
	promslogflag "github.com/prometheus/common/promslog/flag"
	"github.com/prometheus/common/version"

	"github.com/llmprobe/llmprobe/probe"
)

// command is one kingpin subcommand and the function that runs it once the
// command line has been parsed. ctx is cancelled on SIGINT/SIGTERM.
type command struct {
	clause *kingpin.CmdClause
	run    func(ctx context.Context, logger *slog.Logger) error
}

func main() {
	os.Exit(Main(os.Args[1:]))
}

// Main parses args, runs the selected command and returns the exit code.
func Main(args []string) int {
	fillVersion()
	app := kingpin.New("llmprobe", "Continuous, open-loop benchmarking of OpenAI-compatible LLM endpoints, exported as Prometheus metrics.")
	app.Version(version.Print("llmprobe"))
	app.HelpFlag.Short('h')
	// --help and --version answer on standard output (kingpin's default
	// is standard error); errors stay on standard error.
	app.UsageWriter(os.Stdout)
	app.ErrorWriter(os.Stderr)
	logConfig := &promslog.Config{}
	promslogflag.AddFlags(app, logConfig)
	memRatio := addMemoryLimitFlag(app)

	commands := []command{
		registerRun(app),
		registerCheckConfig(app),
		registerSim(app),
		registerBench(app),
		registerFit(app),
		registerSelftest(app),
		registerMixin(app),
		registerPlan(app),
	}

	selected, err := app.Parse(args)
	if err != nil {
		// One line: kingpin's usage text would re-parse args and print
		// the error a second time.
		reportUsage(os.Stderr, nameFlag(app, args, err))
		return 2
	}
	logger := promslog.New(logConfig)
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(probe.GCPercent)
	}
	if err := applyMemoryLimit(*memRatio); err != nil {
		reportUsage(os.Stderr, err)
		return 2
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	for _, c := range commands {
		if c.clause.FullCommand() != selected {
			continue
		}
		// A plain message, not a log line (see cli.go).
		return exitCode(os.Stderr, c.run(ctx, logger))
	}
	reportUsage(os.Stderr, fmt.Errorf("unknown command %q", selected))
	return 2
}
