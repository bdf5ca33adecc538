// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package deploy_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/llmprobe/llmprobe/internal/promtest"
)

// kustomizeBuild runs `kustomize build dir` ($KUSTOMIZE or bin/kustomize;
// missing: a skip, or a failure under LLMPROBE_REQUIRE_TOOLS=1) and
// returns the objects it renders.
func kustomizeBuild(t *testing.T, dir string) []byte {
	t.Helper()
	bin := promtest.RequireTool(t, "kustomize")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "build", dir)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("kustomize build %s: %v\n%s", dir, err, stderr.String())
	}
	return stdout.Bytes()
}

// builtObjects decodes a kustomize build into its objects by kind (one
// each).
func builtObjects(t *testing.T, out []byte) map[string]map[string]any {
	t.Helper()
	docs, err := decodeAll(out)
	if err != nil {
		t.Fatalf("kustomize output: %v", err)
	}
	objs := map[string]map[string]any{}
	for _, d := range docs {
		kind := str(d, "kind")
		if objs[kind] != nil {
			t.Fatalf("kustomize rendered a second %s", kind)
		}
		objs[kind] = d
	}
	return objs
}

// checkBuiltConfig requires the built Deployment to mount the generated
// ConfigMap (its hashed name) holding want as llmprobe.yml, and its
// credentials Secret to be optional.
func checkBuiltConfig(t *testing.T, objs map[string]map[string]any, want []byte) {
	t.Helper()
	cm := objs["ConfigMap"]
	name := str(cm, "metadata", "name")
	if !regexp.MustCompile(`^llmprobe-config-[a-z0-9]{10}$`).MatchString(name) {
		t.Errorf("generated ConfigMap %q: want llmprobe-config-<hash>", name)
	}
	data, _ := cm["data"].(map[string]any)
	if got := data["llmprobe.yml"]; got != string(want) {
		t.Errorf("ConfigMap %s llmprobe.yml is not the configuration file:\n%v", name, got)
	}
	var cfgVol, secVol any
	for _, v := range at(objs["Deployment"], "spec.template.spec.volumes").([]any) {
		switch {
		case at(v, "configMap") != nil:
			cfgVol = v
		case at(v, "secret") != nil:
			secVol = v
		}
	}
	if got := at(cfgVol, "configMap.name"); got != name {
		t.Errorf("the Deployment mounts ConfigMap %v, not the generated %s", got, name)
	}
	if at(secVol, "secret.secretName") != "llmprobe-credentials" || at(secVol, "secret.optional") != true {
		t.Errorf("credentials volume %v: want Secret llmprobe-credentials, optional (the pods start without it)", secVol)
	}
	if objs["Secret"] != nil {
		t.Error("the build renders a Secret: applying it would overwrite the real key")
	}
}

// TestKustomizeBuild builds the base: every object passes kubeconform
// (strict, offline), none has a namespace, the Deployment runs the base
// image, mounts the generated ConfigMap and optionally the Secret, and
// passes the checks of the base's files.
func TestKustomizeBuild(t *testing.T) {
	dir := filepath.Join(promtest.Root(t), "deploy", "kubernetes")
	out := kustomizeBuild(t, dir)
	requireValid(t, writeSchemas(t), "kustomize-base", out)
	objs := builtObjects(t, out)
	for _, kind := range []string{"Deployment", "Service", "ServiceMonitor", "PrometheusRule", "PodDisruptionBudget", "ConfigMap"} {
		if objs[kind] == nil {
			t.Errorf("kustomize build renders no %s", kind)
		}
	}
	for kind, o := range objs {
		if ns := str(o, "metadata", "namespace"); ns != "" {
			t.Errorf("%s has namespace %q; the base leaves it to overlays", kind, ns)
		}
	}
	cfg, err := os.ReadFile(filepath.Join(dir, "llmprobe.yml"))
	if err != nil {
		t.Fatal(err)
	}
	checkBuiltConfig(t, objs, cfg)
	if got, want := at(objs["Deployment"], "spec.template.spec.containers.0.image"), chartDefaultImage(t); got != want {
		t.Errorf("image %v, want %s", got, want)
	}

	var dep deployment
	decodeInto(t, objs["Deployment"], &dep)
	var sec secret
	decodeInto(t, readDocs(t, filepath.Join(dir, "secret.example.yaml"))[0], &sec)
	cmName := str(objs["ConfigMap"], "metadata", "name")
	checkDeployment(t, "kustomize build", &dep, configMapReader(objs["ConfigMap"]),
		map[string][]string{cmName: {"llmprobe.yml"}}, map[string][]string{sec.Metadata.Name: mapKeys(sec.StringData)})
}

// configMapReader reads the keys of a rendered ConfigMap.
func configMapReader(cm map[string]any) func(string) ([]byte, error) {
	return func(key string) ([]byte, error) {
		data, _ := cm["data"].(map[string]any)
		s, ok := data[key].(string)
		if !ok {
			return nil, fmt.Errorf("ConfigMap has no key %q", key)
		}
		return []byte(s), nil
	}
}

// docsOverlay returns the overlay kustomization.yaml docs/deploy.md shows
// (the yaml block that starts with "# overlays/prod/kustomization.yaml"),
// so the documentation and this test cannot drift apart.
func docsOverlay(t *testing.T) []byte {
	t.Helper()
	f, err := os.Open(filepath.Join(promtest.Root(t), "docs", "deploy.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var block bytes.Buffer
	in, found := false, false
	sc := bufio.NewScanner(f)
	for prev := ""; sc.Scan(); prev = sc.Text() {
		line := sc.Text()
		switch {
		case !in && prev == "```yaml" && strings.TrimSpace(line) == "# overlays/prod/kustomization.yaml":
			in, found = true, true
			block.WriteString(line + "\n")
		case in && line == "```":
			in = false
		case in:
			block.WriteString(line + "\n")
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if !found || in {
		t.Fatal("docs/deploy.md: no closed ```yaml block starting with # overlays/prod/kustomization.yaml")
	}
	return block.Bytes()
}

// TestKustomizeDocsOverlay writes the overlay docs/deploy.md documents
// next to a copy of the base, as its resources path expects, with a
// configuration of its own, builds it and requires what the docs promise:
// the namespace on every object, the overlay's image, its configuration
// in the generated ConfigMap the Deployment mounts, and the Prometheus
// selection label on the ServiceMonitor and PrometheusRule; every object
// passes kubeconform.
func TestKustomizeDocsOverlay(t *testing.T) {
	overlay := docsOverlay(t)
	var k struct {
		Namespace string           `yaml:"namespace"`
		Resources []string         `yaml:"resources"`
		Images    []kustomizeImage `yaml:"images"`
		Patches   []struct {
			Target struct {
				Kind string `yaml:"kind"`
			} `yaml:"target"`
			Patch string `yaml:"patch"`
		} `yaml:"patches"`
	}
	if err := yaml.Unmarshal(overlay, &k); err != nil {
		t.Fatalf("docs/deploy.md overlay: %v\n%s", err, overlay)
	}
	if k.Namespace == "" || len(k.Images) != 1 || k.Images[0].NewName == "" || k.Images[0].NewTag == "" || len(k.Resources) != 1 {
		t.Fatalf("docs/deploy.md overlay: want a namespace, one base and one image with newName and newTag: %+v", k)
	}

	// Lay out the tree the overlay's relative base path expects.
	root := t.TempDir()
	overlayDir := filepath.Join(root, "overlays", "prod")
	baseDir := filepath.Join(overlayDir, filepath.FromSlash(k.Resources[0]))
	if rel, err := filepath.Rel(root, baseDir); err != nil || rel != filepath.Join("deploy", "kubernetes") {
		t.Fatalf("overlay base %s: want ../../deploy/kubernetes from overlays/prod (%v)", k.Resources[0], err)
	}
	src := filepath.Join(promtest.Root(t), "deploy", "kubernetes")
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(overlayDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(baseDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(baseDir, e.Name()), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// "your configuration": the base's with another target name and the
	// key from the Secret (secret.example.yaml).
	base, err := os.ReadFile(filepath.Join(src, "llmprobe.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var tree map[string]any
	if err := yaml.Unmarshal(base, &tree); err != nil {
		t.Fatal(err)
	}
	setPath(t, tree, "targets.0.name", "overlay-target")
	setPath(t, tree, "targets.0.http_client_config", map[string]any{
		"authorization": map[string]any{"credentials_file": secretMountPath + "/api-key"},
	})
	mine, err := yaml.Marshal(tree)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(overlayDir, "llmprobe.yml"), mine, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(overlayDir, "kustomization.yaml"), overlay, 0o644); err != nil {
		t.Fatal(err)
	}

	out := kustomizeBuild(t, overlayDir)
	requireValid(t, writeSchemas(t), "kustomize-overlay", out)
	objs := builtObjects(t, out)
	for kind, o := range objs {
		if ns := str(o, "metadata", "namespace"); ns != k.Namespace {
			t.Errorf("%s: namespace %q, want the overlay's %q", kind, ns, k.Namespace)
		}
	}
	img := k.Images[0]
	if got, want := at(objs["Deployment"], "spec.template.spec.containers.0.image"), img.NewName+":"+img.NewTag; got != want {
		t.Errorf("the overlay's image is not used: the Deployment runs %v, want %s (images: name must be the base's image name)", got, want)
	}
	if base, _, _ := strings.Cut(chartDefaultImage(t), ":"); img.Name != base {
		t.Errorf("overlay images: name %q, want the base's image name %q", img.Name, base)
	}
	checkBuiltConfig(t, objs, mine)
	var dep deployment
	decodeInto(t, objs["Deployment"], &dep)
	var sec secret
	decodeInto(t, readDocs(t, filepath.Join(src, "secret.example.yaml"))[0], &sec)
	cmName := str(objs["ConfigMap"], "metadata", "name")
	checkDeployment(t, "docs overlay", &dep, configMapReader(objs["ConfigMap"]),
		map[string][]string{cmName: {"llmprobe.yml"}}, map[string][]string{sec.Metadata.Name: mapKeys(sec.StringData)})
	t.Run("run", func(t *testing.T) {
		runDeployed(t, dep.Spec.Template.Spec.Containers[0].Args, map[string]map[string]string{
			configMountPath: {"llmprobe.yml": string(mine)},
			secretMountPath: sec.StringData,
		})
	})

	// The patches add a label; the objects they target carry it.
	if len(k.Patches) == 0 {
		t.Error("the documented overlay has no patches")
	}
	for _, p := range k.Patches {
		var ops []struct {
			Op, Path string
			Value    any
		}
		if err := yaml.Unmarshal([]byte(p.Patch), &ops); err != nil || len(ops) == 0 {
			t.Fatalf("patch for %s: %v", p.Target.Kind, err)
		}
		for _, op := range ops {
			label, ok := strings.CutPrefix(op.Path, "/metadata/labels/")
			if !ok || op.Op != "add" {
				continue
			}
			o := objs[p.Target.Kind]
			if o == nil {
				t.Errorf("patch target %s: no such object", p.Target.Kind)
				continue
			}
			if got := at(o, "metadata.labels."+path.Base(label)); got != op.Value {
				t.Errorf("%s label %s = %v, want %v", p.Target.Kind, label, got, op.Value)
			}
		}
	}
}
