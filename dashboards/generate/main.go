// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

// Command generate writes llmprobe's monitoring mixin: the Grafana
// dashboards (dashboards/*.json), the Prometheus rule file
// (alerts/llmprobe.rules.yml, and the Helm chart's copy of it) and its
// prometheus-operator wrapper (deploy/kubernetes/prometheusrule.yaml), all
// from alerts.DefaultConfig.
//
// Run it from the module root: `make dashboards` (go run ./dashboards/generate).
//
// It imports alerts and dashboards only.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/llmprobe/llmprobe/alerts"
	"github.com/llmprobe/llmprobe/dashboards"
)

func main() {
	root := flag.String("root", ".", "module root to write the generated files under")
	flag.Parse()
	if err := run(*root); err != nil {
		fmt.Fprintln(os.Stderr, "generate:", err)
		os.Exit(1)
	}
}

func run(root string) error {
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		return fmt.Errorf("%s is not the module root (no go.mod): run from the repository root or pass -root", root)
	}
	files, err := dashboards.Files(alerts.DefaultConfig())
	if err != nil {
		return err
	}
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		dst := filepath.Join(root, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(dst, files[p], 0o644); err != nil {
			return err
		}
		fmt.Println("wrote", p)
	}
	return nil
}
