// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"runtime/debug"
	"strings"
	"time"
)

// SPDX 2.3 JSON, the parts an SBOM of a Go binary needs.
type spdxDoc struct {
	SPDXVersion       string             `json:"spdxVersion"`
	DataLicense       string             `json:"dataLicense"`
	SPDXID            string             `json:"SPDXID"`
	Name              string             `json:"name"`
	DocumentNamespace string             `json:"documentNamespace"`
	CreationInfo      spdxCreation       `json:"creationInfo"`
	Packages          []spdxPackage      `json:"packages"`
	Relationships     []spdxRelationship `json:"relationships"`
}

type spdxCreation struct {
	Created  string   `json:"created"`
	Creators []string `json:"creators"`
}

type spdxPackage struct {
	SPDXID                string         `json:"SPDXID"`
	Name                  string         `json:"name"`
	VersionInfo           string         `json:"versionInfo"`
	DownloadLocation      string         `json:"downloadLocation"`
	FilesAnalyzed         bool           `json:"filesAnalyzed"`
	LicenseConcluded      string         `json:"licenseConcluded"`
	LicenseDeclared       string         `json:"licenseDeclared"`
	CopyrightText         string         `json:"copyrightText"`
	PrimaryPackagePurpose string         `json:"primaryPackagePurpose,omitempty"`
	Checksums             []spdxChecksum `json:"checksums,omitempty"`
	ExternalRefs          []spdxRef      `json:"externalRefs,omitempty"`
	Comment               string         `json:"comment,omitempty"`
}

type spdxChecksum struct {
	Algorithm     string `json:"algorithm"`
	ChecksumValue string `json:"checksumValue"`
}

type spdxRef struct {
	ReferenceCategory string `json:"referenceCategory"`
	ReferenceType     string `json:"referenceType"`
	ReferenceLocator  string `json:"referenceLocator"`
}

type spdxRelationship struct {
	SPDXElementID      string `json:"spdxElementId"`
	RelationshipType   string `json:"relationshipType"`
	RelatedSPDXElement string `json:"relatedSpdxElement"`
}

var spdxIDUnsafe = regexp.MustCompile(`[^A-Za-z0-9.-]+`)

func spdxID(kind, name, version string) string {
	return "SPDXRef-" + kind + "-" + spdxIDUnsafe.ReplaceAllString(name+"-"+version, "-")
}

// sbom describes the binary at path from the build information the Go
// linker embeds in it (debug/buildinfo): the main module at the release's
// version with the binary's SHA-256, the Go standard library, and every
// module linked in, with its version and go.sum hash. Nothing in it
// depends on when or where it is written.
func sbom(path, name string, m meta) ([]byte, error) {
	bin, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	info, err := buildinfo.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	sum := sha256.Sum256(bin)
	binSum := hex.EncodeToString(sum[:])
	var settings []string
	for _, s := range info.Settings {
		settings = append(settings, s.Key+"="+s.Value)
	}
	main := spdxPackage{
		SPDXID:                spdxID("Package", info.Main.Path, m.Version),
		Name:                  info.Main.Path,
		VersionInfo:           m.Version,
		DownloadLocation:      "git+" + m.Source + "@" + m.Revision,
		LicenseConcluded:      m.License,
		LicenseDeclared:       m.License,
		CopyrightText:         "Copyright The llmprobe Authors",
		PrimaryPackagePurpose: "APPLICATION",
		Checksums:             []spdxChecksum{{Algorithm: "SHA256", ChecksumValue: binSum}},
		ExternalRefs:          []spdxRef{purl(info.Main.Path, "v"+strings.TrimPrefix(m.Version, "v"))},
		Comment:               "the binary " + name + ", built with " + info.GoVersion + " (" + strings.Join(settings, " ") + ")",
	}
	doc := spdxDoc{
		SPDXVersion:       "SPDX-2.3",
		DataLicense:       "CC0-1.0",
		SPDXID:            "SPDXRef-DOCUMENT",
		Name:              name,
		DocumentNamespace: m.Source + "/releases/" + m.Version + "/" + name + ".spdx.json/sha256-" + binSum,
		CreationInfo: spdxCreation{
			Created:  m.Created.UTC().Format(time.RFC3339),
			Creators: []string{"Organization: The llmprobe Authors", "Tool: llmprobe-release"},
		},
		Packages:      []spdxPackage{main},
		Relationships: []spdxRelationship{{"SPDXRef-DOCUMENT", "DESCRIBES", main.SPDXID}},
	}
	add := func(p spdxPackage) {
		doc.Packages = append(doc.Packages, p)
		doc.Relationships = append(doc.Relationships, spdxRelationship{main.SPDXID, "DEPENDS_ON", p.SPDXID})
	}
	add(spdxPackage{
		SPDXID:           spdxID("Package", "stdlib", info.GoVersion),
		Name:             "stdlib",
		VersionInfo:      info.GoVersion,
		DownloadLocation: "https://go.dev/dl/",
		LicenseConcluded: "BSD-3-Clause",
		LicenseDeclared:  "BSD-3-Clause",
		CopyrightText:    "NOASSERTION",
		ExternalRefs:     []spdxRef{purl("stdlib", info.GoVersion)},
	})
	for _, d := range info.Deps {
		dep := d
		if d.Replace != nil {
			dep = d.Replace
		}
		add(modulePackage(dep, d))
	}
	return json.MarshalIndent(doc, "", "  ")
}

// modulePackage is one dependency: dep is the module actually linked (the
// replacement, if any), orig the module the build asked for.
func modulePackage(dep, orig *debug.Module) spdxPackage {
	p := spdxPackage{
		SPDXID:           spdxID("Package", dep.Path, dep.Version),
		Name:             dep.Path,
		VersionInfo:      dep.Version,
		DownloadLocation: "NOASSERTION",
		LicenseConcluded: "NOASSERTION",
		LicenseDeclared:  "NOASSERTION",
		CopyrightText:    "NOASSERTION",
		ExternalRefs:     []spdxRef{purl(dep.Path, dep.Version)},
	}
	if dep.Sum != "" {
		p.Comment = "go.sum " + dep.Sum
	}
	if dep != orig {
		p.Comment = strings.TrimSpace(p.Comment + "; replaces " + orig.Path + " " + orig.Version)
	}
	return p
}

func purl(path, version string) spdxRef {
	return spdxRef{
		ReferenceCategory: "PACKAGE-MANAGER",
		ReferenceType:     "purl",
		ReferenceLocator:  "pkg:golang/" + path + "@" + version,
	}
}
