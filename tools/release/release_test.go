// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// repoRoot is the llmprobe repository this module sits in (tools/release).
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "cmd", "llmprobe")); err != nil {
		t.Fatalf("%s is not the llmprobe repository: %v", root, err)
	}
	return root
}

// requireTool finds a program as $ENV, bin/NAME or on $PATH; without it the
// test skips, or fails under LLMPROBE_REQUIRE_TOOLS=1 (make test).
func requireTool(t *testing.T, env, name string) string {
	t.Helper()
	if p := os.Getenv(env); p != "" {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p := filepath.Join(repoRoot(t), "bin", name); fileExists(p) {
		return p
	}
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	if os.Getenv("LLMPROBE_REQUIRE_TOOLS") == "1" {
		t.Fatalf("%s not found ($%s, bin/%s or PATH); `make tools` installs it", name, env, name)
	}
	t.Skipf("%s not found ($%s, bin/%s or PATH)", name, env, name)
	return ""
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

func sha256Hex(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

// childEnv is the environment without a parent make's settings (make test
// runs this test from make), plus extra.
func childEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES", "SOURCE_DATE_EPOCH", "TZ":
			continue
		}
		env = append(env, kv)
	}
	return append(env, extra...)
}

func run(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir, cmd.Env = dir, env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

func readRecord(t *testing.T, dir string) record {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "release.json"))
	if err != nil {
		t.Fatal(err)
	}
	var r record
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// copyWorkTree copies the files a build of the work tree sees (tracked and
// untracked, not ignored; no .git) to dst.
func copyWorkTree(t *testing.T, root, dst string) {
	t.Helper()
	out := run(t, root, childEnv(), "git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	for _, f := range strings.Split(strings.TrimRight(out, "\x00"), "\x00") {
		src := filepath.Join(root, f)
		fi, err := os.Lstat(src)
		if os.IsNotExist(err) {
			continue // deleted in the work tree, not yet committed
		}
		if err != nil {
			t.Fatal(err)
		}
		if !fi.Mode().IsRegular() {
			t.Fatalf("%s: not a regular file", f)
		}
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dst, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, f), b, fi.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
}

// readTarGz returns the headers and contents of a gzipped tar archive.
func readTarGz(t *testing.T, b []byte) ([]*tar.Header, map[string][]byte) {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return readTar(t, zr)
}

func readTar(t *testing.T, r io.Reader) ([]*tar.Header, map[string][]byte) {
	t.Helper()
	tr := tar.NewReader(r)
	var hs []*tar.Header
	data := map[string][]byte{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return hs, data
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, h)
		data[h.Name] = b
	}
}

// TestReleaseSnapshot builds `make release-snapshot` for the host, linux
// on its architecture (linux/amd64 in CI; the
// full six platforms are `make release-snapshot` without
// RELEASE_PLATFORMS), then: runs `llmprobe --version` from the unpacked
// tarball, inspects the OCI image layout, lints and renders the packaged
// chart, checks the SBOM and the checksums, and builds again from a copy of
// the work tree at another path, in another time zone and umask, with the
// stamp release.json recorded, which must give the same bytes.
func TestReleaseSnapshot(t *testing.T) {
	if testing.Short() {
		t.Skip("builds llmprobe")
	}
	helm := requireTool(t, "HELM", "helm")
	makeBin := requireTool(t, "MAKE", "make")
	if runtime.GOOS != "linux" {
		t.Skip("the image is linux's: run on a linux host")
	}
	plat := "linux/" + runtime.GOARCH
	root := repoRoot(t)
	tmp := t.TempDir()
	a := filepath.Join(tmp, "a")
	start := time.Now()
	run(t, root, childEnv(), makeBin, "release-snapshot", "RELEASE_PLATFORMS="+plat, "RELEASE_DIR="+a, "HELM="+helm)
	t.Logf("make release-snapshot (%s): %v", plat, time.Since(start).Round(time.Second))

	rec := readRecord(t, a)
	base, err := os.ReadFile(filepath.Join(root, "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	head := strings.TrimSpace(run(t, root, childEnv(), "git", "rev-parse", "HEAD"))
	epoch, _ := strconv.ParseInt(strings.TrimSpace(run(t, root, childEnv(), "git", "log", "-1", "--format=%ct", "HEAD")), 10, 64)
	if want := strings.TrimSpace(string(base)) + "-snapshot.g" + head[:12]; rec.Version != want {
		t.Errorf("snapshot version %q, want %q", rec.Version, want)
	}
	if rec.Revision != head || rec.SourceDateEpoch != epoch || rec.BuildUser == "" || rec.Branch == "" {
		t.Errorf("release.json %+v: want revision %s, source_date_epoch %d (the commit's time), a build user and branch", rec, head, epoch)
	}
	created := time.Unix(epoch, 0).UTC()
	v := rec.Version
	name := "llmprobe-" + v + "." + strings.ReplaceAll(plat, "/", "-")

	// The checksums cover every release file and are right.
	sums, err := os.ReadFile(filepath.Join(a, "sha256sums.txt"))
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, l := range strings.Split(strings.TrimSpace(string(sums)), "\n") {
		sum, file, ok := strings.Cut(l, "  ")
		if !ok {
			t.Fatalf("sha256sums.txt line %q", l)
		}
		b, err := os.ReadFile(filepath.Join(a, file))
		if err != nil {
			t.Fatal(err)
		}
		if sha256Hex(b) != sum {
			t.Errorf("sha256sums.txt: %s is %s, listed %s", file, sha256Hex(b), sum)
		}
		listed = append(listed, file)
	}
	wantFiles := []string{name + ".spdx.json", name + ".tar.gz", "llmprobe-" + v + ".oci.tar", "llmprobe-" + v + ".tgz"}
	slices.Sort(wantFiles)
	if !slices.Equal(listed, wantFiles) {
		t.Errorf("sha256sums.txt lists %v, want %v", listed, wantFiles)
	}

	// The tarball: one directory, the binary, LICENSE, README.md and the
	// example configuration, owned by root, at the commit's time.
	tgz, err := os.ReadFile(filepath.Join(a, name+".tar.gz"))
	if err != nil {
		t.Fatal(err)
	}
	hs, files := readTarGz(t, tgz)
	var names []string
	for _, h := range hs {
		names = append(names, h.Name)
		if h.Uid != 0 || h.Gid != 0 || h.Uname != "" || !h.ModTime.Equal(created) {
			t.Errorf("%s: uid %d gid %d uname %q mtime %v, want root and %v", h.Name, h.Uid, h.Gid, h.Uname, h.ModTime, created)
		}
	}
	wantNames := []string{name + "/", name + "/LICENSE", name + "/README.md", name + "/llmprobe", name + "/llmprobe.yml"}
	if !slices.Equal(names, wantNames) {
		t.Fatalf("tarball holds %v, want %v", names, wantNames)
	}
	for src, in := range map[string]string{"LICENSE": "LICENSE", "README.md": "README.md", "examples/demo.yml": "llmprobe.yml"} {
		want, err := os.ReadFile(filepath.Join(root, src))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(files[name+"/"+in], want) {
			t.Errorf("tarball's %s is not %s", in, src)
		}
	}
	binary := files[name+"/llmprobe"]
	if hs[3].Mode != 0o755 {
		t.Errorf("binary mode %o, want 755", hs[3].Mode)
	}
	unpacked := filepath.Join(tmp, "llmprobe")
	if err := os.WriteFile(unpacked, binary, 0o755); err != nil {
		t.Fatal(err)
	}
	out := run(t, tmp, childEnv(), unpacked, "--version")
	for _, w := range []string{
		"llmprobe, version " + v + " ", "revision: " + head + ")", "branch: " + rec.Branch + ",",
		"build user:       " + rec.BuildUser + "\n", "build date:       " + created.Format("20060102-15:04:05") + "\n",
		"platform:         " + plat,
	} {
		if !strings.Contains(out, w) {
			t.Errorf("llmprobe --version lacks %q:\n%s", w, out)
		}
	}

	t.Run("build_info", func(t *testing.T) { checkBuildInfo(t, unpacked, rec, head) })
	t.Run("image", func(t *testing.T) { checkImage(t, filepath.Join(a, "llmprobe-"+v+".oci"), rec, created, binary) })
	t.Run("chart", func(t *testing.T) { checkChart(t, helm, filepath.Join(a, "llmprobe-"+v+".tgz"), v) })
	t.Run("sbom", func(t *testing.T) { checkSBOM(t, root, filepath.Join(a, name+".spdx.json"), v, head, binary) })

	// The OCI tar is the layout, byte for byte.
	ot, err := os.Open(filepath.Join(a, "llmprobe-"+v+".oci.tar"))
	if err != nil {
		t.Fatal(err)
	}
	defer ot.Close()
	_, layoutFiles := readTar(t, ot)
	for f, b := range layoutFiles {
		if strings.HasSuffix(f, "/") {
			continue
		}
		disk, err := os.ReadFile(filepath.Join(a, "llmprobe-"+v+".oci", f))
		if err != nil || !bytes.Equal(disk, b) {
			t.Errorf("oci.tar's %s differs from the layout's (%v)", f, err)
		}
	}

	// Reproducible: the same stamp from another copy of the tree, path,
	// time zone and umask gives the same bytes.
	src := filepath.Join(tmp, "elsewhere", "llmprobe-src")
	copyWorkTree(t, root, src)
	b := filepath.Join(tmp, "b")
	start = time.Now()
	run(t, src, childEnv("TZ=Pacific/Chatham"), "/bin/sh", "-c", `umask 077 && exec "$@"`, "sh", makeBin, "release-build",
		"RELEASE_PLATFORMS="+plat, "RELEASE_DIR="+b, "HELM="+helm,
		"REL_VERSION="+rec.Version, "REL_REVISION="+rec.Revision, "REL_BRANCH="+rec.Branch,
		"SOURCE_DATE_EPOCH="+strconv.FormatInt(rec.SourceDateEpoch, 10), "RELEASE_BUILD_USER="+rec.BuildUser)
	t.Logf("second build from a copy: %v", time.Since(start).Round(time.Second))
	sumsB, err := os.ReadFile(filepath.Join(b, "sha256sums.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(sums, sumsB) {
		t.Errorf("not reproducible: sha256sums.txt\n%s\nthen\n%s", sums, sumsB)
	}
	if recB := readRecord(t, b); recB.ImageDigest != rec.ImageDigest {
		t.Errorf("not reproducible: image %s then %s", rec.ImageDigest, recB.ImageDigest)
	}
}

// checkImage inspects the layout with go-containerregistry's reader: one
// image index for the host's linux platform, whose image runs /bin/llmprobe as 65534 with
// the OCI labels, in one layer of root-owned files at the commit's time.
func checkImage(t *testing.T, dir string, rec record, created time.Time, binary []byte) {
	idx, err := layoutIndex(dir)
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := idx.Digest(); d.String() != rec.ImageDigest {
		t.Errorf("index digest %s, release.json says %s", d, rec.ImageDigest)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 1 || im.Manifests[0].Platform == nil || im.Manifests[0].Platform.OS != "linux" || im.Manifests[0].Platform.Architecture != runtime.GOARCH {
		t.Fatalf("index manifests %+v, want one for linux/%s", im.Manifests, runtime.GOARCH)
	}
	wantLabels := map[string]string{
		"org.opencontainers.image.source":   "https://github.com/llmprobe/llmprobe",
		"org.opencontainers.image.licenses": "Apache-2.0",
		"org.opencontainers.image.created":  created.Format(time.RFC3339),
		"org.opencontainers.image.version":  rec.Version,
		"org.opencontainers.image.revision": rec.Revision,
		"org.opencontainers.image.title":    "llmprobe",
	}
	for k, w := range wantLabels {
		if im.Annotations[k] != w {
			t.Errorf("index annotation %s = %q, want %q", k, im.Annotations[k], w)
		}
	}
	img, err := idx.Image(im.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	if !slices.Equal(c.Entrypoint, []string{"/bin/llmprobe"}) || !slices.Equal(c.Cmd, []string{"run", "--config.file=/etc/llmprobe/llmprobe.yml"}) {
		t.Errorf("entrypoint %q cmd %q", c.Entrypoint, c.Cmd)
	}
	uid, _, _ := strings.Cut(c.User, ":")
	if n, err := strconv.Atoi(uid); err != nil || n == 0 || c.User != "65534:65534" {
		t.Errorf("user %q, want numeric non-root 65534:65534", c.User)
	}
	if _, ok := c.ExposedPorts["9477/tcp"]; !ok {
		t.Errorf("exposed ports %v, want 9477/tcp", c.ExposedPorts)
	}
	for k, w := range wantLabels {
		if c.Labels[k] != w {
			t.Errorf("label %s = %q, want %q", k, c.Labels[k], w)
		}
	}
	if cf.OS != "linux" || cf.Architecture != runtime.GOARCH || !cf.Created.Time.Equal(created) {
		t.Errorf("config os %s arch %s created %v", cf.OS, cf.Architecture, cf.Created)
	}
	mt, _ := img.MediaType()
	if mt != "application/vnd.oci.image.manifest.v1+json" {
		t.Errorf("manifest media type %s", mt)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers %d %v, want 1", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	hs, files := readTar(t, rc)
	for _, h := range hs {
		if h.Uid != 0 || h.Gid != 0 || !h.ModTime.Equal(created) {
			t.Errorf("layer %s: uid %d gid %d mtime %v", h.Name, h.Uid, h.Gid, h.ModTime)
		}
		if h.Name == "bin/llmprobe" && h.Mode != 0o755 {
			t.Errorf("layer bin/llmprobe mode %o", h.Mode)
		}
	}
	if !bytes.Equal(files["bin/llmprobe"], binary) {
		t.Error("the image's /bin/llmprobe is not the tarball's binary")
	}
	if !strings.Contains(string(files["etc/passwd"]), "nobody:x:65534:65534:") {
		t.Errorf("etc/passwd: %q", files["etc/passwd"])
	}
	if !bytes.Contains(files["etc/ssl/certs/ca-certificates.crt"], []byte("-----BEGIN CERTIFICATE-----")) {
		t.Error("the image has no CA certificates at /etc/ssl/certs/ca-certificates.crt")
	}
}

// checkChart lints and renders the packaged chart: its version and
// appVersion are the release's, and it deploys the release's image.
func checkChart(t *testing.T, helm, tgz, version string) {
	run(t, filepath.Dir(tgz), childEnv(), helm, "lint", "--strict", tgz)
	var chart struct {
		Name       string `yaml:"name"`
		Version    string `yaml:"version"`
		AppVersion string `yaml:"appVersion"`
	}
	if err := yaml.Unmarshal([]byte(run(t, filepath.Dir(tgz), childEnv(), helm, "show", "chart", tgz)), &chart); err != nil {
		t.Fatal(err)
	}
	if chart.Name != "llmprobe" || chart.Version != version || chart.AppVersion != version {
		t.Errorf("packaged chart %+v, want llmprobe version and appVersion %s", chart, version)
	}
	out := run(t, filepath.Dir(tgz), childEnv(), helm, "template", "probe", tgz, "--show-only", "templates/deployment.yaml")
	var dep struct {
		Spec struct {
			Template struct {
				Spec struct {
					Containers []struct{ Image string }
				}
			}
		}
	}
	if err := yaml.Unmarshal([]byte(out), &dep); err != nil {
		t.Fatal(err)
	}
	cs := dep.Spec.Template.Spec.Containers
	if want := "ghcr.io/llmprobe/llmprobe:" + version; len(cs) != 1 || cs[0].Image != want {
		t.Errorf("the packaged chart deploys %+v, want %s", cs, want)
	}
}

// checkSBOM reads the SPDX document: it describes the binary (by its
// SHA-256) at the release's version and lists the modules of go.mod.
func checkSBOM(t *testing.T, root, path, version, revision string, binary []byte) {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc spdxDoc
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.SPDXVersion != "SPDX-2.3" || doc.DataLicense != "CC0-1.0" || doc.SPDXID != "SPDXRef-DOCUMENT" || doc.DocumentNamespace == "" || strings.Contains(doc.DocumentNamespace, "#") {
		t.Errorf("SPDX header %+v", doc)
	}
	ids := map[string]spdxPackage{}
	for _, p := range doc.Packages {
		if _, dup := ids[p.SPDXID]; dup {
			t.Errorf("duplicate SPDXID %s", p.SPDXID)
		}
		ids[p.SPDXID] = p
	}
	var described []spdxPackage
	for _, r := range doc.Relationships {
		if _, ok := ids[r.RelatedSPDXElement]; !ok {
			t.Errorf("relationship to unknown %s", r.RelatedSPDXElement)
		}
		if r.SPDXElementID == "SPDXRef-DOCUMENT" && r.RelationshipType == "DESCRIBES" {
			described = append(described, ids[r.RelatedSPDXElement])
		}
	}
	if len(described) != 1 {
		t.Fatalf("the document describes %d packages, want 1", len(described))
	}
	m := described[0]
	if m.Name != "github.com/llmprobe/llmprobe" || m.VersionInfo != version || len(m.Checksums) != 1 ||
		m.Checksums[0].ChecksumValue != sha256Hex(binary) || !strings.HasSuffix(m.DownloadLocation, "@"+revision) {
		t.Errorf("described package %+v, want llmprobe %s, the binary's SHA-256, revision %s", m, version, revision)
	}
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]string{}
	for _, p := range doc.Packages {
		byName[p.Name] = p.VersionInfo
	}
	for _, mod := range []string{"github.com/prometheus/client_golang", "github.com/prometheus/common", "go.opentelemetry.io/otel/sdk"} {
		var want string
		for _, l := range strings.Split(string(gomod), "\n") {
			if f := strings.Fields(l); len(f) >= 2 && f[0] == mod {
				want = f[1]
			}
		}
		if want == "" || byName[mod] != want {
			t.Errorf("SBOM lists %s at %q, go.mod requires %q", mod, byName[mod], want)
		}
	}
	if !strings.HasPrefix(byName["stdlib"], "go1.") {
		t.Errorf("SBOM lists the standard library at %q", byName["stdlib"])
	}
}

// checkBuildInfo runs the unpacked binary (`run --demo`: its own simulator
// on loopback) and reads llmprobe_build_info from /metrics: the stamp is
// in its labels.
func checkBuildInfo(t *testing.T, bin string, rec record, revision string) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	cmd := exec.Command(bin, "run", "--demo", "--web.listen-address="+addr, "--log.level=warn")
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(45 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	}()
	var line string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline) && line == ""; time.Sleep(200 * time.Millisecond) {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, l := range strings.Split(string(body), "\n") {
			if strings.HasPrefix(l, "llmprobe_build_info{") {
				line = l
			}
		}
	}
	if line == "" {
		t.Fatalf("no llmprobe_build_info from %s within 30 s; log:\n%s", addr, logs.String())
	}
	for _, w := range []string{`version="` + rec.Version + `"`, `revision="` + revision + `"`, `branch="` + rec.Branch + `"`} {
		if !strings.Contains(line, w) {
			t.Errorf("%s lacks %s", line, w)
		}
	}
}
