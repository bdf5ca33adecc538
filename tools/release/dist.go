// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// platform is GOOS/GOARCH.
type platform struct{ OS, Arch string }

func (p platform) String() string { return p.OS + "-" + p.Arch }

func (p platform) exe() string {
	if p.OS == "windows" {
		return "llmprobe.exe"
	}
	return "llmprobe"
}

func parsePlatforms(s string) ([]platform, error) {
	var out []platform
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' }) {
		os, arch, ok := strings.Cut(f, "/")
		if !ok || os == "" || arch == "" {
			return nil, fmt.Errorf("platform %q: want GOOS/GOARCH", f)
		}
		out = append(out, platform{os, arch})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no platforms")
	}
	return out, nil
}

// record is release.json: what was built, from what, for the workflow and
// for anyone reproducing the build (these values and the commit give the
// same bytes).
type record struct {
	Version         string            `json:"version"`
	Revision        string            `json:"revision"`
	Branch          string            `json:"branch"`
	BuildUser       string            `json:"build_user"`
	SourceDateEpoch int64             `json:"source_date_epoch"`
	Platforms       []string          `json:"platforms"`
	Image           string            `json:"image,omitempty"`
	ImageDigest     string            `json:"image_digest,omitempty"`
	ImageLayout     string            `json:"image_layout,omitempty"`
	Files           map[string]string `json:"files"` // name: sha256, as in sha256sums.txt
}

func runDist(args []string) error {
	fs := flag.NewFlagSet("dist", flag.ExitOnError)
	binDir := fs.String("bin-dir", "", "directory with GOOS-GOARCH/llmprobe[.exe]")
	out := fs.String("out", "", "output directory")
	platforms := fs.String("platforms", "linux/amd64", "GOOS/GOARCH list, comma-separated")
	var m meta
	fs.StringVar(&m.Version, "version", "", "release version, without v")
	fs.StringVar(&m.Revision, "revision", "", "commit")
	fs.StringVar(&m.Branch, "branch", "", "branch")
	fs.StringVar(&m.BuildUser, "build-user", "", "build user (recorded in release.json)")
	fs.StringVar(&m.Source, "source", "https://github.com/llmprobe/llmprobe", "repository URL")
	fs.StringVar(&m.License, "license", "Apache-2.0", "SPDX license expression")
	epoch := fs.String("source-date-epoch", os.Getenv("SOURCE_DATE_EPOCH"), "the commit time, Unix seconds")
	imageName := fs.String("image", "ghcr.io/llmprobe/llmprobe", "image repository (recorded; the push names the tags)")
	caBundle := fs.String("ca-bundle", "/etc/ssl/certs/ca-certificates.crt", "CA certificates for the image")
	var files, charts listFlag
	fs.Var(&files, "file", "SRC[:NAME] added to every archive (repeatable)")
	fs.Var(&charts, "chart", "a chart archive (helm package) to re-pack reproducibly in place (repeatable)")
	fs.Parse(args)
	if *binDir == "" || *out == "" || m.Version == "" || m.Revision == "" {
		return fmt.Errorf("dist needs -bin-dir, -out, -version and -revision")
	}
	sec, err := strconv.ParseInt(*epoch, 10, 64)
	if err != nil {
		return fmt.Errorf("-source-date-epoch %q: %w", *epoch, err)
	}
	m.Created = time.Unix(sec, 0).UTC()
	plats, err := parsePlatforms(*platforms)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	for _, c := range charts {
		if err := repackTarGz(c, m.Created); err != nil {
			return err
		}
	}
	var extra []entry
	for _, f := range files {
		src, name, ok := strings.Cut(f, ":")
		if !ok {
			name = filepath.Base(src)
		}
		b, err := os.ReadFile(src)
		if err != nil {
			return err
		}
		extra = append(extra, entry{Name: name, Mode: 0o644, Data: b})
	}
	rec := record{Version: m.Version, Revision: m.Revision, Branch: m.Branch, BuildUser: m.BuildUser, SourceDateEpoch: sec}
	var linuxArches []string
	linuxBins := map[string]string{}
	for _, p := range plats {
		rec.Platforms = append(rec.Platforms, p.OS+"/"+p.Arch)
		bin := filepath.Join(*binDir, p.String(), p.exe())
		b, err := os.ReadFile(bin)
		if err != nil {
			return err
		}
		base := "llmprobe-" + m.Version + "." + p.String()
		entries := []entry{{Name: base + "/" + p.exe(), Mode: 0o755, Data: b}}
		for _, e := range extra {
			e.Name = base + "/" + e.Name
			entries = append(entries, e)
		}
		var archive []byte
		name := base + ".tar.gz"
		if p.OS == "windows" {
			name = base + ".zip"
			archive, err = zipBytes(entries, m.Created)
		} else {
			archive, err = tarGz(entries, m.Created)
		}
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(*out, name), archive, 0o644); err != nil {
			return err
		}
		doc, err := sbom(bin, base, m)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(*out, base+".spdx.json"), append(doc, '\n'), 0o644); err != nil {
			return err
		}
		if p.OS == "linux" {
			linuxArches = append(linuxArches, p.Arch)
			linuxBins[p.Arch] = bin
		}
	}
	if len(linuxArches) > 0 {
		dir := filepath.Join(*out, "llmprobe-"+m.Version+".oci")
		digest, err := buildImage(dir, m, linuxArches, linuxBins, *caBundle)
		if err != nil {
			return err
		}
		entries, err := dirEntries(dir, "")
		if err != nil {
			return err
		}
		f, err := os.Create(dir + ".tar")
		if err != nil {
			return err
		}
		if err := writeTar(f, entries, m.Created); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
		rec.Image, rec.ImageDigest, rec.ImageLayout = *imageName+":"+m.Version, digest.String(), filepath.Base(dir)
	}
	sums, err := checksums(*out)
	if err != nil {
		return err
	}
	rec.Files = sums
	b, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(*out, "release.json"), append(b, '\n'), 0o644)
}

// checksums writes sha256sums.txt (sha256sum's format, names sorted) over
// the regular files directly in dir, and returns them.
func checksums(dir string) (map[string]string, error) {
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	sums := map[string]string{}
	var names []string
	for _, de := range des {
		n := de.Name()
		if !de.Type().IsRegular() || n == "sha256sums.txt" || n == "release.json" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			return nil, err
		}
		s := sha256.Sum256(b)
		sums[n] = hex.EncodeToString(s[:])
		names = append(names, n)
	}
	sort.Strings(names)
	var txt strings.Builder
	for _, n := range names {
		fmt.Fprintf(&txt, "%s  %s\n", sums[n], n)
	}
	return sums, os.WriteFile(filepath.Join(dir, "sha256sums.txt"), []byte(txt.String()), 0o644)
}
