// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package bounded

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	small := filepath.Join(dir, "small")
	if err := os.WriteFile(small, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if b, err := ReadFile(ctx, small, 5); err != nil || string(b) != "hello" {
		t.Errorf("a file at the bound: %q, %v", b, err)
	}
	var tl *TooLargeError
	if _, err := ReadFile(ctx, small, 4); !errors.As(err, &tl) || err.Error() != small+": larger than 4 bytes" {
		t.Errorf("a file over the bound: %v", err)
	}
	if _, err := ReadFile(ctx, dir, 4); !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), "is a directory") {
		t.Errorf("a directory: %v", err)
	}
	if _, err := ReadFile(ctx, filepath.Join(dir, "missing"), 4); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing file: %v", err)
	}
	if _, err := os.Stat("/dev/zero"); err == nil {
		if _, err := ReadFile(ctx, "/dev/zero", 1<<20); !errors.Is(err, ErrNotRegular) || err.Error() != "/dev/zero: not a regular file" {
			t.Errorf("/dev/zero: %v", err)
		}
	}
}

func TestCheck(t *testing.T) {
	dir := t.TempDir()
	small := filepath.Join(dir, "small")
	if err := os.WriteFile(small, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	var tl *TooLargeError
	for _, tc := range []struct {
		path  string
		limit int64
		ok    func(error) bool
	}{
		{small, 5, func(err error) bool { return err == nil }},
		{small, 4, func(err error) bool { return errors.As(err, &tl) }},
		{dir, 4, func(err error) bool { return errors.Is(err, ErrNotRegular) }},
		{"/dev/zero", 4, func(err error) bool { return errors.Is(err, ErrNotRegular) }},
		{filepath.Join(dir, "missing"), 4, func(err error) bool { return errors.Is(err, os.ErrNotExist) }},
	} {
		if err := Check(tc.path, tc.limit); !tc.ok(err) {
			t.Errorf("Check(%s, %d) = %v", tc.path, tc.limit, err)
		}
	}
	if fi, err := Stat(small, 5); err != nil || fi.Size() != 5 {
		t.Errorf("Stat(%s, 5) = %v, %v; want its size 5", small, fi, err)
	}
}

// TestPipe: a named pipe is read (a shell's <(...)), within the bound,
// and a read that blocks on it gives way to the context.
func TestPipe(t *testing.T) {
	dir := t.TempDir()
	var fifo string
	mkfifo := func(name string) {
		fifo = filepath.Join(dir, name)
		if err := syscall.Mkfifo(fifo, 0o600); err != nil {
			t.Skipf("mkfifo: %v", err)
		}
	}
	mkfifo("small")
	write := func(data string) {
		fifo := fifo
		go func() {
			w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
			if err != nil {
				return
			}
			defer w.Close()
			w.WriteString(data)
		}()
	}
	write("from a pipe")
	if b, err := ReadFile(context.Background(), fifo, 64); err != nil || string(b) != "from a pipe" {
		t.Errorf("pipe: %q, %v", b, err)
	}
	mkfifo("large")
	write(strings.Repeat("x", 1000))
	var tl *TooLargeError
	if _, err := ReadFile(context.Background(), fifo, 100); !errors.As(err, &tl) {
		t.Errorf("a pipe past the bound: %v", err)
	}

	// A writer that opens the pipe and never writes.
	mkfifo("stalled")
	stall := make(chan struct{})
	defer close(stall)
	stalled := fifo
	go func() {
		w, err := os.OpenFile(stalled, os.O_WRONLY, 0)
		if err != nil {
			return
		}
		<-stall
		w.Close()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := ReadFile(ctx, fifo, 64); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a stalled pipe: %v, want the context's error", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("returned after %v", d)
	}

	// No writer at all: the open itself waits, and gives way too.
	mkfifo("nowriter")
	ctx, cancel = context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := ReadFile(ctx, fifo, 64); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a pipe without a writer: %v, want the context's error", err)
	}
}

// TestClient: an answer larger than the bound fails the read, whatever
// the server meant to send (here: without end).
func TestClient(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chunk := make([]byte, 64<<10)
		for range 1024 { // 64 MiB at most
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	defer srv.Close()
	c := Client(&http.Client{Timeout: 30 * time.Second}, 1<<20, "the answer")
	resp, err := c.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	var tl *TooLargeError
	if !errors.As(err, &tl) || err.Error() != "the answer: larger than 1 MiB" || n > 1<<20+1 {
		t.Errorf("read %d bytes, err %v", n, err)
	}
}
