// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/alecthomas/kingpin/v2"

	"github.com/llmprobe/llmprobe/config"
)

func registerCheckConfig(app *kingpin.Application) command {
	cmd := app.Command("check-config", "Validate configuration files; exit 1 with every problem (file:line:column: field: message) if any is invalid.")
	files := cmd.Arg("file", "Configuration files to check.").Required().Strings()
	return command{
		clause: cmd,
		run: func(ctx context.Context, _ *slog.Logger) error {
			return checkConfigs(ctx, *files)
		},
	}
}

// checkConfigs checks every file. ctx (cancelled on SIGTERM/SIGINT) stops
// it even while a file blocks (a FIFO, a hung network file system).
func checkConfigs(ctx context.Context, files []string) error {
	failed := 0
	for _, f := range files {
		cfg, err := config.LoadFileContext(ctx, f)
		if ctx.Err() != nil {
			return fmt.Errorf("check-config interrupted at %s: %w", f, ctx.Err())
		}
		if err != nil {
			failed++
			fmt.Fprintf(os.Stderr, "FAILED: %s\n%v\n", f, err)
			continue
		}
		classes := 0
		for _, w := range cfg.Workloads {
			classes += len(w.Classes)
		}
		fmt.Printf("SUCCESS: %s is valid (%d targets, %d workloads, %d classes)\n", f, len(cfg.Targets), len(cfg.Workloads), classes)
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d configuration files are invalid", failed, len(files))
	}
	return nil
}
