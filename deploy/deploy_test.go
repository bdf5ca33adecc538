// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package deploy_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	commoncfg "github.com/prometheus/common/config"
	"go.yaml.in/yaml/v3"

	"github.com/llmprobe/llmprobe/config"
	"github.com/llmprobe/llmprobe/internal/promtest"
)

// Paths the manifests agree on.
const (
	configMountPath = "/etc/llmprobe"
	secretMountPath = "/run/secrets/llmprobe"
	// shutdownOverhead is what `llmprobe run` may take on SIGTERM after
	// the engine drained (cmd/llmprobe/run.go): up to 5s to close its HTTP
	// server and 5s to flush spans. A termination grace period must cover
	// the config's shutdown_grace_period plus this.
	shutdownOverhead = 10 * time.Second
)

// decodeAll decodes every YAML document of data into a generic tree.
// Empty documents (a lone "---") are skipped.
func decodeAll(data []byte) ([]map[string]any, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var docs []map[string]any
	for i := 0; ; i++ {
		var doc map[string]any
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		if doc != nil {
			docs = append(docs, doc)
		}
	}
}

func readDocs(t testing.TB, file string) []map[string]any {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	docs, err := decodeAll(data)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return docs
}

// decodeInto decodes one generic document into a typed view of it.
func decodeInto(t testing.TB, doc map[string]any, v any) {
	t.Helper()
	data, err := yaml.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, v); err != nil {
		t.Fatalf("decoding %T: %v", v, err)
	}
}

func str(m map[string]any, keys ...string) string {
	var cur any = m
	for _, k := range keys {
		mm, ok := cur.(map[string]any)
		if !ok {
			return ""
		}
		cur = mm[k]
	}
	s, _ := cur.(string)
	return s
}

// Typed views of the Kubernetes objects the tests look into: only the
// fields they check.

type objectMeta struct {
	Name   string            `yaml:"name"`
	Labels map[string]string `yaml:"labels"`
}

type labelSelector struct {
	MatchLabels map[string]string `yaml:"matchLabels"`
}

type probe struct {
	HTTPGet *struct {
		Path   string `yaml:"path"`
		Port   any    `yaml:"port"`
		Scheme string `yaml:"scheme"`
	} `yaml:"httpGet"`
}

type container struct {
	Name  string   `yaml:"name"`
	Image string   `yaml:"image"`
	Args  []string `yaml:"args"`
	Ports []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	LivenessProbe   *probe `yaml:"livenessProbe"`
	ReadinessProbe  *probe `yaml:"readinessProbe"`
	SecurityContext struct {
		RunAsNonRoot             *bool `yaml:"runAsNonRoot"`
		RunAsUser                *int  `yaml:"runAsUser"`
		ReadOnlyRootFilesystem   *bool `yaml:"readOnlyRootFilesystem"`
		AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
		Capabilities             struct {
			Drop []string `yaml:"drop"`
		} `yaml:"capabilities"`
	} `yaml:"securityContext"`
	Resources struct {
		Limits map[string]any `yaml:"limits"`
	} `yaml:"resources"`
	VolumeMounts []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
		SubPath   string `yaml:"subPath"`
	} `yaml:"volumeMounts"`
}

type deployment struct {
	Metadata objectMeta `yaml:"metadata"`
	Spec     struct {
		Replicas *int          `yaml:"replicas"`
		Selector labelSelector `yaml:"selector"`
		Template struct {
			Metadata objectMeta `yaml:"metadata"`
			Spec     struct {
				TerminationGracePeriodSeconds *int `yaml:"terminationGracePeriodSeconds"`
				SecurityContext               struct {
					RunAsNonRoot *bool `yaml:"runAsNonRoot"`
					RunAsUser    *int  `yaml:"runAsUser"`
				} `yaml:"securityContext"`
				Containers []container `yaml:"containers"`
				Volumes    []struct {
					Name      string `yaml:"name"`
					ConfigMap *struct {
						Name string `yaml:"name"`
					} `yaml:"configMap"`
					Secret *struct {
						SecretName string `yaml:"secretName"`
						Optional   *bool  `yaml:"optional"`
					} `yaml:"secret"`
				} `yaml:"volumes"`
			} `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

type service struct {
	Metadata objectMeta `yaml:"metadata"`
	Spec     struct {
		Selector map[string]string `yaml:"selector"`
		Ports    []struct {
			Name       string `yaml:"name"`
			Port       int    `yaml:"port"`
			TargetPort any    `yaml:"targetPort"`
		} `yaml:"ports"`
	} `yaml:"spec"`
}

type serviceMonitor struct {
	Metadata objectMeta `yaml:"metadata"`
	Spec     struct {
		JobLabel                string        `yaml:"jobLabel"`
		Selector                labelSelector `yaml:"selector"`
		ScrapeProtocols         []string      `yaml:"scrapeProtocols"`
		ScrapeClassicHistograms *bool         `yaml:"scrapeClassicHistograms"`
		Endpoints               []struct {
			Port string `yaml:"port"`
			Path string `yaml:"path"`
		} `yaml:"endpoints"`
	} `yaml:"spec"`
}

type selectorSpec struct {
	Metadata objectMeta `yaml:"metadata"`
	Spec     struct {
		Selector labelSelector `yaml:"selector"`
	} `yaml:"spec"`
}

type secret struct {
	Metadata   objectMeta        `yaml:"metadata"`
	StringData map[string]string `yaml:"stringData"`
	Data       map[string]string `yaml:"data"`
}

// TestYAMLFilesParse parses every YAML file under deploy/ (the Helm
// templates excepted: they are Go templates), every document of it, and
// requires apiVersion, kind and metadata.name of every Kubernetes object.
func TestYAMLFilesParse(t *testing.T) {
	dir := filepath.Join(promtest.Root(t), "deploy")
	templates := filepath.Join(dir, "helm", "llmprobe", "templates")
	// Files under deploy/kubernetes that are not Kubernetes objects.
	notObjects := map[string]bool{"kustomization.yaml": true, "llmprobe.yml": true}
	n := 0
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p == templates {
				return filepath.SkipDir
			}
			return nil
		}
		if ext := filepath.Ext(p); ext != ".yml" && ext != ".yaml" {
			return nil
		}
		n++
		rel, _ := filepath.Rel(dir, p)
		docs := readDocs(t, p)
		if len(docs) == 0 {
			t.Errorf("%s: no YAML document", rel)
		}
		inKube := filepath.Dir(rel) == "kubernetes" && !notObjects[filepath.Base(rel)]
		for i, doc := range docs {
			_, hasKind := doc["kind"]
			if !hasKind && !inKube {
				continue // not a Kubernetes object (configs, Chart.yaml, ...)
			}
			kind := str(doc, "kind")
			if kind == "" {
				t.Errorf("%s: document %d: no kind", rel, i)
			}
			if str(doc, "apiVersion") == "" {
				t.Errorf("%s: document %d (%s): no apiVersion", rel, i, kind)
			}
			if kind != "Kustomization" && str(doc, "metadata", "name") == "" {
				t.Errorf("%s: document %d (%s): no metadata.name", rel, i, kind)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 10 {
		t.Fatalf("found only %d YAML files under %s", n, dir)
	}
}

// kustomization is the part of kustomization.yaml the tests check.
type kustomization struct {
	Namespace          string   `yaml:"namespace"`
	Resources          []string `yaml:"resources"`
	ConfigMapGenerator []struct {
		Name  string   `yaml:"name"`
		Files []string `yaml:"files"`
	} `yaml:"configMapGenerator"`
	Images []kustomizeImage `yaml:"images"`
}

type kustomizeImage struct {
	Name    string `yaml:"name"`
	NewName string `yaml:"newName"`
	NewTag  string `yaml:"newTag"`
}

// kubeObjects returns the objects of the kustomize base's resources by
// kind (one each).
func kubeObjects(t *testing.T, dir string, k *kustomization) map[string]map[string]any {
	t.Helper()
	objs := map[string]map[string]any{}
	for _, r := range k.Resources {
		for _, doc := range readDocs(t, filepath.Join(dir, r)) {
			kind := str(doc, "kind")
			if objs[kind] != nil {
				t.Fatalf("%s: a second %s; the test expects one of each kind", r, kind)
			}
			objs[kind] = doc
		}
	}
	return objs
}

func TestKustomizeBase(t *testing.T) {
	dir := filepath.Join(promtest.Root(t), "deploy", "kubernetes")
	var k kustomization
	decodeInto(t, readDocs(t, filepath.Join(dir, "kustomization.yaml"))[0], &k)

	if k.Namespace != "" {
		t.Errorf("kustomization.yaml sets namespace %q; the base must leave it to overlays", k.Namespace)
	}
	for _, r := range k.Resources {
		if _, err := os.Stat(filepath.Join(dir, r)); err != nil {
			t.Errorf("resource %s: %v", r, err)
		}
	}
	_, err := os.Stat(filepath.Join(dir, "prometheusrule.yaml"))
	if hasRule := err == nil; hasRule != slices.Contains(k.Resources, "prometheusrule.yaml") {
		t.Errorf("prometheusrule.yaml exists: %v, listed in resources: %v; they must agree", hasRule, !hasRule)
	}
	if slices.ContainsFunc(k.Resources, func(r string) bool { return strings.Contains(r, "secret") }) {
		t.Errorf("resources %v list a Secret: applying its placeholder would overwrite the real key", k.Resources)
	}
	for _, want := range []string{"deployment.yaml", "service.yaml", "servicemonitor.yaml"} {
		if !slices.Contains(k.Resources, want) {
			t.Errorf("resources %v: %s missing", k.Resources, want)
		}
	}

	objs := kubeObjects(t, dir, &k)
	var dep deployment
	decodeInto(t, objs["Deployment"], &dep)

	// The ConfigMap comes from the generator; the Deployment names it by
	// the generator's name (kustomize appends the hash to both).
	if len(k.ConfigMapGenerator) != 1 || len(k.ConfigMapGenerator[0].Files) != 1 {
		t.Fatalf("configMapGenerator: want one ConfigMap from one file, got %+v", k.ConfigMapGenerator)
	}
	gen := k.ConfigMapGenerator[0]
	cfgFile := filepath.Join(dir, gen.Files[0])
	configMaps := map[string][]string{gen.Name: {path.Base(gen.Files[0])}}

	sec := secret{}
	decodeInto(t, readDocs(t, filepath.Join(dir, "secret.example.yaml"))[0], &sec)
	secrets := map[string][]string{sec.Metadata.Name: mapKeys(sec.StringData)}

	cfg := checkDeployment(t, "deploy/kubernetes", &dep, func(key string) ([]byte, error) {
		if key != path.Base(gen.Files[0]) {
			return nil, fmt.Errorf("no file %q in the generated ConfigMap", key)
		}
		return os.ReadFile(cfgFile)
	}, configMaps, secrets)
	if cfg != nil && len(cfg.Targets) == 0 {
		t.Error("sample configuration has no target")
	}
	// docs/deploy.md tells overlays to patch args/3 with the replica count.
	if args := dep.Spec.Template.Spec.Containers[0].Args; len(args) < 4 || !strings.HasPrefix(args[3], "--probe.replicas=") {
		t.Errorf("args %q: docs/deploy.md's overlay patch expects --probe.replicas at index 3", args)
	}
	t.Run("run", func(t *testing.T) {
		data, err := os.ReadFile(cfgFile)
		if err != nil {
			t.Fatal(err)
		}
		runDeployed(t, dep.Spec.Template.Spec.Containers[0].Args, map[string]map[string]string{
			configMountPath: {path.Base(gen.Files[0]): string(data)},
			secretMountPath: sec.StringData,
		})
	})

	t.Run("run without the Secret", func(t *testing.T) {
		// The Secret volume is optional and the sample configuration
		// names no key: the pod starts with an empty mount.
		data, err := os.ReadFile(cfgFile)
		if err != nil {
			t.Fatal(err)
		}
		runDeployed(t, dep.Spec.Template.Spec.Containers[0].Args, map[string]map[string]string{
			configMountPath: {path.Base(gen.Files[0]): string(data)},
			secretMountPath: {},
		})
	})
	for _, v := range dep.Spec.Template.Spec.Volumes {
		if v.Secret != nil && (v.Secret.Optional == nil || !*v.Secret.Optional) {
			t.Errorf("Secret volume %s is not optional: the pods would not start before the Secret exists", v.Name)
		}
	}

	// The image is set in deployment.yaml, not renamed by images: (an
	// overlay's images: entry names what the base renders: docs/deploy.md),
	// and it is the chart's default image.
	c := dep.Spec.Template.Spec.Containers[0]
	if len(k.Images) != 0 {
		t.Errorf("kustomization.yaml images %+v: the base must not rename the image, or an overlay's images: entry for %q never matches", k.Images, c.Image)
	}
	if want := chartDefaultImage(t); c.Image != want {
		t.Errorf("container image %q, want the chart's default %q", c.Image, want)
	}

	var svc service
	decodeInto(t, objs["Service"], &svc)
	var sm serviceMonitor
	decodeInto(t, objs["ServiceMonitor"], &sm)
	checkServiceAndMonitor(t, &dep, &svc, &sm)

	if pdb := objs["PodDisruptionBudget"]; pdb != nil {
		var p selectorSpec
		decodeInto(t, pdb, &p)
		if !selects(p.Spec.Selector.MatchLabels, dep.Spec.Template.Metadata.Labels) {
			t.Errorf("PodDisruptionBudget selector %v does not select the pods %v", p.Spec.Selector.MatchLabels, dep.Spec.Template.Metadata.Labels)
		}
	}
	if rule := objs["PrometheusRule"]; rule != nil {
		checkPrometheusRule(t, rule)
	}
}

func mapKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// selects reports whether every selector label is on labels.
func selects(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// flagValue returns the value of --name=value in args.
func flagValue(args []string, name string) (string, bool) {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v, true
		}
	}
	return "", false
}

// checkDeployment checks the llmprobe Deployment and loads the
// configuration it mounts: readConfig returns a key of the mounted
// ConfigMap; configMaps and secrets map the names of the ConfigMaps and
// Secrets that exist to their keys. It returns the loaded configuration,
// or nil after reporting why it could not.
func checkDeployment(t *testing.T, where string, dep *deployment, readConfig func(key string) ([]byte, error), configMaps, secrets map[string][]string) *config.Config {
	t.Helper()
	spec := &dep.Spec.Template.Spec
	if !selects(dep.Spec.Selector.MatchLabels, dep.Spec.Template.Metadata.Labels) {
		t.Errorf("%s: Deployment selector %v does not select its pod labels %v", where, dep.Spec.Selector.MatchLabels, dep.Spec.Template.Metadata.Labels)
	}
	if len(spec.Containers) != 1 {
		t.Fatalf("%s: want one container, got %d", where, len(spec.Containers))
	}
	c := spec.Containers[0]
	if len(c.Args) == 0 || c.Args[0] != "run" {
		t.Errorf("%s: args %q do not start with the run command", where, c.Args)
	}

	// Scale-out: --probe.replicas must equal spec.replicas.
	replicas := 1
	if dep.Spec.Replicas != nil {
		replicas = *dep.Spec.Replicas
	}
	if v, ok := flagValue(c.Args, "probe.replicas"); !ok {
		t.Errorf("%s: args %q lack --probe.replicas (spec.replicas is %d)", where, c.Args, replicas)
	} else if n, err := strconv.Atoi(v); err != nil || n != replicas {
		t.Errorf("%s: --probe.replicas=%s, spec.replicas=%d: each pod would send the wrong share of the rate", where, v, replicas)
	}

	// The HTTP port: --web.listen-address, the container port and the
	// probes agree.
	listen, ok := flagValue(c.Args, "web.listen-address")
	if !ok {
		listen = ":9477" // the flag's default
	}
	_, lport, err := net.SplitHostPort(listen)
	if err != nil {
		t.Fatalf("%s: --web.listen-address=%s: %v", where, listen, err)
	}
	if len(c.Ports) != 1 || strconv.Itoa(c.Ports[0].ContainerPort) != lport {
		t.Errorf("%s: container ports %+v, want one port %s (--web.listen-address)", where, c.Ports, lport)
	}
	checkProbe := func(name string, p *probe, wantPath string) {
		switch {
		case p == nil || p.HTTPGet == nil:
			t.Errorf("%s: no %s httpGet probe", where, name)
		case p.HTTPGet.Path != wantPath:
			t.Errorf("%s: %s probe path %q, want %q", where, name, p.HTTPGet.Path, wantPath)
		case len(c.Ports) == 1 && fmt.Sprint(p.HTTPGet.Port) != c.Ports[0].Name && fmt.Sprint(p.HTTPGet.Port) != lport:
			t.Errorf("%s: %s probe port %v is not the container port (%s, %s)", where, name, p.HTTPGet.Port, c.Ports[0].Name, lport)
		}
	}
	checkProbe("liveness", c.LivenessProbe, "/-/healthy")
	checkProbe("readiness", c.ReadinessProbe, "/-/ready")

	// Hardening.
	nonRoot := spec.SecurityContext.RunAsNonRoot
	if c.SecurityContext.RunAsNonRoot != nil {
		nonRoot = c.SecurityContext.RunAsNonRoot
	}
	if nonRoot == nil || !*nonRoot {
		t.Errorf("%s: runAsNonRoot is not true", where)
	}
	for _, uid := range []*int{spec.SecurityContext.RunAsUser, c.SecurityContext.RunAsUser} {
		if uid != nil && *uid == 0 {
			t.Errorf("%s: runAsUser 0", where)
		}
	}
	if p := c.SecurityContext.ReadOnlyRootFilesystem; p == nil || !*p {
		t.Errorf("%s: readOnlyRootFilesystem is not true", where)
	}
	if p := c.SecurityContext.AllowPrivilegeEscalation; p == nil || *p {
		t.Errorf("%s: allowPrivilegeEscalation is not false", where)
	}
	if !slices.Contains(c.SecurityContext.Capabilities.Drop, "ALL") {
		t.Errorf("%s: capabilities.drop %v lacks ALL", where, c.SecurityContext.Capabilities.Drop)
	}
	if _, ok := c.Resources.Limits["cpu"]; ok {
		t.Errorf("%s: a CPU limit throttles the arrival loop (reported as schedule lag); remove it", where)
	}

	// Volumes: the config file is in a mounted ConfigMap, and every
	// credentials file is in a mounted Secret.
	mounts := map[string]string{} // mount path -> volume name
	for _, m := range c.VolumeMounts {
		if m.SubPath != "" {
			t.Errorf("%s: volume %s mounted with subPath: Secret rotation would never reach the pod", where, m.Name)
		}
		mounts[m.MountPath] = m.Name
	}
	volumeOf := func(file string) (name, key string) {
		for dir, v := range mounts {
			if rel, ok := strings.CutPrefix(file, dir+"/"); ok && !strings.Contains(rel, "/") {
				return v, rel
			}
		}
		return "", ""
	}
	configFile, ok := flagValue(c.Args, "config.file")
	if !ok {
		t.Errorf("%s: args %q lack --config.file", where, c.Args)
		return nil
	}
	vol, key := volumeOf(configFile)
	var cmName string
	for _, v := range spec.Volumes {
		if v.Name == vol && v.ConfigMap != nil {
			cmName = v.ConfigMap.Name
		}
	}
	if cmName == "" || !slices.Contains(configMaps[cmName], key) {
		t.Errorf("%s: --config.file=%s is not a key of a mounted ConfigMap (volume %q, ConfigMap %q, known %v)", where, configFile, vol, cmName, configMaps)
		return nil
	}
	data, err := readConfig(key)
	if err != nil {
		t.Errorf("%s: %v", where, err)
		return nil
	}
	cfg, err := config.Load(data, configFile)
	if err != nil {
		t.Errorf("%s: the mounted configuration does not load:\n%v", where, err)
		return nil
	}

	// Shutdown: the kubelet's SIGKILL must not cut the drain short.
	grace := time.Duration(cfg.Global.ShutdownGracePeriod)
	if tg := spec.TerminationGracePeriodSeconds; tg == nil {
		t.Errorf("%s: terminationGracePeriodSeconds unset (30s default) with shutdown_grace_period %v", where, grace)
	} else if time.Duration(*tg)*time.Second <= grace+shutdownOverhead {
		t.Errorf("%s: terminationGracePeriodSeconds %d must exceed shutdown_grace_period %v + %v of shutdown overhead", where, *tg, grace, shutdownOverhead)
	}

	for _, tg := range cfg.Targets {
		for _, f := range credentialFiles(tg) {
			vol, key := volumeOf(f)
			var secretName string
			for _, v := range spec.Volumes {
				if v.Name == vol && v.Secret != nil {
					secretName = v.Secret.SecretName
				}
			}
			switch {
			case secretName == "":
				t.Errorf("%s: target %s reads %s, which is not in a mounted Secret (Secret mount %s)", where, tg.Name, f, secretMountPath)
			case !slices.Contains(secrets[secretName], key):
				t.Errorf("%s: target %s reads %s, but Secret %q has keys %v", where, tg.Name, f, secretName, secrets[secretName])
			}
		}
	}
	return cfg
}

// credentialFiles lists every file a target's HTTP clients (the one to the
// target, and the one to the Prometheus a workload_from reads) take
// secrets or TLS material from.
func credentialFiles(tg *config.Target) []string {
	files := httpClientFiles(&tg.HTTPClientConfig)
	if wf := tg.WorkloadFrom; wf != nil && wf.Prometheus != nil {
		files = append(files, httpClientFiles(&wf.Prometheus.HTTPClientConfig)...)
	}
	return files
}

func httpClientFiles(h *commoncfg.HTTPClientConfig) []string {
	files := []string{h.BearerTokenFile}
	if a := h.Authorization; a != nil {
		files = append(files, a.CredentialsFile)
	}
	if b := h.BasicAuth; b != nil {
		files = append(files, b.UsernameFile, b.PasswordFile)
	}
	if o := h.OAuth2; o != nil {
		files = append(files, o.ClientSecretFile, o.TLSConfig.CAFile, o.TLSConfig.CertFile, o.TLSConfig.KeyFile)
	}
	files = append(files, h.TLSConfig.CAFile, h.TLSConfig.CertFile, h.TLSConfig.KeyFile)
	if h.HTTPHeaders != nil {
		for _, hdr := range h.HTTPHeaders.Headers {
			files = append(files, hdr.Files...)
		}
	}
	return slices.DeleteFunc(files, func(f string) bool { return f == "" })
}

func checkServiceAndMonitor(t *testing.T, dep *deployment, svc *service, sm *serviceMonitor) {
	t.Helper()
	pod := dep.Spec.Template.Metadata.Labels
	if !selects(svc.Spec.Selector, pod) {
		t.Errorf("Service selector %v does not select the pods %v", svc.Spec.Selector, pod)
	}
	c := dep.Spec.Template.Spec.Containers[0]
	if len(svc.Spec.Ports) != 1 || len(c.Ports) != 1 {
		t.Fatalf("Service ports %+v, container ports %+v: want one each", svc.Spec.Ports, c.Ports)
	}
	p := svc.Spec.Ports[0]
	if p.Name != "http-metrics" || p.Port != 9477 {
		t.Errorf("Service port %s/%d, want http-metrics/9477", p.Name, p.Port)
	}
	if tp := fmt.Sprint(p.TargetPort); tp != c.Ports[0].Name && tp != strconv.Itoa(c.Ports[0].ContainerPort) {
		t.Errorf("Service targetPort %s is not the container port %s/%d", tp, c.Ports[0].Name, c.Ports[0].ContainerPort)
	}

	if sm == nil {
		return
	}
	if !selects(sm.Spec.Selector.MatchLabels, svc.Metadata.Labels) {
		t.Errorf("ServiceMonitor selector %v does not select the Service labels %v", sm.Spec.Selector.MatchLabels, svc.Metadata.Labels)
	}
	// The alerts and dashboards select job="llmprobe".
	if job := svc.Metadata.Labels[sm.Spec.JobLabel]; sm.Spec.JobLabel == "" || job != "llmprobe" {
		t.Errorf("ServiceMonitor jobLabel %q gives job=%q from the Service labels; the rules select job=\"llmprobe\"", sm.Spec.JobLabel, job)
	}
	if len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Port != p.Name {
		t.Errorf("ServiceMonitor endpoints %+v, want one on port %s", sm.Spec.Endpoints, p.Name)
	}
	if len(sm.Spec.ScrapeProtocols) == 0 || sm.Spec.ScrapeProtocols[0] != "PrometheusProto" {
		t.Errorf("ServiceMonitor scrapeProtocols %v: PrometheusProto must come first (native histograms)", sm.Spec.ScrapeProtocols)
	}
	if p := sm.Spec.ScrapeClassicHistograms; p == nil || !*p {
		t.Error("ServiceMonitor scrapeClassicHistograms is not true: the rules fall back to the _bucket series")
	}
}

// checkPrometheusRule requires the PrometheusRule's groups to be those of
// alerts/llmprobe.rules.yml.
func checkPrometheusRule(t *testing.T, rule map[string]any) {
	t.Helper()
	want := readDocs(t, filepath.Join(promtest.Root(t), "alerts", "llmprobe.rules.yml"))[0]["groups"]
	spec, _ := rule["spec"].(map[string]any)
	got := spec["groups"]
	gj, _ := json.Marshal(got)
	wj, _ := json.Marshal(want)
	if want == nil || !bytes.Equal(gj, wj) {
		t.Errorf("PrometheusRule %s: spec.groups differ from alerts/llmprobe.rules.yml", str(rule, "metadata", "name"))
	}
}

// TestComposeStack checks the local stack: every mounted file exists, the
// llmprobe configuration loads and points at the simulator service, and
// the Prometheus configuration, with the rule files it gets through its
// mounts, passes `promtool check config`.
func TestComposeStack(t *testing.T) {
	r := promtest.Root(t)
	dir := filepath.Join(r, "deploy", "compose")
	var stack struct {
		Services map[string]struct {
			Image string `yaml:"image"`
			Build *struct {
				Context    string `yaml:"context"`
				Dockerfile string `yaml:"dockerfile"`
			} `yaml:"build"`
			Command     []string          `yaml:"command"`
			Volumes     []string          `yaml:"volumes"`
			Environment map[string]string `yaml:"environment"`
			StopGrace   string            `yaml:"stop_grace_period"`
		} `yaml:"services"`
		Volumes map[string]any `yaml:"volumes"`
	}
	decodeInto(t, readDocs(t, filepath.Join(dir, "docker-compose.yml"))[0], &stack)
	for _, name := range []string{"sim", "llmprobe", "prometheus", "grafana"} {
		if _, ok := stack.Services[name]; !ok {
			t.Fatalf("docker-compose.yml: no service %q", name)
		}
	}

	// hostPath maps a path inside a service's container to the host file
	// a bind mount puts there ("" if none does).
	hostPath := func(svc, p string) string {
		best, bestLen := "", -1
		for _, v := range stack.Services[svc].Volumes {
			parts := strings.Split(v, ":")
			if len(parts) < 2 {
				continue
			}
			src, dst := parts[0], parts[1]
			if !strings.HasPrefix(src, ".") && !strings.HasPrefix(src, "/") {
				continue // a named volume
			}
			if rel, ok := strings.CutPrefix(p, dst); ok && (rel == "" || strings.HasPrefix(rel, "/")) && len(dst) > bestLen {
				best, bestLen = filepath.Join(dir, src, rel), len(dst)
			}
		}
		return best
	}
	for name, s := range stack.Services {
		for _, v := range s.Volumes {
			src, _, _ := strings.Cut(v, ":")
			if strings.HasPrefix(src, ".") {
				if _, err := os.Stat(filepath.Join(dir, src)); err != nil {
					t.Errorf("service %s mounts %s: %v", name, src, err)
				}
			} else if _, ok := stack.Volumes[src]; !ok {
				t.Errorf("service %s mounts undeclared volume %q", name, src)
			}
		}
		if b := s.Build; b != nil {
			if _, err := os.Stat(filepath.Join(dir, b.Context, b.Dockerfile)); err != nil {
				t.Errorf("service %s builds with %s: %v", name, b.Dockerfile, err)
			}
		}
	}

	// llmprobe: its configuration loads and probes the simulator service on
	// the port the simulator listens on.
	lp := stack.Services["llmprobe"]
	if len(lp.Command) == 0 || lp.Command[0] != "run" {
		t.Fatalf("llmprobe command %q: want the run command", lp.Command)
	}
	cfgPath, ok := flagValue(lp.Command, "config.file")
	if !ok {
		t.Fatalf("llmprobe command %q lacks --config.file", lp.Command)
	}
	host := hostPath("llmprobe", cfgPath)
	data, err := os.ReadFile(host)
	if err != nil {
		t.Fatalf("llmprobe --config.file=%s is not mounted from an existing file: %v", cfgPath, err)
	}
	cfg, err := config.Load(data, cfgPath)
	if err != nil {
		t.Fatalf("compose llmprobe configuration does not load:\n%v", err)
	}
	simListen, _ := flagValue(stack.Services["sim"].Command, "web.listen-address")
	_, simPort, err := net.SplitHostPort(simListen)
	if err != nil || stack.Services["sim"].Command[0] != "sim" {
		t.Fatalf("sim command %q: want `sim --web.listen-address=:PORT` (%v)", stack.Services["sim"].Command, err)
	}
	for _, tg := range cfg.Targets {
		u, err := url.Parse(tg.URL)
		if err != nil || u.Hostname() != "sim" || u.Port() != simPort {
			t.Errorf("target %s url %s: want the sim service on port %s", tg.Name, tg.URL, simPort)
		}
	}
	if d, err := time.ParseDuration(lp.StopGrace); err != nil || d <= time.Duration(cfg.Global.ShutdownGracePeriod)+shutdownOverhead {
		t.Errorf("llmprobe stop_grace_period %q must exceed shutdown_grace_period %v + %v", lp.StopGrace, time.Duration(cfg.Global.ShutdownGracePeriod), shutdownOverhead)
	}
	t.Run("run", func(t *testing.T) {
		runDeployed(t, lp.Command, map[string]map[string]string{path.Dir(cfgPath): {path.Base(cfgPath): string(data)}})
	})
	lpListen, ok := flagValue(lp.Command, "web.listen-address")
	if !ok {
		lpListen = ":9477"
	}
	_, lpPort, _ := net.SplitHostPort(lpListen)

	// Prometheus.
	prom := stack.Services["prometheus"]
	if !slices.Contains(prom.Command, "--enable-feature=exemplar-storage") {
		t.Errorf("prometheus command %q lacks --enable-feature=exemplar-storage", prom.Command)
	}
	checkPromImage(t, r, prom.Image)
	promCfgPath, ok := flagValue(prom.Command, "config.file")
	if !ok {
		t.Fatalf("prometheus command %q lacks --config.file", prom.Command)
	}
	promHost := hostPath("prometheus", promCfgPath)
	var promCfg struct {
		RuleFiles     []string `yaml:"rule_files"`
		ScrapeConfigs []struct {
			JobName                       string `yaml:"job_name"`
			ScrapeNativeHistograms        *bool  `yaml:"scrape_native_histograms"`
			AlwaysScrapeClassicHistograms *bool  `yaml:"always_scrape_classic_histograms"`
			StaticConfigs                 []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	promDocs := readDocs(t, promHost)
	decodeInto(t, promDocs[0], &promCfg)
	var job bool
	for _, sc := range promCfg.ScrapeConfigs {
		if sc.JobName != "llmprobe" {
			continue
		}
		job = true
		if len(sc.StaticConfigs) != 1 || !slices.Equal(sc.StaticConfigs[0].Targets, []string{"llmprobe:" + lpPort}) {
			t.Errorf("job llmprobe scrapes %+v, want llmprobe:%s", sc.StaticConfigs, lpPort)
		}
		if sc.ScrapeNativeHistograms == nil || !*sc.ScrapeNativeHistograms || sc.AlwaysScrapeClassicHistograms == nil || !*sc.AlwaysScrapeClassicHistograms {
			t.Error("job llmprobe must set scrape_native_histograms and always_scrape_classic_histograms")
		}
	}
	if !job {
		t.Error(`prometheus.yml has no job_name "llmprobe" (the rules select job="llmprobe")`)
	}
	if len(promCfg.RuleFiles) == 0 {
		t.Error("prometheus.yml loads no rule_files")
	}

	// Grafana: the provisioned dashboards and the home dashboard exist, and
	// the data source is the prometheus service.
	graf := stack.Services["grafana"]
	var dashProv struct {
		Providers []struct {
			Options struct {
				Path string `yaml:"path"`
			} `yaml:"options"`
		} `yaml:"providers"`
	}
	decodeInto(t, readDocs(t, filepath.Join(dir, "grafana", "provisioning", "dashboards", "llmprobe.yml"))[0], &dashProv)
	if hostPath("grafana", "/etc/grafana/provisioning/dashboards/llmprobe.yml") == "" {
		t.Error("the dashboards provisioning file is not mounted at /etc/grafana/provisioning")
	}
	for _, p := range dashProv.Providers {
		h := hostPath("grafana", p.Options.Path)
		jsons, _ := filepath.Glob(filepath.Join(h, "*.json"))
		if h == "" || len(jsons) == 0 {
			t.Errorf("dashboard provider path %s: no dashboards mounted there (host %q)", p.Options.Path, h)
		}
		for _, j := range jsons {
			var d struct {
				UID   string `json:"uid"`
				Title string `json:"title"`
			}
			if b, err := os.ReadFile(j); err != nil || json.Unmarshal(b, &d) != nil || d.UID == "" {
				t.Errorf("%s: not a dashboard with a uid", j)
			}
		}
	}
	if home := graf.Environment["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]; home != "" {
		if _, err := os.Stat(hostPath("grafana", home)); err != nil {
			t.Errorf("home dashboard %s: %v", home, err)
		}
	}
	// The data sources are the prometheus and jaeger services, and the
	// exemplars' trace_id links to the Jaeger one.
	var ds struct {
		Datasources []struct {
			UID      string `yaml:"uid"`
			Type     string `yaml:"type"`
			URL      string `yaml:"url"`
			JSONData struct {
				ExemplarTraceIDDestinations []struct {
					Name          string `yaml:"name"`
					DatasourceUID string `yaml:"datasourceUid"`
				} `yaml:"exemplarTraceIdDestinations"`
			} `yaml:"jsonData"`
		} `yaml:"datasources"`
	}
	decodeInto(t, readDocs(t, filepath.Join(dir, "grafana", "provisioning", "datasources", "datasources.yml"))[0], &ds)
	uids := map[string]string{} // type -> uid
	for _, d := range ds.Datasources {
		u, err := url.Parse(d.URL)
		if err != nil || stack.Services[u.Hostname()].Image == "" {
			t.Errorf("data source %s: url %s is not a compose service", d.UID, d.URL)
		}
		uids[d.Type] = d.UID
	}
	if uids["prometheus"] == "" || uids["jaeger"] == "" {
		t.Errorf("data sources %v: want a prometheus and a jaeger one", uids)
	}
	for _, d := range ds.Datasources {
		for _, e := range d.JSONData.ExemplarTraceIDDestinations {
			if e.Name != "trace_id" || e.DatasourceUID != uids["jaeger"] {
				t.Errorf("exemplar destination %+v: want trace_id to the jaeger data source %q", e, uids["jaeger"])
			}
		}
	}

	// Traces: the OTLP endpoint of llmprobe and the simulator is the
	// jaeger service.
	for _, name := range []string{"llmprobe", "sim"} {
		ep := stack.Services[name].Environment["OTEL_EXPORTER_OTLP_ENDPOINT"]
		u, err := url.Parse(ep)
		if err != nil || u.Scheme != "http" || stack.Services[u.Hostname()].Image == "" || u.Port() != "4317" {
			t.Errorf("service %s: OTEL_EXPORTER_OTLP_ENDPOINT %q, want http://<a compose service>:4317", name, ep)
		}
	}

	// Rewrite rule_files to the host files the mounts provide, then let
	// promtool check the configuration and the rules it loads (last: it
	// skips when promtool is not installed).
	t.Run("promtool check config", func(t *testing.T) {
		tmp := t.TempDir()
		var mapped []any
		for _, rf := range promCfg.RuleFiles {
			h := hostPath("prometheus", rf)
			if h == "" {
				t.Errorf("rule file %s is not mounted into the prometheus service", rf)
				continue
			}
			if matches, _ := filepath.Glob(h); len(matches) == 0 {
				t.Errorf("rule file %s (host %s) matches no file", rf, h)
			}
			mapped = append(mapped, h)
		}
		promDocs[0]["rule_files"] = mapped
		out, err := yaml.Marshal(promDocs[0])
		if err != nil {
			t.Fatal(err)
		}
		checked := filepath.Join(tmp, "prometheus.yml")
		if err := os.WriteFile(checked, out, 0o644); err != nil {
			t.Fatal(err)
		}
		res, err := promtest.RunPromtool(t, tmp, "check", "config", checked)
		if err != nil {
			t.Fatalf("promtool check config (rule_files mapped to the host):\n%v\n%s", err, res)
		}
		if want := fmt.Sprintf("SUCCESS: %d rule files found", len(mapped)); !strings.Contains(res, want) {
			t.Errorf("promtool output lacks %q:\n%s", want, res)
		}
	})
}

// checkPromImage requires the compose Prometheus to be the version whose
// promtool checks its configuration (Makefile PROM_VERSION v0.3MM.P is
// Prometheus v3.MM.P).
func checkPromImage(t *testing.T, root, image string) {
	t.Helper()
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^PROM_VERSION\s*:?=\s*v0\.3(\d\d)\.(\d+)\s*$`).FindSubmatch(mk)
	if m == nil {
		t.Fatal("Makefile: no PROM_VERSION := v0.3MM.P")
	}
	minor, _ := strconv.Atoi(string(m[1]))
	want := fmt.Sprintf("prom/prometheus:v3.%d.%s", minor, m[2])
	if image != want {
		t.Errorf("prometheus image %q, want %q (the version the Makefile's promtool checks)", image, want)
	}
}

// dockerInstruction is one Dockerfile instruction with its continuation
// lines joined.
type dockerInstruction struct {
	line int
	cmd  string // upper case
	args string
}

func parseDockerfile(t *testing.T, file string) []dockerInstruction {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var (
		out  []dockerInstruction
		cur  strings.Builder
		open int
	)
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "#") || (line == "" && cur.Len() == 0) {
			continue
		}
		if cur.Len() == 0 {
			open = n
		}
		cont := strings.HasSuffix(line, `\`)
		cur.WriteString(strings.TrimSuffix(line, `\`))
		cur.WriteByte(' ')
		if cont {
			continue
		}
		cmd, args, _ := strings.Cut(strings.TrimSpace(cur.String()), " ")
		out = append(out, dockerInstruction{line: open, cmd: strings.ToUpper(cmd), args: strings.Join(strings.Fields(args), " ")})
		cur.Reset()
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if cur.Len() > 0 {
		t.Fatalf("%s: ends inside a continued instruction (line %d)", file, open)
	}
	return out
}

// TestDockerfile is a static sanity check of the image build: no Docker
// engine runs here.
func TestDockerfile(t *testing.T) {
	r := promtest.Root(t)
	ins := parseDockerfile(t, filepath.Join(r, "deploy", "docker", "Dockerfile"))

	args := map[string]string{} // global ARG defaults
	type stage struct {
		name, base string
		ins        []dockerInstruction
	}
	var stages []*stage
	for _, in := range ins {
		switch {
		case in.cmd == "ARG" && len(stages) == 0:
			k, v, _ := strings.Cut(in.args, "=")
			args[k] = v
		case in.cmd == "FROM":
			f := strings.Fields(in.args)
			f = slices.DeleteFunc(f, func(s string) bool { return strings.HasPrefix(s, "--platform=") })
			s := &stage{base: f[0]}
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				s.name = f[2]
			}
			stages = append(stages, s)
		case len(stages) > 0:
			stages[len(stages)-1].ins = append(stages[len(stages)-1].ins, in)
		default:
			t.Errorf("line %d: %s before the first FROM", in.line, in.cmd)
		}
	}
	if len(stages) < 2 {
		t.Fatalf("want a multi-stage build, got %d stage(s)", len(stages))
	}
	build, final := stages[0], stages[len(stages)-1]

	// The builder's Go is at least the go.mod's.
	base := os.Expand(build.base, func(k string) string { return args[k] })
	goVer, ok := strings.CutPrefix(base, "golang:")
	if !ok {
		t.Fatalf("builder stage FROM %s: want golang:<version>", base)
	}
	mod, err := os.ReadFile(filepath.Join(r, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go (\d+)\.(\d+)`).FindSubmatch(mod)
	img := regexp.MustCompile(`^(\d+)\.(\d+)`).FindStringSubmatch(goVer)
	if m == nil || img == nil {
		t.Fatalf("cannot compare go.mod's go version with golang:%s", goVer)
	}
	if cmpVer(img[1], img[2], string(m[1]), string(m[2])) < 0 {
		t.Errorf("builder golang:%s is older than go.mod's go %s.%s", goVer, m[1], m[2])
	}

	// The build command.
	var out string
	for _, in := range build.ins {
		if in.cmd != "RUN" || !strings.Contains(in.args, "go build") {
			continue
		}
		for _, want := range []string{"./cmd/llmprobe", "-trimpath", "CGO_ENABLED=0",
			"-X github.com/prometheus/common/version.Version=${VERSION}",
			"-X github.com/prometheus/common/version.Revision=${REVISION}",
			"-X github.com/prometheus/common/version.Branch=${BRANCH}",
			"--mount=type=cache,target=/go/pkg/mod"} {
			if !strings.Contains(in.args, want) {
				t.Errorf("line %d: the go build lacks %q", in.line, want)
			}
		}
		if f := regexp.MustCompile(`-o (\S+)`).FindStringSubmatch(in.args); f != nil {
			out = f[1]
		}
	}
	if out == "" {
		t.Fatal("builder stage: no `go build ... -o FILE` RUN instruction")
	}

	var user, expose, entrypoint, cmd string
	var copied bool
	for _, in := range final.ins {
		switch in.cmd {
		case "USER":
			user = in.args
		case "EXPOSE":
			expose = in.args
		case "ENTRYPOINT":
			entrypoint = in.args
		case "CMD":
			cmd = in.args
		case "COPY":
			if in.args == fmt.Sprintf("--from=%s %s /bin/llmprobe", build.name, out) {
				copied = true
			}
		case "RUN":
			t.Errorf("line %d: the final stage runs commands; it should only copy the binary", in.line)
		}
	}
	if !copied {
		t.Errorf("final stage does not COPY --from=%s %s /bin/llmprobe", build.name, out)
	}
	uid, _, _ := strings.Cut(user, ":")
	if uid == "" || uid == "0" || uid == "root" {
		t.Errorf("final stage USER %q: want a non-root user", user)
	}
	if expose != "9477" {
		t.Errorf("EXPOSE %q, want 9477", expose)
	}
	var ep, cm []string
	if err := json.Unmarshal([]byte(entrypoint), &ep); err != nil || !slices.Equal(ep, []string{"/bin/llmprobe"}) {
		t.Errorf(`ENTRYPOINT %s, want ["/bin/llmprobe"] (exec form)`, entrypoint)
	}
	if err := json.Unmarshal([]byte(cmd), &cm); err != nil || len(cm) == 0 || cm[0] != "run" || !slices.Contains(cm, "--config.file="+configMountPath+"/llmprobe.yml") {
		t.Errorf(`CMD %s, want ["run", "--config.file=%s/llmprobe.yml"] (exec form)`, cmd, configMountPath)
	}
}

func cmpVer(aMaj, aMin, bMaj, bMin string) int {
	a1, _ := strconv.Atoi(aMaj)
	a2, _ := strconv.Atoi(aMin)
	b1, _ := strconv.Atoi(bMaj)
	b2, _ := strconv.Atoi(bMin)
	if a1 != b1 {
		return a1 - b1
	}
	return a2 - b2
}

// dockerignore is a .dockerignore: its patterns in order, each with its
// negation. Docker's rules: a path is excluded when the last pattern that
// matches it or one of its parent directories is not negated; "*" and "?"
// do not cross "/", "**" matches any number of directories.
type dockerignore []struct {
	re     *regexp.Regexp
	negate bool
}

func parseDockerignore(t *testing.T, file string) dockerignore {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var d dockerignore
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		neg := strings.HasPrefix(line, "!")
		line = path.Clean(strings.TrimPrefix(strings.TrimPrefix(line, "!"), "/"))
		var re strings.Builder
		re.WriteString("^")
		for i := 0; i < len(line); i++ {
			switch c := line[i]; {
			case strings.HasPrefix(line[i:], "**/"):
				re.WriteString("(.*/)?")
				i += 2
			case strings.HasPrefix(line[i:], "**"):
				re.WriteString(".*")
				i++
			case c == '*':
				re.WriteString("[^/]*")
			case c == '?':
				re.WriteString("[^/]")
			default:
				re.WriteString(regexp.QuoteMeta(string(c)))
			}
		}
		re.WriteString("$")
		d = append(d, struct {
			re     *regexp.Regexp
			negate bool
		}{regexp.MustCompile(re.String()), neg})
	}
	return d
}

// excluded reports whether the slash-separated relative path p is left
// out of the build context.
func (d dockerignore) excluded(p string) bool {
	out := false
	for _, pat := range d {
		for q := p; q != "." && q != "/"; q = path.Dir(q) {
			if pat.re.MatchString(q) {
				out = !pat.negate
				break
			}
		}
	}
	return out
}

// TestDockerignore requires every file `go build ./cmd/llmprobe` reads
// (go.mod, go.sum, the Go files and embedded files of the module's
// packages it depends on) to be in the build context.
func TestDockerignore(t *testing.T) {
	r := promtest.Root(t)
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("go command not found: %v", err)
	}
	ign := parseDockerignore(t, filepath.Join(r, ".dockerignore"))
	if !ign.excluded(".git/config") || !ign.excluded("bin/llmprobe") {
		t.Error(".dockerignore should keep .git and bin out of the build context")
	}

	cmd := exec.Command(goBin, "list", "-deps", "-json=Dir,GoFiles,EmbedFiles,Module", "./cmd/llmprobe")
	cmd.Dir = r
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	files := []string{"go.mod", "go.sum"}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p struct {
			Dir        string
			GoFiles    []string
			EmbedFiles []string
			Module     *struct{ Main bool }
		}
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if p.Module == nil || !p.Module.Main {
			continue
		}
		rel, err := filepath.Rel(r, p.Dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range append(p.GoFiles, p.EmbedFiles...) {
			files = append(files, filepath.ToSlash(filepath.Join(rel, f)))
		}
	}
	if len(files) < 10 {
		t.Fatalf("go list found only %v", files)
	}
	for _, f := range files {
		if ign.excluded(f) {
			t.Errorf(".dockerignore excludes %s, which the image build needs", f)
		}
	}
}

// chartDir is the Helm chart.
func chartDir(t testing.TB) string {
	return filepath.Join(promtest.Root(t), "deploy", "helm", "llmprobe")
}

// TestHelmChartStatic checks what needs no helm binary: Chart.yaml, the
// configuration tree in values.yaml (it must load), and the rules link.
func TestHelmChartStatic(t *testing.T) {
	dir := chartDir(t)
	var chart struct {
		APIVersion string `yaml:"apiVersion"`
		Name       string `yaml:"name"`
		Version    string `yaml:"version"`
		AppVersion string `yaml:"appVersion"`
		Type       string `yaml:"type"`
	}
	decodeInto(t, readDocs(t, filepath.Join(dir, "Chart.yaml"))[0], &chart)
	if chart.APIVersion != "v2" || chart.Name != "llmprobe" || chart.Type != "application" {
		t.Errorf("Chart.yaml: apiVersion %q name %q type %q, want v2 llmprobe application", chart.APIVersion, chart.Name, chart.Type)
	}
	if !regexp.MustCompile(`^\d+\.\d+\.\d+$`).MatchString(chart.Version) || chart.AppVersion == "" {
		t.Errorf("Chart.yaml: version %q (want SemVer), appVersion %q", chart.Version, chart.AppVersion)
	}

	values := readDocs(t, filepath.Join(dir, "values.yaml"))[0]
	cfg := loadValuesConfig(t, values)
	if tree := values["config"].(map[string]any); tree["existingConfigMap"] != "" {
		t.Errorf("values.yaml: config.existingConfigMap %v, want \"\" (the chart renders config)", tree["existingConfigMap"])
	}
	var creds struct {
		ExistingSecret string `yaml:"existingSecret"`
		Create         bool   `yaml:"create"`
	}
	decodeInto(t, values["credentials"].(map[string]any), &creds)
	for _, tg := range cfg.Targets {
		for _, f := range credentialFiles(tg) {
			if creds.ExistingSecret == "" && !creds.Create {
				t.Errorf("values.yaml: target %s reads %s but no Secret is mounted by default", tg.Name, f)
			} else if !strings.HasPrefix(f, secretMountPath+"/") {
				t.Errorf("values.yaml: target %s reads %s, outside the Secret mount %s", tg.Name, f, secretMountPath)
			}
		}
	}
	if g, ok := values["terminationGracePeriodSeconds"].(int); !ok || time.Duration(g)*time.Second <= time.Duration(cfg.Global.ShutdownGracePeriod)+shutdownOverhead {
		t.Errorf("values.yaml: terminationGracePeriodSeconds %v must exceed shutdown_grace_period %v + %v", values["terminationGracePeriodSeconds"], time.Duration(cfg.Global.ShutdownGracePeriod), shutdownOverhead)
	}

	// files/llmprobe.rules.yml is a generated copy of the rules (a real
	// file, so that a vendored or packaged chart holds it), so the chart's
	// PrometheusRule never drifts from alerts/.
	copyPath := filepath.Join(dir, "files", "llmprobe.rules.yml")
	if fi, err := os.Lstat(copyPath); err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("chart rules %s: want a regular file (a link breaks a vendored chart): %v %v", copyPath, fi, err)
	}
	got, err := os.ReadFile(copyPath)
	if err != nil {
		t.Fatalf("chart rules: %v", err)
	}
	want, err := os.ReadFile(filepath.Join(promtest.Root(t), "alerts", "llmprobe.rules.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Error("deploy/helm/llmprobe/files/llmprobe.rules.yml differs from alerts/llmprobe.rules.yml")
	}

	// The template mounts the Secret where the values' comments say.
	tpl, err := os.ReadFile(filepath.Join(dir, "templates", "deployment.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"mountPath: " + secretMountPath, "mountPath: " + configMountPath, "--probe.replicas={{ .Values.replicaCount }}"} {
		if !bytes.Contains(tpl, []byte(want)) {
			t.Errorf("templates/deployment.yaml lacks %q", want)
		}
	}
}

// loadValuesConfig loads the llmprobe configuration tree of a values file
// (without config.existingConfigMap, which the chart leaves out of it).
func loadValuesConfig(t *testing.T, values map[string]any) *config.Config {
	t.Helper()
	tree, ok := values["config"].(map[string]any)
	if !ok {
		t.Fatal("values: no config tree")
	}
	tree = maps.Clone(tree)
	delete(tree, "existingConfigMap")
	data, err := yaml.Marshal(tree)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(data, configMountPath+"/llmprobe.yml")
	if err != nil {
		t.Fatalf("values config does not load:\n%v\n%s", err, data)
	}
	return cfg
}

// helmBinary returns $HELM, else <module root>/bin/helm (`make tools`
// installs it); without it the test skips, or fails under
// LLMPROBE_REQUIRE_TOOLS=1 (`make test`).
func helmBinary(t *testing.T) string {
	t.Helper()
	return promtest.RequireTool(t, "helm")
}

// runHelm runs helm and returns its standard output (its standard error
// carries warnings such as the one about the rules symlink).
func runHelm(t *testing.T, bin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("helm %s: %v\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// TestHelmChart lints the chart and renders it, with the defaults, with
// every option on, and from a copy of the chart outside the repository (a
// vendored chart), validates every rendered object with kubeconform
// (strict, offline schemas from the Go API types) and checks them like the
// kustomize base's; the rendered arguments and configuration really run.
func TestHelmChart(t *testing.T) {
	bin := helmBinary(t)
	dir := chartDir(t)
	full := filepath.Join(promtest.Root(t), "deploy", "testdata", "helm-values-full.yml")
	vendored := vendorChart(t)
	schemas := writeSchemas(t)

	runHelm(t, bin, "lint", "--strict", dir)
	runHelm(t, bin, "lint", "--strict", dir, "-f", full)
	runHelm(t, bin, "lint", "--strict", vendored)
	runHelm(t, bin, "lint", "--strict", vendored, "-f", full)

	cases := []struct {
		name     string
		chart    string
		args     []string
		replicas int
		optional []string // kinds that must be rendered
	}{
		{"defaults", dir, nil, 1, []string{"ServiceAccount", "PodDisruptionBudget"}},
		{"full", dir, []string{"-f", full}, 3, []string{"Secret", "ServiceMonitor", "PrometheusRule", "NetworkPolicy", "ServiceAccount", "PodDisruptionBudget"}},
		{"vendored defaults", vendored, nil, 1, nil},
		{"vendored full", vendored, []string{"-f", full}, 3, []string{"PrometheusRule"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := runHelm(t, bin, append([]string{"template", "probe", tc.chart, "--namespace", "monitoring"}, tc.args...)...)
			requireValid(t, schemas, "helm-"+strings.ReplaceAll(tc.name, " ", "-"), []byte(out))
			docs, err := decodeAll([]byte(out))
			if err != nil {
				t.Fatalf("rendered chart: %v\n%s", err, out)
			}
			objs := map[string]map[string]any{}
			for i, d := range docs {
				kind := str(d, "kind")
				if kind == "" || str(d, "apiVersion") == "" || str(d, "metadata", "name") == "" {
					t.Errorf("rendered document %d lacks apiVersion, kind or metadata.name", i)
				}
				if objs[kind] != nil {
					t.Errorf("rendered a second %s", kind)
				}
				objs[kind] = d
			}
			for _, kind := range append([]string{"Deployment", "Service", "ConfigMap"}, tc.optional...) {
				if objs[kind] == nil {
					t.Fatalf("no %s rendered", kind)
				}
			}

			var dep deployment
			decodeInto(t, objs["Deployment"], &dep)
			if dep.Spec.Replicas == nil || *dep.Spec.Replicas != tc.replicas {
				t.Errorf("replicas %v, want %d", dep.Spec.Replicas, tc.replicas)
			}
			if v, _ := flagValue(dep.Spec.Template.Spec.Containers[0].Args, "probe.replicas"); v != strconv.Itoa(tc.replicas) {
				t.Errorf("--probe.replicas=%s, want %d", v, tc.replicas)
			}
			cm := objs["ConfigMap"]
			cmData, _ := cm["data"].(map[string]any)
			configMaps := map[string][]string{str(cm, "metadata", "name"): mapKeys(cmData)}
			secrets := map[string][]string{}
			if s := objs["Secret"]; s != nil {
				var sec secret
				decodeInto(t, s, &sec)
				secrets[sec.Metadata.Name] = mapKeys(sec.StringData)
			}
			checkDeployment(t, "helm "+tc.name, &dep, func(key string) ([]byte, error) {
				s, ok := cmData[key].(string)
				if !ok {
					return nil, fmt.Errorf("ConfigMap has no key %q", key)
				}
				return []byte(s), nil
			}, configMaps, secrets)
			t.Run("run", func(t *testing.T) {
				if tc.chart == vendored {
					t.Skip("the vendored copy renders the same arguments")
				}
				mounts := map[string]map[string]string{configMountPath: {}}
				for k, v := range cmData {
					mounts[configMountPath][k], _ = v.(string)
				}
				if s := objs["Secret"]; s != nil {
					var sec secret
					decodeInto(t, s, &sec)
					mounts[secretMountPath] = sec.StringData
				}
				runDeployed(t, dep.Spec.Template.Spec.Containers[0].Args, mounts)
			})

			var svc service
			decodeInto(t, objs["Service"], &svc)
			var sm *serviceMonitor
			if objs["ServiceMonitor"] != nil {
				sm = &serviceMonitor{}
				decodeInto(t, objs["ServiceMonitor"], sm)
			}
			checkServiceAndMonitor(t, &dep, &svc, sm)
			if rule := objs["PrometheusRule"]; rule != nil {
				checkPrometheusRule(t, rule)
			}
		})
	}
}
