// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package config

import (
	"fmt"
	"math"
	"reflect"
	"strconv"

	"go.yaml.in/yaml/v3"
)

// Limits on what a configuration may hold. A file beyond one is refused
// before it is decoded. Each is far above what a real configuration needs
// and far below what would exhaust the process: a configuration is
// reloaded by a running exporter, and a hostile or broken file must fail
// fast rather than take the exporter down.
const (
	// MaxFileSize is the largest configuration file, in bytes.
	MaxFileSize = 16 << 20
	// MaxNodes bounds the values (scalars, lists, mappings) a file
	// holds as written, before aliases are expanded. A file that surely
	// holds more is refused before it is parsed (see denseValues): yaml
	// spends ~200 bytes per value while parsing.
	MaxNodes = 100_000
	// MaxAliasExpansion bounds the values YAML aliases add when they are
	// expanded. Anchors may be shared widely, but nested aliases
	// multiply: a few hundred bytes of "billion laughs" expand to 10^9
	// values.
	MaxAliasExpansion = 100_000
	// MaxTargets, MaxWorkloads and MaxClasses (per workload) bound the
	// configuration in the units that cost goroutines and memory.
	MaxTargets   = 1000
	MaxWorkloads = 1000
	MaxClasses   = 1000
	// MaxSamplesFileSize is the largest samples file (dist: empirical
	// with file) read, in bytes, and MaxSamples the most values it may
	// hold: the file is read at every load (a reload included), and a
	// quantile table of this many samples is already exact to 1e-5.
	MaxSamplesFileSize = 16 << 20
	MaxSamples         = 100_000
	// MaxArrivalRate is the highest arrival.rate of a target, in requests
	// per second: its total, shared by replicas.
	MaxArrivalRate = 100_000
	// MaxReportedErrors bounds the errors reported for one file; the rest
	// are counted.
	MaxReportedErrors = 100
)

// checkShape refuses files that are too large in what they expand to:
// too many values, aliases that multiply, too many targets, workloads or
// classes. It runs on the parsed tree, before anything is decoded.
func checkShape(root *yaml.Node, idx nodeIndex, file string) Errors {
	if e := checkAliases(root, idx); e != nil {
		e.File = file
		return Errors{e}
	}
	errs := checkCounts(root, idx)
	for _, e := range errs {
		e.File = file
	}
	return errs
}

// denseValues returns a cheap lower bound of twice the number of values
// in data, without parsing it: the structural bytes outside quoted
// scalars and comments (flow commas and brackets, block indicators, the
// ends of non-blank lines). Every value needs at most two of them, so a
// file with more than 2·MaxNodes holds more than MaxNodes values and is
// refused before yaml builds a node for each (a 16 MiB "[1,1,1,…]" costs
// yaml 1.9 GB).
func denseValues(data []byte) int {
	n := 0
	content := false // the current line has content
	for i := 0; i < len(data); i++ {
		switch c := data[i]; c {
		case '\n':
			if content {
				n++
			}
			content = false
		case ' ', '\t', '\r':
		case '#':
			if i == 0 || data[i-1] == ' ' || data[i-1] == '\t' || data[i-1] == '\n' {
				for i+1 < len(data) && data[i+1] != '\n' {
					i++
				}
				continue
			}
			content = true
		case '"', '\'':
			content = true
			for i++; i < len(data) && data[i] != c; i++ {
				if c == '"' && data[i] == '\\' {
					i++
				}
			}
		case ',', '[', ']', '{', '}':
			n++
			content = true
		case ':', '-':
			// Indicators only when a blank follows (not in URLs or names).
			if i+1 == len(data) || data[i+1] == ' ' || data[i+1] == '\n' || data[i+1] == '\t' || data[i+1] == '\r' {
				n++
			}
			content = true
		default:
			content = true
		}
	}
	return n
}

// countNodes counts the nodes of the tree as written, up to limit+1.
func countNodes(n *yaml.Node, limit int) int {
	count := 0
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		count++
		for _, c := range n.Content {
			if count > limit {
				return
			}
			walk(c)
		}
	}
	walk(n)
	return count
}

// aliasCheck measures what aliases expand to, without expanding them:
// the size of each anchored value is computed once.
type aliasCheck struct {
	sizes map[*yaml.Node]int // anchored value -> expanded size; inProgress while computing
	total int                // values added by the aliases met so far
}

const inProgress = -1

// expanded returns how many values n stands for with aliases expanded
// (at most MaxAliasExpansion+1), or the alias that sits inside its own
// anchor.
func (a *aliasCheck) expanded(n *yaml.Node) (int, *yaml.Node) {
	from := n
	if n.Kind == yaml.AliasNode {
		if n = n.Alias; n == nil {
			return 1, nil
		}
	}
	// Anchored values are measured once, wherever they are met first.
	if n.Anchor != "" {
		switch s, ok := a.sizes[n]; {
		case ok && s == inProgress:
			return 0, from
		case ok:
			return s, nil
		}
		a.sizes[n] = inProgress
	}
	s := 1
	for _, c := range n.Content {
		cs, cycle := a.expanded(c)
		if cycle != nil {
			return 0, cycle
		}
		s = min(s+cs, MaxAliasExpansion+1)
	}
	if n.Anchor != "" {
		a.sizes[n] = s
	}
	return s, nil
}

// checkAliases refuses a file whose aliases expand beyond
// MaxAliasExpansion values, or contain themselves. The error sits at the
// alias where the expansion crosses the bound.
func checkAliases(root *yaml.Node, idx nodeIndex) *Error {
	a := aliasCheck{sizes: map[*yaml.Node]int{}}
	var bad *Error
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		for _, c := range n.Content {
			if bad != nil {
				return
			}
			if c.Kind != yaml.AliasNode {
				walk(c)
				continue
			}
			s, cycle := a.expanded(c)
			switch {
			case cycle != nil:
				bad = nodeErr(cycle, idx, fmt.Sprintf("alias *%s is inside its own anchor (a value cannot contain itself)", cycle.Value))
			case a.total+s > MaxAliasExpansion:
				bad = nodeErr(c, idx, fmt.Sprintf("alias *%s expands the file beyond %d values (anchors may be reused, but nested aliases multiply)", c.Value, MaxAliasExpansion))
			default:
				a.total += s
			}
		}
	}
	walk(root)
	return bad
}

// nodeErr is an error at node n itself.
func nodeErr(n *yaml.Node, idx nodeIndex, msg string) *Error {
	return &Error{Line: n.Line, Column: n.Column, Path: idx.valueAt[position{n.Line, n.Column}], Msg: msg}
}

// checkCounts refuses too many targets, workloads or classes.
func checkCounts(root *yaml.Node, idx nodeIndex) Errors {
	var errs Errors
	reported := map[*yaml.Node]bool{} // a list shared through an alias: once
	tooMany := func(path string, list *yaml.Node, n, limit int, what, per string) {
		if n <= limit || reported[list] {
			return
		}
		reported[list] = true
		pos := idx.pos[path]
		errs = append(errs, &Error{Line: pos.line, Column: pos.col, Path: path, Msg: fmt.Sprintf("too many %s (%d; at most %d%s)", what, n, limit, per)})
	}
	doc := root
	if doc.Kind == yaml.DocumentNode && len(doc.Content) > 0 {
		doc = resolveAlias(doc.Content[0])
	}
	if doc == nil || doc.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(doc.Content); i += 2 {
		v := resolveAlias(doc.Content[i+1])
		if v == nil {
			continue
		}
		switch doc.Content[i].Value {
		case "targets":
			if v.Kind == yaml.SequenceNode {
				tooMany("targets", v, len(v.Content), MaxTargets, "targets", "")
			}
		case "workloads":
			if v.Kind != yaml.MappingNode {
				continue
			}
			tooMany("workloads", v, len(v.Content)/2, MaxWorkloads, "workloads", "")
			for j := 0; j+1 < len(v.Content); j += 2 {
				w := resolveAlias(v.Content[j+1])
				if w == nil || w.Kind != yaml.MappingNode {
					continue
				}
				for k := 0; k+1 < len(w.Content); k += 2 {
					if w.Content[k].Value != "classes" {
						continue
					}
					if cl := resolveAlias(w.Content[k+1]); cl != nil && cl.Kind == yaml.SequenceNode {
						tooMany("workloads."+v.Content[j].Value+".classes", cl, len(cl.Content), MaxClasses, "classes", " per workload")
					}
				}
			}
		}
	}
	return errs
}

// checkWholeNumbers finds fractions where the schema wants an integer:
// yaml decodes max_inflight: 1.5 as 1 without a word.
func checkWholeNumbers(idx nodeIndex, file string) Errors {
	var errs Errors
	for _, nodes := range idx.lines {
		for _, n := range nodes {
			t := n.typ
			for t != nil && t.Kind() == reflect.Pointer {
				t = t.Elem()
			}
			if n.key || n.tag != "!!float" || t == nil || t == durationType {
				continue
			}
			switch t.Kind() {
			case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
				reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			default:
				continue
			}
			if v, err := strconv.ParseFloat(n.value, 64); err == nil && v == math.Trunc(v) {
				continue
			}
			e := &Error{File: file, Msg: fmt.Sprintf("must be a whole number, got %s", quoteValue(n.value))}
			e.setNode(&n, idx)
			errs = append(errs, e)
		}
	}
	return errs
}
