// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package deploy_test

import (
	"encoding"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The JSON schemas kubeconform validates the manifests with are written by
// the tests, from the Go API types the objects decode into (k8s.io/api and
// prometheus-operator's monitoring/v1), so validation needs no network and
// follows the pinned API versions in go.mod. They are strict: every object
// has additionalProperties false, so a misspelled field fails, and every
// field has its JSON type.

// schemaKind is one kind the manifests may contain.
type schemaKind struct {
	gv  schema.GroupVersion
	obj any // a value of the kind's Go type
}

// schemaKinds are the kinds deploy/ renders or ships. A kind missing here
// fails kubeconform (no schema): add it when a manifest gains one.
var schemaKinds = []schemaKind{
	{corev1.SchemeGroupVersion, corev1.ConfigMap{}},
	{corev1.SchemeGroupVersion, corev1.Secret{}},
	{corev1.SchemeGroupVersion, corev1.Service{}},
	{corev1.SchemeGroupVersion, corev1.ServiceAccount{}},
	{appsv1.SchemeGroupVersion, appsv1.Deployment{}},
	{policyv1.SchemeGroupVersion, policyv1.PodDisruptionBudget{}},
	{networkingv1.SchemeGroupVersion, networkingv1.NetworkPolicy{}},
	{monitoringv1.SchemeGroupVersion, monitoringv1.ServiceMonitor{}},
	{monitoringv1.SchemeGroupVersion, monitoringv1.PrometheusRule{}},
	{rbacv1.SchemeGroupVersion, rbacv1.Role{}},
	{rbacv1.SchemeGroupVersion, rbacv1.RoleBinding{}},
	{rbacv1.SchemeGroupVersion, rbacv1.ClusterRole{}},
	{rbacv1.SchemeGroupVersion, rbacv1.ClusterRoleBinding{}},
}

// quantityPattern is resource.Quantity's serialised form (as in the
// Kubernetes OpenAPI): a number with an optional SI, binary or exponent
// suffix.
const quantityPattern = `^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$`

// specialSchemas are the types whose JSON form is not their Go structure:
// they marshal themselves.
var specialSchemas = map[reflect.Type]map[string]any{
	reflect.TypeFor[intstr.IntOrString](): {"anyOf": []any{
		map[string]any{"type": "integer"},
		map[string]any{"type": "string", "minLength": 1},
	}},
	reflect.TypeFor[resource.Quantity](): {"anyOf": []any{
		map[string]any{"type": "string", "pattern": quantityPattern},
		map[string]any{"type": "number"},
	}},
	// A zero Time marshals as null (creationTimestamp: null).
	reflect.TypeFor[metav1.Time]():      {"type": []any{"string", "null"}, "format": "date-time"},
	reflect.TypeFor[metav1.MicroTime](): {"type": []any{"string", "null"}, "format": "date-time"},
	reflect.TypeFor[metav1.Duration]():  {"type": "string"},
	// Any embedded object; managedFields' field sets.
	reflect.TypeFor[runtime.RawExtension](): {"type": "object"},
	reflect.TypeFor[metav1.FieldsV1]():      {"type": "object"},
}

var (
	jsonMarshaler = reflect.TypeFor[json.Marshaler]()
	jsonUnmarsh   = reflect.TypeFor[json.Unmarshaler]()
	textMarshaler = reflect.TypeFor[encoding.TextMarshaler]()
)

// schemaGen builds JSON schemas (draft-07) from Go types by reflection over
// their encoding/json tags. Named struct types become definitions, so a
// recursive type terminates and each is written once.
type schemaGen struct {
	defs map[string]any
}

func defName(t reflect.Type) string {
	return strings.NewReplacer("/", ".", "~", ".").Replace(t.PkgPath()) + "." + t.Name()
}

// of returns the schema of values of type t.
func (g *schemaGen) of(t reflect.Type) (map[string]any, error) {
	if s, ok := specialSchemas[t]; ok {
		return s, nil
	}
	if t.Kind() == reflect.Pointer {
		return g.of(t.Elem())
	}
	// A type that marshals itself has a JSON form reflection cannot see:
	// it must be in specialSchemas. (Text marshalers are strings.)
	for _, m := range []reflect.Type{jsonMarshaler, jsonUnmarsh} {
		if t.Implements(m) || reflect.PointerTo(t).Implements(m) {
			return nil, fmt.Errorf("%s implements %s: add its schema to specialSchemas", t, m)
		}
	}
	if t.Implements(textMarshaler) || reflect.PointerTo(t).Implements(textMarshaler) {
		return map[string]any{"type": "string"}, nil
	}
	switch t.Kind() {
	case reflect.Bool:
		return map[string]any{"type": "boolean"}, nil
	case reflect.String:
		return map[string]any{"type": "string"}, nil
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Uint8, reflect.Uint16, reflect.Uint32:
		// Bounded to the Go type: 2^31 replicas fails, not wraps.
		lo, hi := intBounds(t)
		return map[string]any{"type": "integer", "minimum": lo, "maximum": hi}, nil
	case reflect.Int, reflect.Int64, reflect.Uint, reflect.Uint64:
		s := map[string]any{"type": "integer"}
		if t.Kind() == reflect.Uint || t.Kind() == reflect.Uint64 {
			s["minimum"] = 0
		}
		return s, nil
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}, nil
	case reflect.Interface:
		return map[string]any{}, nil
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return map[string]any{"type": "string", "contentEncoding": "base64"}, nil
		}
		items, err := g.of(t.Elem())
		if err != nil {
			return nil, err
		}
		return map[string]any{"type": "array", "items": items}, nil
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			return nil, fmt.Errorf("%s: map keys must be strings", t)
		}
		v, err := g.of(t.Elem())
		if err != nil {
			return nil, err
		}
		return map[string]any{"type": "object", "additionalProperties": v}, nil
	case reflect.Struct:
		if t.Name() == "" {
			return g.object(t)
		}
		name := defName(t)
		if _, ok := g.defs[name]; !ok {
			g.defs[name] = nil // reserved: a recursive reference ends here
			s, err := g.object(t)
			if err != nil {
				return nil, err
			}
			g.defs[name] = s
		}
		return map[string]any{"$ref": "#/definitions/" + name}, nil
	}
	return nil, fmt.Errorf("%s: no JSON schema for kind %s", t, t.Kind())
}

func intBounds(t reflect.Type) (int64, int64) {
	bits := t.Bits()
	switch t.Kind() {
	case reflect.Uint8, reflect.Uint16, reflect.Uint32:
		return 0, 1<<bits - 1
	}
	return -(1 << (bits - 1)), 1<<(bits-1) - 1
}

// object is the schema of a struct: its JSON fields (embedded structs
// without a JSON name, or with ",inline", contribute theirs), no others.
// A field whose tag lacks omitempty is required, as openapi-gen and
// controller-gen make it by default.
func (g *schemaGen) object(t reflect.Type) (map[string]any, error) {
	props := map[string]any{}
	var required []string
	if err := g.fields(t, props, &required); err != nil {
		return nil, err
	}
	s := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		slices.Sort(required)
		s["required"] = required
	}
	return s, nil
}

func (g *schemaGen) fields(t reflect.Type, props map[string]any, required *[]string) error {
	for i := range t.NumField() {
		f := t.Field(i)
		tag, hasTag := f.Tag.Lookup("json")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" && opts == "" {
			continue
		}
		inline := slices.Contains(strings.Split(opts, ","), "inline") || (f.Anonymous && name == "")
		if inline {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() != reflect.Struct {
				return fmt.Errorf("%s.%s: inline field of kind %s", t, f.Name, ft.Kind())
			}
			if err := g.fields(ft, props, required); err != nil {
				return err
			}
			continue
		}
		if !f.IsExported() {
			continue
		}
		if !hasTag || name == "" {
			name = f.Name
		}
		s, err := g.of(f.Type)
		if err != nil {
			return fmt.Errorf("%s.%s: %w", t, f.Name, err)
		}
		props[name] = s
		if !slices.Contains(strings.Split(opts, ","), "omitempty") && !slices.Contains(strings.Split(opts, ","), "omitzero") {
			*required = append(*required, name)
		}
	}
	return nil
}

// kindSchema is the schema of one top-level object: its type's schema
// with apiVersion and kind fixed, and metadata.name required.
func kindSchema(k schemaKind) (kind string, s map[string]any, err error) {
	t := reflect.TypeOf(k.obj)
	g := &schemaGen{defs: map[string]any{}}
	root, err := g.object(t)
	if err != nil {
		return "", nil, err
	}
	props := root["properties"].(map[string]any)
	for _, p := range []string{"apiVersion", "kind", "metadata"} {
		if props[p] == nil {
			return "", nil, fmt.Errorf("%s has no %s field", t, p)
		}
	}
	props["apiVersion"] = map[string]any{"const": k.gv.String()}
	props["kind"] = map[string]any{"const": t.Name()}
	props["metadata"] = map[string]any{"allOf": []any{
		props["metadata"],
		map[string]any{"required": []any{"name"}},
	}}
	req, _ := root["required"].([]string)
	for _, p := range []string{"apiVersion", "kind", "metadata"} {
		if !slices.Contains(req, p) {
			req = append(req, p)
		}
	}
	slices.Sort(req)
	root["required"] = req
	root["$schema"] = "http://json-schema.org/draft-07/schema#"
	root["title"] = k.gv.String() + " " + t.Name() + " (from " + t.PkgPath() + ")"
	root["definitions"] = g.defs
	return t.Name(), root, nil
}

// schemaFile is the file name kubeconform's {{ .ResourceKind }}{{
// .KindSuffix }} gives a kind: deployment-apps-v1.json, service-v1.json,
// servicemonitor-monitoring-v1.json.
func schemaFile(gv schema.GroupVersion, kind string) string {
	suffix := "-" + gv.Version
	if gv.Group != "" {
		suffix = "-" + strings.ToLower(strings.Split(gv.Group, ".")[0]) + suffix
	}
	return strings.ToLower(kind) + suffix + ".json"
}

// writeSchemas writes the schemas of schemaKinds into a temporary
// directory and returns kubeconform's -schema-location for it.
func writeSchemas(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, k := range schemaKinds {
		kind, s, err := kindSchema(k)
		if err != nil {
			t.Fatalf("schema of %s: %v", k.gv, err)
		}
		data, err := json.MarshalIndent(s, "", " ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, schemaFile(k.gv, kind)), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "{{ .ResourceKind }}{{ .KindSuffix }}.json")
}
