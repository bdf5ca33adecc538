// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package config

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Error is one problem in a configuration file, positioned at the YAML
// node it concerns.
type Error struct {
	File   string // "" for in-memory configs
	Line   int    // 1-based; 0 when unknown
	Column int
	Path   string // field path, e.g. targets[0].arrival.rate
	Msg    string

	// scope is what failed to decode (a decoding error's field, or the
	// mapping whose decoding stopped); deps are the paths a validation
	// error's judgement rests on besides its own (a target's workload).
	scope string
	deps  []string
	// unknownKey marks an unknown key's error; suggest is the known key
	// it is likely a typo of ("" for none).
	unknownKey bool
	suggest    string
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
	}
	if e.Line > 0 {
		if b.Len() > 0 {
			b.WriteByte(':')
		}
		fmt.Fprintf(&b, "%d:%d", e.Line, e.Column)
	}
	if b.Len() > 0 {
		b.WriteString(": ")
	}
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Errors is every problem found in one file. Its message lists them one
// per line.
type Errors []*Error

func (es Errors) Error() string {
	msgs := make([]string, len(es))
	for i, e := range es {
		msgs[i] = e.Error()
	}
	return strings.Join(msgs, "\n")
}

// unscoped is the scope of a decoding error the index could not attach
// to a field: it hides no validation error.
const unscoped = "\x00"

// fieldErrors collects validation problems by field path; positions are
// attached afterwards from the YAML node index.
type fieldErrors struct {
	errs []*Error
	// samples caches the samples files read while validating, so a file
	// that many classes share is read once per load.
	samples map[[2]string]samplesRead
}

func (f *fieldErrors) add(path, format string, args ...any) {
	f.errs = append(f.errs, &Error{Path: path, Msg: fmt.Sprintf(format, args...)})
}

// addDep adds an error whose judgement also rests on the value at dep.
func (f *fieldErrors) addDep(path, dep, format string, args ...any) {
	f.add(path, format, args...)
	f.errs[len(f.errs)-1].deps = []string{dep}
}

var (
	unknownFieldRE = regexp.MustCompile(`(?s)^line (\d+): field (.*) not found in type \S+$`)
	alreadySetRE   = regexp.MustCompile(`(?s)^line (\d+): field (.*) already set in type \S+$`)
	duplicateKeyRE = regexp.MustCompile(`^line (\d+): mapping key (".*") already defined at line (\d+)$`)
	typeErrorRE    = regexp.MustCompile("(?s)^line (\\d+): cannot unmarshal (.*?)(?: `(.*)`)? into (.+)$")
	// goTypeRE is the end of a yaml message that names a Go type.
	goTypeRE = regexp.MustCompile(`(?s) (?:into|in type) \S.*$`)
	lineRE   = regexp.MustCompile(`(?s)^(?:yaml: )?line (\d+): (.*)$`)
)

// translate turns yaml's decoding errors (and ours, see posLine) into
// positioned Errors that name fields as the config author wrote them,
// not Go types.
func translate(lines []string, file string, idx nodeIndex) Errors {
	out := make(Errors, 0, len(lines))
	used := map[string]int{} // yaml line -> candidates already taken by an identical line
	for _, l := range lines {
		e := &Error{File: file, scope: unscoped}
		nth := used[l]
		used[l]++
		if pos, scope, msg, ok := parsePosLine(l); ok {
			e.Msg = msg
			e.Line, e.Column = pos.line, pos.col
			if p, ok := idx.valueAt[pos]; ok {
				e.Path, e.scope = p, p
				if kp, ok := idx.pos[p]; ok {
					e.Line, e.Column = kp.line, kp.col
				}
			}
			if scope == scopeMapping && strings.HasPrefix(msg, "a merge (<<)") {
				if kp, ok := idx.pos[joinPath(e.Path, "<<")]; ok {
					e.Path, e.Line, e.Column = joinPath(e.Path, "<<"), kp.line, kp.col
				}
			}
			out = append(out, e)
			continue
		}
		switch {
		case unknownFieldRE.MatchString(l):
			m := unknownFieldRE.FindStringSubmatch(l)
			e.Line, _ = strconv.Atoi(m[1])
			n := idx.find(e.Line, nth, func(n indexed) int {
				if !n.key || n.value != m[2] {
					return 0
				}
				if n.unknown {
					return 2
				}
				return 1
			})
			e.setNode(n, idx)
			// The decoding goes on past an unknown key: it hides no check
			// of the mapping it sits in (nor of anything else).
			e.scope = unscoped
			e.Msg = fmt.Sprintf("unknown field %q", m[2])
			e.unknownKey = true
			if n != nil && n.suggest != "" {
				e.suggest = n.suggest
				e.Msg += fmt.Sprintf(" (did you mean %q?)", n.suggest)
			}
		case alreadySetRE.MatchString(l):
			m := alreadySetRE.FindStringSubmatch(l)
			e.Line, _ = strconv.Atoi(m[1])
			n := idx.find(e.Line, nth, func(n indexed) int { return b2i(n.key && n.value == m[2]) })
			e.setNode(n, idx)
			if n != nil {
				e.scope = parentPath(e.Path)
			}
			e.Msg = fmt.Sprintf("key %q is set twice", m[2])
		case duplicateKeyRE.MatchString(l):
			// yaml decodes nothing of a mapping with a duplicate key.
			m := duplicateKeyRE.FindStringSubmatch(l)
			e.Line, _ = strconv.Atoi(m[1])
			key, _ := strconv.Unquote(m[2])
			n := idx.find(e.Line, nth, func(n indexed) int { return b2i(n.key && n.value == key) })
			e.setNode(n, idx)
			if n != nil {
				e.scope = parentPath(e.Path)
			}
			e.Msg = fmt.Sprintf("mapping key %s already defined at line %s", m[2], m[3])
		case typeErrorRE.MatchString(l):
			m := typeErrorRE.FindStringSubmatch(l)
			e.Line, _ = strconv.Atoi(m[1])
			tag, text := strings.TrimPrefix(strings.TrimPrefix(m[2], "!"), "!"), m[3]
			n := idx.find(e.Line, nth, func(n indexed) int {
				switch {
				case tag == "seq" && n.kind != yaml.SequenceNode,
					tag == "map" && n.kind != yaml.MappingNode,
					tag != "seq" && tag != "map" && (n.kind != yaml.ScalarNode || !truncatedMatch(text, n.value)):
					return 0
				case mayFail(n.typ, tag):
					return 2
				}
				return 1
			})
			e.setNode(n, idx)
			want := goKind(m[4])
			if n != nil {
				if d := describe(n.typ); d != "" {
					want = d
				}
			}
			// Under a key that may hold a secret, the value is never
			// quoted (secrets.go).
			secret := (n != nil && underSecret(n)) || (n == nil && idx.lineHasSecret(e.Line))
			switch {
			case n != nil && n.key && n.kind != yaml.ScalarNode:
				e.Msg = "a key must be a scalar, not a list or a mapping"
			case secret && n != nil && n.key:
				e.Msg = fmt.Sprintf("a key here must be %s", want)
			case secret && tag != "seq" && tag != "map":
				e.Msg = fmt.Sprintf("cannot use %s as %s", kindWithArticle(tag), want)
			case n != nil && n.key:
				e.Msg = fmt.Sprintf("key %s must be %s", quoteValue(n.value), want)
			case tag == "seq" || tag == "map":
				e.Msg = fmt.Sprintf("cannot use %s as %s", yamlKind(tag), want)
			case n != nil:
				e.Msg = fmt.Sprintf("cannot use %s %s as %s", yamlKind(tag), quoteValue(n.value), want)
			default:
				e.Msg = fmt.Sprintf("cannot use %s %s as %s", yamlKind(tag), quoteValue(text), want)
			}
		case lineRE.MatchString(l):
			m := lineRE.FindStringSubmatch(l)
			e.Line, _ = strconv.Atoi(m[1])
			e.setNode(idx.find(e.Line, nth, func(n indexed) int { return b2i(n.key) }), idx)
			e.Msg = goTypeRE.ReplaceAllString(m[2], "")
		default:
			e.Msg = goTypeRE.ReplaceAllString(fatalMessage(errors.New(l)), "")
		}
		if e.Line > 0 && e.Column == 0 {
			e.Column = 1
		}
		out = append(out, e)
	}
	return out
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// find returns the node on line that rank scores highest (0: not a
// candidate), in document order among equals, skipping the first skip
// of them (the same message twice on a line is about two nodes).
func (idx nodeIndex) find(line, skip int, rank func(indexed) int) *indexed {
	var best []*indexed
	bestRank := 0
	nodes := idx.lines[line]
	for i := range nodes {
		switch r := rank(nodes[i]); {
		case r == 0 || r < bestRank:
		case r > bestRank:
			best, bestRank = []*indexed{&nodes[i]}, r
		default:
			best = append(best, &nodes[i])
		}
	}
	if len(best) == 0 {
		return nil
	}
	return best[min(skip, len(best)-1)]
}

// setNode names e after node n (nil: only the line is known). Errors sit
// at the field's key, as validation errors do.
func (e *Error) setNode(n *indexed, idx nodeIndex) {
	if n == nil {
		return
	}
	e.Path, e.scope, e.Column = n.path, n.path, n.col
	if p, ok := idx.pos[n.path]; ok && !n.key {
		e.Line, e.Column = p.line, p.col
	}
}

// truncatedMatch reports whether yaml's rendering of a value in a type
// error (cut to 7 characters and "..." beyond 10) is value's.
func truncatedMatch(text, value string) bool {
	if prefix, ok := strings.CutSuffix(text, "..."); ok && len(value) > 10 {
		return strings.HasPrefix(value, prefix)
	}
	return text == value
}

// quoteValue quotes a value from the file for a message, shortened.
func quoteValue(v string) string {
	if r := []rune(v); len(r) > 40 {
		v = string(r[:37]) + "..."
	}
	return strconv.Quote(v)
}

func yamlKind(tag string) string {
	switch tag {
	case "str":
		return "string"
	case "seq":
		return "a list"
	case "map":
		return "a mapping"
	case "int", "float":
		return "number"
	case "bool":
		return "boolean"
	case "null":
		return "null"
	case "timestamp":
		return "timestamp"
	case "binary":
		return "binary"
	}
	return "value"
}

// goKind says what a Go type holds, for the rare error the index cannot
// attach to a field; never the Go type itself.
func goKind(t string) string {
	t = strings.TrimLeft(t, "*")
	switch {
	case strings.HasPrefix(t, "float"):
		return "a number"
	case strings.HasPrefix(t, "int"), strings.HasPrefix(t, "uint"):
		return "an integer"
	case t == "bool":
		return "a boolean (true or false)"
	case t == "string":
		return "a string"
	case t == "model.Duration", t == "time.Duration":
		return "a duration (e.g. 30s, 5m)"
	case strings.HasPrefix(t, "[]"):
		return "a list"
	}
	return "a mapping"
}
