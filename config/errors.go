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

// fieldErrors collects validation problems by field path; positions are
// attached afterwards from the YAML node index.
type fieldErrors struct {
	errs []*Error
}

func (f *fieldErrors) add(path, format string, args ...any) {
	f.errs = append(f.errs, &Error{Path: path, Msg: fmt.Sprintf(format, args...)})
}

// position is where a field path's key (or sequence item) sits.
type position struct{ line, col int }

// nodeIndex maps field paths (targets[0].arrival.rate) to positions, and
// remembers scalar values to find a field from an error quoting it.
type nodeIndex struct {
	pos    map[string]position
	values map[string][]string // scalar value -> paths holding it
}

func indexNodes(root *yaml.Node) nodeIndex {
	idx := nodeIndex{pos: map[string]position{}, values: map[string][]string{}}
	var walk func(n *yaml.Node, path string)
	walk = func(n *yaml.Node, path string) {
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				walk(c, path)
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				p := k.Value
				if path != "" {
					p = path + "." + k.Value
				}
				idx.pos[p] = position{k.Line, k.Column}
				if v.Kind == yaml.ScalarNode {
					idx.values[v.Value] = append(idx.values[v.Value], p)
				}
				walk(v, p)
			}
		case yaml.SequenceNode:
			for i, c := range n.Content {
				p := fmt.Sprintf("%s[%d]", path, i)
				idx.pos[p] = position{c.Line, c.Column}
				if c.Kind == yaml.ScalarNode {
					idx.values[c.Value] = append(idx.values[c.Value], p)
				}
				walk(c, p)
			}
		case yaml.AliasNode:
			if n.Alias != nil {
				walk(n.Alias, path)
			}
		}
	}
	walk(root, "")
	return idx
}

// locate finds the position of path, or of its nearest ancestor present
// in the file (a missing required field points at its parent).
func (idx nodeIndex) locate(path string) position {
	for p := path; p != ""; p = parentPath(p) {
		if pos, ok := idx.pos[p]; ok {
			return pos
		}
	}
	return position{}
}

func parentPath(p string) string {
	i := strings.LastIndexAny(p, ".[")
	if i <= 0 {
		return ""
	}
	return p[:i]
}

// pathAtLine finds the field path whose key sits at line (and, when name
// is not empty, whose last element is name).
func (idx nodeIndex) pathAtLine(line int, name string) string {
	best := ""
	for p, pos := range idx.pos {
		if pos.line != line {
			continue
		}
		if name != "" && !strings.HasSuffix(p, "."+name) && p != name {
			continue
		}
		if best == "" || len(p) > len(best) || (len(p) == len(best) && p < best) {
			best = p
		}
	}
	return best
}

// valuePath finds the field holding scalar value v nearest at or after
// line (the start of the mapping whose decoding failed).
func (idx nodeIndex) valuePath(v string, line int) (string, bool) {
	best, bestLine := "", 0
	for _, p := range idx.values[v] {
		if l := idx.pos[p].line; l >= line && (best == "" || l < bestLine) {
			best, bestLine = p, l
		}
	}
	return best, best != ""
}

var (
	unknownFieldRE = regexp.MustCompile(`^line (\d+): field (\S+) not found in type \S+$`)
	typeErrorRE    = regexp.MustCompile("^line (\\d+): cannot unmarshal !!(\\w+) `(.*)` into (\\S+)$")
	lineRE         = regexp.MustCompile(`^(?:yaml: )?line (\d+): (.*)$`)
	quotedRE       = regexp.MustCompile(`"([^"]+)"`)
)

// nodeError carries the position of the mapping whose decoding failed
// with an error yaml does not position itself (an UnmarshalYAML of a
// library type such as model.Duration or HTTPClientConfig's own checks).
type nodeError struct {
	line, col int
	err       error
}

func (e *nodeError) Error() string { return e.err.Error() }
func (e *nodeError) Unwrap() error { return e.err }

// nodePos captures the position of the node being decoded. (Decoding into
// a yaml.Node through the callback would treat Node as a struct and trip
// over unknown-field checks; a yaml.Unmarshaler receives the node as is.)
type nodePos struct{ line, col int }

func (p *nodePos) UnmarshalYAML(n *yaml.Node) error {
	p.line, p.col = n.Line, n.Column
	return nil
}

// decodePlain decodes the current node into v (a `plain` alias) and
// attaches the node's position to errors yaml left unpositioned.
func decodePlain(unmarshal func(any) error, v any) error {
	var n nodePos
	if err := unmarshal(&n); err != nil {
		return err
	}
	err := unmarshal(v)
	if err == nil {
		return nil
	}
	var te *yaml.TypeError
	var ne *nodeError
	if errors.As(err, &te) || errors.As(err, &ne) {
		return err
	}
	return &nodeError{line: n.line, col: n.col, err: err}
}

// translate turns a yaml decoding error into positioned Errors that name
// fields as the config author wrote them, not Go types.
func translate(err error, file string, idx nodeIndex) Errors {
	var ne *nodeError
	if errors.As(err, &ne) {
		e := &Error{File: file, Line: ne.line, Column: ne.col, Msg: ne.err.Error()}
		e.Path = parentPath(idx.pathAtLine(ne.line, ""))
		// Refine to the exact field when the message quotes its value.
		if m := quotedRE.FindStringSubmatch(e.Msg); m != nil {
			if p, ok := idx.valuePath(m[1], ne.line); ok {
				e.Path = p
				pos := idx.pos[p]
				e.Line, e.Column = pos.line, pos.col
			}
		}
		return Errors{e}
	}
	var lines []string
	if te, ok := err.(*yaml.TypeError); ok {
		lines = te.Errors
	} else {
		lines = []string{err.Error()}
	}
	out := make(Errors, 0, len(lines))
	for _, l := range lines {
		e := &Error{File: file}
		switch {
		case unknownFieldRE.MatchString(l):
			m := unknownFieldRE.FindStringSubmatch(l)
			e.Line, _ = strconv.Atoi(m[1])
			e.Path = idx.pathAtLine(e.Line, m[2])
			e.Msg = fmt.Sprintf("unknown field %q", m[2])
		case typeErrorRE.MatchString(l):
			m := typeErrorRE.FindStringSubmatch(l)
			e.Line, _ = strconv.Atoi(m[1])
			e.Path = idx.pathAtLine(e.Line, "")
			e.Msg = fmt.Sprintf("cannot use %s %q as %s", yamlKind(m[2]), m[3], goKind(m[4]))
		case lineRE.MatchString(l):
			m := lineRE.FindStringSubmatch(l)
			e.Line, _ = strconv.Atoi(m[1])
			e.Path = idx.pathAtLine(e.Line, "")
			e.Msg = m[2]
		default:
			e.Msg = strings.TrimPrefix(l, "yaml: ")
		}
		if e.Line > 0 {
			if pos, ok := idx.pos[e.Path]; ok && pos.line == e.Line {
				e.Column = pos.col
			} else {
				e.Column = 1
			}
		}
		out = append(out, e)
	}
	return out
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
	}
	return tag
}

func goKind(t string) string {
	switch {
	case strings.HasPrefix(t, "float"):
		return "a number"
	case strings.HasPrefix(t, "int"), strings.HasPrefix(t, "uint"):
		return "an integer"
	case t == "bool":
		return "a boolean (true/false)"
	case t == "string":
		return "a string"
	case t == "model.Duration", t == "time.Duration":
		return "a duration (e.g. 30s, 5m)"
	case strings.HasPrefix(t, "[]"):
		return "a list"
	case strings.HasPrefix(t, "map"), strings.Contains(t, "."):
		return "a mapping"
	}
	return t
}
