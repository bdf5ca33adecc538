// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package discovery

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/common/model"

	"github.com/llmprobe/llmprobe/config"
)

// fileSD starts a file discoverer over patterns. The refresh interval is
// an hour: every update after the first comes from a change event.
func fileSD(t *testing.T, patterns ...string) <-chan Update {
	t.Helper()
	d, err := New(&config.Discovery{File: &config.FileSD{Files: patterns, RefreshInterval: model.Duration(time.Hour)}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if d.Mechanism() != "file" {
		t.Errorf("mechanism %q", d.Mechanism())
	}
	return updates(t, d)
}

func write(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// replace writes path as editors and ConfigMap volumes do: a new file
// renamed over the old one.
func replace(t *testing.T, path, data string) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	write(t, tmp, data)
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// until receives updates until one has the set want (a write in place
// may be seen half done first: an error or a partial set); it returns
// that update.
func until(t *testing.T, ch <-chan Update, want string) Update {
	t.Helper()
	deadline := time.After(30 * time.Second)
	var last Update
	for {
		select {
		case u := <-ch:
			if u.Err == nil && names(u.Replicas) == want {
				return u
			}
			last = u
		case <-deadline:
			t.Fatalf("set %q not seen within 30s; last update %+v", want, last)
		}
	}
}

// untilErr receives updates until one is an error, and returns it.
func untilErr(t *testing.T, ch <-chan Update) error {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case u := <-ch:
			if u.Err != nil {
				if u.Replicas != nil {
					t.Errorf("error update carries replicas %v", u.Replicas)
				}
				return u.Err
			}
		case <-deadline:
			t.Fatal("no error update within 30s")
		}
	}
}

func TestFileSDJSON(t *testing.T) {
	dir := t.TempDir()
	pool := filepath.Join(dir, "pool.json")
	write(t, pool, `[
  {"targets": ["127.0.0.1:8001", "127.0.0.2:8002"], "labels": {"job": "vllm", "namespace": "prod"}},
  {"targets": ["127.0.0.3:8003"], "labels": {"pod": "vllm-2", "node": "gpu-1", "namespace": "prod"}},
  {"targets": ["[::1]:8004"], "labels": {"replica": "ipv6", "pod": "vllm-3"}}
]`)
	ch := fileSD(t, pool)
	u := next(t, ch)
	if u.Err != nil {
		t.Fatal(u.Err)
	}
	if got := names(u.Replicas); got != "127.0.0.1:8001,127.0.0.2:8002,ipv6,vllm-2" {
		t.Fatalf("replicas %q", got)
	}
	byName := map[string]Replica{}
	for _, r := range u.Replicas {
		byName[r.Name] = r
	}
	if r := byName["vllm-2"]; r.Address != "127.0.0.3:8003" || r.Labels["pod"] != "vllm-2" || r.Labels["node"] != "gpu-1" || r.Labels["namespace"] != "prod" || len(r.Labels) != 3 {
		t.Errorf("vllm-2 = %+v", r)
	}
	if r := byName["127.0.0.1:8001"]; r.Labels["job"] != "" || r.Labels["namespace"] != "prod" || len(r.Labels) != 1 {
		t.Errorf("127.0.0.1:8001 = %+v: only join labels are kept", r)
	}
	if r := byName["ipv6"]; r.Address != "[::1]:8004" || r.Labels["pod"] != "vllm-3" || r.Labels["replica"] != "" {
		t.Errorf("ipv6 = %+v", r)
	}

	// Rewritten in place: a replica added, one removed.
	write(t, pool, `[{"targets": ["127.0.0.1:8001", "127.0.0.5:8005"]}]`)
	until(t, ch, "127.0.0.1:8001,127.0.0.5:8005")

	// Replaced by rename.
	replace(t, pool, `[{"targets": ["127.0.0.6:8006"]}]`)
	until(t, ch, "127.0.0.6:8006")

	// A bad file: an error naming the file and the line; the set is kept
	// by the caller, and the next good version is seen.
	replace(t, pool, "[\n  {\"targets\": [\"127.0.0.7:8007\"]},\n  {\"targets\": [\"127.0.0.8:8008\"]]\n]")
	err := untilErr(t, ch)
	if !strings.Contains(err.Error(), pool) || !strings.Contains(err.Error(), "line 3") {
		t.Errorf("error %q does not name the file and line 3", err)
	}
	replace(t, pool, `[{"targets": ["127.0.0.7:8007"]}]`)
	until(t, ch, "127.0.0.7:8007")

	// A file named without a glob that is deleted: an error (the caller
	// keeps the set), not an empty set.
	if err := os.Remove(pool); err != nil {
		t.Fatal(err)
	}
	if err := untilErr(t, ch); !strings.Contains(err.Error(), pool) {
		t.Errorf("error %q does not name the file", err)
	}
	write(t, pool, `[{"targets": ["127.0.0.9:8009"]}]`)
	until(t, ch, "127.0.0.9:8009")
}

func TestFileSDGlobYAML(t *testing.T) {
	dir := t.TempDir()
	sd := filepath.Join(dir, "sd")
	if err := os.Mkdir(sd, 0o755); err != nil {
		t.Fatal(err)
	}
	a := filepath.Join(sd, "a.yml")
	write(t, a, "- targets: ['127.0.0.1:8001']\n  labels: {pod: a-0}\n")
	ch := fileSD(t, filepath.Join(sd, "*.yml"))
	if u := next(t, ch); u.Err != nil || names(u.Replicas) != "a-0" {
		t.Fatalf("first update %+v", u)
	}
	// A new file matching the glob; one that does not match is ignored.
	write(t, filepath.Join(sd, "ignored.json"), `[{"targets": ["127.0.0.9:9"]}]`)
	replace(t, filepath.Join(sd, "b.yml"), "- targets: ['127.0.0.2:8002', '127.0.0.3:8003']\n")
	until(t, ch, "127.0.0.2:8002,127.0.0.3:8003,a-0")

	// A matched file deleted: its replicas are gone (as in Prometheus).
	if err := os.Remove(a); err != nil {
		t.Fatal(err)
	}
	until(t, ch, "127.0.0.2:8002,127.0.0.3:8003")

	// A YAML error names the file and the line.
	write(t, filepath.Join(sd, "b.yml"), "- targets: ['127.0.0.2:8002']\n  lables: {pod: x}\n")
	err := untilErr(t, ch)
	if msg := err.Error(); !strings.Contains(msg, filepath.Join(sd, "b.yml")) || !strings.Contains(msg, "line 2") || !strings.Contains(msg, "lables") || strings.Contains(msg, "fileSDGroup") {
		t.Errorf("error %q: want the file, line 2, the unknown key and no Go type", msg)
	}
	// An empty file is no groups.
	write(t, filepath.Join(sd, "b.yml"), "")
	until(t, ch, "")
}

func TestFileSDBadContent(t *testing.T) {
	dir := t.TempDir()
	tests := []struct{ name, data, want string }{
		{"no port", `[{"targets": ["127.0.0.1"]}]`, `targets[0]: "127.0.0.1" is not host:port`},
		{"bad port", `[{"targets": ["127.0.0.1:0"]}]`, `"127.0.0.1:0": invalid port`},
		{"empty host", `[{"targets": [":80"]}]`, `":80": invalid host`},
		{"escape in host", `[{"targets": ["bad\u001bhost:80"]}]`, `"bad\x1bhost:80": invalid host`},
		{"override in host", `[{"targets": ["evil\u202elocal:80"]}]`, `"evil\u202elocal:80": invalid host`},
		{"long label", `[{"targets": ["127.0.0.1:80"], "labels": {"pod": "` + strings.Repeat("p", 257) + `"}}]`, "group 0: label pod: value longer than 256 bytes"},
		{"bad utf-8", "[{\"targets\": [\"127.0.0.1:80\"]}, {\"targets\": [\"127.0.0.1:81\"], \"labels\": {\"node\": \"\xff\"}}]", "line 1: not valid UTF-8"},
		{"not a list", `{"targets": ["127.0.0.1:80"]}`, "line 1: json: cannot unmarshal object"},
		{"unknown key", `[{"target": ["127.0.0.1:80"]}]`, `unknown field "target"`},
		{"trailing data", `[] []`, "data after the list of groups"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tt.name, " ", "_")+".json")
			write(t, path, tt.data)
			u := next(t, fileSD(t, path))
			if u.Err == nil {
				t.Fatalf("no error; replicas %v", u.Replicas)
			}
			if msg := u.Err.Error(); !strings.Contains(msg, path) || !strings.Contains(msg, tt.want) {
				t.Errorf("error %q, want the file and %q", msg, tt.want)
			}
		})
	}
}

// TestFileSDLabelsCleaned: a replica name and join labels carrying a
// terminal escape, a C1 control or a bidirectional override become
// label values without them (internal/scrub's Chars).
func TestFileSDLabelsCleaned(t *testing.T) {
	pool := filepath.Join(t.TempDir(), "pool.yml")
	write(t, pool, "- targets: [\"127.0.0.1:8001\"]\n  labels: {replica: \"r\\e[31m\\u202egnp.exe\", pod: \"p\\u2066od\\u2069\", namespace: \"ns\\x9b\", node: \"gpu\\u200f-1\\n\"}\n")
	u := next(t, fileSD(t, pool))
	if u.Err != nil {
		t.Fatal(u.Err)
	}
	r := u.Replicas[0]
	if r.Name != "r [31mgnp.exe" || r.Labels["pod"] != "pod" || r.Labels["namespace"] != "ns " || r.Labels["node"] != "gpu-1 " {
		t.Errorf("replica %q, labels %q", r.Name, r.Labels)
	}
}

func TestFileSDTooLarge(t *testing.T) {
	path := filepath.Join(t.TempDir(), "big.json")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(MaxFileSDSize + 1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	u := next(t, fileSD(t, path))
	if u.Err == nil || !strings.Contains(u.Err.Error(), path) || !strings.Contains(u.Err.Error(), "4 MiB") {
		t.Errorf("update %+v, want an error naming the file and the 4 MiB bound", u)
	}
}

// TestFileSDConfigMapVolume: a Kubernetes ConfigMap volume updates a file
// by swapping the ..data symlink (pool.json -> ..data/pool.json) to a new
// directory: no event names pool.json, and the change is still seen.
func TestFileSDConfigMapVolume(t *testing.T) {
	dir := t.TempDir()
	version := func(name, data string) {
		t.Helper()
		if err := os.Mkdir(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(dir, name, "pool.json"), data)
		tmp := filepath.Join(dir, "..data_tmp")
		if err := os.Symlink(name, tmp); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
	}
	version("..2026_12_02_1", `[{"targets": ["127.0.0.1:8001"]}]`)
	pool := filepath.Join(dir, "pool.json")
	if err := os.Symlink(filepath.Join("..data", "pool.json"), pool); err != nil {
		t.Fatal(err)
	}
	ch := fileSD(t, pool)
	if u := next(t, ch); u.Err != nil || names(u.Replicas) != "127.0.0.1:8001" {
		t.Fatalf("first update %+v", u)
	}
	version("..2026_12_02_2", `[{"targets": ["127.0.0.2:8002"]}]`)
	until(t, ch, "127.0.0.2:8002")
}

// storm calls f every 10 ms in a goroutine until the test ends; errors
// of f are reported. It returns a func that stops the storm and waits
// for it.
func storm(t *testing.T, f func(i int) error) (stop func()) {
	t.Helper()
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for i := 1; ; i++ {
			select {
			case <-quit:
				return
			case <-tick.C:
			}
			if err := f(i); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			close(quit)
			<-done
		})
	}
	t.Cleanup(stop)
	return stop
}

// renameWrite writes path by rename (an editor's or a config tool's
// write), for a storm's goroutine.
func renameWrite(path, data string) error {
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	if err := os.WriteFile(tmp, []byte(data), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// TestFileSDWriteStorm: a file rewritten every 10 ms, ten times faster
// than the 100 ms debounce and without a pause, is still read while the
// writes go on (a debounce that restarts at every event never fires):
// the version written half a second into the storm is seen before the
// storm ends.
func TestFileSDWriteStorm(t *testing.T) {
	pool := filepath.Join(t.TempDir(), "pool.json")
	version := func(i int) string { return fmt.Sprintf(`[{"targets": ["127.0.0.1:%d"]}]`, 10000+i) }
	write(t, pool, version(0))
	ch := fileSD(t, pool)
	until(t, ch, "127.0.0.1:10000")
	start := time.Now()
	stop := storm(t, func(i int) error { return renameWrite(pool, version(i)) })
	defer stop()
	deadline := time.After(20 * time.Second)
	updates, seen := 0, 0
	for seen < 50 {
		select {
		case u := <-ch:
			updates++
			if u.Err == nil && len(u.Replicas) == 1 {
				_, port, _ := net.SplitHostPort(u.Replicas[0].Address)
				n, _ := strconv.Atoi(port)
				seen = max(seen, n-10000)
			}
		case <-deadline:
			t.Fatalf("during 20 s of writes every 10 ms: %d updates, newest version seen %d; want version 50 seen while the writes go on", updates, seen)
		}
	}
	t.Logf("version %d seen %v into the storm, after %d updates", seen, time.Since(start).Round(time.Millisecond), updates)
}

// TestFileSDIgnoresOtherFiles: events of files that no pattern matches
// start no refresh: a log appended every 10 ms beside the watched file
// leaves the discoverer quiet, and a change of the watched file is seen
// while the appends go on.
func TestFileSDIgnoresOtherFiles(t *testing.T) {
	dir := t.TempDir()
	pool := filepath.Join(dir, "pool.json")
	write(t, pool, `[{"targets": ["127.0.0.1:8001"]}]`)
	ch := fileSD(t, filepath.Join(dir, "*.json"))
	until(t, ch, "127.0.0.1:8001")
	log, err := os.Create(filepath.Join(dir, "other.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	storm(t, func(int) error {
		_, err := log.WriteString("a line\n")
		return err
	})
	select {
	case u := <-ch:
		t.Errorf("an unrelated file's writes started a refresh: %+v", u)
	case <-time.After(time.Second):
	}
	replace(t, pool, `[{"targets": ["127.0.0.2:8002"]}]`)
	start := time.Now()
	select {
	case u := <-ch:
		if u.Err != nil || names(u.Replicas) != "127.0.0.2:8002" {
			t.Errorf("update %+v, want the new set", u)
		}
		t.Logf("change seen %v after the write, beside a file appended every 10 ms", time.Since(start).Round(time.Millisecond))
	case <-time.After(10 * time.Second):
		t.Fatal("a change of the watched file not seen within 10 s while another file is appended")
	}
}

// nextWithin is the next update, failing the test unless it comes within
// d (a discoverer that must not hang).
func nextWithin(t *testing.T, ch <-chan Update, d time.Duration) Update {
	t.Helper()
	select {
	case u := <-ch:
		return u
	case <-time.After(d):
		t.Fatalf("no update within %v: the refresh hangs", d)
		return Update{}
	}
}

// TestFileSDNotRegular: a glob that matches a FIFO (which no one writes:
// opening it to read would wait for a writer for ever), a directory or a
// device fails the refresh at once, with an error that names it; the
// discoverer goes on and reads the files once the odd one is gone.
func TestFileSDNotRegular(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "a.json"), `[{"targets": ["127.0.0.1:8001"]}]`)
	fifo := filepath.Join(dir, "fifo.json")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(dir, "sub.json")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	dev := filepath.Join(dir, "dev.json")
	if err := os.Symlink(os.DevNull, dev); err != nil {
		t.Fatal(err)
	}
	ch := fileSD(t, filepath.Join(dir, "*.json"))
	start := time.Now()
	u := nextWithin(t, ch, 5*time.Second)
	took := time.Since(start)
	if u.Err == nil {
		t.Fatalf("update %+v, want an error", u)
	}
	for _, p := range []string{fifo, sub, dev} {
		if msg := u.Err.Error(); !strings.Contains(msg, p+": ") || !strings.Contains(msg, "not a regular file") {
			t.Errorf("error %q, want %s named as not a regular file", msg, p)
		}
	}
	t.Logf("refused in %v: %v", took.Round(time.Microsecond), u.Err)
	for _, p := range []string{fifo, sub, dev} {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	until(t, ch, "127.0.0.1:8001")
}

// padded is a file_sd file of one replica, padded with spaces to size
// bytes.
func padded(t *testing.T, path string, size int) {
	t.Helper()
	data := `[{"targets": ["127.0.0.1:8001"]}]`
	write(t, path, data+strings.Repeat(" ", size-len(data)))
}

// TestFileSDTotalBound: the files of one refresh hold at most
// MaxFileSDSize bytes together: three valid files of 1.5 MiB matched by a
// glob are refused before any is read, with an error that names the
// pattern and the bound; two are read.
func TestFileSDTotalBound(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"a", "b", "c"} {
		padded(t, filepath.Join(dir, n+".json"), 3<<19)
	}
	glob := filepath.Join(dir, "*.json")
	ch := fileSD(t, glob)
	start := time.Now()
	u := nextWithin(t, ch, 5*time.Second)
	if u.Err == nil || !strings.Contains(u.Err.Error(), glob) || !strings.Contains(u.Err.Error(), "4.5 MiB") || !strings.Contains(u.Err.Error(), "4 MiB") {
		t.Fatalf("update %+v, want an error naming the pattern, the 4.5 MiB matched and the 4 MiB bound", u)
	}
	t.Logf("refused in %v: %v", time.Since(start).Round(time.Microsecond), u.Err)
	if err := os.Remove(filepath.Join(dir, "c.json")); err != nil {
		t.Fatal(err)
	}
	until(t, ch, "127.0.0.1:8001")
}

// TestFileSDTooManyFiles: a glob may match at most MaxFileSDFiles files;
// one more is refused before any is read, with an error that names the
// pattern and the bound.
func TestFileSDTooManyFiles(t *testing.T) {
	dir := t.TempDir()
	for i := range MaxFileSDFiles + 1 {
		write(t, filepath.Join(dir, fmt.Sprintf("r%04d.json", i)), fmt.Sprintf(`[{"targets": ["127.0.0.1:%d"]}]`, 10000+i))
	}
	glob := filepath.Join(dir, "*.json")
	ch := fileSD(t, glob)
	start := time.Now()
	u := nextWithin(t, ch, 5*time.Second)
	want := fmt.Sprintf("%d files, more than %d", MaxFileSDFiles+1, MaxFileSDFiles)
	if u.Err == nil || !strings.Contains(u.Err.Error(), glob) || !strings.Contains(u.Err.Error(), want) {
		t.Fatalf("update with %d replicas, error %v; want an error naming the pattern and %q", len(u.Replicas), u.Err, want)
	}
	t.Logf("refused in %v: %v", time.Since(start).Round(time.Microsecond), u.Err)
	if err := os.Remove(filepath.Join(dir, "r0000.json")); err != nil {
		t.Fatal(err)
	}
	for deadline := time.After(30 * time.Second); ; {
		select {
		case u := <-ch:
			if u.Err != nil {
				continue // the event of the removal may come before the directory is read whole
			}
			if len(u.Replicas) != MaxFileSDFiles {
				t.Fatalf("%d replicas from %d files, want one each", len(u.Replicas), MaxFileSDFiles)
			}
			return
		case <-deadline:
			t.Fatal("no set within 30 s once a file was removed")
		}
	}
}

// TestFileSDRefreshTimeBound: a refresh that takes longer than its time
// bound fails, with an error that names the bound, and the discoverer
// goes on refreshing (here a bound of 1 ms, which reading 2000 files
// passes, stands for a file system that stalls).
func TestFileSDRefreshTimeBound(t *testing.T) {
	dir := t.TempDir()
	for i := range 2000 {
		write(t, filepath.Join(dir, fmt.Sprintf("r%04d.json", i)), fmt.Sprintf(`[{"targets": ["127.0.0.1:%d"]}]`, 10000+i))
	}
	d, err := New(&config.Discovery{File: &config.FileSD{Files: []string{filepath.Join(dir, "*.json")}, RefreshInterval: model.Duration(time.Second)}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	d.(*fileDiscoverer).timeout = time.Millisecond
	ch := updates(t, d)
	for range 2 {
		u := nextWithin(t, ch, 5*time.Second)
		if u.Err == nil || !strings.Contains(u.Err.Error(), "not read within 1ms, the time bound of a refresh") {
			t.Fatalf("update with %d replicas, error %v; want the time bound passed", len(u.Replicas), u.Err)
		}
	}
}
