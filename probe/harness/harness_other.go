// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

//go:build !linux

package harness

// noOSReader: only the Go scheduler is watched outside Linux.
type noOSReader struct{}

func newOSReader() osReader { return noOSReader{} }

func (noOSReader) read(*harnessSample) {}
