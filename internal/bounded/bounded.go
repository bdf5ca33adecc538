// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

// Package bounded reads what llmprobe is given — files named on the
// command line or in a configuration, and the answers of HTTP APIs it
// queries (Prometheus) — with a bound on the bytes read, so that a wrong
// path (/dev/zero), a huge file or a hostile server fails fast with an
// error that says so, instead of growing the process until the kernel
// kills it. File reads also give way to a context (SIGINT/SIGTERM).
//
// bounded imports no llmprobe package.
package bounded

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"syscall"
	"time"
)

// TooLargeError is a read that passed its bound.
type TooLargeError struct {
	Name  string // the file, or what the answer is of
	Limit int64  // bytes
}

func (e *TooLargeError) Error() string {
	return e.Name + ": larger than " + Size(e.Limit)
}

// ErrNotRegular is the error of a path that is not a file to read: a
// directory, a device (/dev/zero), a socket. Errors wrap it with the path.
var ErrNotRegular = errors.New("not a regular file")

// Size renders a bound: "16 MiB", "64 KiB", else bytes.
func Size(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// Check checks, without reading it, that path is a regular file of at
// most limit bytes, for a file that a library reads itself (the
// exporter-toolkit web configuration). A pipe is refused too: whoever
// reads it next would find it consumed.
func Check(path string, limit int64) error {
	_, err := Stat(path, limit)
	return err
}

// Stat is Check that also returns what it found of path (its size), for
// a caller that bounds several files together.
func Stat(path string, limit int64) (fs.FileInfo, error) {
	fi, err := os.Stat(path)
	switch {
	case err != nil:
		return nil, err // *PathError names the file
	case fi.IsDir():
		return nil, fmt.Errorf("%s: is a directory, %w", path, ErrNotRegular)
	case !fi.Mode().IsRegular():
		return nil, fmt.Errorf("%s: %w", path, ErrNotRegular)
	case fi.Size() > limit:
		return nil, &TooLargeError{Name: path, Limit: limit}
	}
	return fi, nil
}

// File is a file opened by Open.
type File struct {
	f     *os.File
	ctx   context.Context
	stop  func() bool
	name  string
	limit int64 // 0: none
	read  int64
	size  int64 // of a regular file; -1 otherwise
}

// Open opens path to read at most limit bytes of it (limit 0: no bound,
// for inputs that are streamed). A regular file or a named pipe (a FIFO,
// /dev/stdin from a pipe, a shell's <(...)) is accepted; a directory, a
// device (/dev/zero, a terminal) or a socket is refused with
// ErrNotRegular, and a regular file already larger than limit with a
// *TooLargeError. A read past limit fails with a *TooLargeError; once ctx
// is done, reads fail with ctx.Err() (a read blocked on a pipe is woken).
func Open(ctx context.Context, path string, limit int64) (*File, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	fi, err := os.Stat(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			pe.Op = "open" // what the caller asked for
		}
		return nil, err // *PathError names the file
	}
	size := int64(-1)
	switch mode := fi.Mode(); {
	case mode.IsDir():
		return nil, fmt.Errorf("%s: is a directory, %w", path, ErrNotRegular)
	case mode.IsRegular():
		size = fi.Size()
		if limit > 0 && size > limit {
			return nil, &TooLargeError{Name: path, Limit: limit}
		}
	case mode&fs.ModeNamedPipe != 0:
	default:
		return nil, fmt.Errorf("%s: %w", path, ErrNotRegular)
	}
	var f *os.File
	if size < 0 {
		f, err = openPipe(ctx, path)
	} else {
		f, err = os.Open(path)
	}
	if err != nil {
		return nil, err
	}
	b := &File{f: f, ctx: ctx, name: path, limit: limit, size: size}
	// A pipe's reads go through the poller: a deadline wakes a blocked one.
	b.stop = context.AfterFunc(ctx, func() { _ = f.SetReadDeadline(time.Now()) })
	return b, nil
}

// openPipe opens a named pipe for reading, which waits for a writer,
// giving way to ctx: the wait is then ended by opening the pipe for
// writing (and closing it at once).
func openPipe(ctx context.Context, path string) (*os.File, error) {
	type opened struct {
		f   *os.File
		err error
	}
	done := make(chan opened, 1)
	go func() {
		f, err := os.Open(path)
		done <- opened{f, err}
	}()
	select {
	case o := <-done:
		return o.f, o.err
	case <-ctx.Done():
		if w, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			w.Close()
		}
		go func() {
			if o := <-done; o.f != nil {
				o.f.Close()
			}
		}()
		return nil, ctx.Err()
	}
}

// Read reads from the file within its bound.
func (b *File) Read(p []byte) (int, error) {
	if err := b.ctx.Err(); err != nil {
		return 0, err
	}
	if b.limit > 0 {
		left := b.limit + 1 - b.read // one more than the bound tells a larger file
		if int64(len(p)) > left {
			p = p[:left]
		}
	}
	n, err := b.f.Read(p)
	b.read += int64(n)
	if b.limit > 0 && b.read > b.limit {
		return n, &TooLargeError{Name: b.name, Limit: b.limit}
	}
	if err != nil && !errors.Is(err, io.EOF) {
		if cerr := b.ctx.Err(); cerr != nil {
			return n, cerr
		}
	}
	return n, err
}

// Close closes the file.
func (b *File) Close() error {
	b.stop()
	return b.f.Close()
}

// Name is the path the file was opened with.
func (b *File) Name() string { return b.name }

// ReadFile reads the whole of path, at most limit bytes (limit > 0), as
// Open does: errors name the file.
func ReadFile(ctx context.Context, path string, limit int64) ([]byte, error) {
	f, err := Open(ctx, path, limit)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size := int64(64 << 10)
	if f.size >= 0 {
		size = min(f.size, limit) + 1
	}
	// The buffer grows to at most limit + 1, not to the next power of two.
	buf := make([]byte, 0, size)
	for {
		if len(buf) == cap(buf) {
			grown := make([]byte, len(buf), min(2*int64(cap(buf)), limit+1))
			copy(grown, buf)
			buf = grown
		}
		n, err := f.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		switch {
		case errors.Is(err, io.EOF):
			return buf, nil
		case err != nil:
			var tl *TooLargeError
			if errors.As(err, &tl) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
				return nil, err
			}
			return nil, fmt.Errorf("reading %s: %w", path, err)
		}
	}
}

// Client returns a copy of c (built by internal/httpclient, so that its
// redirect policy holds) whose response bodies fail with a *TooLargeError, named what, once limit bytes were
// read: an API answer is read whole (the Prometheus client reads it all
// before decoding), so a hostile or broken server must not choose its
// size.
func Client(c *http.Client, limit int64, what string) *http.Client {
	out := *c
	base := c.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	out.Transport = limitedTransport{base: base, limit: limit, what: what}
	return &out
}

type limitedTransport struct {
	base  http.RoundTripper
	limit int64
	what  string
}

func (t limitedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(r)
	if err == nil {
		resp.Body = &limitedBody{ReadCloser: resp.Body, left: t.limit + 1, t: &t}
	}
	return resp, err
}

// limitedBody fails a response body read past its bound.
type limitedBody struct {
	io.ReadCloser
	left int64
	t    *limitedTransport
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, &TooLargeError{Name: b.t.what, Limit: b.t.limit}
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	if b.left <= 0 {
		return n, &TooLargeError{Name: b.t.what, Limit: b.t.limit}
	}
	return n, err
}
