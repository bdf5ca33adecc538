// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

//go:build !(aix || darwin || dragonfly || freebsd || linux || netbsd || openbsd)

package main

import "os"

// termWidth is the terminal's width in columns (0: unknown).
func termWidth(*os.File) int { return 0 }
