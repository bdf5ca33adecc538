// Copyright The llmprobe Authors
// SPDX-License-Identifier: Apache-2.0

package discovery

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"net"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/fsnotify/fsnotify"
	"go.yaml.in/yaml/v3"

	"github.com/llmprobe/llmprobe/config"
	"github.com/llmprobe/llmprobe/internal/bounded"
	"github.com/llmprobe/llmprobe/internal/scrub"
)

// Bounds of file discovery.
const (
	// MaxFileSDSize bounds each file_sd file read.
	MaxFileSDSize = 16 << 20
	// MaxLabelValue bounds a label value of a file_sd group.
	MaxLabelValue = 256
	// fileDebounce coalesces the events of one write (truncate, write,
	// chmod; an editor's temporary file and rename).
	fileDebounce = 100 * time.Millisecond
)

// LabelReplica in a file_sd group names its replicas (else pod, else the
// address).
const LabelReplica = "replica"

// fileDiscoverer reads Prometheus file_sd files: on every change event
// in their directories and every refresh interval.
type fileDiscoverer struct {
	patterns []string
	interval time.Duration
	log      *slog.Logger
}

func newFile(c *config.FileSD, opts Options) (*fileDiscoverer, error) {
	if c == nil || len(c.Files) == 0 {
		return nil, errors.New("file discovery: no files")
	}
	for _, p := range c.Files {
		if _, err := filepath.Match(p, ""); err != nil {
			return nil, fmt.Errorf("file discovery: %q: %w", p, err)
		}
	}
	interval := time.Duration(c.RefreshInterval)
	if interval <= 0 {
		interval = config.DefaultFileSDRefresh
	}
	return &fileDiscoverer{patterns: append([]string(nil), c.Files...), interval: interval, log: opts.Logger}, nil
}

func (f *fileDiscoverer) Mechanism() string { return config.DiscoveryMechanismFile }

func (f *fileDiscoverer) Run(ctx context.Context, ch chan<- Update) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		// Without a watcher the periodic re-read still runs.
		f.log.Warn("file discovery cannot watch for changes; re-reading every refresh interval only", "err", err)
	} else {
		defer w.Close()
	}
	watched := map[string]bool{}
	watch := func() {
		if w == nil {
			return
		}
		for _, p := range f.patterns {
			dir := filepath.Dir(p)
			if watched[dir] {
				continue
			}
			// The directory, not the file: editors and Kubernetes'
			// ConfigMap volumes replace files by rename. A directory
			// that does not exist yet is tried again at the next refresh.
			if err := w.Add(dir); err != nil {
				f.log.Debug("file discovery cannot watch a directory yet", "dir", dir, "err", err)
				continue
			}
			watched[dir] = true
		}
	}
	var events <-chan fsnotify.Event
	var watchErrs <-chan error
	if w != nil {
		events, watchErrs = w.Events, w.Errors
	}
	tick := time.NewTicker(f.interval)
	defer tick.Stop()
	debounce := time.NewTimer(time.Hour)
	debounce.Stop()
	defer debounce.Stop()
	for {
		watch()
		if !send(ctx, ch, f.refresh(ctx)) {
			return
		}
	wait:
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				break wait
			case <-debounce.C:
				break wait
			case ev, ok := <-events:
				if !ok {
					events = nil
					continue
				}
				// Every change but a chmod, of any name in the
				// directories, as Prometheus' file_sd: a ConfigMap volume
				// swaps its ..data symlink, not the file's name.
				if ev.Name != "" && ev.Op&^fsnotify.Chmod != 0 {
					debounce.Reset(fileDebounce)
				}
			case err, ok := <-watchErrs:
				if !ok {
					watchErrs = nil
					continue
				}
				f.log.Warn("file discovery watch error; re-reading", "err", err)
				debounce.Reset(fileDebounce)
			}
		}
	}
}

// refresh reads every file. A pattern with a glob stands for the files
// it matches now (a deleted file's replicas are gone, as in Prometheus);
// a file named without a glob must exist. Any file that cannot be read
// or parsed fails the refresh.
func (f *fileDiscoverer) refresh(ctx context.Context) Update {
	var (
		out  []Replica
		errs []error
	)
	seen := map[string]bool{}
	for _, p := range f.patterns {
		files := []string{p}
		glob := hasMeta(filepath.Base(p))
		if glob {
			var err error
			if files, err = filepath.Glob(p); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", p, err))
				continue
			}
			slices.Sort(files)
		}
		for _, file := range files {
			if seen[file] {
				continue
			}
			seen[file] = true
			rs, err := readFileSD(ctx, file)
			if glob && errors.Is(err, fs.ErrNotExist) {
				continue // deleted since the glob
			}
			if err != nil {
				errs = append(errs, err)
				continue
			}
			out = append(out, rs...)
		}
	}
	if len(errs) > 0 {
		err := mechanismError(f.Mechanism(), errors.Join(errs...))
		f.log.Warn("replica discovery failed; keeping the last set", "mechanism", f.Mechanism(), "err", err)
		return failed(err)
	}
	return Update{Replicas: normalize(out)}
}

func hasMeta(s string) bool { return strings.ContainsAny(s, `*?[\`) }

// fileSDGroup is one group of a file_sd file.
type fileSDGroup struct {
	Targets []string          `json:"targets" yaml:"targets"`
	Labels  map[string]string `json:"labels,omitempty" yaml:"labels,omitempty"`
}

// readFileSD reads the replicas of one file_sd file (JSON for .json,
// else YAML). Errors name the file and, where the decoder says, the line.
func readFileSD(ctx context.Context, file string) ([]Replica, error) {
	data, err := bounded.ReadFile(ctx, file, MaxFileSDSize)
	if err != nil {
		return nil, err // names the file
	}
	var groups []fileSDGroup
	switch strings.ToLower(filepath.Ext(file)) {
	case ".json":
		// encoding/json would replace invalid UTF-8 silently.
		if off := invalidUTF8(data); off >= 0 {
			return nil, fmt.Errorf("%s: line %d: not valid UTF-8", file, 1+bytes.Count(data[:off], []byte("\n")))
		}
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&groups); err != nil {
			return nil, fmt.Errorf("%s: %s", file, jsonError(data, err))
		}
		if dec.More() {
			return nil, fmt.Errorf("%s: data after the list of groups", file)
		}
	default:
		dec := yaml.NewDecoder(bytes.NewReader(data))
		dec.KnownFields(true)
		// An empty file is no groups.
		if err := dec.Decode(&groups); err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s: %s", file, yamlError(err))
		}
	}
	var out []Replica
	for i, g := range groups {
		labels, name, err := groupLabels(g.Labels)
		if err != nil {
			return nil, fmt.Errorf("%s: group %d: %w", file, i, err)
		}
		for j, addr := range g.Targets {
			if err := checkAddress(addr); err != nil {
				return nil, fmt.Errorf("%s: group %d: targets[%d]: %w", file, i, j, err)
			}
			r := Replica{Name: addr, Address: addr, Labels: maps.Clone(labels)}
			if name != "" {
				r.Name = name
			}
			out = append(out, r)
		}
	}
	return out, nil
}

// goTypeRE is the Go type yaml names in a message.
var goTypeRE = regexp.MustCompile(` (?:in|into) (?:type )?\S*discovery\.fileSDGroup| into \[\]discovery\.fileSDGroup| into map\[string\]string`)

// yamlError is a YAML decoding error (which gives its lines) in the file
// author's words.
func yamlError(err error) string {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	msg = strings.ReplaceAll(msg, "unmarshal errors:\n  ", "")
	return goTypeRE.ReplaceAllString(msg, "")
}

// groupLabels keeps the join labels of a group (pod, namespace, node)
// and the replica name it gives (replica, else pod), checking the values
// it uses; other labels are ignored.
func groupLabels(in map[string]string) (map[string]string, string, error) {
	var out map[string]string
	for _, k := range []string{LabelReplica, LabelPod, LabelNamespace, LabelNode} {
		v, ok := in[k]
		if !ok || v == "" {
			continue
		}
		switch {
		case len(v) > MaxLabelValue:
			return nil, "", fmt.Errorf("label %s: value longer than %d bytes", k, MaxLabelValue)
		case !utf8.ValidString(v):
			return nil, "", fmt.Errorf("label %s: value is not valid UTF-8", k)
		}
		if k == LabelReplica {
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[k] = v
	}
	name := in[LabelReplica]
	if name == "" {
		name = in[LabelPod]
	}
	return out, name, nil
}

// checkAddress checks a host:port.
func checkAddress(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q is not host:port", addr)
	}
	if host == "" || strings.ContainsAny(host, " /") || strings.ContainsFunc(host, scrub.Unsafe) || !utf8.ValidString(host) {
		return fmt.Errorf("%q: invalid host", addr)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("%q: invalid port", addr)
	}
	return nil
}

// invalidUTF8 is the offset of the first invalid UTF-8 in data, or -1.
func invalidUTF8(data []byte) int {
	for off := 0; off < len(data); {
		r, n := utf8.DecodeRune(data[off:])
		if r == utf8.RuneError && n <= 1 {
			return off
		}
		off += n
	}
	return -1
}

// jsonError says where in data a JSON decoding error is.
func jsonError(data []byte, err error) string {
	var (
		se *json.SyntaxError
		te *json.UnmarshalTypeError
	)
	off := int64(-1)
	switch {
	case errors.As(err, &se):
		off = se.Offset
	case errors.As(err, &te):
		off = te.Offset
	}
	if off < 0 || off > int64(len(data)) {
		return err.Error()
	}
	line := 1 + bytes.Count(data[:off], []byte("\n"))
	return fmt.Sprintf("line %d: %v", line, err)
}
