// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package sim

import (
	"go/build"
	"strings"
	"testing"
)

// TestImports keeps the rule of the package comment: sim, its tests
// included, imports no other llmprobe package but internal/bounded.
func TestImports(t *testing.T) {
	const module = "github.com/llmprobe/llmprobe"
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, imports := range [][]string{pkg.Imports, pkg.TestImports, pkg.XTestImports} {
		for _, imp := range imports {
			if imp == module+"/internal/bounded" {
				continue
			}
			if imp == module || strings.HasPrefix(imp, module+"/") {
				t.Errorf("sim imports %s: the simulator must not share code with what it tests (see doc.go)", imp)
			}
		}
	}
}
