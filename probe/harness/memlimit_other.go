// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

//go:build !linux

package harness

// CgroupMemoryLimit reports no limit outside Linux.
func CgroupMemoryLimit() (limit int64, ok bool) { return 0, false }
