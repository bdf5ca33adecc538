// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/flate"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"
	"time"
)

// entry is one file of an archive or an image layer: its slash path, mode
// and contents. Directories have Dir set and no contents.
type entry struct {
	Name string
	Mode int64
	Dir  bool
	Data []byte
}

// withParents returns the entries with every parent directory added (mode
// 0755) and sorted by name, so an archive's order never depends on the
// order the caller listed files in.
func withParents(entries []entry) []entry {
	seen := map[string]bool{}
	var out []entry
	for _, e := range entries {
		e.Name = strings.TrimSuffix(e.Name, "/")
		seen[e.Name] = true
		out = append(out, e)
	}
	for _, e := range entries {
		for dir := path.Dir(strings.TrimSuffix(e.Name, "/")); dir != "." && dir != "/"; dir = path.Dir(dir) {
			if !seen[dir] {
				seen[dir] = true
				out = append(out, entry{Name: dir, Mode: 0o755, Dir: true})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// writeTar writes the entries as a ustar archive with every header fixed:
// owner root (uid/gid 0, no names), the given modification time, the
// entry's mode. The same entries and time give the same bytes.
func writeTar(w io.Writer, entries []entry, mtime time.Time) error {
	tw := tar.NewWriter(w)
	for _, e := range withParents(entries) {
		h := &tar.Header{
			Name:    e.Name,
			Mode:    e.Mode,
			ModTime: mtime.UTC().Truncate(time.Second),
			Format:  tar.FormatUSTAR,
		}
		if e.Dir {
			h.Typeflag = tar.TypeDir
			h.Name += "/"
		} else {
			h.Typeflag = tar.TypeReg
			h.Size = int64(len(e.Data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return fmt.Errorf("tar %s: %w", e.Name, err)
		}
		if !e.Dir {
			if _, err := tw.Write(e.Data); err != nil {
				return err
			}
		}
	}
	return tw.Close()
}

// gzipBytes compresses b with the standard library at a fixed level and
// an empty header (no name, no time), so it is a function of b alone.
func gzipBytes(b []byte) ([]byte, error) {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(b); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// tarGz is writeTar compressed with gzipBytes.
func tarGz(entries []entry, mtime time.Time) ([]byte, error) {
	var buf bytes.Buffer
	if err := writeTar(&buf, entries, mtime); err != nil {
		return nil, err
	}
	return gzipBytes(buf.Bytes())
}

// zipBytes writes the entries as a zip archive with fixed times and modes,
// in name order.
func zipBytes(entries []entry, mtime time.Time) ([]byte, error) {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	zw.RegisterCompressor(zip.Deflate, func(w io.Writer) (io.WriteCloser, error) {
		return flate.NewWriter(w, flate.BestCompression)
	})
	for _, e := range withParents(entries) {
		h := &zip.FileHeader{Name: e.Name, Modified: mtime.UTC().Truncate(time.Second), Method: zip.Deflate}
		mode := os.FileMode(e.Mode)
		if e.Dir {
			h.Name += "/"
			h.Method = zip.Store
			mode |= os.ModeDir
		}
		h.SetMode(mode)
		fw, err := zw.CreateHeader(h)
		if err != nil {
			return nil, fmt.Errorf("zip %s: %w", e.Name, err)
		}
		if !e.Dir {
			if _, err := fw.Write(e.Data); err != nil {
				return nil, err
			}
		}
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// dirEntries reads a directory tree into entries named below prefix
// (regular files 0644, directories 0755), for archiving an OCI layout.
func dirEntries(root, prefix string) ([]entry, error) {
	var out []entry
	var walk func(dir, name string) error
	walk = func(dir, name string) error {
		des, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		for _, de := range des {
			p := dir + "/" + de.Name()
			n := path.Join(name, de.Name())
			switch {
			case de.IsDir():
				out = append(out, entry{Name: n, Mode: 0o755, Dir: true})
				if err := walk(p, n); err != nil {
					return err
				}
			case de.Type().IsRegular():
				b, err := os.ReadFile(p)
				if err != nil {
					return err
				}
				out = append(out, entry{Name: n, Mode: 0o644, Data: b})
			default:
				return fmt.Errorf("%s: not a regular file or directory", p)
			}
		}
		return nil
	}
	return out, walk(root, prefix)
}

// repackTarGz rewrites a gzipped tar archive (the chart `helm package`
// writes, whose headers carry the time of packaging) with writeTar's fixed
// headers and gzipBytes: the same files give the same bytes. Regular files
// keep an execute bit (0755) or become 0644; other entries are dropped
// except directories, which withParents recreates.
func repackTarGz(path string, mtime time.Time) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	tr := tar.NewReader(zr)
	var entries []entry
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		switch h.Typeflag {
		case tar.TypeReg:
			data, err := io.ReadAll(tr)
			if err != nil {
				return err
			}
			mode := int64(0o644)
			if h.Mode&0o111 != 0 {
				mode = 0o755
			}
			entries = append(entries, entry{Name: h.Name, Mode: mode, Data: data})
		case tar.TypeDir:
		default:
			return fmt.Errorf("%s: %s is not a regular file", path, h.Name)
		}
	}
	out, err := tarGz(entries, mtime)
	if err != nil {
		return err
	}
	return os.WriteFile(path, out, 0o644)
}
