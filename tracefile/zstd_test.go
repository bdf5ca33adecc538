// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package tracefile

import (
	"errors"
	"io"
	"strings"
	"testing"
)

// zstdFrame is a zstd frame of one raw block holding content, whose
// header asks for a window of 1<<(10+exp) bytes and names no content
// size (as a streaming encoder writes it).
func zstdFrame(exp byte, content string) []byte {
	b := []byte{0x28, 0xb5, 0x2f, 0xfd, 0x00, exp << 3}
	h := uint32(len(content))<<3 | 1 // raw block, the last
	b = append(b, byte(h), byte(h>>8), byte(h>>16))
	return append(b, content...)
}

// TestZstdWindowBound: a zstd frame asking for a window over 16 MiB is
// refused with an error naming the file, instead of taking the memory;
// one within the bound is read.
func TestZstdWindowBound(t *testing.T) {
	line := `{"timestamp": 0, "input_length": 1, "output_length": 1}` + "\n"
	for _, c := range []struct {
		exp byte // window 1<<(10+exp)
		ok  bool
	}{{13, true}, {14, true}, {15, false}, {20, false}} {
		r, err := NewReader(strings.NewReader(string(zstdFrame(c.exp, line+line))), "big.zst", Options{})
		n := 0
		if err == nil {
			for {
				if _, err = r.Next(); err != nil {
					break
				}
				n++
			}
			r.Close()
			if errors.Is(err, io.EOF) {
				err = nil
			}
		}
		if c.ok != (err == nil && n == 2) || err != nil && !strings.Contains(err.Error(), "big.zst") {
			t.Errorf("window %d MiB: %d records, %v", 1<<(10+c.exp)>>20, n, err)
		}
	}
}
