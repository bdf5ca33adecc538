// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package deploy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/llmprobe/llmprobe/config"
	"github.com/llmprobe/llmprobe/internal/promtest"
)

// vendorChart copies the chart directory into a temporary directory
// outside the repository, as `helm pull` or a vendoring tool leaves it,
// and returns the copy's path: it must lint and render on its own.
func vendorChart(t *testing.T) string {
	t.Helper()
	src := chartDir(t)
	dst := filepath.Join(t.TempDir(), "llmprobe")
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if !d.Type().IsRegular() {
			t.Errorf("chart file %s is not a regular file (%v): a vendored copy would lose it", rel, d.Type())
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// chartDefaultImage is the image the chart runs by default:
// image.repository and the appVersion.
func chartDefaultImage(t *testing.T) string {
	t.Helper()
	dir := chartDir(t)
	chart := readDocs(t, filepath.Join(dir, "Chart.yaml"))[0]
	values := readDocs(t, filepath.Join(dir, "values.yaml"))[0]
	return str(values, "image", "repository") + ":" + str(chart, "appVersion")
}

// tryHelm runs helm and returns its standard output and, when it fails,
// an error carrying both outputs.
func tryHelm(t *testing.T, bin string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), &helmError{err: err, out: stdout.String() + stderr.String()}
	}
	return stdout.String(), nil
}

type helmError struct {
	err error
	out string
}

func (e *helmError) Error() string { return e.err.Error() + "\n" + e.out }

// renderChart renders the chart with args as release "probe" in namespace
// monitoring and returns the objects by kind (one each) and the manifest.
func renderChart(t *testing.T, bin string, args ...string) (map[string]map[string]any, []byte) {
	t.Helper()
	out := runHelm(t, bin, append([]string{"template", "probe", chartDir(t), "--namespace", "monitoring"}, args...)...)
	docs, err := decodeAll([]byte(out))
	if err != nil {
		t.Fatalf("rendered chart: %v", err)
	}
	objs := map[string]map[string]any{}
	for _, d := range docs {
		kind := str(d, "kind")
		if objs[kind] != nil {
			t.Fatalf("rendered a second %s", kind)
		}
		objs[kind] = d
	}
	return objs, []byte(out)
}

// at returns the value at a dotted path of a decoded YAML tree (numbers
// index lists), or nil.
func at(v any, path string) any {
	for _, k := range strings.Split(path, ".") {
		switch c := v.(type) {
		case map[string]any:
			v = c[k]
		case []any:
			n, err := strconv.Atoi(k)
			if err != nil || n < 0 || n >= len(c) {
				return nil
			}
			v = c[n]
		default:
			return nil
		}
	}
	return v
}

// sameJSON reports whether a and b have the same JSON form.
func sameJSON(a, b any) bool {
	aj, err1 := json.Marshal(a)
	bj, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(aj, bj)
}

// TestHelmChartKnobs renders deploy/testdata/helm-values-full.yml and
// requires each value to render as documented in values.yaml.
func TestHelmChartKnobs(t *testing.T) {
	bin := helmBinary(t)
	full := filepath.Join(promtest.Root(t), "deploy", "testdata", "helm-values-full.yml")
	v := readDocs(t, full)[0]
	objs, _ := renderChart(t, bin, "-f", full)

	dep := objs["Deployment"]
	pod := at(dep, "spec.template")
	c := at(pod, "spec.containers.0")
	selector := at(dep, "spec.selector.matchLabels")
	// want requires the rendered value at path of obj to equal want.
	want := func(what string, obj any, path string, want any) {
		t.Helper()
		if want == nil {
			t.Errorf("%s: the test wants nothing at %s (a value missing from helm-values-full.yml?)", what, path)
		}
		if got := at(obj, path); !sameJSON(got, want) {
			g, _ := json.Marshal(got)
			w, _ := json.Marshal(want)
			t.Errorf("%s: %s is %s, want %s", what, path, g, w)
		}
	}

	// Names, commonLabels on every object and on the pods.
	for kind, o := range objs {
		name := str(o, "metadata", "name")
		switch kind {
		case "ServiceAccount":
			want("serviceAccount.name", o, "metadata.name", "llmprobe-sa")
		case "Secret":
			want("credentials.create", o, "metadata.name", "llmprobe-full-credentials")
		case "Role", "RoleBinding":
			want("discovery.rbac.create", o, "metadata.name", "llmprobe-full-discovery")
			want("discovery.rbac.namespaces", o, "metadata.namespace", "llm-serving")
		default:
			if name != "llmprobe-full" {
				t.Errorf("fullnameOverride: %s is named %q, want llmprobe-full", kind, name)
			}
		}
		for k, val := range v["commonLabels"].(map[string]any) {
			want("commonLabels on "+kind, o, "metadata.labels."+k, val)
		}
	}
	for k, val := range v["commonLabels"].(map[string]any) {
		want("commonLabels on the pods", pod, "metadata.labels."+k, val)
	}
	want("podLabels", pod, "metadata.labels.tier", "probe")
	if a, _ := at(pod, "metadata.annotations").(map[string]any); a["example.com/scrape"] != "false" || a["checksum/config"] == nil || a["checksum/credentials"] == nil {
		t.Errorf("pod annotations %v: want podAnnotations and the config and credentials checksums", a)
	}

	// Image: the digest replaces the tag.
	want("image.digest", c, "image", str(v, "image", "repository")+"@"+str(v, "image", "digest"))
	want("image.pullPolicy", c, "imagePullPolicy", "Always")
	want("imagePullSecrets", pod, "spec.imagePullSecrets", v["imagePullSecrets"])

	// ServiceAccount.
	sa := objs["ServiceAccount"]
	want("serviceAccount.annotations", sa, "metadata.annotations", at(v, "serviceAccount.annotations"))
	want("serviceAccount.automountServiceAccountToken", sa, "automountServiceAccountToken", false)
	want("serviceAccount.name", pod, "spec.serviceAccountName", "llmprobe-sa")
	// The pods mount the token Kubernetes discovery needs (discovery.rbac.create).
	want("discovery.rbac.create", pod, "spec.automountServiceAccountToken", true)
	want("discovery.rbac.create", objs["RoleBinding"], "subjects", []any{map[string]any{"kind": "ServiceAccount", "name": "llmprobe-sa", "namespace": "monitoring"}})

	// Probes: scheme, headers and timings.
	for _, p := range []struct{ value, field, path string }{
		{"livenessProbe", "livenessProbe", "/-/healthy"},
		{"readinessProbe", "readinessProbe", "/-/ready"},
	} {
		pv := v[p.value].(map[string]any)
		want(p.value, c, p.field+".httpGet.path", p.path)
		want(p.value, c, p.field+".httpGet.port", "http-metrics")
		want(p.value+".scheme", c, p.field+".httpGet.scheme", pv["scheme"])
		want(p.value+".httpHeaders", c, p.field+".httpGet.httpHeaders", pv["httpHeaders"])
		for k, val := range pv {
			if k != "scheme" && k != "httpHeaders" {
				want(p.value+"."+k, c, p.field+"."+k, val)
			}
		}
	}

	// Scheduling and the pod spec.
	want("priorityClassName", pod, "spec.priorityClassName", v["priorityClassName"])
	want("nodeSelector", pod, "spec.nodeSelector", v["nodeSelector"])
	want("tolerations", pod, "spec.tolerations", v["tolerations"])
	want("affinity", pod, "spec.affinity", v["affinity"])
	want("terminationGracePeriodSeconds", pod, "spec.terminationGracePeriodSeconds", 35)
	want("resources", c, "resources", v["resources"])
	want("podSecurityContext", pod, "spec.securityContext", v["podSecurityContext"])
	want("securityContext", c, "securityContext", v["securityContext"])
	tsc := v["topologySpreadConstraints"].([]any)
	first := deepCopy(t, tsc[0].(map[string]any))
	first["labelSelector"] = map[string]any{"matchLabels": selector}
	want("topologySpreadConstraints (no labelSelector: the pods')", pod, "spec.topologySpreadConstraints.0", first)
	want("topologySpreadConstraints (own labelSelector)", pod, "spec.topologySpreadConstraints.1", tsc[1])
	vols, _ := at(pod, "spec.volumes").([]any)
	if !slices.ContainsFunc(vols, func(x any) bool { return sameJSON(x, at(v, "extraVolumes.0")) }) {
		t.Errorf("extraVolumes: %v not in the volumes %v", at(v, "extraVolumes.0"), vols)
	}
	mounts, _ := at(c, "volumeMounts").([]any)
	if !slices.ContainsFunc(mounts, func(x any) bool { return sameJSON(x, at(v, "extraVolumeMounts.0")) }) {
		t.Errorf("extraVolumeMounts: %v not in the volume mounts %v", at(v, "extraVolumeMounts.0"), mounts)
	}

	// Arguments and environment.
	var args []string
	for _, a := range at(c, "args").([]any) {
		args = append(args, a.(string))
	}
	for _, w := range []string{"--log.level=debug", "--log.format=logfmt", "--no-demo", "--probe.replicas=3"} {
		if !slices.Contains(args, w) {
			t.Errorf("args %q lack %s", args, w)
		}
	}
	want("env", c, "env", v["env"])

	// Service.
	svc := objs["Service"]
	want("service.annotations", svc, "metadata.annotations", at(v, "service.annotations"))
	want("service.port", svc, "spec.ports.0.port", at(v, "service.port"))
	want("service.type", svc, "spec.type", at(v, "service.type"))

	// ServiceMonitor: in another namespace, selecting the release's.
	sm := objs["ServiceMonitor"]
	want("serviceMonitor.namespace", sm, "metadata.namespace", "prometheus")
	want("serviceMonitor.namespace", sm, "spec.namespaceSelector.matchNames", []any{"monitoring"})
	want("serviceMonitor.labels", sm, "metadata.labels.release", "kube-prometheus-stack")
	for _, k := range []string{"scheme", "interval", "scrapeTimeout", "tlsConfig", "basicAuth", "relabelings", "metricRelabelings"} {
		want("serviceMonitor."+k, sm, "spec.endpoints.0."+k, at(v, "serviceMonitor."+k))
	}
	want("serviceMonitor.nativeHistograms", sm, "spec.scrapeNativeHistograms", true)

	// PrometheusRule.
	pr := objs["PrometheusRule"]
	want("prometheusRule.namespace", pr, "metadata.namespace", "prometheus")
	want("prometheusRule.labels", pr, "metadata.labels.release", "kube-prometheus-stack")

	// NetworkPolicy: the pods, ingress to the metrics port from the
	// selected peers, egress DNS and the rules.
	np := objs["NetworkPolicy"]
	want("networkPolicy", np, "spec.podSelector.matchLabels", selector)
	want("networkPolicy.egress.enabled", np, "spec.policyTypes", []any{"Ingress", "Egress"})
	want("networkPolicy", np, "spec.ingress.0.ports", []any{map[string]any{"port": "http-metrics", "protocol": "TCP"}})
	want("networkPolicy.ingress selectors", np, "spec.ingress.0.from.0", map[string]any{
		"namespaceSelector": at(v, "networkPolicy.ingress.namespaceSelector"),
		"podSelector":       at(v, "networkPolicy.ingress.podSelector"),
	})
	want("networkPolicy.ingress.extraFrom", np, "spec.ingress.0.from.1", at(v, "networkPolicy.ingress.extraFrom.0"))
	want("networkPolicy.egress.allowDNS", np, "spec.egress.0.ports", []any{
		map[string]any{"port": 53, "protocol": "UDP"}, map[string]any{"port": 53, "protocol": "TCP"},
	})
	want("networkPolicy.egress.rules", np, "spec.egress.1", at(v, "networkPolicy.egress.rules.0"))

	// PodDisruptionBudget and the chart-made Secret (its keys only: the
	// values are secrets).
	want("podDisruptionBudget.maxUnavailable", objs["PodDisruptionBudget"], "spec.maxUnavailable", 2)
	want("podDisruptionBudget", objs["PodDisruptionBudget"], "spec.selector.matchLabels", selector)
	if got, wantKeys := mapKeys(at(objs["Secret"], "stringData").(map[string]any)), mapKeys(at(v, "credentials.stringData").(map[string]any)); !slices.Equal(got, wantKeys) {
		t.Errorf("credentials.stringData: Secret keys %v, want %v", got, wantKeys)
	}
}

// TestHelmChartDefaults checks what the defaults render beyond
// TestHelmChart's checks: the image, a ServiceAccount without a token,
// plain HTTP probes, no NetworkPolicy or ServiceMonitor, no Secret mount.
func TestHelmChartDefaults(t *testing.T) {
	bin := helmBinary(t)
	objs, _ := renderChart(t, bin)
	pod := at(objs["Deployment"], "spec.template")
	c := at(pod, "spec.containers.0")
	if got, want := at(c, "image"), chartDefaultImage(t); got != want {
		t.Errorf("image %v, want %s", got, want)
	}
	for _, kind := range []string{"NetworkPolicy", "ServiceMonitor", "PrometheusRule", "Secret"} {
		if objs[kind] != nil {
			t.Errorf("defaults render a %s", kind)
		}
	}
	if sa := objs["ServiceAccount"]; sa == nil || str(sa, "metadata", "name") != "probe-llmprobe" || at(sa, "automountServiceAccountToken") != false {
		t.Errorf("ServiceAccount %v: want probe-llmprobe without a token", sa)
	}
	if at(pod, "spec.serviceAccountName") != "probe-llmprobe" || at(pod, "spec.automountServiceAccountToken") != false {
		t.Errorf("pod serviceAccountName %v automount %v", at(pod, "spec.serviceAccountName"), at(pod, "spec.automountServiceAccountToken"))
	}
	for _, p := range []string{"livenessProbe", "readinessProbe"} {
		if at(c, p+".httpGet.scheme") != "HTTP" || at(c, p+".httpGet.httpHeaders") != nil {
			t.Errorf("%s %v: want plain HTTP", p, at(c, p))
		}
	}
	for _, vol := range at(pod, "spec.volumes").([]any) {
		if at(vol, "secret") != nil {
			t.Errorf("defaults mount a Secret: %v", vol)
		}
	}
	if at(pod, "spec.priorityClassName") != nil || at(pod, "spec.topologySpreadConstraints") != nil {
		t.Error("defaults set priorityClassName or topologySpreadConstraints")
	}
}

// TestHelmChartExisting renders the chart with a ConfigMap and a Secret
// the user manages: no ConfigMap is rendered and no checksum of it, the
// pods mount the named ones, the Secret optionally (so the pods start
// without it) unless credentials.optional=false; serviceAccount.create=false
// renders no ServiceAccount and runs the pods as the named one.
func TestHelmChartExisting(t *testing.T) {
	bin := helmBinary(t)
	schemas := writeSchemas(t)
	base := []string{"--set", "config.existingConfigMap=site-llmprobe", "--set", "credentials.existingSecret=site-credentials"}
	objs, out := renderChart(t, bin, append(base, "--set", "serviceAccount.create=false", "--set", "serviceAccount.name=probe-runner")...)
	requireValid(t, schemas, "helm-existing", out)
	if objs["ConfigMap"] != nil || objs["Secret"] != nil || objs["ServiceAccount"] != nil {
		t.Errorf("rendered a ConfigMap, Secret or ServiceAccount the user manages: %v", mapKeys(objs))
	}
	pod := at(objs["Deployment"], "spec.template")
	if a, _ := at(pod, "metadata.annotations").(map[string]any); a["checksum/config"] != nil || a["checksum/credentials"] != nil {
		t.Errorf("pod annotations %v: no checksum of objects the chart does not render", a)
	}
	if got := at(pod, "spec.serviceAccountName"); got != "probe-runner" {
		t.Errorf("serviceAccountName %v, want probe-runner", got)
	}
	vols := map[string]any{}
	for _, vol := range at(pod, "spec.volumes").([]any) {
		vols[str(vol.(map[string]any), "name")] = vol
	}
	if got := at(vols["config"], "configMap.name"); got != "site-llmprobe" {
		t.Errorf("config volume ConfigMap %v, want site-llmprobe", got)
	}
	if at(vols["credentials"], "secret.secretName") != "site-credentials" || at(vols["credentials"], "secret.optional") != true {
		t.Errorf("credentials volume %v: want Secret site-credentials, optional", vols["credentials"])
	}

	// The chart's configuration (the default names no key) with an
	// optional Secret that does not exist: the pod starts with an empty
	// mount.
	t.Run("run without the Secret", func(t *testing.T) {
		objs, _ := renderChart(t, bin, "--set", "credentials.existingSecret=site-credentials")
		dep := objs["Deployment"]
		if at(dep, "spec.template.spec.volumes.1.secret.optional") != true {
			t.Fatalf("credentials volume %v is not optional", at(dep, "spec.template.spec.volumes.1"))
		}
		var args []string
		for _, a := range at(dep, "spec.template.spec.containers.0.args").([]any) {
			args = append(args, a.(string))
		}
		data, _ := objs["ConfigMap"]["data"].(map[string]any)
		cfg, _ := data["llmprobe.yml"].(string)
		runDeployed(t, args, map[string]map[string]string{
			configMountPath: {"llmprobe.yml": cfg},
			secretMountPath: {},
		})
	})

	objs, _ = renderChart(t, bin, append(base, "--set", "credentials.optional=false")...)
	for _, vol := range at(objs["Deployment"], "spec.template.spec.volumes").([]any) {
		if at(vol, "secret") != nil && at(vol, "secret.optional") == true {
			t.Errorf("credentials.optional=false: volume %v is optional", vol)
		}
	}
	if sa := objs["ServiceAccount"]; sa == nil || at(objs["Deployment"], "spec.template.spec.serviceAccountName") != "probe-llmprobe" {
		t.Errorf("serviceAccount.create (default): want ServiceAccount probe-llmprobe used by the pods")
	}
}

// TestHelmValuesSchema requires values.schema.json to reject a misspelled
// key (top-level and nested), a wrong type and a value outside an enum in
// `helm lint` and `helm template`, to accept what a parent chart adds
// (global), and to describe config as llmprobe's configuration sections.
func TestHelmValuesSchema(t *testing.T) {
	bin := helmBinary(t)
	dir := chartDir(t)
	bad := []struct {
		name, set, want string
	}{
		{"top-level typo", "replicaCountt=2", "replicaCountt"},
		{"nested typo", "serviceMonitor.enabeld=true", "enabeld"},
		{"wrong type", "replicaCount=two", "replicaCount"},
		{"wrong type (object)", "commonLabels=team", "commonLabels"},
		{"enum", "log.level=verbose", "level"},
		{"digest", "image.digest=latest", "digest"},
		{"config section typo", "config.targetz=x", "targetz"},
		{"discovery rbac typo", "discovery.rbac.enabled=true", "enabled"},
		{"discovery namespace not a name", "discovery.rbac.namespaces[0]=Prod_1", "namespaces"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			for _, cmd := range [][]string{
				{"lint", "--strict", dir, "--set", tc.set},
				{"template", "probe", dir, "--set", tc.set},
			} {
				_, err := tryHelm(t, bin, cmd...)
				if err == nil {
					t.Errorf("helm %s --set %s succeeded; values.schema.json should reject it", cmd[0], tc.set)
				} else if msg := err.Error(); !strings.Contains(msg, tc.want) || !strings.Contains(msg, "schema") {
					t.Errorf("helm %s --set %s failed, but not naming %q in a schema error:\n%s", cmd[0], tc.set, tc.want, msg)
				}
			}
		})
	}
	if _, err := tryHelm(t, bin, "template", "probe", dir, "--set", "global.imageRegistry=example.com"); err != nil {
		t.Errorf("a parent chart's global values must pass the schema: %v", err)
	}

	var schema struct {
		Properties map[string]struct {
			Properties map[string]any `json:"properties"`
		} `json:"properties"`
	}
	data, err := os.ReadFile(filepath.Join(dir, "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &schema); err != nil {
		t.Fatalf("values.schema.json: %v", err)
	}
	// The config sections are config.Config's, plus existingConfigMap.
	want := []string{"existingConfigMap"}
	ct := reflect.TypeFor[config.Config]()
	for i := range ct.NumField() {
		if name, _, _ := strings.Cut(ct.Field(i).Tag.Get("yaml"), ","); name != "" && name != "-" {
			want = append(want, name)
		}
	}
	slices.Sort(want)
	if got := mapKeys(schema.Properties["config"].Properties); !slices.Equal(got, want) {
		t.Errorf("values.schema.json config properties %v, want %v (config.Config's sections)", got, want)
	}
	// Every key of values.yaml is in the schema, and the other way round.
	values := readDocs(t, filepath.Join(dir, "values.yaml"))[0]
	if got, want := mapKeys(schema.Properties), append(mapKeys(values), "global"); !slices.Equal(got, slices.Sorted(slices.Values(want))) {
		t.Errorf("values.schema.json properties %v, values.yaml keys %v + global", got, want)
	}
}

// TestHelmFullValuesCoverEveryKnob requires deploy/testdata/helm-values-full.yml
// to set every key of values.yaml (outside the config tree), so that
// TestHelmChart and TestHelmChartKnobs exercise every knob;
// TestHelmChartExisting covers the keys that replace others.
func TestHelmFullValuesCoverEveryKnob(t *testing.T) {
	values := readDocs(t, filepath.Join(chartDir(t), "values.yaml"))[0]
	full := readDocs(t, filepath.Join(promtest.Root(t), "deploy", "testdata", "helm-values-full.yml"))[0]
	coveredElsewhere := map[string]bool{
		"config.existingConfigMap":   true,
		"credentials.existingSecret": true,
		"credentials.optional":       true,
	}
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			p := prefix + k
			if p == "config" || coveredElsewhere[p] {
				continue
			}
			parent, _ := at(full, strings.TrimSuffix(prefix, ".")).(map[string]any)
			if prefix == "" {
				parent = full
			}
			if _, set := parent[k]; !set {
				t.Errorf("helm-values-full.yml does not set %s", p)
				continue
			}
			if sub, ok := v.(map[string]any); ok && len(sub) > 0 {
				walk(p+".", sub)
			}
		}
	}
	walk("", values)
	for _, p := range []string{"config.existingConfigMap", "credentials.existingSecret", "credentials.optional"} {
		if at(values, p) == nil {
			t.Errorf("values.yaml lacks %s, which TestHelmChartExisting covers", p)
		}
	}
}

// renderNotes renders the chart's install notes (NOTES.txt, which `helm
// template` leaves out) with args: a copy of the chart gets a template
// that renders the notes' named template as a YAML string.
func renderNotes(t *testing.T, bin string, args ...string) string {
	t.Helper()
	chart := vendorChart(t)
	if err := os.WriteFile(filepath.Join(chart, "templates", "zz-notes-test.yaml"),
		[]byte(`notes: {{ include "llmprobe.notes" . | toJson }}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	notesTxt, err := os.ReadFile(filepath.Join(chart, "templates", "NOTES.txt"))
	if err != nil || strings.TrimSpace(string(notesTxt)) != `{{ include "llmprobe.notes" . }}` {
		t.Fatalf("NOTES.txt must be the llmprobe.notes template (so that this test renders what helm install prints): %q %v", notesTxt, err)
	}
	out := runHelm(t, bin, append([]string{"template", "probe", chart, "--namespace", "monitoring", "--show-only", "templates/zz-notes-test.yaml"}, args...)...)
	docs, err := decodeAll([]byte(out))
	if err != nil || len(docs) != 1 {
		t.Fatalf("rendered notes: %v\n%s", err, out)
	}
	return str(docs[0], "notes")
}

// TestHelmNotes requires the install notes to say plainly which image is
// published and when the image must be built and pushed, naming the image
// the release runs, and how to
// reach the status page and /metrics (over HTTPS when the probes are).
func TestHelmNotes(t *testing.T) {
	bin := helmBinary(t)
	full := filepath.Join(promtest.Root(t), "deploy", "testdata", "helm-values-full.yml")
	v := readDocs(t, full)[0]
	cases := []struct {
		name string
		args []string
		want []string
	}{
		{"defaults", nil, []string{
			"The release of each version tag vX.Y.Z publishes ghcr.io/llmprobe/llmprobe:X.Y.Z", "deploy/docker/Dockerfile", "docker push",
			"  " + chartDefaultImage(t) + "\n",
			"kubectl -n monitoring port-forward svc/probe-llmprobe 9477:9477",
			"http://localhost:9477/ ", "http://localhost:9477/metrics",
			"1 target(s) from 1 pod(s)", "No ServiceMonitor was created",
		}},
		{"full", []string{"-f", full}, []string{
			"The release of each version tag vX.Y.Z publishes ghcr.io/llmprobe/llmprobe:X.Y.Z",
			"  " + str(v, "image", "repository") + "@" + str(v, "image", "digest") + "\n",
			"port-forward svc/llmprobe-full 9477:9477",
			"https://localhost:9477/ ", "curl -sk https://localhost:9477/metrics",
			"from 3 pod(s)", "PrometheusRule llmprobe-full (namespace prometheus)", "NetworkPolicy llmprobe-full",
		}},
		{"existing", []string{"--set", "config.existingConfigMap=site-llmprobe", "--set", "credentials.existingSecret=site-credentials"}, []string{
			"The release of each version tag vX.Y.Z publishes ghcr.io/llmprobe/llmprobe:X.Y.Z", "ConfigMap site-llmprobe (key llmprobe.yml)",
			"kubectl -n monitoring create secret generic site-credentials",
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			notes := renderNotes(t, bin, tc.args...)
			if strings.HasPrefix(notes, "\n") {
				t.Error("the notes start with a blank line")
			}
			for _, w := range tc.want {
				if !strings.Contains(notes, w) {
					t.Errorf("notes lack %q:\n%s", w, notes)
				}
			}
		})
	}
}

// TestHelmNetworkPolicyVariants renders the NetworkPolicy's other shapes:
// no selector (the metrics port from anywhere), one selector, and egress
// with nothing allowed (an empty list, not null); all pass kubeconform.
func TestHelmNetworkPolicyVariants(t *testing.T) {
	bin := helmBinary(t)
	schemas := writeSchemas(t)
	on := []string{"--set", "networkPolicy.enabled=true"}
	cases := []struct {
		name  string
		args  []string
		check func(t *testing.T, np map[string]any)
	}{
		{"no selector", nil, func(t *testing.T, np map[string]any) {
			if at(np, "spec.ingress.0.from") != nil || !sameJSON(at(np, "spec.policyTypes"), []any{"Ingress"}) {
				t.Errorf("want ingress to the metrics port from anywhere, no egress policy: %v", at(np, "spec"))
			}
		}},
		{"pod selector only", []string{"--set", "networkPolicy.ingress.podSelector.matchLabels.app=prometheus"}, func(t *testing.T, np map[string]any) {
			want := []any{map[string]any{"podSelector": map[string]any{"matchLabels": map[string]any{"app": "prometheus"}}}}
			if !sameJSON(at(np, "spec.ingress.0.from"), want) {
				t.Errorf("from %v, want %v", at(np, "spec.ingress.0.from"), want)
			}
		}},
		{"egress denied", []string{"--set", "networkPolicy.egress.enabled=true", "--set", "networkPolicy.egress.allowDNS=false"}, func(t *testing.T, np map[string]any) {
			if e, ok := at(np, "spec.egress").([]any); !ok || len(e) != 0 || !sameJSON(at(np, "spec.policyTypes"), []any{"Ingress", "Egress"}) {
				t.Errorf("want egress [] with policyType Egress: %v", at(np, "spec"))
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			objs, out := renderChart(t, bin, append(on, tc.args...)...)
			requireValid(t, schemas, "helm-networkpolicy", out)
			np := objs["NetworkPolicy"]
			if np == nil {
				t.Fatal("no NetworkPolicy rendered")
			}
			tc.check(t, np)
		})
	}
}
