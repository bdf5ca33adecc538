// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package config

import (
	"encoding"
	"fmt"
	"reflect"
	"strings"
	"sync"

	commoncfg "github.com/prometheus/common/config"
	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"
)

// position is where a node sits in the file (1-based line and column).
type position struct{ line, col int }

// indexed is one node of the file as the index remembers it.
type indexed struct {
	path    string // its field path; for a mapping key, its entry's
	col     int
	key     bool // a mapping key, not a value
	unknown bool // a key the schema does not have
	kind    yaml.Kind
	tag     string       // a scalar's resolved tag (!!int, !!float, !!str...)
	value   string       // a scalar's text
	typ     reflect.Type // what the schema expects here; nil: anything, or unknown
	suggest string       // of an unknown key: the known key it is likely a typo of
}

// nodeIndex maps the file's nodes to field paths (targets[0].arrival.rate)
// and back. yaml's errors carry a line only, and say what Go type failed
// to decode, not which field: the index finds the field on that line, and
// knows from the schema what the field should hold.
type nodeIndex struct {
	pos     map[string]position // path -> position of its key (of a sequence item: the item)
	lines   map[int][]indexed   // nodes by the line they start on, in document order
	valueAt map[position]string // position of a value node -> its path
}

// indexNodes indexes the file without expanding aliases: an alias is
// indexed where it is written, the aliased value where the anchor is (an
// alias bomb expands to billions of nodes; checkAliases refuses those
// before anything expands them).
func indexNodes(root *yaml.Node) nodeIndex {
	idx := nodeIndex{
		pos:     map[string]position{},
		lines:   map[int][]indexed{},
		valueAt: map[position]string{},
	}
	value := func(n *yaml.Node, path string, typ reflect.Type) {
		p := position{n.Line, n.Column}
		if _, dup := idx.valueAt[p]; !dup {
			idx.valueAt[p] = path
		}
		in := indexed{path: path, col: n.Column, kind: n.Kind, value: n.Value, typ: typ}
		if n.Kind == yaml.ScalarNode {
			in.tag = n.ShortTag()
		}
		idx.lines[n.Line] = append(idx.lines[n.Line], in)
	}
	var walk func(n *yaml.Node, path string, typ reflect.Type)
	walk = func(n *yaml.Node, path string, typ reflect.Type) {
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				value(c, path, typ)
				walk(c, path, typ)
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				p := joinPath(path, k.Value)
				if k.Kind != yaml.ScalarNode {
					p = path // a list or mapping as a key: an error about the mapping
				}
				if _, dup := idx.pos[p]; !dup {
					idx.pos[p] = position{k.Line, k.Column}
				}
				kt, vt, known := schemaEntry(typ, k.Value)
				in := indexed{path: p, col: k.Column, key: true, unknown: !known, kind: k.Kind, value: k.Value, typ: kt}
				if !known {
					in.suggest = suggestKey(typ, k.Value, n)
				}
				idx.lines[k.Line] = append(idx.lines[k.Line], in)
				value(v, p, vt)
				walk(v, p, vt)
			}
		case yaml.SequenceNode:
			et := schemaElem(typ)
			for i, c := range n.Content {
				p := fmt.Sprintf("%s[%d]", path, i)
				idx.pos[p] = position{c.Line, c.Column}
				value(c, p, et)
				walk(c, p, et)
			}
		}
	}
	walk(root, "", configType)
	return idx
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
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

// under reports whether path p is base or below it.
func under(p, base string) bool {
	if base == "" || p == base {
		return true
	}
	return strings.HasPrefix(p, base) && (p[len(base)] == '.' || p[len(base)] == '[')
}

// The schema: what each key of the file holds, by the Go types it
// decodes into.

var (
	configType       = reflect.TypeFor[Config]()
	durationType     = reflect.TypeFor[model.Duration]()
	distType         = reflect.TypeFor[Dist]()
	durationDistType = reflect.TypeFor[DurationDist]()
	urlType          = reflect.TypeFor[commoncfg.URL]()
	tlsVersionType   = reflect.TypeFor[commoncfg.TLSVersion]()
	stringType       = reflect.TypeFor[string]()
	ourPackage       = configType.PkgPath()
)

// yamlForm is the type whose fields t's YAML mapping form has.
func yamlForm(t reflect.Type) reflect.Type {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == durationDistType {
		return reflect.TypeFor[durationDistYAML]()
	}
	return t
}

// schemaEntry returns the types of the key and the value of an entry key
// in a mapping of type t, and whether t has such a key.
func schemaEntry(t reflect.Type, key string) (kt, vt reflect.Type, known bool) {
	t = yamlForm(t)
	switch {
	case t == nil || t.Kind() == reflect.Interface:
		return nil, nil, true
	case t.Kind() == reflect.Map:
		return t.Key(), t.Elem(), true
	case t.Kind() == reflect.Struct && !isLeaf(t):
		fields := structFields(t)
		if ft, ok := fields.named[key]; ok {
			return stringType, ft, true
		}
		if fields.inline != nil {
			return stringType, fields.inline, true
		}
		return stringType, nil, false
	}
	return nil, nil, true
}

// schemaElem returns the type of the items of a sequence of type t.
func schemaElem(t reflect.Type) reflect.Type {
	t = yamlForm(t)
	if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
		return t.Elem()
	}
	return nil
}

// isLeaf reports whether t is written as a scalar although it is a struct
// (commoncfg.URL).
func isLeaf(t reflect.Type) bool { return t == urlType }

type fieldSet struct {
	named  map[string]reflect.Type
	inline reflect.Type // the value type of an inline map: any other key
}

var fieldSets sync.Map // reflect.Type -> fieldSet

// structFields maps the YAML keys of struct t (through ",inline" fields,
// as yaml.v3 does) to their types.
func structFields(t reflect.Type) fieldSet {
	if fs, ok := fieldSets.Load(t); ok {
		return fs.(fieldSet)
	}
	fs := fieldSet{named: map[string]reflect.Type{}}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" {
			continue
		}
		if strings.Contains(","+opts+",", ",inline,") {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			switch ft.Kind() {
			case reflect.Struct:
				in := structFields(ft)
				for k, v := range in.named {
					fs.named[k] = v
				}
				if in.inline != nil {
					fs.inline = in.inline
				}
			case reflect.Map:
				fs.inline = ft.Elem()
			}
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		fs.named[name] = f.Type
	}
	fieldSets.Store(t, fs)
	return fs
}

// describe says what a value of type t is, in the config author's words
// ("" when there is nothing useful to say).
func describe(t reflect.Type) string {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t {
	case nil:
		return ""
	case durationType:
		return "a duration (e.g. 30s, 5m)"
	case distType:
		return `a number or a distribution (a mapping with "dist")`
	case durationDistType:
		return `a duration (e.g. 5s) or a distribution (a mapping with "dist")`
	case urlType:
		return "a URL"
	case tlsVersionType:
		return "a TLS version (TLS10, TLS11, TLS12 or TLS13)"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean (true or false)"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a non-negative integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Map, reflect.Struct:
		return "a mapping"
	}
	return ""
}

// mayFail reports whether a node of yaml kind tag ("seq", "map", or a
// scalar's tag) can fail to decode into t: it tells the field yaml
// complains about from its neighbours on the same line.
func mayFail(t reflect.Type, tag string) bool {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return true
	}
	if t.Kind() == reflect.Interface {
		return false
	}
	switch tag {
	case "seq":
		return t.Kind() != reflect.Slice && t.Kind() != reflect.Array
	case "map":
		return t == durationType || isLeaf(t) || (t.Kind() != reflect.Map && t.Kind() != reflect.Struct)
	}
	// Any scalar decodes into a string; a duration's bad text is reported
	// by diagnose, not as a type error.
	return t.Kind() != reflect.String && t != durationType && t != durationDistType
}

var (
	obsoleteUnmarshalerType = reflect.TypeFor[interface {
		UnmarshalYAML(func(any) error) error
	}]()
	unmarshalerType     = reflect.TypeFor[yaml.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// hasUnmarshaler reports whether t decodes itself (yaml calls its method
// on every node, whatever its kind).
func hasUnmarshaler(t reflect.Type) bool {
	p := reflect.PointerTo(t)
	return p.Implements(obsoleteUnmarshalerType) || p.Implements(unmarshalerType) || p.Implements(textUnmarshalerType)
}
