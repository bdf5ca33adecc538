// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package report_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llmprobe/llmprobe/bench/report"
)

var updateReports = flag.Bool("update-reports", false, "rewrite testdata/golden/ from the current renderers")

// goldenReports are the saved reports the renderers are pinned on
// (testdata/golden/NAME.json): real runs against the simulator, edited
// where a run could not show a case (sweep: a llama.cpp-like server with
// a failed scrape, a family left out and a NaN, GPU figures with nulls,
// cost notes, an untrusted, interrupted stage with failed requests; find:
// the capacity estimate and an untrusted stage), all but vllm written
// before schema 3 (without the figures of vllm bench serve's definitions);
// vllm is a run of schema 3 with them: a stage the simulator absorbs, one
// past it whose requests the grace cut, an SLO and a closed-loop level.
var goldenReports = []string{"sweep", "find", "findslo", "replay", "closed", "vllm"}

// TestReportGolden pins every rendering of saved reports byte for byte:
// the text report, the JSON written back (the saved file itself), the
// Markdown, the SVG, the PNG
// (by its SHA-256) and a comparison. A change of these files is a change
// of what users read: run with -update-reports only after an intended
// one.
func TestReportGolden(t *testing.T) {
	sums := &strings.Builder{}
	reports := map[string]*report.Report{}
	for _, name := range goldenReports {
		data, err := os.ReadFile(filepath.Join("testdata", "golden", name+".json"))
		if err != nil {
			t.Fatal(err)
		}
		// Not ReadReport: a report of closed-loop levels only has no
		// stages, which ReadReport refuses.
		var rep report.Report
		if err := json.Unmarshal(data, &rep); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		reports[name] = &rep
		render := func(ext string, write func(*bytes.Buffer) error) {
			t.Helper()
			var b bytes.Buffer
			if err := write(&b); err != nil {
				t.Fatalf("%s.%s: %v", name, ext, err)
			}
			switch ext {
			case "png":
				fmt.Fprintf(sums, "%x  %s.png\n", sha256.Sum256(b.Bytes()), name)
			case "json":
				// The saved report is what WriteJSON writes: it reads back
				// to the same bytes.
				checkGolden(t, name+".json", b.Bytes())
			default:
				checkGolden(t, name+"."+ext+".golden", b.Bytes())
			}
		}
		render("txt", func(b *bytes.Buffer) error { return rep.WriteText(b) })
		render("json", func(b *bytes.Buffer) error { return rep.WriteJSON(b) })
		render("md", func(b *bytes.Buffer) error {
			return rep.WriteMarkdown(b, report.MarkdownOptions{Plot: name + ".svg"})
		})
		if len(rep.Stages) > 0 {
			render("svg", func(b *bytes.Buffer) error { return rep.WritePlot(b, "svg") })
			render("png", func(b *bytes.Buffer) error { return rep.WritePlot(b, "png") })
		}
	}
	checkGolden(t, "png.sha256.golden", []byte(sums.String()))

	old, cur := reports["sweep"], new(report.Report)
	data, err := os.ReadFile(filepath.Join("testdata", "golden", "sweep2.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, cur); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	cs, unmatched := report.Compare(old, cur)
	if err := report.WriteCompare(&b, cs, unmatched); err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "compare.txt.golden", b.Bytes())
}

// checkGolden compares got with testdata/golden/name (rewriting it first
// with -update-reports).
func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *updateReports {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update-reports to create it)", err)
	}
	if bytes.Equal(got, want) {
		return
	}
	gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	for i := range min(len(gl), len(wl)) {
		if gl[i] != wl[i] {
			t.Errorf("%s differs at line %d:\n got: %.400s\nwant: %.400s", path, i+1, gl[i], wl[i])
			return
		}
	}
	t.Errorf("%s: %d lines, want %d", path, len(gl), len(wl))
}
