// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

// Command llmprobe-release turns the binaries that `make release` (or
// `make release-snapshot`) cross-compiled into the release's files, all of
// them reproducible: the same binaries and stamp give the same bytes.
//
//	llmprobe-release dist  -bin-dir DIR -out DIR -version V -revision R ...
//	    tarballs (zip for windows) with the binary, LICENSE, README.md and
//	    the example configuration; an SPDX SBOM per binary; a multi-arch
//	    OCI image layout of the linux binaries and its tar; sha256sums.txt
//	    over every file in -out.
//	llmprobe-release notes -changelog CHANGELOG.md -version V
//	    the CHANGELOG section of V (fails if there is none).
//	llmprobe-release push  -layout DIR -tag REF [-tag REF ...]
//	    pushes the layout's image index to a registry.
//
// It is a module of its own (tools/release/go.mod), so that its
// dependency, go-containerregistry, stays out of llmprobe's go.mod.
// docs/deploy.md, "Releases", describes the whole process.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "dist":
		err = runDist(os.Args[2:])
	case "notes":
		err = runNotes(os.Args[2:])
	case "push":
		err = runPush(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "llmprobe-release:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: llmprobe-release dist|notes|push [flags] (-h for each)")
	os.Exit(2)
}

// listFlag is a repeatable flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(s string) error { *l = append(*l, s); return nil }

func runNotes(args []string) error {
	fs := flag.NewFlagSet("notes", flag.ExitOnError)
	changelog := fs.String("changelog", "CHANGELOG.md", "the changelog")
	version := fs.String("version", "", "the version (without v)")
	fs.Parse(args)
	b, err := os.ReadFile(*changelog)
	if err != nil {
		return err
	}
	notes, err := changelogSection(string(b), *version)
	if err != nil {
		return fmt.Errorf("%s: %w", *changelog, err)
	}
	_, err = os.Stdout.WriteString(notes)
	return err
}
