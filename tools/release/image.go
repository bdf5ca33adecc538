// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image's fixed settings. deploy/docker/Dockerfile sets the same user,
// entrypoint, command, port and label keys (TestDockerfileInStep).
const (
	imageUser       = "65534:65534"
	imageBinary     = "/bin/llmprobe"
	imageConfigPath = "/etc/llmprobe/llmprobe.yml"
	imagePort       = "9477/tcp"
	// caBundlePath is where Go's crypto/x509 looks first on Linux.
	caBundlePath = "/etc/ssl/certs/ca-certificates.crt"
)

var (
	imageEntrypoint = []string{imageBinary}
	imageCmd        = []string{"run", "--config.file=" + imageConfigPath}
)

// meta is what a release is stamped with.
type meta struct {
	Version   string
	Revision  string
	Branch    string
	BuildUser string
	Created   time.Time // SOURCE_DATE_EPOCH: the commit's time
	Source    string    // the repository URL
	License   string    // SPDX expression
}

// labels are the image's OCI annotations (config labels and manifest
// annotations alike).
func (m meta) labels() map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":       "llmprobe",
		"org.opencontainers.image.description": "Continuous, open-loop benchmarking of OpenAI-compatible LLM endpoints, exported as Prometheus metrics.",
		"org.opencontainers.image.source":      m.Source,
		"org.opencontainers.image.url":         m.Source,
		"org.opencontainers.image.licenses":    m.License,
		"org.opencontainers.image.version":     m.Version,
		"org.opencontainers.image.revision":    m.Revision,
		"org.opencontainers.image.created":     m.Created.UTC().Format(time.RFC3339),
		"org.opencontainers.image.vendor":      "The llmprobe Authors",
	}
}

// imageLayer is the single layer of an image for one platform: the binary
// at /bin/llmprobe, a CA bundle, and /etc/passwd and /etc/group naming
// root and nobody, every file owned by root with the release's time.
func imageLayer(binary, caBundle []byte, created time.Time) (v1.Layer, error) {
	files := []entry{
		{Name: "bin/llmprobe", Mode: 0o755, Data: binary},
		{Name: "etc/passwd", Mode: 0o644, Data: []byte("root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n")},
		{Name: "etc/group", Mode: 0o644, Data: []byte("root:x:0:\nnogroup:x:65534:\n")},
		{Name: "etc/ssl/certs/ca-certificates.crt", Mode: 0o644, Data: caBundle},
	}
	var raw bytes.Buffer
	if err := writeTar(&raw, files, created); err != nil {
		return nil, err
	}
	gz, err := gzipBytes(raw.Bytes())
	if err != nil {
		return nil, err
	}
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(gz)), nil
	}, tarball.WithMediaType(types.OCILayer))
}

// platformImage builds the image of one linux platform from its binary.
func platformImage(m meta, arch string, binary, caBundle []byte) (v1.Image, error) {
	layer, err := imageLayer(binary, caBundle, m.Created)
	if err != nil {
		return nil, err
	}
	created := v1.Time{Time: m.Created.UTC()}
	img, err := mutate.Append(mutate.MediaType(empty.Image, types.OCIManifestSchema1), mutate.Addendum{
		Layer: layer,
		History: v1.History{
			Created:   created,
			CreatedBy: "llmprobe-release image: " + imageBinary + ", CA certificates, /etc/passwd",
			Comment:   "llmprobe " + m.Version,
		},
	})
	if err != nil {
		return nil, err
	}
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS = "linux"
	cf.Architecture = arch
	cf.Created = created
	cf.Author = "The llmprobe Authors"
	cf.Config = v1.Config{
		User:         imageUser,
		Entrypoint:   imageEntrypoint,
		Cmd:          imageCmd,
		ExposedPorts: map[string]struct{}{imagePort: {}},
		Env:          []string{"PATH=/bin"},
		Labels:       m.labels(),
		WorkingDir:   "/",
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, err
	}
	out, ok := mutate.Annotations(img, m.labels()).(v1.Image)
	if !ok {
		return nil, fmt.Errorf("annotated image is not an image")
	}
	return out, nil
}

// buildImage writes an OCI image layout at dir: index.json names one
// multi-platform image index (annotated with the version as its ref name)
// holding one image per linux binary. binaries maps an architecture to its
// binary's path.
func buildImage(dir string, m meta, arches []string, binaries map[string]string, caBundlePath string) (v1.Hash, error) {
	caBundle, err := os.ReadFile(caBundlePath)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("CA bundle for the image: %w", err)
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, arch := range arches {
		bin, err := os.ReadFile(binaries[arch])
		if err != nil {
			return v1.Hash{}, err
		}
		img, err := platformImage(m, arch, bin, caBundle)
		if err != nil {
			return v1.Hash{}, fmt.Errorf("image linux/%s: %w", arch, err)
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add: img,
			Descriptor: v1.Descriptor{
				Platform: &v1.Platform{OS: "linux", Architecture: arch},
			},
		})
	}
	idx, ok := mutate.Annotations(idx, m.labels()).(v1.ImageIndex)
	if !ok {
		return v1.Hash{}, fmt.Errorf("annotated index is not an index")
	}
	if err := os.RemoveAll(dir); err != nil {
		return v1.Hash{}, err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return v1.Hash{}, err
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": m.Version,
	})); err != nil {
		return v1.Hash{}, err
	}
	return idx.Digest()
}

// layoutIndex opens the image index that a layout written by buildImage
// names in its index.json.
func layoutIndex(dir string) (v1.ImageIndex, error) {
	top, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, err
	}
	im, err := top.IndexManifest()
	if err != nil {
		return nil, err
	}
	if len(im.Manifests) != 1 || im.Manifests[0].MediaType != types.OCIImageIndex {
		return nil, fmt.Errorf("%s: index.json must name exactly one image index, has %d manifests", dir, len(im.Manifests))
	}
	return top.ImageIndex(im.Manifests[0].Digest)
}
