// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package deploy_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/llmprobe/llmprobe/internal/promtest"
)

// kubeconformResult is one resource of `kubeconform -output json -verbose`.
type kubeconformResult struct {
	Filename         string `json:"filename"`
	Kind             string `json:"kind"`
	Name             string `json:"name"`
	Version          string `json:"version"`
	Status           string `json:"status"` // statusValid, statusInvalid, statusError, statusSkipped
	Msg              string `json:"msg"`
	ValidationErrors []struct {
		Path string `json:"path"`
		Msg  string `json:"msg"`
	} `json:"validationErrors"`
}

func (r kubeconformResult) String() string {
	var b strings.Builder
	b.WriteString(r.Kind + "/" + r.Name + ": " + r.Status)
	if r.Msg != "" {
		b.WriteString(": " + r.Msg)
	}
	for _, e := range r.ValidationErrors {
		b.WriteString("\n\t" + e.Path + ": " + e.Msg)
	}
	return b.String()
}

// runKubeconform validates a multi-document YAML stream with the schemas
// at schemaLocation (writeSchemas): strict (no unknown field, no duplicate
// key), no other schema source, so nothing is fetched and a kind without a
// schema is an error. It returns kubeconform's verdict on each resource.
func runKubeconform(t *testing.T, schemaLocation, name string, manifests []byte) []kubeconformResult {
	t.Helper()
	bin := promtest.RequireTool(t, "kubeconform")
	file := filepath.Join(t.TempDir(), name+".yaml")
	if err := os.WriteFile(file, manifests, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := promtest.RunCommand(t, "", bin, "-strict", "-output", "json", "-verbose", "-n", "2",
		"-schema-location", schemaLocation, file)
	var res struct {
		Resources []kubeconformResult `json:"resources"`
	}
	if jerr := json.Unmarshal([]byte(out), &res); jerr != nil {
		t.Fatalf("kubeconform %s: %v; output not JSON (%v):\n%s", name, err, jerr, out)
	}
	// kubeconform exits 1 on an invalid resource: the results say which.
	if err != nil && !strings.Contains(out, `"statusInvalid"`) && !strings.Contains(out, `"statusError"`) {
		t.Fatalf("kubeconform %s: %v\n%s", name, err, out)
	}
	return res.Resources
}

// requireValid requires kubeconform to find every object of manifests
// valid (and to have seen them all).
// It runs as the subtest "kubeconform", so that without kubeconform (and
// without LLMPROBE_REQUIRE_TOOLS=1) only it is skipped.
func requireValid(t *testing.T, schemaLocation, name string, manifests []byte) {
	t.Helper()
	docs, err := decodeAll(manifests)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	t.Run("kubeconform", func(t *testing.T) {
		res := runKubeconform(t, schemaLocation, name, manifests)
		if len(res) != len(docs) {
			t.Errorf("kubeconform %s: %d results for %d objects: %v", name, len(res), len(docs), res)
		}
		for _, r := range res {
			if r.Status != "statusValid" {
				t.Errorf("kubeconform %s: %v", name, r)
			}
		}
	})
}

// encodeAll writes docs as a multi-document YAML stream.
func encodeAll(t *testing.T, docs ...map[string]any) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	for _, d := range docs {
		if err := enc.Encode(d); err != nil {
			t.Fatal(err)
		}
	}
	if err := enc.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// deleteField is the value setPath deletes a field with.
type deleteField struct{}

// setPath sets the field at a dotted path (numbers index lists) of a
// decoded YAML tree, creating maps on the way.
func setPath(t *testing.T, doc map[string]any, path string, v any) {
	t.Helper()
	keys := strings.Split(path, ".")
	var cur any = doc
	for i, k := range keys {
		last := i == len(keys)-1
		switch c := cur.(type) {
		case map[string]any:
			if last {
				if _, del := v.(deleteField); del {
					delete(c, k)
				} else {
					c[k] = v
				}
				return
			}
			if c[k] == nil {
				c[k] = map[string]any{}
			}
			cur = c[k]
		case []any:
			n, err := strconv.Atoi(k)
			if err != nil || n >= len(c) {
				t.Fatalf("setPath %s: %q is not an index of a list of %d", path, k, len(c))
			}
			if last {
				c[n] = v
				return
			}
			cur = c[n]
		default:
			t.Fatalf("setPath %s: %q is under a %T", path, k, cur)
		}
	}
}

// deepCopy copies a decoded YAML tree.
func deepCopy(t *testing.T, doc map[string]any) map[string]any {
	t.Helper()
	data, err := yaml.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := yaml.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestKubeconformSchemas checks the generated schemas themselves: the
// kustomize base's files (and the Secret example) are valid, and each of a
// set of mistakes (a misspelled field at several depths, wrong types, an
// out-of-range integer, a bad quantity, a missing required field, an
// unknown kind) is rejected, while the legitimate alternatives of
// IntOrString and Quantity are accepted.
func TestKubeconformSchemas(t *testing.T) {
	schemas := writeSchemas(t)
	dir := filepath.Join(promtest.Root(t), "deploy", "kubernetes")
	byKind := map[string]map[string]any{}
	var all []map[string]any
	for _, f := range []string{"deployment.yaml", "service.yaml", "servicemonitor.yaml", "prometheusrule.yaml", "poddisruptionbudget.yaml", "secret.example.yaml", "discovery-rbac.example.yaml"} {
		for _, d := range readDocs(t, filepath.Join(dir, f)) {
			byKind[str(d, "kind")] = d
			all = append(all, d)
		}
	}
	requireValid(t, schemas, "base-files", encodeAll(t, all...))

	const (
		container = "/spec/template/spec/containers/0"
		notQty    = "does not match pattern"
	)
	cases := []struct {
		name, kind, path string
		value            any
		valid            bool
		// kubeconform must report an error at errPath saying errWant.
		errPath, errWant string
	}{
		{"misspelled spec field", "Deployment", "spec.replicass", 1, false, "/spec", "additional properties 'replicass' not allowed"},
		{"misspelled metadata field", "Deployment", "metadata.labelz", map[string]any{"a": "b"}, false, "/metadata", "additional properties 'labelz' not allowed"},
		{"misspelled container field", "Deployment", "spec.template.spec.containers.0.imagee", "x", false, container, "additional properties 'imagee' not allowed"},
		{"replicas a string", "Deployment", "spec.replicas", "three", false, "/spec/replicas", "got string, want integer"},
		{"replicas beyond int32", "Deployment", "spec.replicas", 1 << 31, false, "/spec/replicas", "maximum"},
		{"port a bool (IntOrString)", "Deployment", "spec.template.spec.containers.0.livenessProbe.httpGet.port", true, false, container + "/livenessProbe/httpGet/port", "got boolean"},
		{"port a number (IntOrString)", "Deployment", "spec.template.spec.containers.0.livenessProbe.httpGet.port", 9477, true, "", ""},
		{"cpu not a quantity", "Deployment", "spec.template.spec.containers.0.resources.requests.cpu", "lots", false, container + "/resources/requests/cpu", notQty},
		{"cpu a number (Quantity)", "Deployment", "spec.template.spec.containers.0.resources.requests.cpu", 0.5, true, "", ""},
		{"no containers (required)", "Deployment", "spec.template.spec.containers", deleteField{}, false, "/spec/template/spec", "missing property 'containers'"},
		{"env not a list", "Deployment", "spec.template.spec.containers.0.env", map[string]any{"A": "b"}, false, container + "/env", "got object, want array"},
		{"optional not a bool", "Deployment", "spec.template.spec.volumes.1.secret.optional", "yes", false, "/spec/template/spec/volumes/1/secret/optional", "got string, want boolean"},
		{"service port a string", "Service", "spec.ports.0.port", "9477", false, "/spec/ports/0/port", "got string, want integer"},
		{"misspelled ServiceMonitor endpoint field", "ServiceMonitor", "spec.endpoints.0.intervall", "15s", false, "/spec/endpoints/0", "additional properties 'intervall' not allowed"},
		{"ServiceMonitor without selector", "ServiceMonitor", "spec.selector", deleteField{}, false, "/spec", "missing property 'selector'"},
		{"misspelled PrometheusRule field", "PrometheusRule", "spec.groups.0.rules.0.exprr", "up", false, "/spec/groups/0/rules/0", "additional properties 'exprr' not allowed"},
		{"secret data not a map", "Secret", "stringData", []any{"x"}, false, "/stringData", "got array, want object"},
		{"no metadata.name", "PodDisruptionBudget", "metadata.name", deleteField{}, false, "/metadata", "missing property 'name'"},
		{"wrong apiVersion", "PodDisruptionBudget", "apiVersion", "policy/v1beta1", false, "", ""}, // no schema: an error
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			doc := deepCopy(t, byKind[tc.kind])
			setPath(t, doc, tc.path, tc.value)
			res := runKubeconform(t, schemas, "mutated", encodeAll(t, doc))
			if len(res) != 1 {
				t.Fatalf("want one result, got %v", res)
			}
			r := res[0]
			switch {
			case tc.valid && r.Status != "statusValid":
				t.Errorf("%s=%v should be valid: %v", tc.path, tc.value, r)
			case !tc.valid && r.Status == "statusValid":
				t.Errorf("%s=%v passed kubeconform; the schema is not strict", tc.path, tc.value)
			case !tc.valid && tc.errPath != "" && !strings.Contains(r.Msg, "at '"+tc.errPath+"'"):
				t.Errorf("%s=%v rejected, but not at %s: %v", tc.path, tc.value, tc.errPath, r)
			case !tc.valid && tc.errPath != "" && !strings.Contains(r.Msg, tc.errWant):
				t.Errorf("%s=%v rejected, but kubeconform does not say %q: %v", tc.path, tc.value, tc.errWant, r)
			}
		})
	}

	t.Run("unknown kind", func(t *testing.T) {
		doc := deepCopy(t, byKind["Deployment"])
		doc["kind"] = "Deploymnet"
		res := runKubeconform(t, schemas, "unknown", encodeAll(t, doc))
		if len(res) != 1 || res[0].Status != "statusError" {
			t.Errorf("a kind without a schema must be an error, got %v", res)
		}
	})
	t.Run("duplicate key", func(t *testing.T) {
		data, err := os.ReadFile(filepath.Join(dir, "service.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		dup := bytes.Replace(data, []byte("\nspec:\n"), []byte("\nspec:\n  type: ClusterIP\n  type: NodePort\n"), 1)
		if bytes.Equal(dup, data) {
			t.Fatal("service.yaml has no top-level spec: to duplicate a key in")
		}
		res := runKubeconform(t, schemas, "duplicate", dup)
		if len(res) != 1 || res[0].Status == "statusValid" {
			t.Errorf("a duplicated key must fail -strict, got %v", res)
		}
	})
}
