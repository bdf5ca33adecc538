// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"io"
	"log"
	"maps"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"go.yaml.in/yaml/v3"
)

// TestWorkflow reads .github/workflows/ci.yml: pull requests and main run
// `make test` within the time budget; a v* tag runs, after the tests,
// `make release` and publishes the image, the chart and the files with the
// permissions that needs.
func TestWorkflow(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot(t), ".github", "workflows", "ci.yml"))
	if err != nil {
		t.Fatal(err)
	}
	type step struct {
		Uses string
		Run  string
		With map[string]any
		Env  map[string]string
	}
	type job struct {
		If          string
		Needs       any
		Timeout     int               `yaml:"timeout-minutes"`
		Permissions map[string]string `yaml:"permissions"`
		Steps       []step
	}
	var wf struct {
		On struct {
			PullRequest *struct{} `yaml:"pull_request"`
			Push        struct{ Branches, Tags []string }
		} `yaml:"on"`
		Permissions map[string]string
		Jobs        map[string]job
	}
	var raw map[string]any
	if err := yaml.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	if _, ok := raw["on"]; !ok || raw["on"] == nil {
		t.Fatal("no on: (a YAML 1.1 parser would read `on` as true; keep it a plain key)")
	}
	if err := yaml.Unmarshal(b, &wf); err != nil {
		t.Fatal(err)
	}
	if _, ok := raw["on"].(map[string]any)["pull_request"]; !ok {
		t.Error("the workflow does not run on pull_request")
	}
	if !slices.Contains(wf.On.Push.Branches, "main") || !slices.Contains(wf.On.Push.Tags, "v*") {
		t.Errorf("push triggers %+v, want branch main and tags v*", wf.On.Push)
	}
	if wf.Permissions["contents"] != "read" || len(wf.Permissions) != 1 {
		t.Errorf("default permissions %v, want contents: read only", wf.Permissions)
	}
	runs := func(j job, cmd string) bool {
		for _, s := range j.Steps {
			for _, l := range strings.Split(s.Run, "\n") {
				if f := strings.Fields(l); len(f) >= 2 && strings.Join(f[:2], " ") == cmd {
					return true
				}
			}
		}
		return false
	}
	test, ok := wf.Jobs["test"]
	if !ok || !runs(test, "make test") || test.If != "" {
		t.Errorf("job test %+v must run `make test` unconditionally", test)
	}
	if test.Timeout == 0 || test.Timeout > 20 {
		t.Errorf("job test timeout-minutes %d, want within the 20-minute CI budget", test.Timeout)
	}
	rel, ok := wf.Jobs["release"]
	if !ok {
		t.Fatal("no release job")
	}
	if rel.If != "startsWith(github.ref, 'refs/tags/v')" || rel.Needs != "test" {
		t.Errorf("release job if %q needs %v: want tags only, after test", rel.If, rel.Needs)
	}
	if !runs(rel, "make release") || rel.Permissions["packages"] != "write" || rel.Permissions["contents"] != "write" {
		t.Errorf("release job must run `make release` with contents and packages write: %+v", rel)
	}
	all := string(b[bytes.Index(b, []byte("\n  release:")):])
	for _, w := range []string{
		"bin/llmprobe-release push -layout .release/llmprobe-$v.oci",
		"-tag " + defaultImage(t) + ":$v",
		"bin/helm push .release/llmprobe-$v.tgz oci://ghcr.io/llmprobe/charts",
		"gh release create \"v$v\" --verify-tag",
		".release/sha256sums.txt", ".release/*.spdx.json", ".release/*.zip", ".release/*.tar.gz",
	} {
		if !strings.Contains(all, w) {
			t.Errorf("the release job lacks %q", w)
		}
	}
	for name, j := range wf.Jobs {
		var checkout, gover bool
		for _, s := range j.Steps {
			checkout = checkout || strings.HasPrefix(s.Uses, "actions/checkout@") && s.With["fetch-depth"] == 0
			gover = gover || strings.HasPrefix(s.Uses, "actions/setup-go@") && s.With["go-version-file"] == "go.mod"
		}
		if !checkout || !gover {
			t.Errorf("job %s: want a full checkout (fetch-depth 0: tags and the commit time) and go.mod's Go", name)
		}
	}
}

// defaultImage is the Makefile's RELEASE_IMAGE.
func defaultImage(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^RELEASE_IMAGE\s*\?=\s*(\S+)$`).FindSubmatch(b)
	if m == nil {
		t.Fatal("Makefile sets no RELEASE_IMAGE")
	}
	return string(m[1])
}

// TestVersionInStep: VERSION is a release version, and the chart in the
// repository is at it with the release's image by default.
func TestVersionInStep(t *testing.T) {
	root := repoRoot(t)
	b, err := os.ReadFile(filepath.Join(root, "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	v := strings.TrimSpace(string(b))
	if !regexp.MustCompile(`^\d+\.\d+\.\d+$`).MatchString(v) || string(b) != v+"\n" {
		t.Fatalf("VERSION %q: want X.Y.Z and a newline", b)
	}
	var chart struct {
		Version    string `yaml:"version"`
		AppVersion string `yaml:"appVersion"`
	}
	cb, err := os.ReadFile(filepath.Join(root, "deploy", "helm", "llmprobe", "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(cb, &chart); err != nil {
		t.Fatal(err)
	}
	if chart.Version != v || chart.AppVersion != v {
		t.Errorf("Chart.yaml version %q appVersion %q, VERSION %s (the release packages the chart at the release's version)", chart.Version, chart.AppVersion, v)
	}
	var values struct {
		Image struct{ Repository, Tag string }
	}
	vb, err := os.ReadFile(filepath.Join(root, "deploy", "helm", "llmprobe", "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(vb, &values); err != nil {
		t.Fatal(err)
	}
	if values.Image.Repository != defaultImage(t) || values.Image.Tag != "" {
		t.Errorf("values.yaml image %+v: want the released %s, tag from the appVersion", values.Image, defaultImage(t))
	}
	// The kustomize base names the same released image, at VERSION.
	kb, err := os.ReadFile(filepath.Join(root, "deploy", "kubernetes", "deployment.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "image: " + defaultImage(t) + ":" + v + "\n"; !strings.Contains(string(kb), want) {
		t.Errorf("deploy/kubernetes/deployment.yaml lacks %q", strings.TrimSpace(want))
	}
}

// TestDockerfileInStep: deploy/docker/Dockerfile, for those who build with
// Docker, sets every label, the user, entrypoint, command and port of the
// image this tool writes, and stamps the same version variables.
func TestDockerfileInStep(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "deploy", "docker", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	df := string(b)
	// The final stage: from its FROM on.
	final := df[strings.LastIndex(df, "\nFROM "):]
	for k := range maps.Keys((meta{}).labels()) {
		if !regexp.MustCompile(`(?m)^\s*(LABEL\s+)?` + regexp.QuoteMeta(k) + `=`).MatchString(final) {
			t.Errorf("the Dockerfile's final stage sets no label %s", k)
		}
	}
	ep, _ := json.Marshal(imageEntrypoint)
	cmd, _ := json.Marshal(imageCmd)
	for _, w := range []string{
		"\nUSER " + imageUser + "\n",
		"\nENTRYPOINT " + strings.ReplaceAll(string(ep), ",", ", ") + "\n",
		"\nCMD " + strings.ReplaceAll(string(cmd), ",", ", ") + "\n",
		"\nEXPOSE " + strings.TrimSuffix(imagePort, "/tcp") + "\n",
		"COPY --from=build /out/llmprobe " + imageBinary + "\n",
	} {
		if !strings.Contains(final, w) {
			t.Errorf("the Dockerfile's final stage lacks %q", strings.TrimSpace(w))
		}
	}
	for _, v := range []string{"Version", "Revision", "Branch", "BuildUser", "BuildDate"} {
		if !strings.Contains(df, "-X github.com/prometheus/common/version."+v+"=${") {
			t.Errorf("the Dockerfile does not stamp version.%s from a build argument", v)
		}
	}
}

// TestArchivesReproducible: the archives are a function of their files and
// time alone, not of the order the files come in.
func TestArchivesReproducible(t *testing.T) {
	at := time.Unix(1796187159, 0)
	files := []entry{
		{Name: "d/llmprobe", Mode: 0o755, Data: []byte("binary")},
		{Name: "d/LICENSE", Mode: 0o644, Data: []byte("license")},
		{Name: "d/sub/x.yml", Mode: 0o644, Data: []byte("x: 1")},
	}
	rev := slices.Clone(files)
	slices.Reverse(rev)
	for name, f := range map[string]func([]entry, time.Time) ([]byte, error){"tar.gz": tarGz, "zip": zipBytes} {
		x, err := f(files, at)
		if err != nil {
			t.Fatal(err)
		}
		y, err := f(rev, at)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(x, y) {
			t.Errorf("%s depends on the order of its files", name)
		}
		z, err := f(files, at.Add(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Equal(x, z) {
			t.Errorf("%s ignores the time it is given", name)
		}
	}
	tgz, _ := tarGz(files, at)
	hs, data := readTarGz(t, tgz)
	var names []string
	for _, h := range hs {
		names = append(names, h.Name)
	}
	if want := []string{"d/", "d/LICENSE", "d/llmprobe", "d/sub/", "d/sub/x.yml"}; !slices.Equal(names, want) || string(data["d/llmprobe"]) != "binary" {
		t.Errorf("tar holds %v, want %v", names, want)
	}
	zb, _ := zipBytes(files, at)
	zr, err := zip.NewReader(bytes.NewReader(zb), int64(len(zb)))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range zr.File {
		if f.Name == "d/llmprobe" && f.Mode().Perm() != 0o755 || !f.Modified.Equal(at) {
			t.Errorf("zip %s: mode %v modified %v", f.Name, f.Mode(), f.Modified)
		}
	}

	// A chart as helm packages it (the time of packaging in its headers)
	// re-packs to the same bytes whenever it was packaged.
	dir := t.TempDir()
	for i, when := range []time.Time{time.Now(), time.Now().Add(-time.Hour)} {
		b, _ := tarGz(files, when)
		p := filepath.Join(dir, string(rune('a'+i))+".tgz")
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := repackTarGz(p, at); err != nil {
			t.Fatal(err)
		}
	}
	x, _ := os.ReadFile(filepath.Join(dir, "a.tgz"))
	y, _ := os.ReadFile(filepath.Join(dir, "b.tgz"))
	if !bytes.Equal(x, y) || !bytes.Equal(x, tgz) {
		t.Error("re-packed charts differ")
	}
}

// TestPushMultiArch builds a two-platform image layout and pushes it to a
// registry on loopback (go-containerregistry's registry handler), as the
// release workflow does to ghcr.io: the registry then serves the same index
// digest with both platforms, and each image runs as non-root.
func TestPushMultiArch(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "img.oci")
	bins := map[string]string{}
	for _, arch := range []string{"amd64", "arm64"} {
		p := filepath.Join(t.TempDir(), "llmprobe-"+arch)
		if err := os.WriteFile(p, []byte("not really a "+arch+" binary"), 0o755); err != nil {
			t.Fatal(err)
		}
		bins[arch] = p
	}
	ca := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(ca, []byte("-----BEGIN CERTIFICATE-----\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	m := meta{Version: "1.2.3", Revision: "abc", Created: time.Unix(1796187159, 0), Source: "https://example.invalid/llmprobe", License: "Apache-2.0"}
	digest, err := buildImage(dir, m, []string{"amd64", "arm64"}, bins, ca)
	if err != nil {
		t.Fatal(err)
	}
	again, err := buildImage(filepath.Join(t.TempDir(), "again.oci"), m, []string{"amd64", "arm64"}, bins, ca)
	if err != nil || again != digest {
		t.Errorf("the same inputs gave index %s then %s (%v)", digest, again, err)
	}
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	tag := host + "/llmprobe/llmprobe:1.2.3"
	pushed, err := push(dir, tag, true)
	if err != nil {
		t.Fatal(err)
	}
	if pushed != digest {
		t.Errorf("pushed %s, built %s", pushed, digest)
	}
	ref, err := name.NewTag(tag, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := remote.Index(ref)
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := idx.Digest(); d != digest {
		t.Errorf("the registry serves %s, want %s", d, digest)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var plats []string
	for _, d := range im.Manifests {
		plats = append(plats, d.Platform.String())
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cf.Architecture != d.Platform.Architecture || cf.Config.User != "65534:65534" || cf.Config.Labels["org.opencontainers.image.version"] != "1.2.3" {
			t.Errorf("%s: config %+v", d.Platform, cf.Config)
		}
	}
	if !slices.Equal(plats, []string{"linux/amd64", "linux/arm64"}) {
		t.Errorf("platforms %v", plats)
	}
}

// TestChangelogSection: `notes` finds a dated version's section, and
// refuses a version the changelog has no section for; the repository's
// CHANGELOG.md keeps the form the release reads.
func TestChangelogSection(t *testing.T) {
	cl := "# Changelog\n\nintro\n\n## [Unreleased]\n\n### Added\n- next\n\n## [0.2.0] - 2026-12-24\n\n### Fixed\n- a fix\n\n## [0.1.0] - 2026-12-02\n\n- first\n"
	got, err := changelogSection(cl, "v0.2.0")
	if err != nil || got != "### Fixed\n- a fix\n" {
		t.Errorf("0.2.0: %q %v", got, err)
	}
	if got, err := changelogSection(cl, "0.1.0"); err != nil || got != "- first\n" {
		t.Errorf("0.1.0 (last): %q %v", got, err)
	}
	for _, v := range []string{"0.3.0", "Unreleased", "0.1"} {
		if _, err := changelogSection(cl, v); err == nil {
			t.Errorf("%s: no error", v)
		}
	}
	if _, err := changelogSection("## [0.1.0] - 2026-12-02\n\n## [0.0.1] - 2026-11-01\n- x\n", "0.1.0"); err == nil {
		t.Error("an empty section passed")
	}
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "CHANGELOG.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "## [") && l != "## [Unreleased]" && !versionHeading.MatchString(l) {
			t.Errorf("CHANGELOG.md heading %q is neither ## [Unreleased] nor ## [X.Y.Z] - YYYY-MM-DD", l)
		}
	}
	if !strings.Contains(string(b), "\n## [Unreleased]\n") {
		t.Error("CHANGELOG.md has no ## [Unreleased] section")
	}
}
