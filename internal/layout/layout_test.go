// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package layout

import (
	"bufio"
	"errors"
	"go/build"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

// rule is the place of one package in the layering: the llmprobe
// packages its code may import, and those its tests may import besides
// (the test-support packages and the simulator are open to every test
// unless closed says otherwise).
type rule struct {
	imports []string
	tests   []string
	// closed: its tests may import nothing beyond imports and tests
	// (the simulator must not share code with what it tests).
	closed bool
	// testOnly: the package is only tests (or test support), so its
	// tests may import anything.
	testOnly bool
}

// Groups of the table.
var (
	// leaves import no llmprobe package (internal/httpclient none but
	// internal/scrub).
	leaves = []string{"dist", "slo", "regression", "diagnosis", "internal/bounded", "internal/scrub", "internal/httpclient"}
	// engine is what the probe engine is made of.
	engine = []string{"probe", "probe/wire", "probe/workload", "probe/harness"}
	// support is what tests share; no production code imports it.
	support = []string{"internal/promtest", "internal/otlptest", "internal/simtest", "internal/testio", "internal/redirecttest", "internal/proctest", "internal/dnstest", "internal/kubetest", "internal/h2test"}
)

func join(groups ...[]string) []string { return slices.Concat(groups...) }

// layers is the layering, bottom up: each package's allowed imports are
// below it. docs/architecture.md ("Packages and the direction of their
// imports") draws the same table.
var layers = map[string]rule{
	// The leaves: pure math, objectives, regression detection, the
	// diagnosis of a slow target, bounded reading, what may be shown of a
	// URL or a value, HTTP clients (which show URLs).
	"dist":                {},
	"slo":                 {},
	"regression":          {},
	"diagnosis":           {},
	"internal/bounded":    {},
	"internal/scrub":      {},
	"internal/httpclient": {imports: []string{"internal/scrub"}},
	"config":              {imports: []string{"dist", "slo", "regression", "internal/bounded", "internal/scrub", "tracefile"}},
	// The trace readers (Mooncake, Azure, BurstGPT, llmprobe's own
	// records, access logs): beside the leaves, reading files only.
	"tracefile": {imports: []string{"internal/bounded"}},

	// What the serving side says of itself (an engine's exposition, its
	// GPUs in Prometheus, the cost per token): read by bench, and made to
	// be read by the daemon's side without bench.
	"servermetrics": {imports: []string{"internal/bounded", "internal/httpclient", "internal/scrub"}},

	// Replica discovery (dns, file_sd, Kubernetes): read by the engine
	// and the binary.
	"discovery": {imports: []string{"config", "internal/bounded", "internal/scrub"}},

	// The simulator is what everything else is tested against: it shares
	// no code with it, its tests included.
	"sim": {imports: []string{"internal/bounded"}, closed: true},

	// The probe, bottom up: one request over the wire; the harness'
	// judgement of itself; what to send; the engine that wires them.
	"probe/wire":     {imports: []string{"slo", "internal/httpclient", "internal/bounded", "internal/scrub"}},
	"probe/harness":  {imports: []string{"config"}},
	"probe/workload": {imports: []string{"probe/wire", "config", "dist", "fit", "tracefile"}},
	"fit":            {imports: []string{"config", "dist", "internal/bounded", "internal/scrub", "internal/httpclient", "tracefile"}},
	"probe": {
		imports: join(engine[1:], leaves, []string{"config", "fit", "tracefile", "discovery", "servermetrics"}),
		tests:   []string{"exporter"}, // the exposition fixture (exposition_golden_test.go)
	},

	// How much probing is enough (llmprobe plan, the daemon's plan
	// figures): the detector run offline on a class's shape, its tokens
	// and their cost; pure, below the exporter and the binary.
	"plan": {imports: []string{"config", "dist", "slo", "regression", "alerts", "servermetrics", "probe/workload", "probe/wire"}},

	// What reads the engine: the exporter (metrics, status page, reloads)
	// and bench (finite stages, reports). Neither imports cmd; the
	// exporter never imports bench, bench's tests use the exporter.
	"exporter": {
		imports: join(engine, []string{"config", "slo", "dist", "diagnosis", "internal/bounded", "internal/scrub", "servermetrics", "plan"}),
		tests:   []string{"regression"}, // the detector's results in the test status (helpers_test.go)
	},
	"bench": {imports: join(engine, leaves, []string{"config", "fit", "tracefile", "servermetrics", "bench/report"}), tests: []string{"exporter"}},
	// What a bench run reports: data and documents, no configuration, no
	// runner (bench fills it).
	"bench/report": {imports: []string{"probe", "probe/wire", "dist", "slo", "regression", "internal/bounded", "servermetrics"}},

	// The monitoring mixin and its dashboards.
	"alerts":              {imports: []string{"internal/bounded"}},
	"dashboards":          {imports: []string{"alerts"}},
	"dashboards/generate": {imports: []string{"alerts", "dashboards"}},
	"examples":            {tests: join(engine, []string{"config"})},

	// The binary may import every production package.
	"cmd/llmprobe": {imports: join(engine, leaves, []string{"config", "fit", "sim", "exporter", "bench", "bench/report", "servermetrics", "alerts", "dashboards", "examples", "tracefile", "discovery", "plan"}), testOnly: true},

	// Test support and the packages that are only tests.
	"internal/promtest":     {imports: []string{"internal/proctest", "internal/testio"}},
	"internal/proctest":     {imports: []string{"internal/testio"}},
	"internal/otlptest":     {},
	"internal/simtest":      {imports: []string{"sim"}},
	"internal/testio":       {},
	"internal/redirecttest": {},
	"internal/dnstest":      {},
	"internal/kubetest":     {},
	"internal/h2test":       {},
	"internal/layout":       {closed: true},
	"e2e":                   {testOnly: true},
	"soak":                  {testOnly: true},
	"deploy":                {testOnly: true},
	"deploy/compose":        {testOnly: true},
	"deploy/systemd":        {testOnly: true},
}

// goos are the systems the module is built for; files of each (build
// tags, _linux.go) are read.
var goos = []string{"linux", "darwin", "windows"}

// TestLayering walks the module and refuses every llmprobe import that
// the table does not allow: production code, in-package tests and
// external tests alike.
func TestLayering(t *testing.T) {
	root, module := moduleRoot(t)
	pkgs := packages(t, root, module)
	if len(pkgs) < len(layers)/2 {
		t.Fatalf("found %d packages under %s: the walk is broken", len(pkgs), root)
	}
	for _, p := range sortedKeys(pkgs) {
		imps := pkgs[p]
		r, ok := layers[p]
		if !ok {
			t.Errorf("%s is not in the layering: give it its place in internal/layout's table (and in docs/architecture.md)", p)
			continue
		}
		for _, imp := range imps.code {
			if imp != p && !slices.Contains(r.imports, imp) {
				t.Errorf("%s imports %s, against the layering (it may import %v)", p, imp, r.imports)
			}
		}
		for _, imp := range imps.tests {
			if !allowedInTest(p, r, imp) {
				t.Errorf("%s's tests import %s, against the layering", p, imp)
			}
		}
	}
	for p := range layers {
		if _, ok := pkgs[p]; !ok {
			t.Errorf("the layering names %s, which is no package of the module", p)
		}
	}
}

func allowedInTest(p string, r rule, imp string) bool {
	switch {
	case imp == p, slices.Contains(r.imports, imp), slices.Contains(r.tests, imp), r.testOnly:
		return true
	case r.closed:
		return false
	}
	return imp == "sim" || slices.Contains(support, imp)
}

// imports are the llmprobe imports of one package, relative to the
// module path, of its code and of its tests.
type imports struct{ code, tests []string }

// packages reads every package under root, for every system in goos.
func packages(t *testing.T, root, module string) map[string]*imports {
	t.Helper()
	out := map[string]*imports{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if name := d.Name(); path != root && (name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
			return filepath.SkipDir
		}
		// A nested module (tools/release) is not this module's.
		if _, err := os.Stat(filepath.Join(path, "go.mod")); path != root && err == nil {
			return filepath.SkipDir
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		for _, g := range goos {
			ctx := build.Default
			ctx.GOOS = g
			pkg, err := ctx.ImportDir(path, 0)
			var none *build.NoGoError
			if errors.As(err, &none) {
				continue
			}
			if err != nil {
				return err
			}
			name := filepath.ToSlash(rel)
			imps := out[name]
			if imps == nil {
				imps = &imports{}
				out[name] = imps
			}
			imps.code = addOwn(imps.code, module, pkg.Imports)
			imps.tests = addOwn(imps.tests, module, pkg.TestImports, pkg.XTestImports)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// addOwn adds the module's own imports, relative to the module path.
func addOwn(dst []string, module string, lists ...[]string) []string {
	for _, l := range lists {
		for _, imp := range l {
			rel, ok := strings.CutPrefix(imp, module+"/")
			if imp == module {
				rel, ok = ".", true
			}
			if ok && !slices.Contains(dst, rel) {
				dst = append(dst, rel)
			}
		}
	}
	return dst
}

// moduleRoot finds go.mod above the test's directory and reads the module
// path.
func moduleRoot(t *testing.T) (root, module string) {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		f, err := os.Open(filepath.Join(dir, "go.mod"))
		if err == nil {
			defer f.Close()
			s := bufio.NewScanner(f)
			for s.Scan() {
				if m, ok := strings.CutPrefix(strings.TrimSpace(s.Text()), "module "); ok {
					return dir, strings.Trim(strings.TrimSpace(m), `"`)
				}
			}
			t.Fatalf("%s/go.mod names no module", dir)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test")
		}
		dir = parent
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
