// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package alerts

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/llmprobe/llmprobe/internal/bounded"
)

// A mixin file (`llmprobe mixin --config=mixin.yml`) is YAML with the keys
// of Config's yaml tags. Every key is optional: a file holds only what it
// changes, over DefaultConfig. A list replaces the default list; labels and
// annotations are added to the default ones. `llmprobe mixin
// --print-config` prints every key with its default.

// MaxConfigFileBytes bounds a mixin file: a file larger than this is
// refused before it is parsed.
const MaxConfigFileBytes = 1 << 20

// LoadConfigFile reads and checks a mixin file. Every problem is reported
// at once, each as file:line:column: field: message.
func LoadConfigFile(path string) (Config, error) {
	// A larger file, or a device such as /dev/zero, is refused unread.
	data, err := bounded.ReadFile(context.Background(), path, MaxConfigFileBytes)
	if err != nil {
		return Config{}, err
	}
	return ParseConfig(path, data)
}

// ParseConfig is LoadConfigFile of data read from the file name.
func ParseConfig(name string, data []byte) (Config, error) {
	cfg := DefaultConfig()
	if len(data) > MaxConfigFileBytes {
		return cfg, fmt.Errorf("%s: larger than %d bytes: not a mixin configuration", name, MaxConfigFileBytes)
	}
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return cfg, cfg.Validate() // an empty file: the defaults
		}
		return cfg, fmt.Errorf("%s: %v", name, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return cfg, fmt.Errorf("%s:%d:%d: a mixin file holds one YAML document", name, extra.Line, extra.Column)
	}
	p := &fileParser{name: name, nodes: map[string]*yaml.Node{}}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		return cfg, cfg.Validate()
	}
	p.decode(root, reflect.ValueOf(&cfg).Elem(), "")
	// Validate what decoded too (a value that did not decode keeps its
	// default), so that one run reports every problem of the file.
	if err := cfg.Validate(); err != nil {
		p.errs = append(p.errs, unjoin(p.position(err))...)
	}
	if len(cfg.GroupLabels) == 0 {
		cfg.GroupLabels = nil // `group_labels: []` is the default
	}
	// In file order, as a reader fixes them.
	slices.SortStableFunc(p.errs, func(a, b error) int { return cmp.Compare(errorLine(a), errorLine(b)) })
	return cfg, errors.Join(p.errs...)
}

// errorLine is the line:column of a positioned error as one sortable
// number; errors without a position sort last.
func errorLine(err error) int {
	var line, col int
	_, rest, _ := strings.Cut(err.Error(), ":")
	if _, scanErr := fmt.Sscanf(rest, "%d:%d:", &line, &col); scanErr != nil {
		return math.MaxInt
	}
	return line<<16 + col
}

// MarshalConfig renders cfg as a mixin file with every key.
func MarshalConfig(cfg Config) ([]byte, error) {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(cfg); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// fileParser decodes a mixin file node by node, so that each problem is
// reported with its position and path, and all of them at once.
type fileParser struct {
	name  string
	errs  []error
	nodes map[string]*yaml.Node // field path -> value node
}

func (p *fileParser) errorf(n *yaml.Node, path, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if path != "" {
		msg = path + ": " + msg
	}
	p.errs = append(p.errs, fmt.Errorf("%s:%d:%d: %s", p.name, n.Line, n.Column, msg))
}

var yamlUnmarshaler = reflect.TypeFor[yaml.Unmarshaler]()

// decode sets v from n. Structs without their own UnmarshalYAML are
// walked key by key (unknown keys are errors), slices of such structs
// element by element; anything else is decoded by yaml.
func (p *fileParser) decode(n *yaml.Node, v reflect.Value, path string) {
	if path != "" {
		p.nodes[path] = n
	}
	if n.Kind == yaml.AliasNode || n.Anchor != "" {
		p.errorf(n, path, "anchors and aliases are not supported in a mixin file")
		return
	}
	custom := v.Addr().Type().Implements(yamlUnmarshaler) || v.Addr().Type().Implements(reflect.TypeFor[interface {
		UnmarshalYAML(func(any) error) error
	}]())
	switch {
	case v.Kind() == reflect.Struct && !custom:
		if n.Kind != yaml.MappingNode {
			p.errorf(n, path, "must be a mapping of keys to values")
			return
		}
		fields := yamlFields(v.Type())
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, val := n.Content[i], n.Content[i+1]
			idx, ok := fields[k.Value]
			if !ok {
				p.errorf(k, path, "unknown key %q", k.Value)
				continue
			}
			p.decode(val, v.Field(idx), join(path, k.Value))
		}
	case v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.Struct:
		if n.Kind != yaml.SequenceNode {
			p.errorf(n, path, "must be a list")
			return
		}
		out := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
		for i, el := range n.Content {
			p.decode(el, out.Index(i), path+"["+strconv.Itoa(i)+"]")
		}
		v.Set(out)
	default:
		if err := containsAlias(n); err != nil {
			p.errorf(n, path, "%v", err)
			return
		}
		if err := n.Decode(v.Addr().Interface()); err != nil {
			p.errorf(n, path, "%s", decodeMessage(err))
		}
	}
}

func containsAlias(n *yaml.Node) error {
	if n.Kind == yaml.AliasNode || n.Anchor != "" {
		return errors.New("anchors and aliases are not supported in a mixin file")
	}
	for _, c := range n.Content {
		if err := containsAlias(c); err != nil {
			return err
		}
	}
	return nil
}

// decodeMessage strips yaml's "yaml: unmarshal errors: line N:" framing:
// the position is already in front of it.
func decodeMessage(err error) string {
	var te *yaml.TypeError
	if errors.As(err, &te) && len(te.Errors) > 0 {
		msgs := make([]string, len(te.Errors))
		for i, e := range te.Errors {
			if _, rest, ok := strings.Cut(e, ": "); ok && strings.HasPrefix(e, "line ") {
				e = rest
			}
			msgs[i] = e
		}
		return strings.Join(msgs, "; ")
	}
	return strings.TrimPrefix(err.Error(), "yaml: ")
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// yamlFields maps yaml keys to field indexes.
func yamlFields(t reflect.Type) map[string]int {
	out := map[string]int{}
	for i := range t.NumField() {
		tag, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
		if tag != "" && tag != "-" {
			out[tag] = i
		}
	}
	return out
}

// position prefixes each FieldError of err with the position of the
// setting in the file, or says the value is the default.
func (p *fileParser) position(err error) error {
	var out []error
	for _, e := range unjoin(err) {
		var fe *FieldError
		if !errors.As(e, &fe) {
			out = append(out, fmt.Errorf("%s: %w", p.name, e))
			continue
		}
		if n := p.lookup(fe.Field); n != nil {
			out = append(out, fmt.Errorf("%s:%d:%d: %w", p.name, n.Line, n.Column, e))
		} else {
			out = append(out, fmt.Errorf("%s: %w (a default the file does not set)", p.name, e))
		}
	}
	return errors.Join(out...)
}

// lookup finds the node of field or of its closest parent in the file
// ("ttft.slo" falls back to "ttft"; "group_labels[1]" to "group_labels").
func (p *fileParser) lookup(field string) *yaml.Node {
	for f := field; f != ""; {
		if n, ok := p.nodes[f]; ok {
			// An element of a list of scalars (group_labels[1]) has no
			// node of its own in p.nodes: take it from the list.
			if rest := field[len(f):]; strings.HasPrefix(rest, "[") && n.Kind == yaml.SequenceNode {
				end := strings.IndexByte(rest, ']')
				if idx, err := strconv.Atoi(rest[1:max(end, 1)]); err == nil && idx >= 0 && idx < len(n.Content) {
					return n.Content[idx]
				}
			}
			return n
		}
		i := strings.LastIndexAny(f, ".[")
		if i < 0 {
			break
		}
		f = f[:i]
	}
	return nil
}

func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}
