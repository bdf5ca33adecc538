// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"regexp"
	"strings"
)

// versionHeading is a released version's heading in CHANGELOG.md (Keep a
// Changelog): "## [0.1.0] - 2026-12-02".
var versionHeading = regexp.MustCompile(`^## \[([^\]]+)\] - (\d{4}-\d{2}-\d{2})\s*$`)

// changelogSection returns the body of version's section, from the line
// after its heading to the next "## " heading, trimmed. A version without
// a dated section, or with an empty one, is an error: a release is cut by
// renaming "## [Unreleased]" to "## [X.Y.Z] - DATE".
func changelogSection(changelog, version string) (string, error) {
	version = strings.TrimPrefix(version, "v")
	lines := strings.Split(changelog, "\n")
	start := -1
	for i, l := range lines {
		if start < 0 {
			if m := versionHeading.FindStringSubmatch(l); m != nil && m[1] == version {
				start = i + 1
			}
			continue
		}
		if strings.HasPrefix(l, "## ") {
			lines = lines[:i]
			break
		}
	}
	if start < 0 {
		return "", fmt.Errorf(`no section "## [%s] - YYYY-MM-DD"`, version)
	}
	body := strings.TrimSpace(strings.Join(lines[start:], "\n"))
	if body == "" {
		return "", fmt.Errorf("the section of %s is empty", version)
	}
	return body + "\n", nil
}
