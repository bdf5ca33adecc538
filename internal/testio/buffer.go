// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

// Package testio holds what tests share to watch what a process writes:
// a buffer that a daemon's goroutines or a child process write while the
// test reads it.
//
// It is test support: only tests import it, and it imports no llmprobe
// package.
package testio

import (
	"bytes"
	"sync"
)

// MaxBuffer bounds a Buffer: a chatty process must not eat the test's
// memory; what comes after is dropped.
const MaxBuffer = 4 << 20

// Buffer is a bytes.Buffer safe for concurrent writes and reads, bounded
// by MaxBuffer. The zero value is ready to use.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write implements io.Writer. It never fails; past MaxBuffer it drops.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.buf.Len() > MaxBuffer {
		return len(p), nil
	}
	return b.buf.Write(p)
}

// String returns what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
