// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package config

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/llmprobe/llmprobe/internal/bounded"
)

// LoadFile reads, decodes and validates a configuration file, and checks
// that the files it names (credentials, certificates) can be read. On
// error it returns Errors (or a read error) naming the file, line and
// field of every problem.
func LoadFile(path string) (*Config, error) {
	return loadFile(context.Background(), path)
}

func loadFile(ctx context.Context, path string) (*Config, error) {
	data, err := readFile(ctx, path)
	if err != nil {
		return nil, err
	}
	return load(data, path, true)
}

// LoadFileContext is LoadFile that gives way to ctx: it returns ctx.Err()
// as soon as ctx is done (SIGTERM while a file blocks: a FIFO, a hung
// network file system). The abandoned load finishes in the background.
func LoadFileContext(ctx context.Context, path string) (*Config, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	type result struct {
		cfg *Config
		err error
	}
	done := make(chan result, 1)
	go func() {
		cfg, err := loadFile(ctx, path)
		done <- result{cfg, err}
	}()
	select {
	case r := <-done:
		return r.cfg, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// readFile reads at most MaxFileSize bytes of path, a regular file or a
// pipe (internal/bounded): a device such as /dev/zero is refused without
// being read, a larger file before it is read, and a pipe that passes
// the limit after MaxFileSize+1 bytes. It gives way to ctx.
func readFile(ctx context.Context, path string) ([]byte, error) {
	data, err := bounded.ReadFile(ctx, path, MaxFileSize)
	var tl *bounded.TooLargeError
	if errors.As(err, &tl) {
		return nil, tooLarge(path)
	}
	return data, err
}

var unknownAnchorRE = regexp.MustCompile(`unknown anchor '(.*)' referenced`)

// locateAlias finds the first use of alias *name in data.
func locateAlias(data []byte, name string) (line, col int) {
	ref := []byte("*" + name)
	for off := 0; ; {
		i := bytes.Index(data[off:], ref)
		if i < 0 {
			return 0, 0
		}
		end := off + i + len(ref)
		if end == len(data) || bytes.IndexByte([]byte(" \t\r\n,[]{}"), data[end]) >= 0 {
			start := off + i
			line = 1 + bytes.Count(data[:start], []byte("\n"))
			return line, 1 + utf8.RuneCount(data[bytes.LastIndexByte(data[:start], '\n')+1:start])
		}
		off = end
	}
}

func tooLarge(file string) Errors {
	return Errors{{File: file, Msg: fmt.Sprintf("larger than %d MiB, the limit for a configuration file", MaxFileSize>>20)}}
}

// Load decodes and validates a configuration held in memory; file names it
// in errors and anchors relative paths (credentials_file, samples files).
// Unlike LoadFile it does not check the files an http_client_config
// names: a configuration checked here may be meant for another machine
// (a manifest, a pod's secrets).
func Load(data []byte, file string) (*Config, error) {
	return load(data, file, false)
}

func load(data []byte, file string, checkFiles bool) (*Config, error) {
	if len(data) > MaxFileSize {
		return nil, tooLarge(file)
	}
	if denseValues(data) > 2*MaxNodes {
		return nil, Errors{{File: file, Msg: fmt.Sprintf("more than %d values, the limit for a configuration file", MaxNodes)}}
	}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		errs := translate(typeErrorLines(err), file, nodeIndex{})
		if m := unknownAnchorRE.FindStringSubmatch(err.Error()); m != nil && len(errs) == 1 {
			// yaml does not say where.
			errs[0].Line, errs[0].Column = locateAlias(data, m[1])
			errs[0].Msg = fmt.Sprintf("alias *%s refers to no anchor (define &%s before it)", m[1], m[1])
		} else if len(errs) == 1 {
			// yaml says where the construct began, not where it broke.
			if line, col, ok := locateSyntaxError(data, err.Error()); ok {
				errs[0].Line, errs[0].Column = line, col
				errs[0].Msg = syntaxHint(errs[0].Msg, byteAt(data, line, col))
			}
		}
		return nil, errs
	}
	if len(root.Content) == 0 || root.Content[0].ShortTag() == "!!null" {
		return nil, Errors{{File: file, Msg: "empty configuration"}}
	}
	if n := countNodes(&root, MaxNodes); n > MaxNodes {
		return nil, Errors{{File: file, Msg: fmt.Sprintf("more than %d values, the limit for a configuration file", MaxNodes)}}
	}
	idx := indexNodes(&root)
	if errs := checkShape(&root, idx, file); len(errs) > 0 {
		hideSecrets(errs, idx)
		return nil, errs
	}
	dir := ""
	if file != "" {
		dir = filepath.Dir(file)
	}
	// The files an http_client_config names are checked as the file
	// names them, whatever else is wrong with it (see checkHTTPFiles): these
	// errors are not subject to decodedBadly.
	var files fieldErrors
	if checkFiles {
		checkHTTPFiles(&files, &root, dir)
	}
	root = yaml.Node{} // the decoder parses its own

	cfg, err := decodeYAML(data)
	errs := checkWholeNumbers(idx, file)
	var te *yaml.TypeError
	switch {
	case err == nil:
	case errors.As(err, &te):
		errs = append(errs, translate(te.Errors, file, idx)...)
	default:
		// Decoding could not go on: what was decoded means nothing.
		return nil, Errors{{File: file, Msg: fatalMessage(err)}}
	}
	cfg.Source = file

	for _, t := range cfg.Targets {
		if t != nil {
			t.HTTPClientConfig.SetDirectory(dir)
			if t.WorkloadFrom != nil && t.WorkloadFrom.Prometheus != nil {
				t.WorkloadFrom.Prometheus.HTTPClientConfig.SetDirectory(dir)
			}
			if t.ServerMetrics != nil {
				t.ServerMetrics.HTTPClientConfig.SetDirectory(dir)
			}
			if t.Arrival.Trace != nil {
				t.Arrival.Trace.dir = dir
			}
			t.Discovery.SetDirectory(dir)
		}
	}
	if p := cfg.Global.Diagnosis.Prometheus; p != nil {
		p.HTTPClientConfig.SetDirectory(dir)
	}
	for _, w := range cfg.Workloads {
		if w == nil {
			continue
		}
		for _, c := range w.Classes {
			if c != nil {
				for _, d := range c.dists() {
					d.dir = dir
				}
				if c.FromTrace != nil {
					c.FromTrace.dir = dir
				}
			}
		}
	}

	fe := fieldErrors{samples: map[[2]string]samplesRead{}}
	cfg.validate(&fe)
	decoding := errs
	for _, e := range fe.errs {
		if decodedBadly(e, decoding) || typoConsequence(e, decoding, idx) {
			continue
		}
		pos := idx.locate(e.Path)
		e.File, e.Line, e.Column = file, pos.line, pos.col
		errs = append(errs, e)
	}
	for _, e := range files.errs {
		pos := idx.locate(e.Path)
		e.File, e.Line, e.Column = file, pos.line, pos.col
		errs = append(errs, e)
	}
	if len(errs) > 0 {
		hideSecrets(errs, idx)
		return nil, report(errs, file)
	}
	return cfg, nil
}

// decodedBadly reports whether validation error e is about something
// that failed to decode: its field did (it has the default, not what the
// file says), something inside it did (a distribution one of whose
// parameters did), or something its judgement rests on did (the workload
// a target names).
func decodedBadly(e *Error, decoding Errors) bool {
	for _, d := range decoding {
		if d.scope == unscoped {
			continue // not attached to a field
		}
		for _, p := range append([]string{e.Path}, e.deps...) {
			if under(p, d.scope) || under(d.scope, p) {
				return true
			}
		}
	}
	return false
}

// typoConsequence reports whether validation error e is likely a
// consequence of an unknown key of the same mapping: a misspelt key
// leaves the field it meant unset, and "arrival.rate must be positive,
// got 0" under "unknown field arival" only misleads. With a suggestion,
// the errors about the suggested field (or below it) go; without one,
// those about a field the mapping does not set (below the top level).
// The others stay: a field it sets, or the mapping as a whole, was judged
// on what the file says.
func typoConsequence(e *Error, decoding Errors, idx nodeIndex) bool {
	for _, d := range decoding {
		if !d.unknownKey || d.Path == "" {
			continue
		}
		block := parentPath(d.Path) // "": a top-level key, the whole file
		for _, p := range append([]string{e.Path}, e.deps...) {
			if d.suggest != "" {
				if under(p, joinPath(block, d.suggest)) {
					return true
				}
				continue
			}
			if block == "" || p == block || !under(p, block) {
				continue // a top-level key without a suggestion hides nothing
			}
			// The field of the block p is under.
			child := p
			for parentPath(child) != block && parentPath(child) != "" {
				child = parentPath(child)
			}
			if _, set := idx.pos[child]; !set {
				return true
			}
		}
	}
	return false
}

// report sorts errors by position (the file's problems top to bottom),
// drops duplicates (an aliased value decodes once per alias) and keeps at
// most MaxReportedErrors.
func report(errs Errors, file string) Errors {
	slices.SortStableFunc(errs, func(a, b *Error) int {
		if a.Line != b.Line {
			return a.Line - b.Line
		}
		return a.Column - b.Column
	})
	errs = slices.CompactFunc(errs, func(a, b *Error) bool {
		return a.Line == b.Line && a.Column == b.Column && a.Path == b.Path && a.Msg == b.Msg
	})
	if n := len(errs) - MaxReportedErrors; n > 0 {
		errs = append(errs[:MaxReportedErrors:MaxReportedErrors], &Error{File: file, Msg: fmt.Sprintf("%d more errors not shown", n)})
	}
	return errs
}
