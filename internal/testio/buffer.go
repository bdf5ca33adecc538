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
	"fmt"
	"sync"
)

// MaxBuffer bounds a Buffer: a chatty process must not eat the test's
// memory. Past it, a Buffer keeps the first and the last MaxBuffer/2
// bytes (how a process started, and what it said last) and drops the
// middle.
const MaxBuffer = 4 << 20

// Buffer is a byte buffer safe for concurrent writes and reads, bounded
// by MaxBuffer. The zero value is ready to use.
type Buffer struct {
	mu      sync.Mutex
	head    []byte // the first bytes written, up to MaxBuffer/2
	tail    []byte // what came after; compacted to its last MaxBuffer/2 bytes
	dropped int64  // bytes between head and tail no longer kept
}

// Write implements io.Writer. It never fails.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := len(p)
	if len(b.tail) == 0 && b.dropped == 0 {
		room := min(MaxBuffer/2-len(b.head), len(p))
		b.head = append(b.head, p[:room]...)
		p = p[room:]
	}
	b.tail = append(b.tail, p...)
	if len(b.tail) > MaxBuffer {
		cut := len(b.tail) - MaxBuffer/2
		b.dropped += int64(cut)
		b.tail = append(b.tail[:0], b.tail[cut:]...)
	}
	return n, nil
}

// String returns what was written so far; past MaxBuffer, a line says
// how much of the middle was dropped.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.dropped == 0 {
		return string(b.head) + string(b.tail)
	}
	return fmt.Sprintf("%s\n[... %d bytes dropped ...]\n%s", b.head, b.dropped, b.tail)
}
