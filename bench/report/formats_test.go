// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package report_test

import (
	"bytes"
	"testing"

	"github.com/llmprobe/llmprobe/bench/report"
)

// TestFormats: a file's extension, in any case, selects its format, the
// usage messages list them, and Write writes each as its own writer does.
func TestFormats(t *testing.T) {
	for path, want := range map[string]string{"r.json": "json", "r.MD": "markdown", "p.svg": "svg", "a/p.PNG": "png", "r.txt": "", "json": ""} {
		f, ok := report.FormatOf(path)
		if f.Name != want || ok != (want != "") {
			t.Errorf("FormatOf(%q) = %q, %v; want %q", path, f.Name, ok, want)
		}
	}
	if got, want := report.Extensions(false), ".json (the JSON report, what compare reads) or .md (Markdown)"; got != want {
		t.Errorf("documents: %q, want %q", got, want)
	}
	if got, want := report.Extensions(true), ".svg or .png"; got != want {
		t.Errorf("pictures: %q, want %q", got, want)
	}
	rep := &report.Report{Stages: []*report.StageReport{{Stage: 1, Target: "t", RequestedRate: 1}}}
	o := report.MarkdownOptions{Plot: "p.svg"}
	for _, f := range report.Formats {
		var got, want bytes.Buffer
		if err := rep.Write(&got, f, o); err != nil {
			t.Fatalf("%s: %v", f.Name, err)
		}
		var err error
		switch f.Name {
		case "json":
			err = rep.WriteJSON(&want)
		case "markdown":
			err = rep.WriteMarkdown(&want, o)
		case "svg":
			err = rep.WriteSVG(&want)
		case "png":
			err = rep.WritePNG(&want)
		}
		if err != nil || !bytes.Equal(got.Bytes(), want.Bytes()) {
			t.Errorf("%s: Write differs from its writer (%v)", f.Name, err)
		}
	}
}
