// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package testio

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

func TestBufferKeepsAll(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 100 {
				fmt.Fprintf(&b, "writer %d line %d\n", i, j)
			}
		}()
	}
	wg.Wait()
	got := b.String()
	if n := strings.Count(got, "\n"); n != 400 {
		t.Errorf("%d lines, want 400", n)
	}
	if strings.Contains(got, "dropped") {
		t.Errorf("a small output lost something:\n%.200s", got)
	}
}

// TestBufferKeepsHeadAndTail: past MaxBuffer the buffer keeps how the
// process started and what it said last, and says how much it dropped.
func TestBufferKeepsHeadAndTail(t *testing.T) {
	var b Buffer
	line := strings.Repeat("x", 1023) + "\n"
	b.Write([]byte("first line\n"))
	const lines = 3 * MaxBuffer / 1024
	for range lines {
		b.Write([]byte(line))
	}
	b.Write([]byte("last line\n"))
	got := b.String()
	if !strings.HasPrefix(got, "first line\n") {
		t.Errorf("the first line is lost: %.40q", got)
	}
	if !strings.HasSuffix(got, "x\nlast line\n") {
		t.Errorf("the last line is lost: %q", got[len(got)-40:])
	}
	total := len("first line\n") + lines*len(line) + len("last line\n")
	var dropped int
	if _, err := fmt.Sscanf(got[strings.Index(got, "[... "):], "[... %d bytes dropped ...]", &dropped); err != nil {
		t.Fatalf("no line saying what was dropped: %v", err)
	}
	kept := len(got) - len(fmt.Sprintf("\n[... %d bytes dropped ...]\n", dropped))
	if kept+dropped != total {
		t.Errorf("kept %d + dropped %d bytes, want the %d written", kept, dropped, total)
	}
	if kept > 3*MaxBuffer/2 {
		t.Errorf("kept %d bytes, want at most 1.5 × MaxBuffer", kept)
	}
}

// TestBufferOneLargeWrite: a write larger than the bound is cut too.
func TestBufferOneLargeWrite(t *testing.T) {
	var b Buffer
	p := []byte("a" + strings.Repeat("b", 3*MaxBuffer) + "c")
	if n, err := b.Write(p); n != len(p) || err != nil {
		t.Fatalf("Write = %d, %v", n, err)
	}
	got := b.String()
	if !strings.HasPrefix(got, "ab") || !strings.HasSuffix(got, "bc") || len(got) > 3*MaxBuffer/2+100 {
		t.Errorf("got %d bytes from %.10q to %q", len(got), got, got[len(got)-10:])
	}
}
