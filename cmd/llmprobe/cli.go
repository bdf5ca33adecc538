// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"strings"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/common/version"

	"github.com/llmprobe/llmprobe/config"
)

// What the user sees when a command fails is a plain message, not a log
// line: "llmprobe: error: ..." on standard error, as kingpin words its
// own. Exit code 2 is a bad command line (a flag, an argument, a flag's
// value), 1 any other failure. The daemon's logging while it runs is
// promslog's.

// usageError is a bad command line found by a command itself (a flag's
// value it cannot use): exit code 2, like kingpin's own parse errors.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// usagef is a usageError with a formatted message.
func usagef(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

// usageHint ends the one line of a command-line error.
const usageHint = " (see llmprobe --help)"

// reportUsage prints a bad command line on one line.
func reportUsage(w io.Writer, err error) {
	msg := strings.Join(strings.Fields(err.Error()), " ")
	fmt.Fprintf(w, "llmprobe: error: %s%s\n", msg, usageHint)
}

// nameFlag puts the flag whose value kingpin could not take before its
// error ("--find: enum value must be one of capacity,slo, got 'cap'"):
// kingpin's parsers say what is wrong with a value, not whose it is. The
// flag is found by giving each flag of the command line its value again
// and keeping the one that fails with err. Other errors are returned as
// they are.
func nameFlag(app *kingpin.Application, args []string, err error) error {
	pc, perr := app.ParseContext(args)
	if perr != nil {
		return err
	}
	for _, e := range pc.Elements {
		f, ok := e.Clause.(*kingpin.FlagClause)
		if !ok || e.Value == nil {
			continue
		}
		m := f.Model()
		if ferr := m.Value.Set(*e.Value); ferr != nil && ferr.Error() == err.Error() {
			return fmt.Errorf("--%s: %w", m.Name, err)
		}
	}
	return err
}

// reportError prints a command's failure; a multi-line error (every
// problem of a configuration file) keeps one problem per line.
func reportError(w io.Writer, err error) {
	fmt.Fprintf(w, "llmprobe: error: %v\n", err)
}

// exitCode reports err (nil: success) and returns the exit code.
func exitCode(w io.Writer, err error) int {
	var ue usageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ue):
		reportUsage(w, err)
		return 2
	}
	reportError(w, err)
	return 1
}

// invalidConfig introduces the problems of a configuration file that a
// command cannot start with, one per line below.
func invalidConfig(err error) error {
	var errs config.Errors
	if errors.As(err, &errs) {
		return fmt.Errorf("the configuration is invalid:\n%w", err)
	}
	return err
}

// fillVersion gives the build information that `make build` sets with
// -ldflags a sensible value when the binary was built otherwise (go
// build, go install, go run): the module version or the VCS revision Go
// stamped, and "unknown" rather than nothing.
func fillVersion() {
	info, ok := debug.ReadBuildInfo()
	if version.Version == "" {
		switch {
		case ok && info.Main.Version != "" && info.Main.Version != "(devel)":
			version.Version = strings.TrimPrefix(info.Main.Version, "v")
		default:
			version.Version = "devel"
		}
	}
	if version.Branch == "" {
		version.Branch = "unknown"
	}
	if version.BuildUser == "" {
		version.BuildUser = "unknown"
	}
	if version.BuildDate == "" {
		version.BuildDate = "unknown"
	}
}
