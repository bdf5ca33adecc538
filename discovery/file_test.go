// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package discovery

import (
	"os"
	"path/filepath"
	"strings"
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
	if u.Err == nil || !strings.Contains(u.Err.Error(), path) || !strings.Contains(u.Err.Error(), "16 MiB") {
		t.Errorf("update %+v, want an error naming the file and the 16 MiB bound", u)
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
