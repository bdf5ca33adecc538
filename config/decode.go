// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/url"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"
)

// Decoding never stops at the first problem. yaml.v3 goes on after a type
// error or an unknown field (it collects them in a *yaml.TypeError), but
// any other error an UnmarshalYAML returns aborts the whole file: a bad
// duration (model.Duration), prometheus/common's own checks of an
// http_client_config. decodePlain therefore finds those values first
// (diagnose), reports them as positioned type errors and decodes the rest;
// so every decoding problem is reported, and the partially decoded
// configuration is validated too (see load).
//
// Errors of our own carry their position in the TypeError line (yaml's
// carry a line only): posLine encodes it, translate decodes it.

// posMark starts a TypeError line written by posLine.
const posMark = "\x00llmprobe:"

// Scopes of a positioned error: what failed to decode, so that validation
// does not complain about it again.
const (
	scopeField   = 'f' // the value at the position
	scopeMapping = 'm' // the whole mapping at the position (its decoding stopped)
)

// posLine is a TypeError line for a problem with node n.
func posLine(n *yaml.Node, scope byte, msg string) string {
	var line, col int
	if n != nil {
		line, col = n.Line, n.Column
	}
	return fmt.Sprintf("%s%d:%d:%c:%s", posMark, line, col, scope, msg)
}

// parsePosLine decodes a posLine.
func parsePosLine(l string) (pos position, scope byte, msg string, ok bool) {
	rest, ok := strings.CutPrefix(l, posMark)
	if !ok {
		return position{}, 0, "", false
	}
	parts := strings.SplitN(rest, ":", 4)
	if len(parts) != 4 || len(parts[2]) != 1 {
		return position{}, 0, "", false
	}
	pos.line, _ = strconv.Atoi(parts[0])
	pos.col, _ = strconv.Atoi(parts[1])
	return pos, parts[2][0], parts[3], true
}

// nodeRef captures the node being decoded. (Decoding into a yaml.Node
// through the callback would treat Node as a struct and trip over
// unknown-field checks; a yaml.Unmarshaler receives the node as is.)
type nodeRef struct{ node *yaml.Node }

func (r *nodeRef) UnmarshalYAML(n *yaml.Node) error {
	r.node = n
	return nil
}

// decodePlain decodes the current node into v (a pointer to a `plain`
// alias struct) and returns nil or a *yaml.TypeError, never an error that
// would abort the decoding of the rest of the file.
func decodePlain(unmarshal func(any) error, v any) error {
	var ref nodeRef
	if err := unmarshal(&ref); err != nil {
		return err
	}
	var lines []string
	if ref.node != nil && ref.node.Kind == yaml.MappingNode {
		lines = diagnose(ref.node, reflect.TypeOf(v).Elem())
	}
	var te *yaml.TypeError
	switch err := unmarshal(v); {
	case err == nil:
	case errors.As(err, &te):
		lines = append(lines, te.Errors...)
	case ref.node != nil:
		// Not anticipated by diagnose: the rest of this mapping is not
		// decoded, the rest of the file is.
		lines = append(lines, posLine(ref.node, scopeMapping, fatalMessage(err)))
	default:
		return err
	}
	if len(lines) == 0 {
		return nil
	}
	return &yaml.TypeError{Errors: lines}
}

// typeErrorLines returns the lines of a *yaml.TypeError (decodePlain
// returns nothing else).
func typeErrorLines(err error) []string {
	var te *yaml.TypeError
	if errors.As(err, &te) {
		return te.Errors
	}
	if err != nil {
		return []string{err.Error()}
	}
	return nil
}

// diagnose finds, in mapping n that decodes into struct type t, the values
// whose decoding would abort the file, and reports each as a positioned
// error line. It replaces each with null in the node tree being decoded,
// so that the field keeps its default and decoding goes on. Values of our
// own types that decode themselves are left to their own decodePlain.
func diagnose(n *yaml.Node, t reflect.Type) []string {
	var lines []string
	seen := map[*yaml.Node]bool{} // aliased mappings and lists are walked once
	var visit func(slot **yaml.Node, t reflect.Type)
	visitMapping := func(m *yaml.Node, t reflect.Type) {
		fields := structFields(t)
		for i := 0; i+1 < len(m.Content); i += 2 {
			k := m.Content[i]
			if k.Kind == yaml.ScalarNode && k.Tag == "!!merge" {
				// <<: *base, or <<: [*a, *b]: the merged mappings' values
				// decode into this struct.
				mv := resolveAlias(m.Content[i+1])
				if mv == nil {
					continue
				}
				if mv.Kind == yaml.MappingNode {
					visit(&m.Content[i+1], t)
				} else if mv.Kind == yaml.SequenceNode {
					for j := range mv.Content {
						visit(&mv.Content[j], t)
					}
				}
				continue
			}
			ft := fields.named[k.Value]
			if ft == nil {
				ft = fields.inline
			}
			if ft != nil {
				visit(&m.Content[i+1], ft)
			}
		}
	}
	verdicts := map[*yaml.Node]verdict{} // aliased values are checked once
	visit = func(slot **yaml.Node, t reflect.Type) {
		v := *slot
		r := resolveAlias(v)
		if r == nil || r.ShortTag() == "!!null" {
			return
		}
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if !needsDiagnosis(t) {
			return
		}
		if t == durationType || (hasUnmarshaler(t) && t.PkgPath() != ourPackage) {
			vd, done := verdicts[r]
			if !done {
				vd = check(r, t)
				verdicts[r] = vd
			}
			if vd.msg != "" {
				at := v
				if vd.at != nil && v == r {
					at = vd.at
				}
				lines = append(lines, posLine(at, scopeField, vd.msg))
				*slot = nullNode(v)
			}
			return
		}
		if seen[r] {
			return
		}
		seen[r] = true
		switch t.Kind() {
		case reflect.Struct:
			if r.Kind == yaml.MappingNode {
				visitMapping(r, t)
			}
		case reflect.Map:
			if r.Kind == yaml.MappingNode {
				for i := 1; i < len(r.Content); i += 2 {
					visit(&r.Content[i], t.Elem())
				}
			}
		case reflect.Slice, reflect.Array:
			if r.Kind == yaml.SequenceNode {
				for i := range r.Content {
					visit(&r.Content[i], t.Elem())
				}
			}
		}
	}
	visitMapping(n, t)
	return lines
}

// verdict is what check found wrong with a value (msg == "": nothing),
// and the scalar inside it the message is about (nil: the value itself).
type verdict struct {
	at  *yaml.Node
	msg string
}

// check decodes n as a t on its own to see whether its decoding aborts.
func check(n *yaml.Node, t reflect.Type) verdict {
	if t == durationType {
		if n.Kind == yaml.ScalarNode {
			if _, err := model.ParseDuration(n.Value); err != nil {
				return verdict{msg: durationMessage(n.Value, false)}
			}
		}
		return verdict{} // not a scalar: a type error, reported by the decoding
	}
	// prometheus/common's types: its type errors come from the real
	// decoding, with unknown fields checked. Decode as the real decoding
	// does, unknown fields refused (Node.Decode does not refuse them): an
	// unknown field is a type error there, and the type's own checks that
	// would follow (HTTPClientConfig.Validate) are not reached.
	err := decodeKnownFields(n, reflect.New(t).Interface())
	var te *yaml.TypeError
	if err == nil || errors.As(err, &te) {
		return verdict{}
	}
	at := refine(n, err.Error())
	if at == n {
		at = nil
	}
	return verdict{at: at, msg: fatalMessage(err)}
}

// decodeKnownFields decodes n into v with unknown fields refused.
func decodeKnownFields(n *yaml.Node, v any) error {
	// n is encoded on its own: an alias in it (a merge of a mapping
	// anchored elsewhere in the file) would refer to no anchor there.
	budget := MaxNodes
	n = inlineAliases(n, &budget)
	if n == nil {
		return nil // more than the file may hold: its own error
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	if err := enc.Encode(n); err != nil {
		return n.Decode(v)
	}
	if err := enc.Close(); err != nil {
		return n.Decode(v)
	}
	dec := yaml.NewDecoder(&buf)
	dec.KnownFields(true)
	return dec.Decode(v)
}

// inlineAliases copies n with every alias replaced by a copy of what it
// refers to, and no anchors; nil when that takes more than *budget nodes.
func inlineAliases(n *yaml.Node, budget *int) *yaml.Node {
	if *budget--; *budget < 0 {
		return nil
	}
	if n.Kind == yaml.AliasNode {
		r := resolveAlias(n)
		if r == nil {
			return nil
		}
		return inlineAliases(r, budget)
	}
	c := *n
	c.Anchor = ""
	c.Content = make([]*yaml.Node, len(n.Content))
	for i, k := range n.Content {
		if c.Content[i] = inlineAliases(k, budget); c.Content[i] == nil {
			return nil
		}
	}
	return &c
}

var diagnosed sync.Map // reflect.Type -> bool

// needsDiagnosis reports whether a value of type t may hold something
// whose decoding aborts the file: a duration, a foreign type that decodes
// itself, or a plain struct, map or list of those. Our own types that
// decode themselves run their own diagnosis.
func needsDiagnosis(t reflect.Type) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if v, ok := diagnosed.Load(t); ok {
		return v.(bool)
	}
	diagnosed.Store(t, false) // recursive types: assume not while looking
	var need bool
	switch {
	case t == durationType:
		need = true
	case hasUnmarshaler(t):
		need = t.PkgPath() != ourPackage
	case t.Kind() == reflect.Struct:
		for i := 0; i < t.NumField() && !need; i++ {
			need = t.Field(i).IsExported() && needsDiagnosis(t.Field(i).Type)
		}
	case t.Kind() == reflect.Map, t.Kind() == reflect.Slice, t.Kind() == reflect.Array:
		need = needsDiagnosis(t.Elem())
	}
	diagnosed.Store(t, need)
	return need
}

func resolveAlias(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 100; i++ {
		n = n.Alias
	}
	if n != nil && n.Kind == yaml.AliasNode {
		return nil
	}
	return n
}

func nullNode(at *yaml.Node) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Line: at.Line, Column: at.Column}
}

var quotedRE = regexp.MustCompile(`"((?:[^"\\]|\\.)+)"`)

// refine finds the scalar under r that an error message
// names, quoted ("parse \"::\": ...") or last ("unknown TLS version:
// TLS99"), so the error points at that field rather than at the whole
// mapping.
func refine(r *yaml.Node, msg string) *yaml.Node {
	var names []string
	for _, m := range quotedRE.FindAllStringSubmatch(msg, -1) {
		if s, err := strconv.Unquote(`"` + m[1] + `"`); err == nil {
			names = append(names, s)
		}
	}
	if i := strings.LastIndex(msg, ": "); i >= 0 {
		names = append(names, msg[i+2:])
	}
	var found *yaml.Node
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		if found != nil {
			return
		}
		switch n.Kind {
		case yaml.MappingNode:
			for i := 1; i < len(n.Content); i += 2 {
				if c := n.Content[i]; c.Kind == yaml.ScalarNode {
					for _, name := range names {
						if name != "" && c.Value == name {
							found = c
							return
						}
					}
				}
				walk(n.Content[i])
			}
		case yaml.SequenceNode:
			for _, c := range n.Content {
				walk(c)
			}
		}
	}
	walk(r)
	if found == nil {
		return r
	}
	return found
}

// durationMessage says why text is not a duration.
func durationMessage(text string, orDist bool) string {
	hint := "a number and a unit, e.g. 500ms, 30s, 5m, 1h"
	if orDist {
		hint += `; or a mapping with "dist"`
	}
	return fmt.Sprintf("not a valid duration %q (%s)", text, hint)
}

// fatalMessage is the message of an error yaml would have aborted on, in
// the config author's words.
func fatalMessage(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		// The URL itself may hold credentials.
		return "not a valid URL: " + ue.Err.Error()
	}
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	switch {
	case strings.HasPrefix(msg, "map merge requires"):
		return "a merge (<<) needs a mapping or a list of mappings"
	case strings.HasPrefix(msg, "invalid map key"):
		return "a key must be a scalar, not a list or a mapping"
	case strings.HasPrefix(msg, "!!binary value contains invalid base64"):
		return "a binary value (tagged binary) is not valid base64"
	case strings.HasPrefix(msg, "document contains excessive aliasing"):
		return fmt.Sprintf("aliases expand the file beyond what it holds as written (at most %d values from aliases)", MaxAliasExpansion)
	}
	return msg
}

// decodeYAML decodes data into a configuration, reporting decoding
// problems as the lines of one *yaml.TypeError (or another error when
// decoding could not go on at all). The configuration is what could be
// decoded; the fields that failed keep their defaults.
func decodeYAML(data []byte) (*Config, error) {
	cfg := New()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	err := dec.Decode(cfg)
	if errors.Is(err, io.EOF) {
		err = nil
	}
	var te *yaml.TypeError
	if err != nil && !errors.As(err, &te) {
		return cfg, err
	}
	lines := typeErrorLines(err)
	lines = append(lines, cfg.takeDecodeErrors()...)
	if len(lines) > 0 {
		return cfg, &yaml.TypeError{Errors: lines}
	}
	return cfg, nil
}

// takeDecodeErrors collects what the list items (targets, classes) kept
// of their decoding problems. They keep them instead of returning them
// because yaml drops a list item whose decoding failed, which would shift
// the indices of the items after it in every later message.
func (c *Config) takeDecodeErrors() []string {
	var lines []string
	for _, t := range c.Targets {
		if t != nil {
			lines = append(lines, t.decodeErrs...)
			t.decodeErrs = nil
		}
	}
	for _, name := range sortedKeys(c.Workloads) {
		if w := c.Workloads[name]; w != nil {
			for _, cl := range w.Classes {
				if cl != nil {
					lines = append(lines, cl.decodeErrs...)
					cl.decodeErrs = nil
				}
			}
		}
	}
	return lines
}
