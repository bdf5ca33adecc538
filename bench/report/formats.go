// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package report

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"
)

// Format is a file format a report is written in, chosen by the file's
// extension.
type Format struct {
	// Name is "json", "markdown", "svg" or "png".
	Name string
	// Ext is the extension that selects it, in any case.
	Ext string
	// Plot: the load–latency picture (bench --plot), not a document of
	// the report (bench --output).
	Plot bool
	// What says what a document is, in a usage message ("" for none).
	What string
}

// Formats are the formats a report is written in: the JSON report (what
// ReadReport and Compare read) and Markdown, and the picture as SVG or
// PNG.
var Formats = []Format{
	{Name: "json", Ext: ".json", What: "the JSON report, what compare reads"},
	{Name: "markdown", Ext: ".md", What: "Markdown"},
	{Name: "svg", Ext: ".svg", Plot: true},
	{Name: "png", Ext: ".png", Plot: true},
}

// FormatOf is the format path's extension selects (ok false: none).
func FormatOf(path string) (f Format, ok bool) {
	ext := strings.ToLower(filepath.Ext(path))
	for _, f := range Formats {
		if f.Ext == ext {
			return f, true
		}
	}
	return Format{}, false
}

// Extensions lists the extensions of the documents (plot false) or of the
// pictures, each with what it is, as a usage message says them: ".svg or
// .png".
func Extensions(plot bool) string {
	var items []string
	for _, f := range Formats {
		if f.Plot != plot {
			continue
		}
		item := f.Ext
		if f.What != "" {
			item += " (" + f.What + ")"
		}
		items = append(items, item)
	}
	if len(items) < 2 {
		return strings.Join(items, "")
	}
	return strings.Join(items[:len(items)-1], ", ") + " or " + items[len(items)-1]
}

// Write writes r in format f; o are the Markdown's options.
func (r *Report) Write(w io.Writer, f Format, o MarkdownOptions) error {
	switch {
	case f.Plot:
		return r.WritePlot(w, f.Name)
	case f.Name == "json":
		return r.WriteJSON(w)
	case f.Name == "markdown":
		return r.WriteMarkdown(w, o)
	}
	return fmt.Errorf("unknown report format %q", f.Name)
}
