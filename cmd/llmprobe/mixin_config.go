// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"

	"github.com/llmprobe/llmprobe/alerts"
	"github.com/llmprobe/llmprobe/config"
	"github.com/llmprobe/llmprobe/internal/bounded"
)

// loadMixinConfig is alerts.LoadConfigFile in the words check-config
// uses: a syntax error at the line and column where the file breaks
// (yaml.v3 names the start of its parser context, without the file's
// line), yaml's Go-typed messages ("cannot unmarshal !!str `abc` into
// int") said as what the key holds, and an unknown key with the key it
// likely misspells.
func loadMixinConfig(file string) (alerts.Config, error) {
	data, err := bounded.ReadFile(context.Background(), file, alerts.MaxConfigFileBytes)
	if err != nil {
		var tl *bounded.TooLargeError
		if errors.As(err, &tl) {
			return alerts.Config{}, fmt.Errorf("%s: larger than %d bytes: not a mixin configuration", file, alerts.MaxConfigFileBytes)
		}
		return alerts.Config{}, err
	}
	if e := config.SyntaxError(file, data); e != nil {
		return alerts.Config{}, e
	}
	cfg, err := alerts.ParseConfig(file, data)
	if err != nil {
		return cfg, rewordMixinErrors(err)
	}
	return cfg, nil
}

var (
	mixinTypeErrorRE  = regexp.MustCompile("cannot unmarshal !!(\\w+) `(.*)` into (\\S+)")
	mixinUnknownKeyRE = regexp.MustCompile(`^(.*?:\d+:\d+: )(?:(\S+): )?unknown key "(.*)"$`)
)

// rewordMixinErrors rewrites the lines of alerts.ParseConfig's error.
func rewordMixinErrors(err error) error {
	lines := strings.Split(err.Error(), "\n")
	for i, l := range lines {
		l = mixinTypeErrorRE.ReplaceAllStringFunc(l, func(m string) string {
			p := mixinTypeErrorRE.FindStringSubmatch(m)
			return fmt.Sprintf("cannot use %s %s as %s", yamlTagWords(p[1]), strconv.Quote(p[2]), goTypeWords(p[3]))
		})
		if m := mixinUnknownKeyRE.FindStringSubmatch(l); m != nil {
			if s := config.Suggest(m[3], mixinKeys(m[2])); s != "" {
				l += fmt.Sprintf(" (did you mean %q?)", s)
			}
		}
		lines[i] = l
	}
	return errors.New(strings.Join(lines, "\n"))
}

func yamlTagWords(tag string) string {
	switch tag {
	case "str":
		return "string"
	case "int", "float":
		return "number"
	case "bool":
		return "boolean"
	case "seq":
		return "list"
	case "map":
		return "mapping"
	}
	return tag
}

func goTypeWords(t string) string {
	t = strings.TrimLeft(t, "*")
	switch {
	case strings.HasPrefix(t, "int"), strings.HasPrefix(t, "uint"):
		return "an integer"
	case strings.HasPrefix(t, "float"):
		return "a number"
	case t == "bool":
		return "a boolean (true or false)"
	case t == "string":
		return "a string"
	case strings.HasPrefix(t, "[]"):
		return "a list"
	case strings.HasPrefix(t, "map["):
		return "a mapping"
	}
	return "a " + t[strings.LastIndexByte(t, '.')+1:]
}

// mixinKeys are the keys of the mapping at path ("" for the top) of a
// mixin file.
func mixinKeys(path string) []string {
	t := reflect.TypeFor[alerts.Config]()
	for _, part := range strings.FieldsFunc(path, func(r rune) bool { return r == '.' }) {
		name, _, _ := strings.Cut(part, "[")
		f, ok := yamlField(t, name)
		if !ok {
			return nil
		}
		t = f.Type
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
			t = t.Elem()
		}
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	var keys []string
	for i := range t.NumField() {
		if tag, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ","); tag != "" && tag != "-" {
			keys = append(keys, tag)
		}
	}
	return keys
}

func yamlField(t reflect.Type, key string) (reflect.StructField, bool) {
	if t.Kind() != reflect.Struct {
		return reflect.StructField{}, false
	}
	for i := range t.NumField() {
		if tag, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ","); tag == key {
			return t.Field(i), true
		}
	}
	return reflect.StructField{}, false
}

var durationType = reflect.TypeFor[model.Duration]()

// marshalMixinConfig is alerts.MarshalConfig with every duration written
// as the documentation writes it: in days, never weeks or years
// (slo_window: 28d, not 4w).
func marshalMixinConfig(cfg alerts.Config) ([]byte, error) {
	b, err := alerts.MarshalConfig(cfg)
	if err != nil {
		return nil, err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, err
	}
	if len(doc.Content) == 1 {
		rewriteDurations(doc.Content[0], reflect.TypeOf(cfg))
	}
	var out strings.Builder
	enc := yaml.NewEncoder(&out)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return []byte(out.String()), nil
}

// rewriteDurations rewrites, in n (the YAML form of a value of type t),
// the values of every model.Duration with formatDays.
func rewriteDurations(n *yaml.Node, t reflect.Type) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == durationType:
		if n.Kind == yaml.ScalarNode {
			if d, err := model.ParseDuration(n.Value); err == nil {
				n.Value = formatDays(time.Duration(d))
			}
		}
	case t.Kind() == reflect.Struct && n.Kind == yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			if f, ok := yamlField(t, n.Content[i].Value); ok {
				rewriteDurations(n.Content[i+1], f.Type)
			}
		}
	case (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) && n.Kind == yaml.SequenceNode:
		for _, c := range n.Content {
			rewriteDurations(c, t.Elem())
		}
	}
}

// formatDays writes d as model.Duration does (1h30m, 250ms), except
// that days are the largest unit: 28d, 14d, 365d.
func formatDays(d time.Duration) string {
	if d == 0 {
		return "0s"
	}
	var b strings.Builder
	if d < 0 {
		b.WriteByte('-')
		d = -d
	}
	for _, u := range []struct {
		unit string
		size time.Duration
	}{{"d", 24 * time.Hour}, {"h", time.Hour}, {"m", time.Minute}, {"s", time.Second}, {"ms", time.Millisecond}} {
		if n := d / u.size; n > 0 {
			fmt.Fprintf(&b, "%d%s", n, u.unit)
			d -= n * u.size
		}
	}
	return b.String()
}
